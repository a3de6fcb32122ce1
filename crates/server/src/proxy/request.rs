//! Parsing the arguments of `call_tool_read|write|destructive`: the tool name, its
//! arguments (`args` object or `args_json` string), and the intent, which arrives nested
//! (`intent: {operation_type, data_sensitivity, reason}`) or flat
//! (`intent_data_sensitivity`, `intent_reason`). Every error says what is wrong
//! and how to fix it.

use serde_json::{Map, Value};

use mcpproxy_policy::{Intent, OperationType};
use mcpproxy_support::is_unprintable;

/// A parsed call request.
#[derive(Debug, Clone, PartialEq)]
pub struct CallInput {
    pub variant: OperationType,
    pub server: String,
    pub tool: String,
    pub args: Map<String, Value>,
    /// `None` when the caller sent no intent field at all.
    pub intent: Option<Intent>,
}

/// Keys a call may carry.
const KNOWN_KEYS: &[&str] = &[
    "name",
    "args",
    "args_json",
    "intent",
    "intent_data_sensitivity",
    "intent_reason",
    "intent_operation_type",
];

/// Parses the arguments of a call variant.
pub fn parse_call(
    variant: OperationType,
    arguments: &Map<String, Value>,
) -> Result<CallInput, String> {
    let tool_kind = variant.tool_name();
    if let Some(unknown) = arguments.keys().find(|k| !KNOWN_KEYS.contains(&k.as_str())) {
        return Err(format!(
            "Unknown parameter '{unknown}' for {tool_kind}: use name, args (or args_json), intent, \
             intent_data_sensitivity, intent_reason"
        ));
    }
    let name = match arguments.get("name") {
        Some(Value::String(s)) => s.trim(),
        Some(_) => {
            return Err(format!(
                "Parameter 'name' of {tool_kind} must be a string like \"github:list_repos\""
            ));
        }
        None => {
            return Err(format!(
                "Parameter 'name' is required for {tool_kind}: give the tool as \"server:tool\" (see retrieve_tools)"
            ));
        }
    };
    let (server, tool) = split_name(name)?;
    let args = parse_args(arguments, tool_kind)?;
    let intent = parse_intent(arguments)?;
    Ok(CallInput {
        variant,
        server: server.to_owned(),
        tool: tool.to_owned(),
        args,
        intent,
    })
}

/// The longest `server:tool` name a call may give.
pub(super) const MAX_CALL_NAME_BYTES: usize = mcpproxy_policy::MAX_QUALIFIED_NAME_BYTES;

/// Splits `server:tool`, refusing names no server could have given: too long, or with
/// control or invisible characters (which could forge lines where names are printed).
pub fn split_name(name: &str) -> Result<(&str, &str), String> {
    if name.len() > MAX_CALL_NAME_BYTES {
        return Err(format!(
            "Tool name is {} bytes long; a \"server:tool\" name is at most {MAX_CALL_NAME_BYTES} bytes (retrieve_tools lists the names)",
            name.len()
        ));
    }
    if let Some((at, c)) = name.char_indices().find(|&(_, c)| is_unprintable(c)) {
        return Err(format!(
            "Tool name contains the unprintable character U+{:04X} at byte {at}; names are printable text like \"github:list_repos\"",
            c as u32
        ));
    }
    match name.split_once(':') {
        Some((server, tool)) if !server.is_empty() && !tool.is_empty() => Ok((server, tool)),
        _ => Err(format!(
            "Tool name '{name}' must be \"server:tool\", e.g. \"github:list_repos\"; retrieve_tools lists the names"
        )),
    }
}

