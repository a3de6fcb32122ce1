//! Filtered, newest-first paging over the journal.
//!
//! A query walks ONE index (preferring tool > server > intent type > status > type; with no
//! filter, the records table itself) newest-first within the time range (ULID bounds from the
//! milliseconds), applies the other filters to each record, skips `offset` matches and returns
//! `limit` plus whether more exist. A first page therefore reads about as many rows as it
//! returns, plus what the non-indexed filters reject.
//!
//! The tool index is keyed `server:tool`. A tool filter without a server first lists the
//! `*:tool` keys (a skip-scan over the distinct keys of the tool index) and merges their walks
//! newest-first. A tool filter may also be given qualified, as `server:tool`.

use std::ops::Bound;

use redb::{ReadOnlyTable, ReadableDatabase, ReadableTable};
use serde::Serialize;

use super::Result;
use super::journal::{
    IDX_INTENT, IDX_SERVER, IDX_STATUS, IDX_TOOL, IDX_TYPE, INDEXES, Journal, RECORDS, key_id,
    key_ms, parse_key,
};
use super::record::{ActivityRecord, RecordType, Status};

/// Which records a query wants; `None` fields do not filter. The intent type ignores ASCII
/// case; server and tool are exact.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Intent type (`read`, `write`, `destructive`, ...): the declared operation type, else
    /// the tool variant's suffix.
    pub intent_type: Option<String>,
    /// Upstream server name.
    pub server: Option<String>,
    /// Tool name, or `server:tool`.
    pub tool: Option<String>,
    /// The record's status.
    pub status: Option<Status>,
    /// The record's type.
    pub record_type: Option<RecordType>,
    /// MCP session id (exact; not indexed: checked on each candidate).
    pub session: Option<String>,
    /// Inclusive lower bound, unix ms.
    pub start_ms: Option<u64>,
    /// Inclusive upper bound, unix ms.
    pub end_ms: Option<u64>,
    /// The replica that wrote the record (exact; not indexed: checked on each candidate).
    pub replica: Option<String>,
    /// How a person answered the call ([`Filter::APPROVALS`]: a decision, or `any` for every
    /// call that waited for one); not indexed: checked on each candidate.
    pub approval: Option<String>,
}

impl Filter {
    /// The statuses a status filter takes, in the order the CLI and the REST API list them.
    pub const STATUSES: [Status; 4] = [
        Status::Pending,
        Status::Success,
        Status::Error,
        Status::Blocked,
    ];

    /// The values an approval filter takes: `any` (the call waited for a person), or how it
    /// ended.
    pub const APPROVALS: [&'static str; 6] = [
        "any",
        "approved",
        "denied",
        "cancelled",
        "timed_out",
        "refused",
    ];

    /// Whether `rec` passes every filter, time range included (taken from its id).
    pub fn matches(&self, rec: &ActivityRecord) -> bool {
        let in_time = || match parse_key(&rec.id) {
            Ok(key) => {
                let ms = key_ms(&key);
                self.start_ms.is_none_or(|s| ms >= s) && self.end_ms.is_none_or(|e| ms <= e)
            }
            Err(_) => self.start_ms.is_none() && self.end_ms.is_none(),
        };
        let tool_ok = || {
            self.tool.as_deref().is_none_or(|t| {
                rec.tool_name == t || format!("{}:{}", rec.server_name, rec.tool_name) == t
            })
        };
        let intent_ok = || {
            self.intent_type.as_deref().is_none_or(|w| {
                rec.intent_type()
                    .is_some_and(|have| have.eq_ignore_ascii_case(w))
            })
        };
        self.session
            .as_deref()
            .is_none_or(|s| rec.session_id.as_deref() == Some(s))
            && self
                .replica
                .as_deref()
                .is_none_or(|r| rec.replica.as_deref() == Some(r))
            && self.approval.as_deref().is_none_or(|want| {
                rec.approval
                    .as_ref()
                    .is_some_and(|a| want == "any" || a.decision == want)
            })
            && self.server.as_deref().is_none_or(|s| rec.server_name == s)
            && self.status.is_none_or(|s| s == rec.status)
            && self.record_type.is_none_or(|t| t == rec.record_type)
            && tool_ok()
            && intent_ok()
            && in_time()
    }
}

