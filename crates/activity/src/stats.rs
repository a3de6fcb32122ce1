//! Call statistics over a window of the journal: how many calls by server, tool, variant,
//! status and policy decision, with the median and 99th-percentile durations of each
//! group. Tool calls by default; the records of another type (prompt gets, completions,
//! resource reads, subscriptions) when the filter names it. Read a chunk at a time ([`Journal::for_each_chunk`]), so memory grows with the number of groups and calls'
//! durations (4 bytes a call), not with the records' size.

use std::collections::BTreeMap;

use serde::Serialize;

use super::query::Filter;
use super::record::{ActivityRecord, RecordType};
use super::{Journal, Result};

/// One group's numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    /// The group's key: a server name, `server:tool`, a variant, a status or a decision.
    pub key: String,
    pub calls: u64,
    pub p50_ms: u32,
    pub p99_ms: u32,
}

/// Calls in a window, grouped five ways; each list is sorted by calls, most first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CallStats {
    /// The type of the records counted: `tool_call` unless the filter named another.
    #[serde(rename = "type")]
    pub record_type: String,
    /// Records counted (records of other types are left out).
    pub calls: u64,
    /// The first and last counted call's time (RFC 3339), if any.
    pub first: Option<String>,
    pub last: Option<String>,
    pub p50_ms: u32,
    pub p99_ms: u32,
    /// Of the records counted, the dry runs (verdicts only, nothing called); `by_status`
    /// counts them under `dry-run`.
    #[serde(default)]
    pub dry_runs: u64,
    pub by_server: Vec<Group>,
    pub by_tool: Vec<Group>,
    pub by_variant: Vec<Group>,
    pub by_status: Vec<Group>,
    pub by_decision: Vec<Group>,
}

/// The statistics of records read one at a time, in any order: what
/// [`Journal::call_stats`] computes over the local journal, open to any other source of
/// records (the cluster's journal read back from a sink's store). Memory grows with the
/// number of groups and calls (4 bytes a call), not with the records' size.
#[derive(Debug, Default)]
pub struct StatsTally {
    all: Vec<u32>,
    dry_runs: u64,
    groups: [BTreeMap<String, Vec<u32>>; 5],
    /// The oldest and newest record counted: (id, timestamp).
    first: Option<(String, String)>,
    last: Option<(String, String)>,
}

impl StatsTally {
    /// Counts one record (the caller passes only records of the type it counts).
    pub fn add(&mut self, record: &ActivityRecord) {
        let ms = u32::try_from(record.duration_ms).unwrap_or(u32::MAX);
        self.all.push(ms);
        self.dry_runs += u64::from(record.dry_run);
        if self.first.as_ref().is_none_or(|(id, _)| record.id < *id) {
            self.first = Some((record.id.clone(), record.timestamp.clone()));
        }
        if self.last.as_ref().is_none_or(|(id, _)| record.id > *id) {
            self.last = Some((record.id.clone(), record.timestamp.clone()));
        }
        let keys = [
            record.server_name.clone(),
            format!("{}:{}", record.server_name, record.tool_name),
            record
                .tool_variant
                .map_or_else(|| "(none)".to_owned(), |v| v.tool_name().to_owned()),
            // A dry run called nothing: counted as a dry run, never as a success.
            if record.dry_run {
                "dry-run".to_owned()
            } else {
                record.status.as_str().to_owned()
            },
            record.verdict.decision.as_str().to_owned(),
        ];
        for (group, key) in self.groups.iter_mut().zip(keys) {
            group.entry(key).or_default().push(ms);
        }
    }

    /// How many records were counted.
    pub fn count(&self) -> usize {
        self.all.len()
    }

    /// The statistics of the records counted, which were of `record_type`.
    pub fn finish(self, record_type: RecordType) -> CallStats {
        let Self {
            mut all,
            dry_runs,
            groups: [server, tool, variant, status, decision],
            first,
            last,
        } = self;
        CallStats {
            record_type: record_type.as_str().to_owned(),
            calls: all.len() as u64,
            first: first.map(|(_, timestamp)| timestamp),
            last: last.map(|(_, timestamp)| timestamp),
            p50_ms: quantile(&mut all, 0.5),
            p99_ms: quantile(&mut all, 0.99),
            dry_runs,
            by_server: groups(server),
            by_tool: groups(tool),
            by_variant: groups(variant),
            by_status: groups(status),
            by_decision: groups(decision),
        }
    }
}

/// The `q`-quantile (0.0 to 1.0) of `durations`, nearest rank; 0 for none.
fn quantile(durations: &mut [u32], q: f64) -> u32 {
    if durations.is_empty() {
        return 0;
    }
    durations.sort_unstable();
    let rank = ((q * durations.len() as f64).ceil() as usize).clamp(1, durations.len());
    durations[rank - 1]
}

fn groups(map: BTreeMap<String, Vec<u32>>) -> Vec<Group> {
    let mut out: Vec<Group> = map
        .into_iter()
        .map(|(key, mut durations)| Group {
            key,
            calls: durations.len() as u64,
            p50_ms: quantile(&mut durations, 0.5),
            p99_ms: quantile(&mut durations, 0.99),
        })
        .collect();
    out.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.key.cmp(&b.key)));
    out
}

