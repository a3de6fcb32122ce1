//! The table: its columns, the DDL, the INSERT statement, and one JSONEachRow line per record.
//!
//! Written for ClickHouse 18.16 (Debian's) and later. 18.16 has no `DateTime64`, and its
//! JSONEachRow input does not evaluate `DEFAULT` expressions for omitted fields, so the
//! record's time is inserted as `timestamp_ms UInt64` and `timestamp DateTime('UTC')` is
//! `MATERIALIZED` from it (whole seconds, UTC whatever the server's time zone). Every other
//! column is sent in every row.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// How a column's value is taken from the record's JSON.
#[derive(Clone, Copy)]
enum From {
    /// The record's `id` (the one read from the line if the JSON has none).
    Id,
    /// The time read from the line's ULID.
    TimestampMs,
    /// A string field; `''` when missing or null, its JSON text when not a string.
    Str(Field),
    /// The JSON text of a field, as the record has it; `''` when missing or null.
    Json(Field),
    /// A whole number field; 0 when missing or not a number.
    U64(Field),
    /// A boolean field as 0/1.
    Bool(Field),
    /// The whole record JSON, as received.
    Record,
}

/// Reads one field of a record.
type Field = for<'a> fn(&Fields<'a>) -> Raw<'a>;

/// A field's JSON text, borrowed from the record; `None` when the record has no such field.
type Raw<'a> = Option<&'a RawValue>;

/// Name, ClickHouse type, source. `timestamp` is the materialized column, never inserted.
const COLUMNS: &[(&str, &str, From)] = &[
    ("id", "String", From::Id),
    ("timestamp_ms", "UInt64", From::TimestampMs),
    ("type", "String", From::Str(|f| f.record_type)),
    ("source", "String", From::Str(|f| f.source)),
    ("server_name", "String", From::Str(|f| f.server_name)),
    ("tool_name", "String", From::Str(|f| f.tool_name)),
    ("tool_variant", "String", From::Str(|f| f.tool_variant)),
    (
        "intent_operation_type",
        "String",
        From::Str(|f| f.intent.operation_type),
    ),
    (
        "intent_data_sensitivity",
        "String",
        From::Str(|f| f.intent.data_sensitivity),
    ),
    ("intent_reason", "String", From::Str(|f| f.intent.reason)),
    ("annotations", "String", From::Json(|f| f.annotations)),
    (
        "annotation_source",
        "String",
        From::Str(|f| f.annotation_source),
    ),
    ("safety_class", "String", From::Str(|f| f.safety_class)),
    ("decision", "String", From::Str(|f| f.verdict.decision)),
    ("verdict_plugin", "String", From::Str(|f| f.verdict.plugin)),
    (
        "verdict_message",
        "String",
        From::Str(|f| f.verdict.message),
    ),
    ("warnings", "String", From::Json(|f| f.verdict.warnings)),
    ("arguments", "String", From::Json(|f| f.arguments)),
    (
        "arguments_truncated",
        "UInt8",
        From::Bool(|f| f.arguments_truncated),
    ),
    ("response_bytes", "UInt64", From::U64(|f| f.response_bytes)),
    ("status", "String", From::Str(|f| f.status)),
    ("error_message", "String", From::Str(|f| f.error_message)),
    ("duration_ms", "UInt64", From::U64(|f| f.duration_ms)),
    ("session_id", "String", From::Str(|f| f.session_id)),
    ("request_id", "String", From::Str(|f| f.request_id)),
    ("client_name", "String", From::Str(|f| f.client.name)),
    ("client_version", "String", From::Str(|f| f.client.version)),
    ("dry_run", "UInt8", From::Bool(|f| f.dry_run)),
    ("replica", "String", From::Str(|f| f.replica)),
    ("seq", "UInt64", From::U64(|f| f.seq)),
    ("prev", "String", From::Str(|f| f.prev)),
    ("hash", "String", From::Str(|f| f.hash)),
    ("record", "String", From::Record),
];