/// One page of results, newest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Page {
    /// The records.
    pub records: Vec<ActivityRecord>,
    /// Whether more records match past this page.
    pub has_more: bool,
}

/// Where a query reads candidates from.
enum Plan {
    /// The records table.
    Records,
    /// The index `idx` at these keys (merged newest-first when several).
    Index { idx: usize, keys: Vec<String> },
}

/// Largest ULID timestamp.
const MAX_MS: u64 = (1 << 48) - 1;

/// ULID key bounds `[lo, hi]` for a millisecond range.
fn key_bounds(start_ms: Option<u64>, end_ms: Option<u64>) -> ([u8; 16], [u8; 16]) {
    let lo = ulid::Ulid::from_parts(start_ms.unwrap_or(0).min(MAX_MS), 0);
    let hi = ulid::Ulid::from_parts(end_ms.unwrap_or(MAX_MS).min(MAX_MS), u128::MAX);
    (lo.to_bytes(), hi.to_bytes())
}

type Index = ReadOnlyTable<(&'static str, [u8; 16]), ()>;
type IndexRange = redb::Range<'static, (&'static str, [u8; 16]), ()>;

/// The distinct keys of `index` accepted by `keep`, by skipping from key to key.
fn distinct_keys(index: &Index, keep: impl Fn(&str) -> bool) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let next = match &after {
            None => index.first()?.map(|(k, _)| k.value().0.to_string()),
            Some(prev) => {
                let lower = (prev.as_str(), [0xff_u8; 16]);
                let mut range =
                    index.range::<(&str, [u8; 16])>((Bound::Excluded(lower), Bound::Unbounded))?;
                match range.next() {
                    Some(row) => Some(row?.0.value().0.to_string()),
                    None => None,
                }
            }
        };
        let Some(key) = next else { return Ok(out) };
        if keep(&key) {
            out.push(key.clone());
        }
        after = Some(key);
    }
}

/// Newest-first merge of several index walks, yielding record keys.
struct Merge {
    walks: Vec<std::iter::Rev<IndexRange>>,
    heads: Vec<Option<[u8; 16]>>,
}

impl Merge {
    fn new(index: &Index, keys: &[String], lo: [u8; 16], hi: [u8; 16]) -> Result<Self> {
        let mut walks = Vec::with_capacity(keys.len());
        let mut heads = Vec::with_capacity(keys.len());
        for key in keys {
            let mut walk = index.range((key.as_str(), lo)..=(key.as_str(), hi))?.rev();
            heads.push(Self::pull(&mut walk)?);
            walks.push(walk);
        }
        Ok(Self { walks, heads })
    }

    fn pull(walk: &mut std::iter::Rev<IndexRange>) -> Result<Option<[u8; 16]>> {
        match walk.next() {
            Some(row) => Ok(Some(row?.0.value().1)),
            None => Ok(None),
        }
    }

    fn next(&mut self) -> Result<Option<[u8; 16]>> {
        let best = self
            .heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.map(|h| (h, i)))
            .max();
        let Some((key, i)) = best else {
            return Ok(None);
        };
        self.heads[i] = Self::pull(&mut self.walks[i])?;
        Ok(Some(key))
    }
}

/// Applies offset and limit to the stream of matches.
struct Collector {
    offset: usize,
    limit: usize,
    skipped: usize,
    page: Page,
}

impl Collector {
    /// Counts or keeps one match; false once the page is full and one more match was seen.
    fn take(&mut self, rec: ActivityRecord) -> bool {
        if self.skipped < self.offset {
            self.skipped += 1;
            true
        } else if self.page.records.len() < self.limit {
            self.page.records.push(rec);
            true
        } else {
            self.page.has_more = true;
            false
        }
    }
}

