//! The statements the reader sends. Written for ClickHouse 18.16 (Debian's) and later: no
//! query parameters, so every value is put into the text as a ClickHouse string literal
//! ([`literal`]: quotes, backslashes and control characters escaped) or as a number the
//! reader computed; names are identifiers checked by [`is_identifier`] and quoted.
//!
//! The `WHERE` clause filters on the table's columns and is a superset of the [`Filter`]:
//! the reader applies [`Filter::matches`] to every record it parses, so a column that
//! disagrees with its record (a row a hostile writer inserted by hand) never lets a record
//! through that the local journal would not. The replica is inside the `record` JSON only
//! (no column, so tables created before it keep working): the clause keeps rows whose JSON
//! contains `"replica":"<name>"`, and the parsed record decides.
//!
//! Rows come newest first (`ORDER BY id DESC`: a ULID's text sorts as its time), each id once
//! (`LIMIT 1 BY id`: delivery is at least once, so a replica that died mid-delivery sends
//! its last batch again), a chunk at a time: the next chunk starts below the last id seen.

use mcpproxy_activity::Filter;
use mcpproxy_activity::parse_record_id;

/// The longest name [`is_identifier`] accepts (the sink's own rule).
const MAX_IDENTIFIER: usize = 128;

/// Whether `name` is a plain ClickHouse name: 1 to 128 ASCII letters, digits and `_`, not
/// starting with a digit.
pub(super) fn is_identifier(name: &str) -> bool {
    name.len() <= MAX_IDENTIFIER
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `text` as a ClickHouse string literal: in single quotes, with `\` and `'` escaped by a
/// backslash and every control character (NUL, newline, DEL, ...) as `\xHH`; everything
/// else is kept as its UTF-8 bytes.
pub(super) fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            c if c.is_ascii_control() => out.push_str(&format!("\\x{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// `` `database`.`table` `` for checked names; `None` when either is not an identifier.
pub(super) fn table(database: &str, table: &str) -> Option<String> {
    (is_identifier(database) && is_identifier(table)).then(|| format!("`{database}`.`{table}`"))
}

/// The largest whole second a `DateTime` holds.
const MAX_DATETIME: u64 = u32::MAX as u64;

/// The conditions of the `WHERE` clause for `filter`, and for rows older than the record
/// `before` (a ULID: anything else is ignored), joined with `AND`; `1` when none.
pub(super) fn conditions(filter: &Filter, before: Option<&str>) -> String {
    let mut all: Vec<String> = Vec::new();
    let mut end_ms = filter.end_ms;
    if let Some(before) = before
        && let Some(ms) = parse_record_id(before)
    {
        all.push(format!("id < {}", literal(before)));
        end_ms = Some(end_ms.map_or(ms, |end| end.min(ms)));
    }
    // The time range on `timestamp_ms`, and on `timestamp` (the partition and sort key,
    // whole seconds) so that ClickHouse skips the parts outside it.
    if let Some(start) = filter.start_ms {
        all.push(format!("timestamp_ms >= {start}"));
        if start / 1000 <= MAX_DATETIME {
            all.push(format!("timestamp >= toDateTime({})", start / 1000));
        }
    }
    if let Some(end) = end_ms {
        all.push(format!("timestamp_ms <= {end}"));
        if end / 1000 <= MAX_DATETIME {
            all.push(format!("timestamp <= toDateTime({})", end / 1000));
        }
    }
    if let Some(server) = &filter.server {
        all.push(format!("server_name = {}", literal(server)));
    }
    if let Some(tool) = &filter.tool {
        let tool = literal(tool);
        all.push(format!(
            "(tool_name = {tool} OR concat(server_name, ':', tool_name) = {tool})"
        ));
    }
    if let Some(intent) = &filter.intent_type {
        let intent = intent.to_ascii_lowercase();
        all.push(format!(
            "(lower(intent_operation_type) = {} OR lower(tool_variant) = {})",
            literal(&intent),
            literal(&format!("call_tool_{intent}"))
        ));
    }
    if let Some(status) = filter.status {
        all.push(format!("status = {}", literal(status.as_str())));
    }
    if let Some(record_type) = filter.record_type {
        all.push(format!("type = {}", literal(record_type.as_str())));
    }
    if let Some(session) = &filter.session {
        all.push(format!("session_id = {}", literal(session)));
    }
    if let Some(replica) = &filter.replica {
        let field = format!("\"replica\":{}", serde_json::Value::from(replica.as_str()));
        all.push(format!("position(record, {}) > 0", literal(&field)));
    }
    // Like the replica, the approval is inside the record's JSON: `"approval":` for any,
    // its `"decision":"..."` for one (the verdict's decisions are other words).
    if let Some(approval) = &filter.approval {
        let field = if approval == "any" {
            "\"approval\":".to_owned()
        } else {
            format!(
                "\"decision\":{}",
                serde_json::Value::from(approval.as_str())
            )
        };
        all.push(format!("position(record, {}) > 0", literal(&field)));
    }
    if all.is_empty() {
        "1".to_owned()
    } else {
        all.join(" AND ")
    }
}

/// Up to `chunk` rows (`id`, `record`) matching `filter` below the record `before`, newest
/// first, each id once. The ids are chosen first, reading only the narrow columns; the
/// records (the wide column) are then read for those ids alone.
pub(super) fn page(table: &str, filter: &Filter, before: Option<&str>, chunk: usize) -> String {
    let conditions = conditions(filter, before);
    format!(
        "SELECT id, record FROM {table} WHERE id IN (SELECT id FROM {table} WHERE {conditions} \
         ORDER BY id DESC LIMIT 1 BY id LIMIT {chunk}) AND {conditions} ORDER BY id DESC \
         LIMIT 1 BY id FORMAT JSONEachRow"
    )
}

/// Every row (`id`, `record`) matching `filter`, each id once, in no particular order: for
/// statistics, read as one stream.
pub(super) fn all(table: &str, filter: &Filter) -> String {
    format!(
        "SELECT id, record FROM {table} WHERE {} LIMIT 1 BY id FORMAT JSONEachRow",
        conditions(filter, None)
    )
}

/// Every distinct record (`record`) written at or after `since_ms`, in no particular order:
/// for walking each replica's hash chain. A batch delivered twice gives the same text twice,
/// which counts once; a record that differs in any byte is another row, for the walk to
/// judge.
pub(super) fn chain_records(table: &str, since_ms: Option<u64>) -> String {
    let since = since_ms.map_or_else(|| "1".to_owned(), |ms| format!("timestamp_ms >= {ms}"));
    format!("SELECT DISTINCT record FROM {table} WHERE {since} FORMAT JSONEachRow")
}

/// The row of the record `id` (a ULID, checked by the caller), if any.
pub(super) fn by_id(table: &str, id: &str) -> String {
    let ms = parse_record_id(id).unwrap_or(0);
    let mut time = format!("timestamp_ms = {ms}");
    if ms / 1000 <= MAX_DATETIME {
        time.push_str(&format!(" AND timestamp = toDateTime({})", ms / 1000));
    }
    format!(
        "SELECT id, record FROM {table} WHERE id = {} AND {time} LIMIT 1 FORMAT JSONEachRow",
        literal(id)
    )
}

#[cfg(test)]
mod tests;
