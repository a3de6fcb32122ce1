//! The arguments of `code_execution` (`code`, `input`, `intent`, `options`), checked, and the
//! limits of one run: each option lowers the config's ceiling, never raises it.

use std::time::Duration;

use serde_json::{Map, Value};

use mcpproxy_config::CodeExecutionConfig;
use mcpproxy_policy::{Intent, OperationType, is_data_sensitivity};

/// The longest script accepted, in bytes.
pub(super) const MAX_CODE_BYTES: usize = 256 * 1024;
/// The largest `input` accepted, as JSON bytes.
pub(super) const MAX_INPUT_BYTES: usize = 4 << 20;
/// The longest `intent.reason`, in characters (as for the call variants).
const MAX_REASON_CHARS: usize = 1000;
/// The most servers `options.allowed_servers` names.
const MAX_ALLOWED_SERVERS: usize = 256;

const KNOWN_KEYS: &[&str] = &["code", "input", "intent", "options"];
const OPTION_KEYS: &[&str] = &["timeout_ms", "max_tool_calls", "allowed_servers"];
const INTENT_KEYS: &[&str] = &["operation_type", "data_sensitivity", "reason"];

/// One script to run, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct CodeRequest {
    /// A JavaScript function body.
    pub code: String,
    /// The script's global `input`.
    pub input: Value,
    /// The ceiling of every inner call: its variant and declared operation type.
    pub ceiling: OperationType,
    /// The intent each inner call declares (`operation_type` is the ceiling).
    pub intent: Intent,
    pub timeout: Duration,
    pub max_tool_calls: u32,
    /// `None`: every server.
    pub allowed_servers: Option<Vec<String>>,
}

impl CodeRequest {
    /// The `options` as the run takes them, for the record.
    pub fn options_json(&self) -> Value {
        serde_json::json!({
            "timeout_ms": u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
            "max_tool_calls": self.max_tool_calls,
            "allowed_servers": self.allowed_servers,
        })
    }
}

/// Parses the tool's arguments against the config's ceilings.
pub fn parse_code_request(
    arguments: &Map<String, Value>,
    config: &CodeExecutionConfig,
) -> Result<CodeRequest, String> {
    if let Some(unknown) = arguments.keys().find(|k| !KNOWN_KEYS.contains(&k.as_str())) {
        return Err(format!(
            "Unknown parameter '{}' for code_execution: use code, input, intent, options",
            mcpproxy_support::quote(unknown)
        ));
    }
    let code = match arguments.get("code") {
        Some(Value::String(code)) => code.clone(),
        Some(_) => {
            return Err(
                "Parameter 'code' of code_execution must be a string: a JavaScript function body \
                 whose `return` value is the result"
                    .to_owned(),
            );
        }
        None => {
            return Err(
                "Parameter 'code' is required for code_execution: a JavaScript function body, \
                 e.g. \"return call_tool('server:tool', {}).result;\""
                    .to_owned(),
            );
        }
    };
    if code.len() > MAX_CODE_BYTES {
        return Err(format!(
            "Parameter 'code' is {} bytes; a script is at most {MAX_CODE_BYTES} bytes",
            code.len()
        ));
    }
    let input = arguments.get("input").cloned().unwrap_or(Value::Null);
    let input_len = serde_json::to_vec(&input).map_or(0, |v| v.len());
    if input_len > MAX_INPUT_BYTES {
        return Err(format!(
            "Parameter 'input' is {input_len} bytes of JSON; it is at most {MAX_INPUT_BYTES} bytes"
        ));
    }
    let intent = parse_intent(arguments.get("intent"))?;
    let ceiling = intent.operation_type.unwrap_or(OperationType::Read);
    let mut request = CodeRequest {
        code,
        input,
        ceiling,
        intent: Intent {
            operation_type: Some(ceiling),
            ..intent
        },
        timeout: config.timeout,
        max_tool_calls: config.max_tool_calls,
        allowed_servers: None,
    };
    parse_options(arguments.get("options"), config, &mut request)?;
    Ok(request)
}

