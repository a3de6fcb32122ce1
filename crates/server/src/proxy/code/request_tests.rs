//! Tests of `code_execution`'s request parsing: the defaults, options that may only lower
//! the config's ceilings, and the refusals that say what to do.

use serde_json::json;

use super::*;

fn parse(value: Value) -> Result<CodeRequest, String> {
    let Value::Object(map) = value else {
        panic!("an object")
    };
    parse_code_request(&map, &CodeExecutionConfig::default())
}

#[test]
fn defaults_are_a_read_ceiling_and_the_config_limits() {
    let request = parse(json!({"code": "return 1"})).unwrap();
    assert_eq!(request.ceiling, OperationType::Read);
    assert_eq!(request.intent.operation_type, Some(OperationType::Read));
    assert_eq!(request.input, Value::Null);
    assert_eq!(request.timeout, CodeExecutionConfig::DEFAULT_TIMEOUT);
    assert_eq!(
        request.max_tool_calls,
        CodeExecutionConfig::DEFAULT_MAX_TOOL_CALLS
    );
    assert_eq!(request.allowed_servers, None);
}

#[test]
fn options_lower_the_ceilings_and_never_raise_them() {
    let request = parse(json!({
        "code": "",
        "intent": {"operation_type": "write", "data_sensitivity": "private", "reason": "sync"},
        "options": {"timeout_ms": 999_999_999u64, "max_tool_calls": 3, "allowed_servers": ["fs"]}
    }))
    .unwrap();
    assert_eq!(request.ceiling, OperationType::Write);
    assert_eq!(request.intent.data_sensitivity.as_deref(), Some("private"));
    assert_eq!(request.timeout, CodeExecutionConfig::DEFAULT_TIMEOUT);
    assert_eq!(request.max_tool_calls, 3);
    assert_eq!(request.allowed_servers, Some(vec!["fs".to_owned()]));
    let request = parse(json!({"code": "", "options": {"max_tool_calls": 1_000_000}})).unwrap();
    assert_eq!(
        request.max_tool_calls,
        CodeExecutionConfig::DEFAULT_MAX_TOOL_CALLS
    );
}

#[test]
fn bad_arguments_are_refused_with_what_to_do() {
    for (args, says) in [
        (json!({}), "'code' is required"),
        (json!({"code": 5}), "must be a string"),
        (json!({"code": "", "extra": 1}), "Unknown parameter 'extra'"),
        (
            json!({"code": "", "intent": {"operation_type": "delete"}}),
            "not one of read",
        ),
        (
            json!({"code": "", "intent": {"data_sensitivity": "secret"}}),
            "data_sensitivity",
        ),
        (
            json!({"code": "", "intent": {"reason": "x".repeat(1001)}}),
            "maximum length",
        ),
        (
            json!({"code": "", "options": {"timeout_ms": 0}}),
            "options.timeout_ms",
        ),
        (
            json!({"code": "", "options": {"max_tool_calls": -1}}),
            "options.max_tool_calls",
        ),
        (
            json!({"code": "", "options": {"allowed_servers": [1]}}),
            "allowed_servers",
        ),
        (
            json!({"code": "", "options": {"memory": 1}}),
            "Unknown key 'options.memory'",
        ),
        (json!({"code": "x".repeat(MAX_CODE_BYTES + 1)}), "at most"),
    ] {
        let error = parse(args.clone()).unwrap_err();
        assert!(error.contains(says), "{args}: {error}");
    }
}
