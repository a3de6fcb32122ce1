//! Property tests of what a client puts in a `call_tool_*` call: arguments and tool names
//! generated at random (proptest; a failing case is shrunk and saved in
//! `properties.proptest-regressions` beside this file, and replayed first from then on). No
//! input panics; an accepted call names a short, printable server and tool; a refusal says
//! why in bounded words.

#[path = "../../../tests/support/strategies.rs"]
mod strategies;

use mcpproxy_policy::OperationType;
use mcpproxy_server::proxy::{parse_call, split_name};
use proptest::prelude::*;
use serde_json::{Map, Value};
use strategies::{json_value, text};

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
}