/// Parses a stored row, logging and skipping a corrupt one.
pub(super) fn parse_row(key: &[u8; 16], json: &[u8]) -> Option<ActivityRecord> {
    match serde_json::from_slice(json) {
        Ok(rec) => Some(rec),
        Err(e) => {
            tracing::warn!(id = %key_id(key), "skipping corrupt activity record: {e}");
            None
        }
    }
}

/// Records read at a time by [`Journal::for_each_chunk`] (an export, the statistics).
pub const SCAN_CHUNK: usize = 1000;

impl Journal {
    fn plan(&self, filter: &Filter, txn: &redb::ReadTransaction) -> Result<Plan> {
        let lower = |s: &String| s.to_ascii_lowercase();
        if let Some(tool) = &filter.tool {
            let keys = match &filter.server {
                Some(server) => vec![format!("{server}:{tool}")],
                None => {
                    let index = txn.open_table(INDEXES[IDX_TOOL])?;
                    let suffix = format!(":{tool}");
                    distinct_keys(&index, |k| k == tool || k.ends_with(&suffix))?
                }
            };
            return Ok(Plan::Index {
                idx: IDX_TOOL,
                keys,
            });
        }
        let single = |idx: usize, key: String| Plan::Index {
            idx,
            keys: vec![key],
        };
        Ok(if let Some(server) = &filter.server {
            single(IDX_SERVER, server.clone())
        } else if let Some(intent) = &filter.intent_type {
            single(IDX_INTENT, lower(intent))
        } else if let Some(status) = filter.status {
            single(IDX_STATUS, status.as_str().to_owned())
        } else if let Some(record_type) = filter.record_type {
            single(IDX_TYPE, record_type.as_str().to_owned())
        } else {
            Plan::Records
        })
    }

    /// Calls `visit` with every record matching `filter` after the record with id `after`
    /// (from the start when `None`), oldest first, [`SCAN_CHUNK`] records at a time, so
    /// memory stays flat however many match; stops early when `visit` returns `false`.
    pub fn for_each_chunk(
        &self,
        filter: &Filter,
        after: Option<&str>,
        mut visit: impl FnMut(&[ActivityRecord]) -> bool,
    ) -> Result<()> {
        let mut after = after.map(str::to_owned);
        loop {
            let chunk = self.scan_after(filter, after.as_deref(), SCAN_CHUNK)?;
            if chunk.is_empty() || !visit(&chunk) || chunk.len() < SCAN_CHUNK {
                return Ok(());
            }
            after = chunk.last().map(|r| r.id.clone());
        }
    }

    /// [`for_each_chunk`](Self::for_each_chunk) with the rows of [`scan_export`](Self::scan_export).
    pub fn for_each_export_chunk(
        &self,
        filter: &Filter,
        after: Option<&str>,
        mut visit: impl FnMut(&[(ActivityRecord, Option<Vec<u8>>)]) -> bool,
    ) -> Result<()> {
        let mut after = after.map(str::to_owned);
        loop {
            let chunk = self.scan_export(filter, after.as_deref(), SCAN_CHUNK)?;
            if chunk.is_empty() || !visit(&chunk) || chunk.len() < SCAN_CHUNK {
                return Ok(());
            }
            after = chunk.last().map(|(r, _)| r.id.clone());
        }
    }

