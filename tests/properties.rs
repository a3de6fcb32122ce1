//! Property tests: what a client, a config author or a stored record can put in front of
//! the parsers, generated at random (proptest; a failing case is shrunk and saved in
//! `properties.proptest-regressions` beside this file, and replayed first from then on).
//! No input panics, and every accepted input keeps the invariants the rest of the proxy
//! relies on.

use mcpproxy_activity::ActivityRecord;
use mcpproxy_activity::{MAX_NAME_BYTES, MAX_TEXT_BYTES};
use mcpproxy_config::Config;
use mcpproxy_policy::OperationType;
use mcpproxy_server::proxy::{parse_call, split_name};
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Any JSON value, nested a few levels, with strings that include control, invisible and
/// non-ASCII characters.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Strings biased toward what breaks parsers: separators, controls, bidi and zero-width
/// characters, and plain words.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_]{0,12}(:[a-z_]{0,12}){0,2}",
        "\\PC{0,40}",
        prop::collection::vec(
            prop_oneof![
                Just('\r'),
                Just('\n'),
                Just('\u{1b}'),
                Just('\u{202e}'),
                Just('\u{200b}'),
                Just(':'),
                Just('"'),
                any::<char>()
            ],
            0..24
        )
        .prop_map(|cs| cs.into_iter().collect()),
    ]
}

/// The arguments of a `call_tool_*` call: mostly the known keys, with any values.
fn call_arguments() -> impl Strategy<Value = Map<String, Value>> {
    let key = prop_oneof![
        Just("name".to_owned()),
        Just("args".to_owned()),
        Just("args_json".to_owned()),
        Just("intent".to_owned()),
        Just("intent_data_sensitivity".to_owned()),
        Just("intent_reason".to_owned()),
        text(),
    ];
    let value = prop_oneof![
        text().prop_map(Value::String),
        json_value(),
        json_value().prop_map(|v| Value::String(v.to_string())),
    ];
    prop::collection::btree_map(key, value, 0..6).prop_map(|m| m.into_iter().collect())
}

fn variant() -> impl Strategy<Value = OperationType> {
    prop_oneof![
        Just(OperationType::Read),
        Just(OperationType::Write),
        Just(OperationType::Destructive),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    /// Call arguments and intents: never a panic; an accepted call names a server and a
    /// tool that are short, printable and non-empty, and its error messages are bounded.
    #[test]
    fn call_arguments_parse_or_say_why(variant in variant(), arguments in call_arguments()) {
        match parse_call(variant, &arguments) {
            Ok(input) => {
                prop_assert!(!input.server.is_empty() && !input.tool.is_empty());
                let name = format!("{}:{}", input.server, input.tool);
                prop_assert!(name.len() <= 256);
                prop_assert!(!name.chars().any(|c| c.is_control()));
                prop_assert_eq!(input.variant, variant);
            }
            Err(message) => {
                prop_assert!(!message.is_empty());
                // A message may quote a (bounded) name, never a whole flood.
                prop_assert!(message.len() < 2048, "{} bytes", message.len());
            }
        }
    }

    #[test]
    fn tool_names_split_or_say_why(name in text()) {
        if let Ok((server, tool)) = split_name(&name) {
            prop_assert_eq!(format!("{server}:{tool}"), name);
        }
    }

    /// Config text, as JSON values or as raw text: never a panic; every error names the
    /// file it came from.
    #[test]
    fn any_config_json_is_accepted_or_refused_with_the_file_named(value in json_value()) {
        if let Err(e) = Config::from_json(&value.to_string(), "random.json") {
            prop_assert!(e.to_string().starts_with("random.json"), "{}", e);
        }
    }

    /// Known keys with random values reach every validator, not just the first check.
    #[test]
    fn known_config_keys_with_any_values_are_accepted_or_refused_with_the_key_named(
        keys in prop::collection::btree_map(
            prop_oneof![
                Just("listen"), Just("api_key"), Just("allowed_hosts"), Just("allowed_origins"),
                Just("tool_call_timeout_ms"), Just("mcpServers"), Just("intent_declaration"),
                Just("plugins"), Just("activity"), Just("upstream"), Just("http"),
            ],
            json_value(),
            1..4,
        )
    ) {
        let object: Map<String, Value> = keys.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        if let Err(e) = Config::from_json(&Value::Object(object).to_string(), "random.json") {
            prop_assert!(e.to_string().starts_with("random.json: "), "{}", e);
        }
    }

    #[test]
    fn any_config_text_is_accepted_or_refused_with_the_file_named(text in "\\PC{0,200}") {
        if let Err(e) = Config::from_json(&text, "random.json") {
            prop_assert!(e.to_string().starts_with("random.json"), "{}", e);
        }
    }

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
