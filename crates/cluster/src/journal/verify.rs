//! `mcpproxy activity verify --cluster`: every replica's hash chain, walked in the cluster
//! journal's table. Each replica's journal chains its records on its own (`seq` 1, 2, 3, ...
//! per replica), and the ClickHouse sink delivers them with that chain in `record` (and in
//! the `replica`, `seq`, `prev`, `hash` columns, which are for queries: the walk reads the
//! record itself, so a column changed on its own proves nothing either way).
//!
//! The rows are read in one stream, each distinct record once (delivery is at least once),
//! grouped by the record's `replica`, and each group goes through the same
//! [`Verifier`] as the local journal and an export. A record written after a replica's
//! chain started but without chain fields is reported as inserted, as locally.
//!
//! The table holds no signatures: checkpoints come from a witness (each labelled with its
//! replica) and are checked against `--key`. Without any, the walk proves the chains are
//! consistent, which an attacker who can write the table and recompute hashes can fake; a
//! witness is what makes a rewrite show (docs/security.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use mcpproxy_activity::{ChainReport, Checkpoint, ProblemKind, Verifier, parse_record_id};

use super::Error;
use super::reader::{ClusterJournal, MAX_SCAN};
use super::sql;

/// The public keys the checkpoints must be signed with: one for every replica (replicas
/// sharing `activity.checkpoints.signing_key`), and one per replica.
#[derive(Debug, Clone, Default)]
pub struct ClusterKeys {
    pub all: Option<String>,
    pub by_replica: BTreeMap<String, String>,
}

impl ClusterKeys {
    fn of(&self, replica: &str) -> Option<(String, &'static str)> {
        self.by_replica
            .get(replica)
            .or(self.all.as_ref())
            .map(|key| (key.clone(), "given"))
    }
}

/// What `verify --cluster` found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterReport {
    /// Every replica's chain holds, and every witness checkpoint found its chain.
    pub ok: bool,
    /// Distinct rows read.
    pub rows: u64,
    /// Each replica's chain, by name (`""`: records that name no replica).
    pub replicas: Vec<ReplicaChain>,
    /// What could not be put against any chain (a witness checkpoint naming no replica, or
    /// one the table has no record of).
    pub problems: Vec<String>,
}

/// One replica's chain.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaChain {
    pub replica: String,
    #[serde(flatten)]
    pub report: ChainReport,
}

/// A replica's rows as they are read.
struct Group {
    verifier: Verifier,
    /// The time of the earliest chained record: the chain's start as the table shows it.
    started_ms: Option<u64>,
}

#[derive(Deserialize)]
struct Row {
    record: String,
}

impl ClusterJournal {
    /// Walks every replica's chain in the table (records at or after `since_ms`), with the
    /// `witness` checkpoints put against the chain of the replica each names.
    pub async fn verify_chains(
        &self,
        keys: &ClusterKeys,
        since_ms: Option<u64>,
        witness: Vec<Checkpoint>,
    ) -> Result<ClusterReport, Error> {
        let mut groups: BTreeMap<String, Group> = BTreeMap::new();
        let mut report = ClusterReport::default();
        let sql = sql::chain_records(self.table(), since_ms);
        self.client()
            .stream(&sql, MAX_SCAN, |line| {
                let row: Row = serde_json::from_str(line)
                    .map_err(|e| self.client().bad_line(line, e.to_string()))?;
                report.rows += 1;
                add_row(&mut groups, keys, since_ms, &row.record);
                Ok(())
            })
            .await?;
        put_witness(&mut groups, keys, since_ms, witness, &mut report.problems);
        for (replica, group) in groups {
            let mut verifier = group.verifier;
            verifier.chain_state(0, 0, group.started_ms.unwrap_or(0));
            let mut chain = verifier.finish();
            for problem in &mut chain.problems {
                if problem.kind == ProblemKind::Truncated {
                    problem.message.push_str(
                        " (or not delivered to the table yet: `mcpproxy activity sinks` on that \
                         replica shows its backlog)",
                    );
                }
            }
            report.replicas.push(ReplicaChain {
                replica,
                report: chain,
            });
        }
        report.ok = report.problems.is_empty() && report.replicas.iter().all(|r| r.report.ok);
        Ok(report)
    }
}

