//! Property tests of the record codec: any record a caller can cause or a stored row can
//! hold, generated at random (proptest; a failing case is shrunk and saved in
//! `properties.proptest-regressions` beside this file, and replayed first from then on).
//! Bounding keeps every name and text within its cap, and what is written reads back the
//! same.

#[path = "../../../tests/support/strategies.rs"]
mod strategies;

use mcpproxy_activity::ActivityRecord;
use mcpproxy_activity::{MAX_NAME_BYTES, MAX_TEXT_BYTES};
use proptest::prelude::*;
use serde_json::{Map, Value};
use strategies::{json_value, text};

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    /// Records whose text fields are anything a caller can send (always readable).
    #[test]
    fn caller_text_in_records_is_bounded_and_round_trips(
        server in text(), tool in text(), error in text(), session in text(),
        repeat in 1usize..2000, arguments in json_value(),
    ) {
        let record = ActivityRecord {
            server_name: server.repeat(repeat),
            tool_name: tool.repeat(repeat),
            error_message: Some(error.repeat(repeat)),
            session_id: Some(session),
            arguments: Some(arguments),
            ..ActivityRecord::default()
        };
        let bounded = record.bounded();
        prop_assert!(bounded.server_name.len() <= MAX_NAME_BYTES);
        prop_assert!(bounded.tool_name.len() <= MAX_NAME_BYTES);
        prop_assert!(bounded.error_message.as_ref().is_some_and(|m| m.len() <= MAX_TEXT_BYTES));
        let written = serde_json::to_value(&*bounded).unwrap();
        let read: ActivityRecord = serde_json::from_value(written.clone()).unwrap();
        // Compared as JSON: `arguments: Some(null)` and `None` are both written as null.
        prop_assert_eq!(serde_json::to_value(&read).unwrap(), written);
    }
}

/// The keys of a record's JSON that [`records_bound_and_round_trip`] fills.
const RECORD_KEYS: [&str; 16] = [
    "id",
    "type",
    "source",
    "server_name",
    "tool_name",
    "tool_variant",
    "status",
    "error_message",
    "session_id",
    "request_id",
    "arguments",
    "timestamp",
    "verdict",
    "intent",
    "client",
    "details",
];

/// The decisions a verdict may carry.
const DECISIONS: &[&str] = &["allow", "warn", "reject"];

/// A value for the record key `key`: mostly one of the type the key has (so that most
/// generated objects read as a record and the codec is exercised), sometimes any JSON.
fn record_value(key: &'static str) -> BoxedStrategy<Value> {
    let one_of =
        |names: &'static [&'static str]| prop::sample::select(names).prop_map(Value::from).boxed();
    let typed = match key {
        "type" => one_of(&[
            "tool_call",
            "policy_decision",
            "tool_change",
            "approval",
            "alert",
            "resource_read",
            "server_request",
            "prompt_get",
            "completion",
            "subscription",
            "server_change",
            "code_execution",
        ]),
        "source" => one_of(&["mcp", "cli", "api", "upstream", "proxy", "config_file"]),
        "status" => one_of(&["pending", "success", "error", "blocked"]),
        "tool_variant" => one_of(&["call_tool_read", "call_tool_write", "call_tool_destructive"]),
        "verdict" => (
            prop::sample::select(DECISIONS),
            prop::option::of(text()),
        )
            .prop_map(|(decision, message)| serde_json::json!({"decision": decision, "message": message}))
            .boxed(),
        "intent" => (prop::option::of(text()), prop::option::of(text()))
            .prop_map(|(sensitivity, reason)| {
                serde_json::json!({"data_sensitivity": sensitivity, "reason": reason})
            })
            .boxed(),
        "client" => (text(), text())
            .prop_map(|(name, version)| serde_json::json!({"name": name, "version": version}))
            .boxed(),
        "arguments" | "details" => json_value().boxed(),
        _ => text().prop_map(Value::String).boxed(),
    };
    prop_oneof![9 => typed, 1 => json_value()].boxed()
}

/// The record codec: whatever JSON a record is read from, bounding it keeps every name and
/// text field within its cap, and writing it out reads back the same. Objects that do not
/// read as a record prove nothing about the codec: they are counted, and most cases must
/// be records.
#[test]
fn records_bound_and_round_trip() {
    const CASES: u32 = 512;
    let fields = prop::sample::subsequence(RECORD_KEYS.to_vec(), 0..10).prop_flat_map(|keys| {
        keys.into_iter()
            .map(|key| (Just(key), record_value(key)))
            .collect::<Vec<_>>()
    });
    let long = prop::option::of(("[a-z\\r\\n]{1,4}", 1usize..5000));
    let config = ProptestConfig {
        cases: CASES,
        source_file: Some(file!()),
        ..ProptestConfig::default()
    };
    let records = std::sync::atomic::AtomicU32::new(0);
    let result =
        proptest::test_runner::TestRunner::new(config).run(&(fields, long), |(fields, long)| {
            let mut object: Map<String, Value> =
                fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            if let Some((piece, times)) = long {
                object.insert("tool_name".into(), Value::String(piece.repeat(times)));
                object.insert("error_message".into(), Value::String(piece.repeat(times)));
            }
            let Ok(record) = serde_json::from_value::<ActivityRecord>(Value::Object(object)) else {
                return Ok(());
            };
            records.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let bounded = record.bounded();
            prop_assert!(bounded.server_name.len() <= MAX_NAME_BYTES);
            prop_assert!(bounded.tool_name.len() <= MAX_NAME_BYTES);
            if let Some(message) = &bounded.error_message {
                prop_assert!(message.len() <= MAX_TEXT_BYTES);
            }
            let written = serde_json::to_value(&*bounded).unwrap();
            let read: ActivityRecord = serde_json::from_value(written.clone()).unwrap();
            prop_assert_eq!(serde_json::to_value(&read).unwrap(), written);
            Ok(())
        });
    if let Err(failure) = result {
        panic!("{failure}");
    }
    let records = records.into_inner();
    assert!(
        records >= CASES / 2,
        "only {records} of {CASES} generated objects read as a record: the codec was barely tested"
    );
}
