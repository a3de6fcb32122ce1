//! `http-sink`'s settings (`plugins.settings.http-sink` in mcp_config.json; the
//! `test-sink-misbehave` fixture takes them too), read from the JSON
//! object `host.config()` returns. Unknown keys are ignored: mcpproxy overlays its own
//! switches, and `allowed_hosts` is read by mcpproxy itself (it widens the sink's HTTP grant).
//!
//! | key | type | default |
//! |---|---|---|
//! | `url` | `http://` or `https://` URL | required |
//! | `method` | HTTP method | `POST` |
//! | `headers` | object of header name → string | none (`content-type: application/x-ndjson` is added unless set here) |
//! | `timeout_ms` | whole milliseconds | 30000 (connect: the smaller of it and 5000) |

use serde_json::{Map, Value};

use crate::http::{Target, Timeouts};

/// The content type sent unless the `headers` setting gives one.
pub const DEFAULT_CONTENT_TYPE: &str = "application/x-ndjson";

/// Headers a guest cannot set (mcpproxy's HTTP stack refuses them, or sets them itself).
const RESERVED_HEADERS: [&str; 10] = [
    "connection",
    "content-length",
    "host",
    "http2-settings",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// What `http-sink` sends, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The `url` setting.
    pub target: Target,
    /// Upper case.
    pub method: String,
    /// Lower-case names; always holds a `content-type`.
    pub headers: Vec<(String, String)>,
    /// From the `timeout_ms` setting.
    pub timeouts: Timeouts,
}

/// Parses `host.config()`'s JSON text into its object.
pub fn object(config: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str::<Value>(config) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!(
            "this sink's settings must be a JSON object, got {}",
            kind(&other)
        )),
        Err(e) => Err(format!("this sink's settings are not valid JSON ({e})")),
    }
}

/// Reads the settings; every error names the setting and what to put there.
pub fn parse(config: &str) -> Result<Settings, String> {
    let map = object(config)?;
    let url = match map.get("url") {
        Some(Value::String(url)) if !url.trim().is_empty() => url,
        None | Some(Value::Null) | Some(Value::String(_)) => {
            return Err(
                "the url setting is missing: set it to the http:// or https:// address the \
                 records are posted to"
                    .to_string(),
            );
        }
        Some(other) => {
            return Err(format!(
                "the url setting must be an http:// or https:// URL string, got {}",
                describe(other)
            ));
        }
    };
    let target = Target::parse("url", url)?;
    let method = match map.get("method") {
        None | Some(Value::Null) => "POST".to_string(),
        Some(Value::String(m)) if is_token(m.trim()) => m.trim().to_ascii_uppercase(),
        Some(other) => {
            return Err(format!(
                "the method setting must be an HTTP method such as POST or PUT, got {}",
                describe(other)
            ));
        }
    };
    let headers = headers(map.get("headers"))?;
    let timeouts = Timeouts::from_setting(map.get("timeout_ms"))?;
    Ok(Settings {
        target,
        method,
        headers,
        timeouts,
    })
}

fn headers(value: Option<&Value>) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    match value {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (name, value) in map {
                let lower = name.trim().to_ascii_lowercase();
                if !is_token(&lower) {
                    return Err(format!(
                        "the headers setting has {name:?}, which is not a valid header name \
                         (letters, digits and !#$%&'*+-.^_`|~ only)"
                    ));
                }
                if RESERVED_HEADERS.contains(&lower.as_str()) {
                    return Err(format!(
                        "the headers setting cannot set {name:?}: mcpproxy's HTTP client sets \
                         it itself; remove it"
                    ));
                }
                let value = match value {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    other => {
                        return Err(format!(
                            "the headers setting's {name:?} must be a string, got {}",
                            kind(other)
                        ));
                    }
                };
                if value.chars().any(|c| c == '\r' || c == '\n' || c == '\0') {
                    return Err(format!(
                        "the headers setting's {name:?} contains a line break or NUL; header \
                         values must be one line"
                    ));
                }
                if out.iter().any(|(n, _)| *n == lower) {
                    return Err(format!(
                        "the headers setting names {name:?} twice (header names ignore case)"
                    ));
                }
                out.push((lower, value));
            }
        }
        Some(other) => {
            return Err(format!(
                "the headers setting must be an object of header name to value, e.g. \
                 {{\"authorization\": \"Splunk <token>\"}}; got {}",
                kind(other)
            ));
        }
    }
    if !out.iter().any(|(n, _)| n == "content-type") {
        out.push(("content-type".to_string(), DEFAULT_CONTENT_TYPE.to_string()));
    }
    Ok(out)
}

/// An HTTP token (RFC 9110 `tchar`s), as method and header names must be.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A JSON value's kind, for messages that must not echo a secret.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A short rendering of a (non-secret) value for messages.
fn describe(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 80 {
        kind(value).to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_value(v: Value) -> Result<Settings, String> {
        parse(&v.to_string())
    }

    #[test]
    fn minimal_settings_get_the_defaults() {
        let s = parse_value(json!({"url": "http://127.0.0.1:9000/ingest"})).unwrap();
        assert_eq!(s.target.url(), "http://127.0.0.1:9000/ingest");
        assert_eq!(s.method, "POST");
        assert_eq!(
            s.headers,
            vec![("content-type".to_string(), DEFAULT_CONTENT_TYPE.to_string())]
        );
        assert_eq!(s.timeouts, Timeouts::default());
    }

    #[test]
    fn full_settings() {
        let s = parse_value(json!({
            "url": "https://splunk.example:8088/services/collector/raw",
            "method": "put",
            "headers": {"Authorization": "Splunk abc", "Content-Type": "text/plain", "X-N": 3},
            "timeout_ms": 10000,
            "allowed_hosts": ["other:1"],
            "strict_server_validation": true,
        }))
        .unwrap();
        assert_eq!(s.method, "PUT");
        assert_eq!(
            s.headers,
            vec![
                ("authorization".to_string(), "Splunk abc".to_string()),
                ("content-type".to_string(), "text/plain".to_string()),
                ("x-n".to_string(), "3".to_string()),
            ]
        );
        assert_eq!(s.timeouts.first_byte_ms, 10000);
    }

    #[test]
    fn errors_name_the_setting() {
        for (config, want) in [
            (json!({}), "the url setting is missing"),
            (json!({"url": ""}), "the url setting is missing"),
            (json!({"url": 5}), "the url setting must be"),
            (json!({"url": "ftp://x"}), "http:// or https://"),
            (
                json!({"url": "http://x", "method": "P OST"}),
                "the method setting",
            ),
            (
                json!({"url": "http://x", "headers": ["a"]}),
                "must be an object",
            ),
            (
                json!({"url": "http://x", "headers": {"a b": "1"}}),
                "not a valid header name",
            ),
            (
                json!({"url": "http://x", "headers": {"Host": "y"}}),
                "cannot set \"Host\"",
            ),
            (
                json!({"url": "http://x", "headers": {"a": "1\r\nb: 2"}}),
                "line break",
            ),
            (
                json!({"url": "http://x", "headers": {"a": {"b": 1}}}),
                "must be a string",
            ),
            (
                json!({"url": "http://x", "headers": {"A": "1", "a": "2"}}),
                "twice",
            ),
            (json!({"url": "http://x", "timeout_ms": "x"}), "timeout_ms"),
            (json!([]), "must be a JSON object"),
        ] {
            let err = parse_value(config.clone()).unwrap_err();
            assert!(err.contains(want), "{config}: {err}");
        }
        assert!(parse("{").unwrap_err().contains("not valid JSON"));
    }
}
