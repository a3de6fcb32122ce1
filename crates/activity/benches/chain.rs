//! The hash chain's cost per record, measured with criterion: what the journal's writer
//! thread does to link a final record (read its JSON into a tree that borrows its strings,
//! add `seq`, the canonical encoding, SHA-256: `linked_record_hash`) for a typical record
//! (~600 bytes of JSON) and one with arguments at the default cap (4 KiB), beside the same by
//! way of a `serde_json::Value` (`link_value_*`, what the writer did before, and what
//! `verify` does); and what `verify` spends per record.
//!
//! `cargo bench -p mcpproxy-activity --bench chain`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

use mcpproxy_activity::{
    ActivityRecord, RecordType, Source, Status, Verifier, linked_record_hash, record_hash,
};

/// A finished call's record whose arguments hold `argument_bytes` of text, as stored JSON.
fn stored(argument_bytes: usize) -> Vec<u8> {
    let mut record =
        ActivityRecord::new(RecordType::ToolCall, Source::Mcp, "github", "create_issue");
    record.arguments = Some(json!({
        "repo": "acme/widgets",
        "title": "Crash on start",
        "body": "x".repeat(argument_bytes),
    }));
    record.status = Status::Success;
    record.duration_ms = 182;
    record.response_bytes = 2048;
    record.session_id = Some("4b1f6c2e-8a55-4c1e-9d59-2f8e0d0d7a11".into());
    record.request_id = Some("17".into());
    serde_json::to_vec(&record).expect("a record encodes")
}

/// The same hash by way of a `Value`: decode, add `seq`, hash.
fn link_value(json: &[u8], prev: &[u8; 32], seq: u64) -> [u8; 32] {
    let mut value: Value = serde_json::from_slice(json).expect("a stored record decodes");
    if let Value::Object(map) = &mut value {
        map.insert("seq".into(), seq.into());
    }
    record_hash(prev, &value)
}

fn chained(n: u64, json: &[u8]) -> Vec<Value> {
    let mut prev = [0u8; 32];
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    (1..=n)
        .map(|seq| {
            let mut value: Value = serde_json::from_slice(json).expect("decodes");
            value["seq"] = seq.into();
            let hash = record_hash(&prev, &value);
            value["prev"] = hex(&prev).into();
            value["hash"] = hex(&hash).into();
            prev = hash;
            value
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    for (name, bytes) in [("typical", 200), ("4k_arguments", 4096)] {
        let json = stored(bytes);
        assert_eq!(
            linked_record_hash(&[7; 32], &json, 42),
            Some(link_value(&json, &[7; 32], 42))
        );
        c.bench_function(&format!("chain/link_{name}_{}b", json.len()), |b| {
            b.iter(|| linked_record_hash(&[7; 32], black_box(&json), 42))
        });
        c.bench_function(&format!("chain/link_value_{name}_{}b", json.len()), |b| {
            b.iter(|| link_value(black_box(&json), &[7; 32], 42))
        });
    }
    let records = chained(1000, &stored(200));
    c.bench_function("chain/verify_1000_typical", |b| {
        b.iter(|| {
            let mut verifier = Verifier::new(None);
            for record in &records {
                verifier.record(black_box(record));
            }
            verifier.finish()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