impl Journal {
    /// The statistics of the records matching `filter` of one type: the filter's type, else
    /// tool calls (records of other types are never mixed in).
    pub fn call_stats(&self, filter: &Filter) -> Result<CallStats> {
        let record_type = filter.record_type.unwrap_or(RecordType::ToolCall);
        let filter = Filter {
            record_type: Some(record_type),
            ..filter.clone()
        };
        let mut tally = StatsTally::default();
        self.for_each_chunk(&filter, None, |chunk| {
            chunk.iter().for_each(|record| tally.add(record));
            true
        })?;
        Ok(tally.finish(record_type))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JournalOptions;
    use crate::record::{Source, Status};
    use crate::test_util::open_temp;
    use mcpproxy_policy::OperationType;

    #[test]
    fn quantiles_use_the_nearest_rank() {
        let mut d: Vec<u32> = (1..=100).collect();
        assert_eq!(quantile(&mut d, 0.5), 50);
        assert_eq!(quantile(&mut d, 0.99), 99);
        assert_eq!(quantile(&mut [7], 0.99), 7);
        assert_eq!(quantile(&mut [], 0.5), 0);
    }

    #[tokio::test]
    async fn calls_are_counted_by_group_and_other_records_left_out() {
        let (_dir, journal) = open_temp(JournalOptions::default());
        let mut records = Vec::new();
        for i in 0..30u64 {
            let mut rec = ActivityRecord::new(
                RecordType::ToolCall,
                Source::Mcp,
                if i % 3 == 0 { "gh" } else { "fs" },
                "read",
            );
            rec.tool_variant = Some(OperationType::Read);
            rec.status = if i == 0 {
                Status::Blocked
            } else {
                Status::Success
            };
            rec.dry_run = i == 1 || i == 2;
            rec.duration_ms = i;
            records.push(rec);
        }
        records.push(ActivityRecord::new(
            RecordType::ToolChange,
            Source::Upstream,
            "fs",
            "read",
        ));
        journal.bulk_load(&records).unwrap();
        let stats = journal.call_stats(&Filter::default()).unwrap();
        assert_eq!(stats.calls, 30);
        assert_eq!(stats.by_server[0].key, "fs");
        assert_eq!(stats.by_server[0].calls, 20);
        assert_eq!(stats.by_server[1].calls, 10);
        assert_eq!(stats.by_tool[0].key, "fs:read");
        assert_eq!(stats.by_variant[0].key, "call_tool_read");
        let blocked = stats.by_status.iter().find(|g| g.key == "blocked").unwrap();
        assert_eq!(blocked.calls, 1);
        let success = stats.by_status.iter().find(|g| g.key == "success").unwrap();
        assert_eq!(success.calls, 27, "dry runs are not successes");
        let dry = stats.by_status.iter().find(|g| g.key == "dry-run").unwrap();
        assert_eq!(dry.calls, 2);
        assert_eq!(stats.dry_runs, 2);
        assert_eq!(stats.p50_ms, 14);
        assert_eq!(stats.p99_ms, 29);

        let only_gh = Filter {
            server: Some("gh".into()),
            ..Filter::default()
        };
        assert_eq!(journal.call_stats(&only_gh).unwrap().calls, 10);
        assert_eq!(stats.record_type, "tool_call");
    }

    #[tokio::test]
    async fn the_records_of_another_type_are_counted_when_the_filter_names_it() {
        let (_dir, journal) = open_temp(JournalOptions::default());
        let mut records = vec![ActivityRecord::new(
            RecordType::ToolCall,
            Source::Mcp,
            "fs",
            "read",
        )];
        for (i, prompt) in ["greet", "greet", "summarise"].into_iter().enumerate() {
            let mut rec = ActivityRecord::new(RecordType::PromptGet, Source::Mcp, "fs", prompt);
            rec.status = Status::Success;
            rec.duration_ms = 10 * (i as u64 + 1);
            records.push(rec);
        }
        records.push(ActivityRecord::new(
            RecordType::Completion,
            Source::Mcp,
            "fs",
            "greet",
        ));
        journal.bulk_load(&records).unwrap();
        let prompts = Filter {
            record_type: Some(RecordType::PromptGet),
            ..Filter::default()
        };
        let stats = journal.call_stats(&prompts).unwrap();
        assert_eq!(stats.record_type, "prompt_get");
        assert_eq!(stats.calls, 3);
        assert_eq!(stats.by_tool[0].key, "fs:greet");
        assert_eq!(stats.by_tool[0].calls, 2);
        assert_eq!(stats.by_variant[0].key, "(none)");
        assert_eq!(stats.p99_ms, 30);
        let completions = Filter {
            record_type: Some(RecordType::Completion),
            ..Filter::default()
        };
        assert_eq!(journal.call_stats(&completions).unwrap().calls, 1);
        // Without a type, tool calls only.
        assert_eq!(journal.call_stats(&Filter::default()).unwrap().calls, 1);
    }
}

#[cfg(test)]
mod chunk_tests {
    use crate::query::SCAN_CHUNK;
    use crate::record::{ActivityRecord, RecordType, Source};
    use crate::test_util::open_temp;
    use crate::{Filter, JournalOptions};

    #[tokio::test]
    async fn every_record_is_visited_once_in_order_a_chunk_at_a_time() {
        let (_dir, journal) = open_temp(JournalOptions::default());
        let records: Vec<ActivityRecord> = (0..2 * SCAN_CHUNK + 500)
            .map(|_| ActivityRecord::new(RecordType::ToolCall, Source::Mcp, "fs", "read"))
            .collect();
        journal.bulk_load(&records).unwrap();
        let mut seen = Vec::new();
        let mut chunks = 0;
        journal
            .for_each_chunk(&Filter::default(), None, |chunk| {
                chunks += 1;
                seen.extend(chunk.iter().map(|r| r.id.clone()));
                true
            })
            .unwrap();
        assert_eq!(chunks, 3);
        assert_eq!(
            seen,
            records.iter().map(|r| r.id.clone()).collect::<Vec<_>>()
        );
        // Stopping early reads no further chunk.
        let mut chunks = 0;
        journal
            .for_each_chunk(&Filter::default(), None, |_| {
                chunks += 1;
                false
            })
            .unwrap();
        assert_eq!(chunks, 1);
    }
}