/// The columns added after the table's first version (the replica that wrote a record and
/// its place in that replica's hash chain), with their types: a table created before them
/// gets them by `ALTER TABLE ... ADD COLUMN` ([`add_column`]). Rows inserted before have
/// `''` and 0 there; their `record` is what they were.
pub(crate) const ADDED_COLUMNS: &[(&str, &str)] = &[
    ("replica", "String"),
    ("seq", "UInt64"),
    ("prev", "String"),
    ("hash", "String"),
];

/// The fields of a record the columns read, borrowed from its JSON text in one pass (the
/// rest is skipped). Any of them may be missing or of an unexpected type: each is judged
/// when its column is written.
#[derive(Default, Deserialize)]
#[serde(default)]
struct Fields<'a> {
    #[serde(borrow)]
    id: Raw<'a>,
    #[serde(borrow, rename = "type")]
    record_type: Raw<'a>,
    #[serde(borrow)]
    source: Raw<'a>,
    #[serde(borrow)]
    server_name: Raw<'a>,
    #[serde(borrow)]
    tool_name: Raw<'a>,
    #[serde(borrow)]
    tool_variant: Raw<'a>,
    #[serde(borrow, deserialize_with = "object")]
    intent: Intent<'a>,
    #[serde(borrow)]
    annotations: Raw<'a>,
    #[serde(borrow)]
    annotation_source: Raw<'a>,
    #[serde(borrow)]
    safety_class: Raw<'a>,
    #[serde(borrow, deserialize_with = "object")]
    verdict: Verdict<'a>,
    #[serde(borrow)]
    arguments: Raw<'a>,
    #[serde(borrow)]
    arguments_truncated: Raw<'a>,
    #[serde(borrow)]
    response_bytes: Raw<'a>,
    #[serde(borrow)]
    status: Raw<'a>,
    #[serde(borrow)]
    error_message: Raw<'a>,
    #[serde(borrow)]
    duration_ms: Raw<'a>,
    #[serde(borrow)]
    session_id: Raw<'a>,
    #[serde(borrow)]
    request_id: Raw<'a>,
    #[serde(borrow, deserialize_with = "object")]
    client: Client<'a>,
    #[serde(borrow)]
    dry_run: Raw<'a>,
    #[serde(borrow)]
    replica: Raw<'a>,
    #[serde(borrow)]
    seq: Raw<'a>,
    #[serde(borrow)]
    prev: Raw<'a>,
    #[serde(borrow)]
    hash: Raw<'a>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct Intent<'a> {
    #[serde(borrow)]
    operation_type: Raw<'a>,
    #[serde(borrow)]
    data_sensitivity: Raw<'a>,
    #[serde(borrow)]
    reason: Raw<'a>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct Verdict<'a> {
    #[serde(borrow)]
    decision: Raw<'a>,
    #[serde(borrow)]
    plugin: Raw<'a>,
    #[serde(borrow)]
    message: Raw<'a>,
    #[serde(borrow)]
    warnings: Raw<'a>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct Client<'a> {
    #[serde(borrow)]
    name: Raw<'a>,
    #[serde(borrow)]
    version: Raw<'a>,
}

/// A nested object's fields; anything but an object (`null`, a string, ...) has none, as a
/// path through it finds nothing.
fn object<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    let raw = <&RawValue>::deserialize(deserializer)?;
    if raw.get().starts_with('{') {
        serde_json::from_str(raw.get()).map_err(serde::de::Error::custom)
    } else {
        Ok(T::default())
    }
}

impl<'a> Fields<'a> {
    /// `None` when `json` is not a JSON object this reading accepts (not JSON, not an
    /// object, or a key given twice).
    fn read(json: &'a str) -> Option<Self> {
        serde_json::from_str(json).ok()
    }
}

/// `db`.`table`, quoted. The names are checked identifiers (see `settings`).
fn qualified(database: &str, table: &str) -> String {
    format!("`{database}`.`{table}`")
}

/// `CREATE TABLE IF NOT EXISTS ...` for the sink's table.
pub(crate) fn create_table(database: &str, table: &str) -> String {
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

/// `ALTER TABLE ... ADD COLUMN ...` for one of [`ADDED_COLUMNS`] (ClickHouse 18.16 has no
/// `IF NOT EXISTS` there: a column that exists answers code 44, which the caller accepts).
pub(crate) fn add_column(database: &str, table: &str, (name, ty): (&str, &str)) -> String {
    format!(
        "ALTER TABLE {} ADD COLUMN `{name}` {ty}",
        qualified(database, table)
    )
}

/// `CREATE DATABASE IF NOT EXISTS ...`.
pub(crate) fn create_database(database: &str) -> String {
    format!("CREATE DATABASE IF NOT EXISTS `{database}`")
}

/// The INSERT statement; the rows follow in the request body.
pub(crate) fn insert(database: &str, table: &str) -> String {
    format!(
        "INSERT INTO {} FORMAT JSONEachRow",
        qualified(database, table)
    )
}

/// One record as a JSONEachRow line (with its `\n`), appended to `out`. `json` is the
/// record's JSON; `id` and `timestamp_ms` its id and time as the caller read them (from the
/// line's ULID). A record whose JSON does not parse still gets a row: its id, time and the
/// raw text in `record`. The record is read in one pass, borrowing its text; only a record
/// that pass refuses (a key given twice) is first normalised through a full parse, where the
/// last of a repeated key counts.
pub(crate) fn push_row(out: &mut Vec<u8>, id: &str, timestamp_ms: u64, json: &str) {
    let normalised: String;
    let fields = match Fields::read(json) {
        Some(fields) => fields,
        None => {
            normalised = match serde_json::from_str::<Value>(json) {
                Ok(value @ Value::Object(_)) => value.to_string(),
                _ => String::new(),
            };
            Fields::read(&normalised).unwrap_or_default()
        }
    };
    out.push(b'{');
    for (i, (name, _, from)) in COLUMNS.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_str(out, name);
        out.push(b':');
        match from {
            From::Id => match fields.id.and_then(string) {
                Some(own) if !own.is_empty() => push_str(out, &own),
                _ => push_str(out, id),
            },
            From::TimestampMs => push_u64(out, timestamp_ms),
            From::Str(field) => match field(&fields) {
                None => push_str(out, ""),
                Some(raw) => match string(raw) {
                    Some(text) => push_str(out, &text),
                    None if raw.get() == "null" => push_str(out, ""),
                    None => push_str(out, raw.get()),
                },
            },
            From::Json(field) => match field(&fields) {
                Some(raw) if raw.get() != "null" => push_str(out, raw.get()),
                _ => push_str(out, ""),
            },
            From::U64(field) => push_u64(out, field(&fields).map_or(0, whole_number)),
            From::Bool(field) => {
                out.push(if field(&fields).is_some_and(truthy) {
                    b'1'
                } else {
                    b'0'
                });
            }
            From::Record => push_str(out, json),
        }
    }
    out.extend_from_slice(b"}\n");
}

/// A JSON string's text (unescaped), or `None` for any other JSON value.
fn string(raw: &RawValue) -> Option<Cow<'_, str>> {
    let text = raw.get();
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    if inner.contains('\\') {
        serde_json::from_str(text).ok()
    } else {
        // Valid JSON (serde_json checked it) without escapes: the text between the quotes.
        Some(Cow::Borrowed(inner))
    }
}