fn parse_intent(value: Option<&Value>) -> Result<Intent, String> {
    let object = match value {
        None | Some(Value::Null) => return Ok(Intent::default()),
        Some(Value::Object(object)) => object,
        Some(_) => {
            return Err(
                "Parameter 'intent' of code_execution must be an object: {\"operation_type\": \
                 \"read\"|\"write\"|\"destructive\", \"data_sensitivity\": ..., \"reason\": ...}"
                    .to_owned(),
            );
        }
    };
    if let Some(unknown) = object.keys().find(|k| !INTENT_KEYS.contains(&k.as_str())) {
        return Err(format!(
            "Unknown key 'intent.{}' for code_execution: use operation_type, data_sensitivity, reason",
            mcpproxy_support::quote(unknown)
        ));
    }
    let mut intent = Intent::default();
    match object.get("operation_type") {
        None | Some(Value::Null) => {}
        Some(Value::String(op)) => {
            intent.operation_type = Some(
                OperationType::ALL
                    .into_iter()
                    .find(|o| o.as_str() == op)
                    .ok_or_else(|| {
                        format!(
                            "intent.operation_type '{}' is not one of read, write, destructive",
                            mcpproxy_support::quote(op)
                        )
                    })?,
            );
        }
        Some(_) => {
            return Err(
                "intent.operation_type must be \"read\", \"write\" or \"destructive\"".into(),
            );
        }
    }
    match object.get("data_sensitivity") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if is_data_sensitivity(s) => {
            intent.data_sensitivity = Some(s.clone())
        }
        Some(other) => {
            return Err(format!(
                "intent.data_sensitivity {} is not one of public, internal, private, unknown",
                mcpproxy_support::quote(&other.to_string())
            ));
        }
    }
    match object.get("reason") {
        None | Some(Value::Null) => {}
        Some(Value::String(reason)) if reason.chars().count() <= MAX_REASON_CHARS => {
            intent.reason = Some(reason.clone());
        }
        Some(Value::String(_)) => {
            return Err(format!(
                "intent.reason exceeds maximum length of {MAX_REASON_CHARS} characters"
            ));
        }
        Some(_) => return Err("intent.reason must be a string".into()),
    }
    Ok(intent)
}

fn parse_options(
    value: Option<&Value>,
    config: &CodeExecutionConfig,
    request: &mut CodeRequest,
) -> Result<(), String> {
    let object = match value {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(object)) => object,
        Some(_) => {
            return Err(
                "Parameter 'options' of code_execution must be an object: {\"timeout_ms\": ..., \
                 \"max_tool_calls\": ..., \"allowed_servers\": [...]}"
                    .to_owned(),
            );
        }
    };
    if let Some(unknown) = object.keys().find(|k| !OPTION_KEYS.contains(&k.as_str())) {
        return Err(format!(
            "Unknown key 'options.{}' for code_execution: use timeout_ms, max_tool_calls, allowed_servers",
            mcpproxy_support::quote(unknown)
        ));
    }
    let ceiling_ms = u64::try_from(config.timeout.as_millis()).unwrap_or(u64::MAX);
    match object.get("timeout_ms") {
        None | Some(Value::Null) => {}
        Some(v) => match v.as_u64() {
            Some(ms) if ms >= 1 => request.timeout = Duration::from_millis(ms.min(ceiling_ms)),
            _ => {
                return Err(format!(
                    "options.timeout_ms must be a whole number of milliseconds from 1 (at most \
                     {ceiling_ms} counts: code_execution.timeout_ms), got {v}"
                ));
            }
        },
    }
    match object.get("max_tool_calls") {
        None | Some(Value::Null) => {}
        Some(v) => match v.as_u64() {
            Some(n) => {
                request.max_tool_calls = u32::try_from(n)
                    .unwrap_or(u32::MAX)
                    .min(config.max_tool_calls);
            }
            None => {
                return Err(format!(
                    "options.max_tool_calls must be a whole number from 0 (at most {} counts: \
                     code_execution.max_tool_calls), got {v}",
                    config.max_tool_calls
                ));
            }
        },
    }
    match object.get("allowed_servers") {
        None | Some(Value::Null) => {}
        Some(Value::Array(names)) if names.len() <= MAX_ALLOWED_SERVERS => {
            let names = names
                .iter()
                .map(|n| n.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or("options.allowed_servers must be a list of server names (strings)")?;
            request.allowed_servers = Some(names);
        }
        Some(_) => {
            return Err(format!(
                "options.allowed_servers must be a list of at most {MAX_ALLOWED_SERVERS} server names"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