/// A new replica's group.
fn group<'a>(
    groups: &'a mut BTreeMap<String, Group>,
    keys: &ClusterKeys,
    since_ms: Option<u64>,
    replica: &str,
) -> &'a mut Group {
    groups.entry(replica.to_owned()).or_insert_with(|| {
        let mut verifier = Verifier::new(keys.of(replica));
        if let Some(since) = since_ms {
            verifier.since(since);
        }
        Group {
            verifier,
            started_ms: None,
        }
    })
}

/// One distinct row: into its replica's group (a row that is not a JSON object goes to the
/// group of no replica, reported unreadable).
fn add_row(
    groups: &mut BTreeMap<String, Group>,
    keys: &ClusterKeys,
    since_ms: Option<u64>,
    record: &str,
) {
    let parsed = serde_json::from_str::<Value>(record);
    let value = match parsed {
        Ok(value @ Value::Object(_)) => value,
        unreadable => {
            let detail = match unreadable {
                Ok(_) => "not a JSON object".to_owned(),
                Err(e) => e.to_string(),
            };
            let shown: String = record.chars().take(40).collect();
            group(groups, keys, since_ms, "")
                .verifier
                .unreadable(&mcpproxy_support::quote(&shown), &detail);
            return;
        }
    };
    let replica = value
        .get("replica")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let chained_ms = value
        .get("seq")
        .and_then(|_| value.get("id"))
        .and_then(Value::as_str)
        .and_then(parse_record_id);
    let group = group(groups, keys, since_ms, replica);
    if let Some(ms) = chained_ms {
        group.started_ms = Some(group.started_ms.map_or(ms, |s| s.min(ms)));
    }
    group.verifier.record(&value);
}

/// The witness's checkpoints, each against the chain of the replica it names; one naming
/// none goes to the only chain there is, else it is reported.
fn put_witness(
    groups: &mut BTreeMap<String, Group>,
    keys: &ClusterKeys,
    since_ms: Option<u64>,
    witness: Vec<Checkpoint>,
    problems: &mut Vec<String>,
) {
    let only = (groups.len() == 1)
        .then(|| groups.keys().next().cloned())
        .flatten();
    for checkpoint in witness {
        let replica = match (&checkpoint.replica, &only) {
            (Some(replica), _) => replica.clone(),
            (None, Some(only)) => only.clone(),
            (None, None) => {
                problems.push(format!(
                    "the witness's checkpoint of seq {} signed at {} names no replica, and the \
                     table holds several chains: keep each replica's checkpoints with its name \
                     (checkpoints signed with a cluster.replica carry it)",
                    checkpoint.seq, checkpoint.time
                ));
                continue;
            }
        };
        if !groups.contains_key(&replica) {
            problems.push(format!(
                "the witness has a checkpoint of replica '{}' (seq {}, signed at {}), but the \
                 table holds no record of it: its records were deleted, or were never delivered \
                 here",
                mcpproxy_support::quote(&replica),
                checkpoint.seq,
                checkpoint.time
            ));
        }
        group(groups, keys, since_ms, &replica)
            .verifier
            .checkpoint(checkpoint);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_that_is_not_a_json_object_is_unreadable_in_the_group_of_no_replica() {
        let mut groups = BTreeMap::new();
        let keys = ClusterKeys::default();
        add_row(&mut groups, &keys, None, "not json");
        add_row(&mut groups, &keys, None, "[1, 2]");
        let report = groups
            .remove("")
            .expect("the group of no replica")
            .verifier
            .finish();
        let details: Vec<&str> = report.problems.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(report.problems.len(), 2, "{details:?}");
        assert!(
            report
                .problems
                .iter()
                .all(|p| p.kind == ProblemKind::Unreadable)
        );
        assert!(details[0].contains("expected ident"), "{details:?}");
        assert!(details[1].contains("not a JSON object"), "{details:?}");
    }
}