fn parse_args(
    arguments: &Map<String, Value>,
    tool_kind: &str,
) -> Result<Map<String, Value>, String> {
    let object = match (arguments.get("args"), arguments.get("args_json")) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "Give the tool's arguments once: either 'args' (an object) or 'args_json' (a JSON string), not both, to {tool_kind}"
            ));
        }
        (Some(Value::Object(o)), None) => o.clone(),
        (Some(Value::Null), None) | (None, None) => Map::new(),
        (Some(_), None) => {
            return Err("Parameter 'args' must be a JSON object of the tool's arguments, e.g. {\"org\": \"myorg\"}".into());
        }
        (None, Some(Value::String(text))) if text.trim().is_empty() => Map::new(),
        (None, Some(Value::String(text))) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(o)) => o,
            Ok(_) => return Err("Parameter 'args_json' must hold a JSON object, e.g. \"{\\\"org\\\": \\\"myorg\\\"}\"".into()),
            Err(e) => return Err(format!("Parameter 'args_json' is not valid JSON ({e}); send a JSON object as a string, or use 'args' with an object")),
        },
        (None, Some(Value::Object(o))) => o.clone(),
        (None, Some(_)) => return Err("Parameter 'args_json' must be a string holding a JSON object".into()),
    };
    Ok(object)
}

fn parse_intent(arguments: &Map<String, Value>) -> Result<Option<Intent>, String> {
    let nested = match arguments.get("intent") {
        None | Some(Value::Null) => None,
        Some(Value::Object(o)) => Some(o),
        Some(Value::String(s)) => {
            return Err(format!(
                "Parameter 'intent' must be an object like {{\"operation_type\": \"read\"}}, not the string '{s}'"
            ));
        }
        Some(_) => return Err("Parameter 'intent' must be an object like {\"operation_type\": \"read\", \"reason\": \"...\"}".into()),
    };
    let mut intent = Intent::default();
    let mut present = nested.is_some();
    if let Some(nested) = nested {
        for key in nested.keys() {
            if !matches!(
                key.as_str(),
                "operation_type"
                    | "data_sensitivity"
                    | "reason"
                    | "intent_data_sensitivity"
                    | "intent_reason"
            ) {
                return Err(format!(
                    "Unknown field 'intent.{key}': intent takes operation_type, data_sensitivity and reason"
                ));
            }
        }
        if let Some(op) = string_field(nested, "operation_type", "intent.operation_type")? {
            intent.operation_type = Some(
                op.parse()
                    .map_err(|e: mcpproxy_policy::InvalidOperationType| e.to_string())?,
            );
        }
        // Seed 000's example nests the flat names inside `intent`; accept them there too.
        intent.data_sensitivity = merge(
            string_field(nested, "data_sensitivity", "intent.data_sensitivity")?,
            string_field(
                nested,
                "intent_data_sensitivity",
                "intent.intent_data_sensitivity",
            )?,
            "data_sensitivity",
        )?;
        intent.reason = merge(
            string_field(nested, "reason", "intent.reason")?,
            string_field(nested, "intent_reason", "intent.intent_reason")?,
            "reason",
        )?;
    }
    let flat_op = string_field(arguments, "intent_operation_type", "intent_operation_type")?;
    let flat_sensitivity = string_field(
        arguments,
        "intent_data_sensitivity",
        "intent_data_sensitivity",
    )?;
    let flat_reason = string_field(arguments, "intent_reason", "intent_reason")?;
    present |= flat_op.is_some() || flat_sensitivity.is_some() || flat_reason.is_some();
    if let Some(op) = flat_op {
        let op: OperationType = op
            .parse()
            .map_err(|e: mcpproxy_policy::InvalidOperationType| e.to_string())?;
        match intent.operation_type {
            Some(nested) if nested != op => {
                return Err(format!(
                    "intent.operation_type is '{nested}' but intent_operation_type is '{op}': give it once"
                ));
            }
            _ => intent.operation_type = Some(op),
        }
    }
    intent.data_sensitivity = merge(
        intent.data_sensitivity,
        flat_sensitivity,
        "data_sensitivity",
    )?;
    intent.reason = merge(intent.reason, flat_reason, "reason")?;
    Ok(present.then_some(intent))
}

fn string_field(
    map: &Map<String, Value>,
    key: &str,
    shown: &str,
) -> Result<Option<String>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("{shown} must be a string, not {other}")),
    }
}

