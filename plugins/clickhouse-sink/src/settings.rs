//! `clickhouse-sink`'s settings (`plugins.settings.clickhouse-sink` in mcp_config.json), read
//! from the JSON object `host.config()` returns. Unknown keys are ignored: mcpproxy overlays
//! its own switches, and `allowed_hosts` is read by mcpproxy itself (it widens the sink's
//! HTTP grant).
//!
//! | key | type | default |
//! |---|---|---|
//! | `url` | ClickHouse's HTTP interface, `http(s)://host:port[/path]` | `http://127.0.0.1:8123` |
//! | `database` | identifier | `default` |
//! | `table` | identifier | `mcpproxy_activity` |
//! | `user` | string | none (ClickHouse's `default` user) |
//! | `password` | string | none; sent with `user` as HTTP Basic auth, never in the URL |
//! | `create_table` | bool | `true` |
//! | `timeout_ms` | whole milliseconds | 30000 (connect: the smaller of it and 5000) |

use serde_json::{Map, Value};

use crate::http::{Target, Timeouts};

pub(crate) const DEFAULT_URL: &str = "http://127.0.0.1:8123";
pub(crate) const DEFAULT_DATABASE: &str = "default";
pub(crate) const DEFAULT_TABLE: &str = "mcpproxy_activity";

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Settings {
    /// The HTTP interface; queries go to its path with `?query=` appended.
    pub target: Target,
    pub database: String,
    pub table: String,
    /// `(user, password)` for HTTP Basic auth; `None` sends no credentials.
    pub credentials: Option<(String, String)>,
    pub create_table: bool,
    pub timeouts: Timeouts,
}

/// Reads the settings; every error names the setting and what to put there.
pub(crate) fn parse(config: &str) -> Result<Settings, String> {
    let map = object(config)?;
    let url = string(&map, "url")?.unwrap_or_else(|| DEFAULT_URL.to_string());
    let target = Target::parse("url", &url)?;
    let database = identifier(&map, "database", DEFAULT_DATABASE)?;
    let table = identifier(&map, "table", DEFAULT_TABLE)?;
    let user = string(&map, "user")?;
    let password = secret(&map, "password")?;
    let credentials = match (user, password) {
        (None, None) => None,
        (Some(user), password) => Some((user, password.unwrap_or_default())),
        (None, Some(password)) => Some(("default".to_string(), password)),
    };
    let create_table = match map.get("create_table") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) if s.trim().eq_ignore_ascii_case("true") => true,
        Some(Value::String(s)) if s.trim().eq_ignore_ascii_case("false") => false,
        Some(other) => {
            return Err(format!(
                "the create_table setting must be true or false, got {other}"
            ));
        }
    };
    let timeouts = Timeouts::from_setting(map.get("timeout_ms"))?;
    Ok(Settings {
        target,
        database,
        table,
        credentials,
        create_table,
        timeouts,
    })
}

/// Parses `host.config()`'s JSON text into its object.
fn object(config: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str::<Value>(config) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("this sink's settings must be a JSON object".to_string()),
        Err(e) => Err(format!("this sink's settings are not valid JSON ({e})")),
    }
}

/// A string setting; absent, `null` or blank is `None`.
fn string(map: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
        Some(other) => Err(format!("the {key} setting must be a string, got {other}")),
    }
}

/// Like [`string`], but never echoes the value and keeps it as written.
fn secret(map: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("the {key} setting must be a string")),
    }
}

/// A database or table name: letters, digits and `_`, not starting with a digit (what
/// ClickHouse accepts unquoted; the SQL quotes it with backticks anyway).
fn identifier(map: &Map<String, Value>, key: &str, default: &str) -> Result<String, String> {
    let Some(name) = string(map, key)? else {
        return Ok(default.to_string());
    };
    let plain = name.len() <= 128
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if plain {
        Ok(name)
    } else {
        Err(format!(
            "the {key} setting {name:?} is not a plain ClickHouse name: use up to 128 letters, \
             digits and underscores, not starting with a digit (e.g. {default})"
        ))
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
    fn defaults() {
        let s = parse("{}").unwrap();
        assert_eq!(s.target.url(), "http://127.0.0.1:8123/");
        assert_eq!(
            (s.database.as_str(), s.table.as_str()),
            ("default", "mcpproxy_activity")
        );
        assert_eq!(s.credentials, None);
        assert!(s.create_table);
        assert_eq!(s.timeouts, Timeouts::default());
    }

    #[test]
    fn all_settings() {
        let s = parse_value(json!({
            "url": "https://ch.example.com:8443/clickhouse",
            "database": "audit",
            "table": "mcp_2026",
            "user": "sink",
            "password": " p w ",
            "create_table": false,
            "timeout_ms": 1500,
            "allowed_hosts": ["x:1"],
            "require_operation_type": true,
        }))
        .unwrap();
        assert_eq!(s.target.url(), "https://ch.example.com:8443/clickhouse");
        assert_eq!(
            (s.database.as_str(), s.table.as_str()),
            ("audit", "mcp_2026")
        );
        assert_eq!(s.credentials, Some(("sink".into(), " p w ".into())));
        assert!(!s.create_table);
        assert_eq!(s.timeouts.connect_ms, 1500);
        let s = parse_value(json!({"password": "x", "create_table": "FALSE"})).unwrap();
        assert_eq!(s.credentials, Some(("default".into(), "x".into())));
        assert!(!s.create_table);
        let s = parse_value(json!({"user": "u", "password": ""})).unwrap();
        assert_eq!(s.credentials, Some(("u".into(), String::new())));
    }

    #[test]
    fn errors_name_the_setting() {
        for (config, want) in [
            (json!({"url": "clickhouse:8123"}), "the url setting"),
            (json!({"url": 8123}), "the url setting must be a string"),
            (
                json!({"database": "my-db"}),
                "the database setting \"my-db\" is not a plain",
            ),
            (json!({"table": "1x"}), "the table setting \"1x\""),
            (json!({"table": "a.b"}), "the table setting"),
            (json!({"table": "x`; DROP"}), "the table setting"),
            (
                json!({"create_table": "yes"}),
                "create_table setting must be true or false",
            ),
            (json!({"timeout_ms": 0}), "timeout_ms"),
            (json!({"user": ["a"]}), "the user setting must be a string"),
            (json!({"url": "http://u:p@h:8123"}), "credentials"),
        ] {
            let err = parse_value(config.clone()).unwrap_err();
            assert!(err.contains(want), "{config}: {err}");
        }
        let err = parse_value(json!({"password": 12345})).unwrap_err();
        assert_eq!(err, "the password setting must be a string");
        assert!(parse("[]").unwrap_err().contains("JSON object"));
    }
}
