//! The table: its columns, the DDL, the INSERT statement, and one JSONEachRow line per record.
//!
//! Written for ClickHouse 18.16 (Debian's) and later. 18.16 has no `DateTime64`, and its
//! JSONEachRow input does not evaluate `DEFAULT` expressions for omitted fields, so the
//! record's time is inserted as `timestamp_ms UInt64` and `timestamp DateTime('UTC')` is
//! `MATERIALIZED` from it (whole seconds, UTC whatever the server's time zone). Every other
//! column is sent in every row.

use serde_json::{Map, Value};

/// How a column's value is taken from the record's JSON.
#[derive(Clone, Copy, Debug)]
enum From {
    /// The record's `id` (the WIT record's `id` if the JSON has none).
    Id,
    /// The WIT record's `timestamp-ms`.
    TimestampMs,
    /// A string at this path; `''` when missing or null, JSON text for a non-string.
    Str(&'static [&'static str]),
    /// The JSON text of the value at this path; `''` when missing or null.
    Json(&'static [&'static str]),
    /// A whole number at this path; 0 when missing or not a number.
    U64(&'static [&'static str]),
    /// A boolean at this path as 0/1.
    Bool(&'static [&'static str]),
    /// The whole record JSON, as received.
    Record,
}

/// Name, ClickHouse type, source. `timestamp` is the materialized column, never inserted.
const COLUMNS: &[(&str, &str, From)] = &[
    ("id", "String", From::Id),
    ("timestamp_ms", "UInt64", From::TimestampMs),
    ("type", "String", From::Str(&["type"])),
    ("source", "String", From::Str(&["source"])),
    ("server_name", "String", From::Str(&["server_name"])),
    ("tool_name", "String", From::Str(&["tool_name"])),
    ("tool_variant", "String", From::Str(&["tool_variant"])),
    (
        "intent_operation_type",
        "String",
        From::Str(&["intent", "operation_type"]),
    ),
    (
        "intent_data_sensitivity",
        "String",
        From::Str(&["intent", "data_sensitivity"]),
    ),
    ("intent_reason", "String", From::Str(&["intent", "reason"])),
    ("annotations", "String", From::Json(&["annotations"])),
    (
        "annotation_source",
        "String",
        From::Str(&["annotation_source"]),
    ),
    ("safety_class", "String", From::Str(&["safety_class"])),
    ("decision", "String", From::Str(&["verdict", "decision"])),
    (
        "verdict_plugin",
        "String",
        From::Str(&["verdict", "plugin"]),
    ),
    (
        "verdict_message",
        "String",
        From::Str(&["verdict", "message"]),
    ),
    ("warnings", "String", From::Json(&["verdict", "warnings"])),
    ("arguments", "String", From::Json(&["arguments"])),
    (
        "arguments_truncated",
        "UInt8",
        From::Bool(&["arguments_truncated"]),
    ),
    ("response_bytes", "UInt64", From::U64(&["response_bytes"])),
    ("status", "String", From::Str(&["status"])),
    ("error_message", "String", From::Str(&["error_message"])),
    ("duration_ms", "UInt64", From::U64(&["duration_ms"])),
    ("session_id", "String", From::Str(&["session_id"])),
    ("request_id", "String", From::Str(&["request_id"])),
    ("client_name", "String", From::Str(&["client", "name"])),
    (
        "client_version",
        "String",
        From::Str(&["client", "version"]),
    ),
    ("dry_run", "UInt8", From::Bool(&["dry_run"])),
    ("record", "String", From::Record),
];

/// `db`.`table`, quoted. The names are checked identifiers (see `settings`).
fn qualified(database: &str, table: &str) -> String {
    format!("`{database}`.`{table}`")
}

/// `CREATE TABLE IF NOT EXISTS ...` for the sink's table.
pub fn create_table(database: &str, table: &str) -> String {
    let mut columns: Vec<String> = Vec::with_capacity(COLUMNS.len() + 1);
    for (name, ty, _) in COLUMNS {
        columns.push(format!("    `{name}` {ty}"));
        if *name == "timestamp_ms" {
            columns.push(
                "    `timestamp` DateTime('UTC') MATERIALIZED toDateTime(intDiv(timestamp_ms, 1000))"
                    .to_string(),
            );
        }
    }
    format!(
        "CREATE TABLE IF NOT EXISTS {}\n(\n{}\n)\nENGINE = MergeTree()\nPARTITION BY \
         toYYYYMM(timestamp)\nORDER BY (timestamp, id)",
        qualified(database, table),
        columns.join(",\n")
    )
}