/// The same intent field given nested and flat must agree.
fn merge(
    nested: Option<String>,
    flat: Option<String>,
    field: &str,
) -> Result<Option<String>, String> {
    match (nested, flat) {
        (Some(a), Some(b)) if a != b => Err(format!(
            "intent.{field} is given twice with different values ('{a}' and '{b}' in intent_{field}): give it once"
        )),
        (a, b) => Ok(a.or(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<CallInput, String> {
        parse_call(OperationType::Read, v.as_object().unwrap())
    }

    #[test]
    fn args_as_object_or_json_string() {
        let a = parse(json!({"name": "gh:list", "args": {"org": "x"}})).unwrap();
        let b = parse(json!({"name": "gh:list", "args_json": "{\"org\": \"x\"}"})).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.server, "gh");
        assert_eq!(a.tool, "list");
        assert_eq!(a.intent, None);
        let e = parse(json!({"name": "gh:list", "args": {}, "args_json": "{}"})).unwrap_err();
        assert!(e.contains("not both"), "{e}");
        let e = parse(json!({"name": "gh:list", "args_json": "{oops"})).unwrap_err();
        assert!(e.contains("not valid JSON"), "{e}");
    }

    #[test]
    fn names_need_a_server() {
        for bad in ["list", ":list", "gh:", ""] {
            let e = parse(json!({ "name": bad })).unwrap_err();
            assert!(e.contains("server:tool"), "{e}");
        }
        assert!(parse(json!({})).unwrap_err().contains("'name' is required"));
        // A tool name may itself hold colons after the first.
        assert_eq!(parse(json!({"name": "gh:a:b"})).unwrap().tool, "a:b");
    }

    #[test]
    fn names_that_could_forge_output_are_refused() {
        for (bad, what) in [
            ("gh:x\r01FAKE", "U+000D at byte 4"),
            ("gh:x\ny", "U+000A"),
            ("gh:\u{1b}[2J", "U+001B"),
            ("gh:rev\u{202e}txt", "U+202E"),
            ("gh:zero\u{200b}width", "U+200B"),
        ] {
            let e = parse(json!({ "name": bad })).unwrap_err();
            assert!(e.contains(what), "{bad:?}: {e}");
            assert!(
                !e.contains(bad),
                "the message must not echo the name: {e:?}"
            );
        }
        let long = format!("gh:{}", "a".repeat(MAX_CALL_NAME_BYTES));
        let e = parse(json!({ "name": long })).unwrap_err();
        assert!(e.contains("at most 256 bytes"), "{e}");
        let longest = format!("gh:{}", "a".repeat(MAX_CALL_NAME_BYTES - 3));
        assert!(parse(json!({ "name": longest })).is_ok());
        // Non-ASCII printable names are fine.
        assert!(parse(json!({"name": "données:lire_fichier"})).is_ok());
    }

    #[test]
    fn intent_nested_and_flat_merge_and_conflict() {
        let i = parse(
            json!({"name": "g:t", "intent": {"operation_type": "read", "reason": "r"},
                             "intent_data_sensitivity": "private"}),
        )
        .unwrap()
        .intent
        .unwrap();
        assert_eq!(i.operation_type, Some(OperationType::Read));
        assert_eq!(i.reason.as_deref(), Some("r"));
        assert_eq!(i.data_sensitivity.as_deref(), Some("private"));
        let same =
            parse(json!({"name": "g:t", "intent": {"reason": "r"}, "intent_reason": "r"})).unwrap();
        assert_eq!(same.intent.unwrap().reason.as_deref(), Some("r"));
        let e = parse(json!({"name": "g:t", "intent": {"reason": "a"}, "intent_reason": "b"}))
            .unwrap_err();
        assert!(e.contains("given twice"), "{e}");
        // Seed 000's example nests the flat names.
        let i = parse(json!({"name": "g:t", "intent": {"intent_data_sensitivity": "private"}}))
            .unwrap()
            .intent
            .unwrap();
        assert_eq!(i.data_sensitivity.as_deref(), Some("private"));
    }

    #[test]
    fn bad_operation_type_has_the_documented_text() {
        let e = parse(json!({"name": "g:t", "intent": {"operation_type": "x"}})).unwrap_err();
        assert_eq!(
            e,
            "Invalid intent.operation_type 'x': must be read, write, or destructive"
        );
        let e = parse(json!({"name": "g:t", "intent": "read"})).unwrap_err();
        assert!(e.contains("must be an object"), "{e}");
        let e = parse(json!({"name": "g:t", "bogus": 1})).unwrap_err();
        assert!(e.contains("Unknown parameter 'bogus'"), "{e}");
    }
}
