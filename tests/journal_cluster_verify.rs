//! `mcpproxy activity verify --cluster` against a real ClickHouse table: two replicas deliver
//! their hash-chained records through the ClickHouse sink, a witness keeps each replica's
//! signed checkpoint, and the walk over the table holds; then the table is tampered with as
//! someone with write access to it would (a record deleted, an argument changed, a decision
//! changed, a forged record inserted, two records reordered, the tail cut) and `verify`
//! names each break, per replica, with exit code 1.

use std::io::Write;
use std::time::Duration;

use serde_json::{Value, json};

use crate::journal_cluster::{Replicas, TABLE, activity, api, delivered_records, make_calls};
use crate::support::clickhouse::ClickHouse;
use crate::support::mcp::Proxy;

/// Runs `sql` (an `ALTER TABLE ... UPDATE|DELETE` mutation) and waits until ClickHouse has
/// applied it: 18.16 runs mutations in the background, with no synchronous setting.
async fn mutate(ch: &ClickHouse, sql: &str) {
    ch.query(sql).await;
    crate::support::poll::until_value(
        "ClickHouse applies the mutation",
        Duration::from_secs(30),
        || async {
            let left = ch
                .query("SELECT count() FROM system.mutations WHERE is_done = 0 FORMAT TabSeparated")
                .await;
            if left.trim() == "0" {
                Ok(())
            } else {
                Err(format!("{} mutations left", left.trim()))
            }
        },
    )
    .await;
}

/// A ClickHouse string literal of `text`.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// The stored record of `replica` at `seq`, as the table has it.
async fn record_at(ch: &ClickHouse, replica: &str, seq: u64) -> Value {
    let text = ch
        .query(&format!(
            "SELECT record FROM default.{TABLE} WHERE replica = {} AND seq = {seq} LIMIT 1 \
             FORMAT TabSeparatedRaw",
            literal(replica)
        ))
        .await;
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Replaces the record `id` with `record` (its text), as an attacker with UPDATE would.
async fn rewrite(ch: &ClickHouse, id: &str, record: &Value) {
    mutate(
        ch,
        &format!(
            "ALTER TABLE default.{TABLE} UPDATE record = {} WHERE id = {}",
            literal(&record.to_string()),
            literal(id)
        ),
    )
    .await;
}

/// `verify --cluster ARGS -o json` on `proxy`'s config: the exit code and the report.
fn verify(proxy: &Proxy, args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec!["verify", "--cluster", "-o", "json"];
    all.extend_from_slice(args);
    let out = activity(proxy, &all);
    let report = serde_json::from_str(&out.stdout())
        .unwrap_or_else(|e| panic!("{e}: {} {}", out.stdout(), out.stderr()));
    (out.code(), report)
}

/// The report of one replica's chain.
fn chain<'a>(report: &'a Value, replica: &str) -> &'a Value {
    report["replicas"]
        .as_array()
        .and_then(|all| all.iter().find(|r| r["replica"] == replica))
        .unwrap_or_else(|| panic!("no chain of {replica} in {report}"))
}