/// `CREATE DATABASE IF NOT EXISTS ...`.
pub fn create_database(database: &str) -> String {
    format!("CREATE DATABASE IF NOT EXISTS `{database}`")
}

/// The INSERT statement; the rows follow in the request body.
pub fn insert(database: &str, table: &str) -> String {
    format!(
        "INSERT INTO {} FORMAT JSONEachRow",
        qualified(database, table)
    )
}

/// One record as a JSONEachRow line (with its `\n`), appended to `out`. `json` is the
/// record's JSON; `id` and `timestamp_ms` its id and time as the caller read them (from the
/// line's ULID). A record whose
/// JSON does not parse still gets a row: its id, time and the raw text in `record`.
pub fn push_row(out: &mut Vec<u8>, id: &str, timestamp_ms: u64, json: &str) {
    let parsed = serde_json::from_str::<Value>(json).unwrap_or(Value::Null);
    let mut row = Map::new();
    for (name, _, from) in COLUMNS {
        let value = match from {
            From::Id => match parsed.get("id") {
                Some(Value::String(s)) if !s.is_empty() => Value::String(s.clone()),
                _ => Value::String(id.to_string()),
            },
            From::TimestampMs => Value::from(timestamp_ms),
            From::Str(path) => Value::String(match lookup(&parsed, path) {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            }),
            From::Json(path) => Value::String(match lookup(&parsed, path) {
                None | Some(Value::Null) => String::new(),
                Some(other) => other.to_string(),
            }),
            From::U64(path) => Value::from(match lookup(&parsed, path) {
                Some(Value::Number(n)) => n
                    .as_u64()
                    .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
                    .unwrap_or(0),
                Some(Value::String(s)) => s.trim().parse().unwrap_or(0),
                _ => 0,
            }),
            From::Bool(path) => Value::from(match lookup(&parsed, path) {
                Some(Value::Bool(b)) => u8::from(*b),
                Some(Value::Number(n)) => u8::from(n.as_f64().is_some_and(|f| f != 0.0)),
                Some(Value::String(s)) => u8::from(matches!(s.trim(), "true" | "1")),
                _ => 0,
            }),
            From::Record => Value::String(json.to_string()),
        };
        row.insert((*name).to_string(), value);
    }
    // Serializing a map of strings and numbers cannot fail; keep the batch whole if it did.
    if serde_json::to_writer(&mut *out, &Value::Object(row)).is_ok() {
        out.push(b'\n');
    }
}

/// The id a record's JSON line starts with (`{"id":"<ULID>"`, as mcpproxy stores every
/// record), or `""`.
pub fn line_id(line: &str) -> &str {
    line.strip_prefix("{\"id\":\"")
        .and_then(|rest| rest.get(..26))
        .filter(|id| id.bytes().all(|b| b.is_ascii_alphanumeric()))
        .unwrap_or("")
}

/// The milliseconds since the Unix epoch a ULID's first ten characters hold (Crockford
/// base32), or 0 when `id` is not a ULID.
pub fn ulid_ms(id: &str) -> u64 {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    if id.len() != 26 {
        return 0;
    }
    let mut ms: u64 = 0;
    for c in id.bytes().take(10) {
        let Some(digit) = ALPHABET.iter().position(|a| *a == c.to_ascii_uppercase()) else {
            return 0;
        };
        ms = (ms << 5) | digit as u64;
    }
    // 10 characters hold 50 bits; a ULID's time is 48: larger is not a ULID.
    if ms >> 48 != 0 { 0 } else { ms }
}