/// A number (a fraction is cut, a negative is 0) or a string holding a whole number; else 0.
fn whole_number(raw: &RawValue) -> u64 {
    match serde_json::from_str::<Value>(raw.get()) {
        Ok(Value::Number(n)) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .unwrap_or(0),
        Ok(Value::String(s)) => s.trim().parse().unwrap_or(0),
        _ => 0,
    }
}

/// `true`, a non-zero number, or the string `"true"` or `"1"`.
fn truthy(raw: &RawValue) -> bool {
    match serde_json::from_str::<Value>(raw.get()) {
        Ok(Value::Bool(b)) => b,
        Ok(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Ok(Value::String(s)) => matches!(s.trim(), "true" | "1"),
        _ => false,
    }
}

/// `text` as a JSON string.
fn push_str(out: &mut Vec<u8>, text: &str) {
    // Writing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, text);
}

fn push_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(n.to_string().as_bytes());
}

/// The id a record's JSON line starts with (`{"id":"<ULID>"`, as mcpproxy stores every
/// record), or `""`.
pub(crate) fn line_id(line: &str) -> &str {
    line.strip_prefix("{\"id\":\"")
        .and_then(|rest| rest.get(..26))
        .filter(|id| id.bytes().all(|b| b.is_ascii_alphanumeric()))
        .unwrap_or("")
}