/// `(kind, seq)` of each problem of one replica's chain.
fn problems(report: &Value, replica: &str) -> Vec<(String, Option<u64>)> {
    chain(report, replica)["problems"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|p| (p["kind"].as_str().unwrap().to_owned(), p["seq"].as_u64()))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn verify_cluster_walks_every_replicas_chain_and_names_each_break_in_the_table() {
    let Some(ch) = ClickHouse::start().await else {
        return;
    };
    let replicas = Replicas::start(&ch);
    let (a, b) = (&replicas.a, &replicas.b);
    make_calls(a, 6).await;
    make_calls(b, 6).await;
    let records_a = delivered_records(a).await.len() as u64;
    let records_b = delivered_records(b).await.len() as u64;
    assert!(records_a >= 6 && records_b >= 6);

    // The witness: each replica's head signed now, as a witness fetches it, each checkpoint
    // labelled with its replica; and each replica's public key.
    let witness = tempfile::NamedTempFile::new().unwrap();
    let mut keys = Vec::new();
    for (name, proxy) in [("replica-a", a), ("replica-b", b)] {
        let kept = api(proxy, "/activity/checkpoint").await;
        assert_eq!(kept["checkpoint"]["replica"], name, "{kept}");
        writeln!(witness.as_file(), "{kept}").unwrap();
        keys.push(format!("{name}={}", kept["key"].as_str().unwrap()));
    }
    let witness_path = witness.path().to_str().unwrap().to_owned();
    let with_witness = [
        "--witness",
        witness_path.as_str(),
        "--key",
        keys[0].as_str(),
        "--key",
        keys[1].as_str(),
    ];

    // The intact table holds, from either replica, with or without the witness.
    let (code, report) = verify(b, &with_witness);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["ok"], true);
    assert_eq!(report["rows"], records_a + records_b);
    for (name, records) in [("replica-a", records_a), ("replica-b", records_b)] {
        let chain = chain(&report, name);
        assert_eq!(chain["chained"], records, "{chain}");
        assert_eq!(chain["first_seq"], 1);
        assert_eq!(chain["last_seq"], records);
        assert_eq!(chain["checkpoints"], 1);
        assert_eq!(chain["last_checkpoint"]["seq"], records);
        assert_eq!(chain["key_source"], "given");
    }
    let (code, report) = verify(a, &[]);
    assert_eq!((code, &report["ok"]), (Some(0), &json!(true)), "{report}");
    assert_eq!(chain(&report, "replica-a")["checkpoints"], 0);
    // A batch delivered twice (at least once delivery) is the same records again: no break.
    ch.query(&format!(
        "INSERT INTO default.{TABLE} SELECT * FROM default.{TABLE} WHERE replica = 'replica-b'"
    ))
    .await;
    let (code, report) = verify(a, &with_witness);
    assert_eq!(code, Some(0), "a redelivered batch is no break: {report}");
    // The wrong key for a replica: its checkpoint's signature is bad.
    let wrong = format!("replica-a={}", "ab".repeat(32));
    let (code, report) = verify(
        a,
        &[
            "--witness",
            &witness_path,
            "--key",
            &wrong,
            "--key",
            &keys[1],
        ],
    );
    assert_eq!(code, Some(1));
    assert_eq!(
        problems(&report, "replica-a"),
        vec![("bad_signature".to_owned(), Some(records_a))]
    );

    // Tampering with replica A's records.
    // Deleted: seq 2.
    let second = record_at(&ch, "replica-a", 2).await;
    mutate(
        &ch,
        &format!(
            "ALTER TABLE default.{TABLE} DELETE WHERE id = {}",
            literal(second["id"].as_str().unwrap())
        ),
    )
    .await;
    // An argument changed: seq 3 (the columns agree with the record, as a careful attacker
    // would leave them; the walk reads the record).
    let mut third = record_at(&ch, "replica-a", 3).await;
    third["arguments"] = json!({"note": "rewritten"});
    rewrite(&ch, third["id"].as_str().unwrap(), &third).await;
    // A forged record inserted claiming seq 5, its hash recomputed by the attacker's rules
    // (but it cannot be both seq 5 and the record the chain has there).
    let mut forged = record_at(&ch, "replica-a", 5).await;
    forged["id"] = json!("01KB0000000000000000000000");
    forged["tool_name"] = json!("drop_everything");
    ch.query(&format!(
        "INSERT INTO default.{TABLE} (id, timestamp_ms, replica, seq, record) SELECT {}, \
         timestamp_ms, replica, seq, {} FROM default.{TABLE} WHERE replica = 'replica-a' AND \
         seq = 5",
        literal(forged["id"].as_str().unwrap()),
        literal(&forged.to_string())
    ))
    .await;

    // Tampering with replica B's records.
    // A decision changed: a blocked call now says it was allowed.
    let mut decided = None;
    for seq in 3..records_b {
        let record = record_at(&ch, "replica-b", seq).await;
        if record["status"] == "blocked" {
            decided = Some((seq, record));
            break;
        }
    }
    let (decided_seq, mut decided) = decided.expect("a blocked call in replica B");
    decided["verdict"]["decision"] = json!("allow");
    decided["status"] = json!("success");
    rewrite(&ch, decided["id"].as_str().unwrap(), &decided).await;
    // Two records reordered: seq 1 and 2 swap places (each keeps its content and hash).
    let (mut first, mut second_b) = (
        record_at(&ch, "replica-b", 1).await,
        record_at(&ch, "replica-b", 2).await,
    );
    first["seq"] = json!(2);
    second_b["seq"] = json!(1);
    rewrite(&ch, first["id"].as_str().unwrap(), &first).await;
    rewrite(&ch, second_b["id"].as_str().unwrap(), &second_b).await;
    // The tail cut: replica B's last record deleted (the witness signed it).
    let last = record_at(&ch, "replica-b", records_b).await;
    mutate(
        &ch,
        &format!(
            "ALTER TABLE default.{TABLE} DELETE WHERE id = {}",
            literal(last["id"].as_str().unwrap())
        ),
    )
    .await;

    let (code, report) = verify(a, &with_witness);
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(report["ok"], false);
    let found_a = problems(&report, "replica-a");
    for expected in [
        ("deleted", Some(2)),
        ("altered", Some(3)),
        ("inserted", Some(5)),
    ] {
        let expected = (expected.0.to_owned(), expected.1);
        assert!(found_a.contains(&expected), "{expected:?} in {found_a:?}");
    }
    let found_b = problems(&report, "replica-b");
    for expected in [
        ("altered", Some(1)),
        ("altered", Some(2)),
        ("altered", Some(decided_seq)),
        ("truncated", Some(records_b)),
    ] {
        let expected = (expected.0.to_owned(), expected.1);
        assert!(found_b.contains(&expected), "{expected:?} in {found_b:?}");
    }
    // The text for a person names the records and the replica.
    let out = activity(a, &{
        let mut args = vec!["verify", "--cluster"];
        args.extend_from_slice(&with_witness);
        args
    });
    out.assert_code(1);
    let text = out.stdout();
    for needle in [
        "replica replica-a:",
        "replica replica-b:",
        "deleted: seq 2 is missing",
        &format!("record {} (seq 3", third["id"].as_str().unwrap()),
        "01KB0000000000000000000000",
        "the tail was truncated",
        "or not delivered to the table yet",
        "BROKEN",
    ] {
        assert!(text.contains(needle), "{needle:?} in {text}");
    }

    // The same through REST, on either replica (no witness: links and hashes only).
    let rest = api(b, "/activity/verify?cluster=true").await;
    assert_eq!(rest["ok"], false);
    assert!(problems(&rest, "replica-a").contains(&("deleted".to_owned(), Some(2))));
}
