//! Unit tests of the statements: literals of hostile text, names, and the clause of every
//! filter.

use super::*;
use mcpproxy_activity::{RecordType, Status};

#[test]
fn a_literal_escapes_quotes_backslashes_and_control_characters() {
    assert_eq!(literal("plain"), "'plain'");
    assert_eq!(literal(""), "''");
    assert_eq!(literal("it's"), r"'it\'s'");
    assert_eq!(literal(r"a\b"), r"'a\\b'");
    // A backslash before a quote cannot unescape it.
    assert_eq!(literal(r"\'"), r"'\\\''");
    assert_eq!(literal("x' OR 1=1 --"), r"'x\' OR 1=1 --'");
    assert_eq!(literal("a\nb\rc\td"), r"'a\x0Ab\x0Dc\x09d'");
    assert_eq!(literal("nul\0end"), r"'nul\x00end'");
    assert_eq!(literal("del\u{7f}"), r"'del\x7F'");
    assert_eq!(literal("é 😀 `x`"), "'é 😀 `x`'");
}

/// Reads a literal back as ClickHouse does (the escapes [`literal`] writes, and no others):
/// the text between the quotes must be the input, and nothing may follow the closing quote.
fn read_back(sql: &str) -> Option<String> {
    let inner = sql.strip_prefix('\'')?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => return chars.next().is_none().then_some(out),
            '\\' => match chars.next()? {
                '\\' => out.push('\\'),
                '\'' => out.push('\''),
                'x' => {
                    let hex: String = chars.by_ref().take(2).collect();
                    out.push(char::from(u8::from_str_radix(&hex, 16).ok()?));
                }
                _ => return None,
            },
            c if c.is_ascii_control() => return None,
            c => out.push(c),
        }
    }
    None
}

#[test]
fn every_hostile_string_reads_back_as_itself_and_ends_at_its_quote() {
    let hostile = [
        "'",
        "\\",
        "\\'",
        "''",
        "'; DROP TABLE t; --",
        "a\\' OR '1'='1",
        "line\nbreak",
        "\r\n\t\0\u{1b}[31m",
        "\0",
        "tail\\",
        "'\\'\\\\''",
        "\u{202e}rtl é 😀",
    ];
    for text in hostile {
        let sql = literal(text);
        assert_eq!(read_back(&sql).as_deref(), Some(text), "{sql}");
        assert!(!sql.chars().any(|c| c.is_ascii_control()), "{sql:?}");
    }
}

#[test]
fn names_are_plain_identifiers_only() {
    assert!(is_identifier("mcpproxy_activity"));
    assert!(is_identifier("_t1"));
    for bad in ["", "1t", "a-b", "a`b", "a.b", "a b", "é", &"x".repeat(129)] {
        assert!(!is_identifier(bad), "{bad}");
        assert_eq!(table("default", bad), None);
    }
    assert_eq!(table("audit", "t").as_deref(), Some("`audit`.`t`"));
}

#[test]
fn no_filter_reads_everything_newest_first_each_id_once() {
    assert_eq!(
        page("`d`.`t`", &Filter::default(), None, 100),
        "SELECT id, record FROM `d`.`t` WHERE id IN (SELECT id FROM `d`.`t` WHERE 1 ORDER BY \
         id DESC LIMIT 1 BY id LIMIT 100) AND 1 ORDER BY id DESC LIMIT 1 BY id FORMAT \
         JSONEachRow"
    );
    let blocked = Filter {
        status: Some(Status::Blocked),
        ..Filter::default()
    };
    assert_eq!(
        all("`d`.`t`", &blocked),
        "SELECT id, record FROM `d`.`t` WHERE status = 'blocked' LIMIT 1 BY id FORMAT \
         JSONEachRow"
    );
}

#[test]
fn every_filter_becomes_its_condition() {
    let filter = Filter {
        intent_type: Some("Destructive".into()),
        server: Some("fs'x".into()),
        tool: Some("del\\ete".into()),
        status: Some(Status::Blocked),
        record_type: Some(RecordType::ToolCall),
        session: Some("s\n1".into()),
        start_ms: Some(1_790_000_000_123),
        end_ms: Some(1_790_000_100_999),
        replica: Some("r-1".into()),
        approval: Some("denied".into()),
    };
    let sql = conditions(&filter, None);
    let want = [
        "timestamp_ms >= 1790000000123",
        "timestamp >= toDateTime(1790000000)",
        "timestamp_ms <= 1790000100999",
        "timestamp <= toDateTime(1790000100)",
        r"server_name = 'fs\'x'",
        r"(tool_name = 'del\\ete' OR concat(server_name, ':', tool_name) = 'del\\ete')",
        "(lower(intent_operation_type) = 'destructive' OR lower(tool_variant) = \
         'call_tool_destructive')",
        "status = 'blocked'",
        "type = 'tool_call'",
        r"session_id = 's\x0A1'",
        r#"position(record, '"replica":"r-1"') > 0"#,
        r#"position(record, '"decision":"denied"') > 0"#,
    ];
    assert_eq!(sql, want.join(" AND "));
}

#[test]
fn a_replica_is_looked_for_as_its_json_field() {
    let filter = Filter {
        replica: Some("a\"b'\\".into()),
        ..Filter::default()
    };
    // JSON-escaped first (as the record holds it), then a literal.
    assert_eq!(
        conditions(&filter, None),
        r#"position(record, '"replica":"a\\"b\'\\\\"') > 0"#
    );
}

#[test]
fn the_next_chunk_starts_below_the_last_id_and_keeps_the_earlier_end() {
    let last = "01KAMXH0VBSJ2QX6F6R4VZ7P3M";
    let ms = parse_record_id(last).unwrap();
    let sql = conditions(&Filter::default(), Some(last));
    assert_eq!(
        sql,
        format!(
            "id < '{last}' AND timestamp_ms <= {ms} AND timestamp <= toDateTime({})",
            ms / 1000
        )
    );
    let earlier = Filter {
        end_ms: Some(5_000),
        ..Filter::default()
    };
    assert!(conditions(&earlier, Some(last)).contains("timestamp_ms <= 5000 "));
    // Anything but a ULID is no cursor at all.
    assert_eq!(conditions(&Filter::default(), Some("x' OR 1=1")), "1");
}

#[test]
fn times_past_what_a_datetime_holds_bound_only_the_milliseconds() {
    let filter = Filter {
        start_ms: Some(u64::MAX),
        end_ms: Some((1 << 48) - 1),
        ..Filter::default()
    };
    assert_eq!(
        conditions(&filter, None),
        format!(
            "timestamp_ms >= {} AND timestamp_ms <= {}",
            u64::MAX,
            (1u64 << 48) - 1
        )
    );
}

#[test]
fn a_record_is_found_by_its_id_and_time() {
    let id = "01KAMXH0VBSJ2QX6F6R4VZ7P3M";
    let ms = parse_record_id(id).unwrap();
    assert_eq!(
        by_id("`d`.`t`", id),
        format!(
            "SELECT id, record FROM `d`.`t` WHERE id = '{id}' AND timestamp_ms = {ms} AND \
             timestamp = toDateTime({}) LIMIT 1 FORMAT JSONEachRow",
            ms / 1000
        )
    );
}
