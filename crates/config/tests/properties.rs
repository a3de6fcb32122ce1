//! Property tests of the config parser: any JSON or text in front of it, generated at
//! random (proptest; a failing case is shrunk and saved in `properties.proptest-regressions`
//! beside this file, and replayed first from then on). No input panics, and every refusal
//! names the file (and the key) it came from.

#[path = "../../../tests/support/strategies.rs"]
mod strategies;

use mcpproxy_config::Config;
use proptest::prelude::*;
use serde_json::{Map, Value};
use strategies::json_value;

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

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
}