fn lookup<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, key| v.get(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FULL: &str = r#"{"id":"01KAMXH0VBSJ2QX6F6R4VZ7P3M","type":"tool_call","source":"mcp","server_name":"github","tool_name":"create_issue","tool_variant":"call_tool_write","intent":{"operation_type":"write","reason":"file a bug"},"annotations":{"readOnlyHint":false,"destructiveHint":false},"annotation_source":"server","safety_class":"write-capable","verdict":{"decision":"warn","warnings":[{"plugin":"pii","message":"email"}]},"arguments":{"title":"é \u0001 😀"},"arguments_truncated":false,"response_bytes":1234,"status":"success","error_message":null,"duration_ms":87,"timestamp":"2026-11-22T04:10:00.123Z","session_id":"s1","request_id":"7","client":{"name":"claude","version":"1.0"},"dry_run":false}"#;

    fn row(id: &str, ms: u64, json: &str) -> Value {
        let mut out = Vec::new();
        push_row(&mut out, id, ms, json);
        assert_eq!(out.last(), Some(&b'\n'));
        assert_eq!(out.iter().filter(|b| **b == b'\n').count(), 1);
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn ids_and_times_come_from_the_line() {
        let line = r#"{"id":"01KAQ3V2B8ZKJ3M4N5P6Q7R8S9","type":"tool_call"}"#;
        assert_eq!(line_id(line), "01KAQ3V2B8ZKJ3M4N5P6Q7R8S9");
        assert_eq!(line_id(r#"{"type":"x"}"#), "");
        assert_eq!(line_id(r#"{"id":"short"}"#), "");
        // 01KAQ3V2B8: 2025-11-2x in ms, as the ulid crate encodes it.
        let ms = ulid_ms("01KAQ3V2B8ZKJ3M4N5P6Q7R8S9");
        assert!((1_763_000_000_000..1_765_000_000_000).contains(&ms), "{ms}");
        assert_eq!(ulid_ms("00000000010000000000000000"), 1);
        assert_eq!(ulid_ms("0000000001000000000000000"), 0, "25 characters");
        assert_eq!(ulid_ms("8ZZZZZZZZZ0000000000000000"), 0, "over 48 bits");
        assert_eq!(
            ulid_ms("0000000U010000000000000000"),
            0,
            "U is not Crockford"
        );
    }

    #[test]
    fn ddl_and_insert() {
        let ddl = create_table("default", "mcpproxy_activity");
        println!("{ddl}");
        assert!(ddl.starts_with(
            "CREATE TABLE IF NOT EXISTS `default`.`mcpproxy_activity`\n(\n    `id` String,\n    \
             `timestamp_ms` UInt64,\n    `timestamp` DateTime('UTC') MATERIALIZED \
             toDateTime(intDiv(timestamp_ms, 1000)),\n    `type` String,\n"
        ));
        assert!(ddl.ends_with(
            "    `record` String\n)\nENGINE = MergeTree()\nPARTITION BY toYYYYMM(timestamp)\n\
             ORDER BY (timestamp, id)"
        ));
        assert_eq!(ddl.matches(",\n").count(), COLUMNS.len());
        assert_eq!(
            insert("audit", "t"),
            "INSERT INTO `audit`.`t` FORMAT JSONEachRow"
        );
        assert_eq!(
            create_database("audit"),
            "CREATE DATABASE IF NOT EXISTS `audit`"
        );
    }

    #[test]
    fn full_record_row() {
        let r = row("ignored", 1_795_320_600_123, FULL);
        println!("{r}");
        assert_eq!(
            r,
            json!({
                "id": "01KAMXH0VBSJ2QX6F6R4VZ7P3M",
                "timestamp_ms": 1_795_320_600_123u64,
                "type": "tool_call",
                "source": "mcp",
                "server_name": "github",
                "tool_name": "create_issue",
                "tool_variant": "call_tool_write",
                "intent_operation_type": "write",
                "intent_data_sensitivity": "",
                "intent_reason": "file a bug",
                "annotations": "{\"destructiveHint\":false,\"readOnlyHint\":false}",
                "annotation_source": "server",
                "safety_class": "write-capable",
                "decision": "warn",
                "verdict_plugin": "",
                "verdict_message": "",
                "warnings": "[{\"message\":\"email\",\"plugin\":\"pii\"}]",
                "arguments": "{\"title\":\"é \\u0001 😀\"}",
                "arguments_truncated": 0,
                "response_bytes": 1234,
                "status": "success",
                "error_message": "",
                "duration_ms": 87,
                "session_id": "s1",
                "request_id": "7",
                "client_name": "claude",
                "client_version": "1.0",
                "dry_run": 0,
                "record": FULL,
            })
        );
        // Every column but the materialized one, and nothing else.
        assert_eq!(r.as_object().unwrap().len(), COLUMNS.len());
    }

    #[test]
    fn sparse_and_odd_records() {
        let r = row(
            "01X",
            5,
            r#"{"status":"error","response_bytes":"12","dry_run":true,"request_id":7,"client":null}"#,
        );
        assert_eq!(r["id"], "01X");
        assert_eq!(r["timestamp_ms"], 5);
        assert_eq!(r["status"], "error");
        assert_eq!(r["response_bytes"], 12);
        assert_eq!(r["duration_ms"], 0);
        assert_eq!(r["dry_run"], 1);
        assert_eq!(r["request_id"], "7");
        assert_eq!(r["client_name"], "");
        assert_eq!(r["annotations"], "");
        assert_eq!(r["warnings"], "");
        // Not JSON at all: still a row, with the raw text kept.
        let r = row("01Y", 6, "not json\n");
        assert_eq!(
            (&r["id"], &r["record"]),
            (&json!("01Y"), &json!("not json\n"))
        );
        assert_eq!(r["type"], "");
    }
}