    /// Up to `limit` records matching `filter`, oldest first, after the record with id
    /// `after` (from the start when `None`): for reading the whole journal (export) or
    /// following it (watch) a chunk at a time, in bounded memory.
    pub fn scan_after(
        &self,
        filter: &Filter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ActivityRecord>> {
        let rows = self.scan_rows(filter, after, limit, false)?;
        Ok(rows.into_iter().map(|(record, _)| record).collect())
    }

    /// [`scan_after`](Self::scan_after) for an export: each record with the row as stored
    /// when the row is in the hash chain (its exact bytes are what the chain's hash covers).
    pub fn scan_export(
        &self,
        filter: &Filter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(ActivityRecord, Option<Vec<u8>>)>> {
        self.scan_rows(filter, after, limit, true)
    }

    fn scan_rows(
        &self,
        filter: &Filter,
        after: Option<&str>,
        limit: usize,
        chained_rows: bool,
    ) -> Result<Vec<(ActivityRecord, Option<Vec<u8>>)>> {
        let after = after.map(parse_key).transpose()?;
        self.guard(|| {
            let (lo, hi) = key_bounds(filter.start_ms, filter.end_ms);
            let lo = match after {
                Some(after) if after >= lo => after,
                _ => lo,
            };
            let mut out = Vec::new();
            if lo > hi {
                return Ok(out);
            }
            let txn = self.db()?.begin_read()?;
            let records = txn.open_table(RECORDS)?;
            for row in records.range(lo..=hi)? {
                let (key, value) = row?;
                let key = key.value();
                if Some(key) == after {
                    continue;
                }
                let Some(rec) = parse_row(&key, value.value()) else {
                    continue;
                };
                if filter.matches(&rec) {
                    let row = value.value();
                    let chained = chained_rows
                        && crate::chain::ChainLink::of_row(row).is_some_and(|l| l.is_chained());
                    out.push((rec, chained.then(|| row.to_vec())));
                    if out.len() >= limit {
                        break;
                    }
                }
            }
            Ok(out)
        })
    }

    /// Records matching `filter`, newest first: skips `offset` matches, returns up to `limit`
    /// (the caller caps it; the REST API uses 1000) and whether more match.
    pub fn query(&self, filter: &Filter, limit: usize, offset: usize) -> Result<Page> {
        self.guard(|| self.read_page(filter, limit, offset))
    }

    fn read_page(&self, filter: &Filter, limit: usize, offset: usize) -> Result<Page> {
        let page = Page::default();
        if filter
            .start_ms
            .zip(filter.end_ms)
            .is_some_and(|(s, e)| s > e)
        {
            return Ok(page);
        }
        let (lo, hi) = key_bounds(filter.start_ms, filter.end_ms);
        let txn = self.db()?.begin_read()?;
        let records = txn.open_table(RECORDS)?;
        let mut page = Collector {
            offset,
            limit,
            skipped: 0,
            page,
        };
        match self.plan(filter, &txn)? {
            Plan::Records => {
                for row in records.range(lo..=hi)?.rev() {
                    let (key, value) = row?;
                    let key = key.value();
                    let Some(rec) = parse_row(&key, value.value()) else {
                        continue;
                    };
                    if filter.matches(&rec) && !page.take(rec) {
                        break;
                    }
                }
            }
            Plan::Index { idx, keys } => {
                let index = txn.open_table(INDEXES[idx])?;
                let mut walk = Merge::new(&index, &keys, lo, hi)?;
                // The other indexed filters are checked by point lookups in their indexes
                // before the record is read: much cheaper than reading and parsing it.
                let lower = |v: &Option<String>| v.as_ref().map(|s| s.to_ascii_lowercase());
                let mut probes = Vec::new();
                for (i, want) in [
                    (IDX_SERVER, filter.server.clone()),
                    (IDX_INTENT, lower(&filter.intent_type)),
                    (IDX_STATUS, filter.status.map(|s| s.as_str().to_owned())),
                    (IDX_TYPE, filter.record_type.map(|t| t.as_str().to_owned())),
                ] {
                    if let Some(want) = want
                        && i != idx
                    {
                        probes.push((txn.open_table(INDEXES[i])?, want));
                    }
                }
                // Without a tool, session, replica or approval filter the indexes answer every filter,
                // so rows skipped by the offset need not be read either.
                let exact = filter.tool.is_none()
                    && filter.session.is_none()
                    && filter.replica.is_none()
                    && filter.approval.is_none();
                'walk: while let Some(key) = walk.next()? {
                    for (probe, want) in &probes {
                        if probe.get((want.as_str(), key))?.is_none() {
                            continue 'walk;
                        }
                    }
                    if exact && page.skipped < offset {
                        page.skipped += 1;
                        continue;
                    }
                    let Some(row) = records.get(key)? else {
                        continue;
                    };
                    let Some(rec) = parse_row(&key, row.value()) else {
                        continue;
                    };
                    if (exact || filter.matches(&rec)) && !page.take(rec) {
                        break;
                    }
                }
            }
        }
        Ok(page.page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{open_temp, rec_at, with_intent};
    use crate::{JournalOptions, Retention};

    const T0: u64 = 1_790_000_000_000;

    /// 240 records, one a minute, over 3 servers x 4 tools, mixed variants/statuses/types.
    fn dataset() -> Vec<ActivityRecord> {
        let servers = ["alpha", "beta", "gamma"];
        let tools = ["read_file", "write_file", "delete", "search"];
        let variants = ["read", "write", "destructive"];
        let statuses = [
            Status::Success,
            Status::Error,
            Status::Blocked,
            Status::Pending,
        ];
        (0..240u64)
            .map(|i| {
                let i_us = i as usize;
                let mut rec = rec_at(
                    T0 + i * 60_000,
                    servers[i_us % 3],
                    tools[(i_us / 3) % 4],
                    variants[(i_us / 2) % 3],
                    statuses[(i_us / 5) % 4],
                );
                if i % 11 == 0 {
                    rec = with_intent(rec, "Destructive");
                }
                if i % 13 < 2 {
                    rec.approval = Some(crate::ApprovalRecord {
                        decision: if i % 13 == 0 { "approved" } else { "denied" }.into(),
                        ..Default::default()
                    });
                }
                if i % 7 == 0 {
                    rec.record_type = RecordType::PolicyDecision;
                }
                rec.session_id = Some(format!("s{}", i % 4));
                rec.replica = match i % 5 {
                    0 => Some("r1".to_owned()),
                    1 | 2 => Some("r2".to_owned()),
                    _ => None,
                };
                rec
            })
            .collect()
    }

    /// An independent statement of the filter semantics.
    fn wanted(r: &ActivityRecord, f: &Filter) -> bool {
        let ms = ulid::Ulid::from_string(&r.id).unwrap().timestamp_ms();
        let intent = match &r.intent {
            Some(i) => i.operation_type.unwrap().as_str().to_owned(),
            None => r.tool_variant.unwrap().as_str().to_owned(),
        };
        let lower = |o: &Option<String>| o.as_ref().map(|v| v.to_lowercase());
        let qualified = format!("{}:{}", r.server_name, r.tool_name);
        lower(&f.intent_type).is_none_or(|v| v == intent)
            && f.server.as_ref().is_none_or(|v| *v == r.server_name)
            && f.tool
                .as_ref()
                .is_none_or(|v| *v == r.tool_name || *v == qualified)
            && f.status.is_none_or(|v| v == r.status)
            && f.record_type.is_none_or(|v| v == r.record_type)
            && f.start_ms.is_none_or(|v| ms >= v)
            && f.end_ms.is_none_or(|v| ms <= v)
            && f.session
                .as_ref()
                .is_none_or(|v| Some(v) == r.session_id.as_ref())
            && f.replica
                .as_ref()
                .is_none_or(|v| Some(v) == r.replica.as_ref())
            && f.approval.as_ref().is_none_or(|v| {
                r.approval
                    .as_ref()
                    .is_some_and(|a| v == "any" || *v == a.decision)
            })
    }

    fn brute(all: &[ActivityRecord], f: &Filter, limit: usize, offset: usize) -> Page {
        let matching: Vec<_> = all.iter().rev().filter(|r| wanted(r, f)).cloned().collect();
        let records: Vec<_> = matching.iter().skip(offset).take(limit).cloned().collect();
        Page {
            has_more: matching.len() > offset + records.len(),
            records,
        }
    }

    #[test]
    fn every_filter_alone_and_combined_matches_brute_force() {
        let options = JournalOptions {
            retention: Retention {
                max_undelivered_bytes: 0,
                max_age: std::time::Duration::ZERO,
                max_records: 0,
                max_bytes: 0,
                ..Retention::default()
            },
            ..JournalOptions::default()
        };
        let (_dir, j) = open_temp(options);
        let all = dataset();
        j.bulk_load(&all).unwrap();
        let s = |v: &str| Some(v.to_string());
        let mut filters = vec![Filter::default()];
        let singles = [
            Filter {
                intent_type: s("destructive"),
                ..Filter::default()
            },
            Filter {
                intent_type: s("READ"),
                ..Filter::default()
            },
            Filter {
                server: s("beta"),
                ..Filter::default()
            },
            Filter {
                server: s("nope"),
                ..Filter::default()
            },
            Filter {
                tool: s("delete"),
                ..Filter::default()
            },
            Filter {
                tool: s("gamma:search"),
                ..Filter::default()
            },
            Filter {
                status: Some(Status::Blocked),
                ..Filter::default()
            },
            Filter {
                status: Some(Status::Pending),
                ..Filter::default()
            },
            Filter {
                record_type: Some(RecordType::PolicyDecision),
                ..Filter::default()
            },
            Filter {
                start_ms: Some(T0 + 100 * 60_000),
                ..Filter::default()
            },
            Filter {
                end_ms: Some(T0 + 30 * 60_000),
                ..Filter::default()
            },
            Filter {
                session: s("s1"),
                ..Filter::default()
            },
            Filter {
                replica: s("r2"),
                ..Filter::default()
            },
            Filter {
                replica: s("r3"),
                ..Filter::default()
            },
            Filter {
                approval: s("any"),
                ..Filter::default()
            },
            Filter {
                approval: s("denied"),
                ..Filter::default()
            },
        ];
        filters.extend(singles.iter().cloned());
        for a in &singles {
            for b in &singles {
                filters.push(Filter {
                    intent_type: a.intent_type.clone().or(b.intent_type.clone()),
                    server: a.server.clone().or(b.server.clone()),
                    tool: a.tool.clone().or(b.tool.clone()),
                    status: a.status.or(b.status),
                    record_type: a.record_type.or(b.record_type),
                    session: a.session.clone().or(b.session.clone()),
                    start_ms: a.start_ms.or(b.start_ms),
                    end_ms: a.end_ms.or(b.end_ms),
                    replica: a.replica.clone().or(b.replica.clone()),
                    approval: a.approval.clone().or(b.approval.clone()),
                });
            }
        }
        filters.push(Filter {
            server: s("alpha"),
            tool: s("read_file"),
            status: Some(Status::Success),
            start_ms: Some(T0 + 10 * 60_000),
            end_ms: Some(T0 + 200 * 60_000),
            ..Filter::default()
        });
        // Exact millisecond bounds are inclusive; an inverted range is empty.
        filters.push(Filter {
            start_ms: Some(T0 + 60_000),
            end_ms: Some(T0 + 60_000),
            ..Filter::default()
        });
        filters.push(Filter {
            start_ms: Some(T0 + 2),
            end_ms: Some(T0 + 1),
            ..Filter::default()
        });
        for f in &filters {
            for (limit, offset) in [(1000, 0), (7, 0), (7, 5), (5, 1000), (0, 0), (3, 20)] {
                let got = j.query(f, limit, offset).unwrap();
                let want = brute(&all, f, limit, offset);
                let ids = |p: &Page| p.records.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
                assert_eq!(
                    (ids(&got), got.has_more),
                    (ids(&want), want.has_more),
                    "filter {f:?} limit {limit} offset {offset}"
                );
            }
        }
        let blocked = all.iter().filter(|r| r.status == Status::Blocked).count();
        assert_eq!(
            j.query(&singles[6], 1000, 0).unwrap().records.len(),
            blocked
        );
        assert_eq!(j.query(&singles[4], 1000, 0).unwrap().records.len(), 60);
        let one = Filter {
            start_ms: Some(T0 + 60_000),
            end_ms: Some(T0 + 60_000),
            ..Filter::default()
        };
        assert_eq!(j.query(&one, 10, 0).unwrap().records.len(), 1);
        let destructive = Filter {
            intent_type: s("destructive"),
            ..Filter::default()
        };
        let page = j.query(&destructive, 1000, 0).unwrap();
        assert!(
            page.records
                .iter()
                .any(|r| r.tool_variant == Some(mcpproxy_policy::OperationType::Read))
        );
        assert!(
            page.records.windows(2).all(|w| w[0].id > w[1].id),
            "newest first"
        );
    }
}