/// The milliseconds since the Unix epoch a ULID's first ten characters hold (Crockford
/// base32), or 0 when `id` is not a ULID.
pub(crate) fn ulid_ms(id: &str) -> u64 {
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
                "annotations": "{\"readOnlyHint\":false,\"destructiveHint\":false}",
                "annotation_source": "server",
                "safety_class": "write-capable",
                "decision": "warn",
                "verdict_plugin": "",
                "verdict_message": "",
                "warnings": "[{\"plugin\":\"pii\",\"message\":\"email\"}]",
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
                "replica": "",
                "seq": 0,
                "prev": "",
                "hash": "",
                "record": FULL,
            })
        );
        // Every column but the materialized one, and nothing else.
        assert_eq!(r.as_object().unwrap().len(), COLUMNS.len());
    }

    #[test]
    fn a_chained_record_fills_the_chain_columns() {
        let json = r#"{"id":"01KAMXH0VBSJ2QX6F6R4VZ7P3M","status":"success","replica":"r-2","seq":41,"prev":"00ab","hash":"ff01"}"#;
        let r = row("ignored", 1, json);
        assert_eq!(
            (&r["replica"], &r["seq"], &r["prev"], &r["hash"]),
            (&json!("r-2"), &json!(41), &json!("00ab"), &json!("ff01"))
        );
        assert_eq!(r["record"], json, "the record keeps its chain fields");
        let ddl = create_table("default", "t");
        for (name, ty) in ADDED_COLUMNS {
            assert!(
                ddl.contains(&format!("`{name}` {ty},\n")),
                "{name} in {ddl}"
            );
            assert!(
                COLUMNS.iter().any(|(n, t, _)| n == name && t == ty),
                "{name} is a column"
            );
        }
        assert_eq!(
            add_column("audit", "t", ADDED_COLUMNS[1]),
            "ALTER TABLE `audit`.`t` ADD COLUMN `seq` UInt64"
        );
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

    #[test]
    fn unusual_shapes_read_like_paths_through_the_json() {
        // A nested field that is not an object has nothing inside it; a string field that
        // is not a string is kept as its JSON text; JSON columns keep the record's text.
        let r = row(
            "01Z",
            7,
            r#"{"id":"","intent":"write","verdict":[1],"client":{"name":{"n":1},"version":2.5},"arguments":{"b":1,"a":[true,null]},"annotations":null,"duration_ms":12.9,"response_bytes":-3,"arguments_truncated":"1","dry_run":0}"#,
        );
        assert_eq!(
            r["id"], "01Z",
            "an empty id in the JSON gives way to the line's"
        );
        assert_eq!(r["intent_operation_type"], "");
        assert_eq!(r["decision"], "");
        assert_eq!(r["client_name"], r#"{"n":1}"#);
        assert_eq!(r["client_version"], "2.5");
        assert_eq!(r["arguments"], r#"{"b":1,"a":[true,null]}"#);
        assert_eq!(r["annotations"], "");
        assert_eq!(r["duration_ms"], 12);
        assert_eq!(r["response_bytes"], 0);
        assert_eq!(r["arguments_truncated"], 1);
        assert_eq!(r["dry_run"], 0);
        // Escapes in string fields are read, and written back escaped.
        let r = row("01Z", 7, r#"{"tool_name":"a\"b\u00e9\n","status":"ok"}"#);
        assert_eq!(r["tool_name"], "a\"b\u{e9}\n");
        assert_eq!(r["status"], "ok");
    }

    #[test]
    fn a_key_given_twice_counts_once_its_last_value() {
        let json =
            r#"{"status":"pending","intent":{"reason":"a","reason":"b"},"status":"success"}"#;
        let r = row("01Z", 7, json);
        assert_eq!(r["status"], "success");
        assert_eq!(r["intent_reason"], "b");
        assert_eq!(
            r["record"], json,
            "the record column keeps the text as received"
        );
    }
}
