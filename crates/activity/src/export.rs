//! Export formats of the activity journal: JSON Lines (every field, one record per line,
//! exactly as the REST API shows a record) and CSV (the columns a spreadsheet wants).
//!
//! CSV fields are quoted as RFC 4180 says, and a field that a spreadsheet would read as a
//! formula (starting with `=`, `+`, `-`, `@`, a tab or a carriage return) is prefixed with
//! `'`: record text comes from callers and upstreams, and must not run in someone's
//! spreadsheet.

use std::str::FromStr;

use super::record::ActivityRecord;

/// How records are written out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Jsonl,
    Csv,
}

impl FromStr for ExportFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "jsonl" => Ok(Self::Jsonl),
            "csv" => Ok(Self::Csv),
            other => Err(format!("format '{other}' is not valid: use jsonl or csv")),
        }
    }
}

impl ExportFormat {
    /// The HTTP content type of the format.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Jsonl => "application/x-ndjson",
            Self::Csv => "text/csv; charset=utf-8",
        }
    }

    /// What comes before the first record (the CSV header line).
    pub fn header(self) -> &'static str {
        match self {
            Self::Jsonl => "",
            Self::Csv => CSV_HEADER,
        }
    }

    /// Appends one record, with its line ending, to `out`; in JSON Lines, a record in the
    /// hash chain is written as stored (`row`), chain fields included, so the export verifies
    /// offline.
    pub fn write_row(self, record: &ActivityRecord, row: Option<&[u8]>, out: &mut Vec<u8>) {
        match (self, row) {
            (Self::Jsonl, Some(row)) => {
                out.extend_from_slice(row);
                out.push(b'\n');
            }
            _ => self.write(record, out),
        }
    }

    /// Appends one record, with its line ending, to `out`.
    pub fn write(self, record: &ActivityRecord, out: &mut Vec<u8>) {
        match self {
            Self::Jsonl => {
                // Serialising a record (strings, numbers, JSON values) cannot fail.
                if serde_json::to_writer(&mut *out, record).is_ok() {
                    out.push(b'\n');
                }
            }
            Self::Csv => write_csv(record, out),
        }
    }
}

const CSV_HEADER: &str = "id,timestamp,type,source,server,tool,variant,intent,status,decision,\
plugin,message,duration_ms,response_bytes,error,session_id,request_id,client\n";

fn write_csv(record: &ActivityRecord, out: &mut Vec<u8>) {
    let intent = record
        .intent
        .as_ref()
        .and_then(|i| i.operation_type)
        .map(|o| o.as_str().to_owned())
        .unwrap_or_default();
    let variant = record
        .tool_variant
        .map(|v| v.tool_name().to_owned())
        .unwrap_or_default();
    let client = record
        .client
        .as_ref()
        .map(|c| format!("{} {}", c.name, c.version))
        .unwrap_or_default();
    let fields: [&str; 18] = [
        &record.id,
        &record.timestamp,
        record.record_type.as_str(),
        record.source.as_str(),
        &record.server_name,
        &record.tool_name,
        &variant,
        &intent,
        record.status.as_str(),
        record.verdict.decision.as_str(),
        record.verdict.plugin.as_deref().unwrap_or(""),
        record.verdict.message.as_deref().unwrap_or(""),
        &record.duration_ms.to_string(),
        &record.response_bytes.to_string(),
        record.error_message.as_deref().unwrap_or(""),
        record.session_id.as_deref().unwrap_or(""),
        record.request_id.as_deref().unwrap_or(""),
        &client,
    ];
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        csv_field(field, out);
    }
    out.push(b'\n');
}

/// One CSV field: quoted when it holds a separator, a quote or a line break; a leading
/// formula character defused with `'`.
fn csv_field(text: &str, out: &mut Vec<u8>) {
    let formula = text.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let quote = formula || text.contains([',', '"', '\n', '\r']);
    if quote {
        out.push(b'"');
    }
    if formula {
        out.push(b'\'');
    }
    for c in text.chars() {
        if c == '"' {
            out.extend_from_slice(b"\"\"");
        } else {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
    if quote {
        out.push(b'"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{RecordType, Source};

    fn csv_of(record: &ActivityRecord) -> String {
        let mut out = Vec::new();
        ExportFormat::Csv.write(record, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn csv_quotes_separators_and_defuses_formulas() {
        let mut record = ActivityRecord::new(RecordType::ToolCall, Source::Mcp, "fs", "a,b");
        record.error_message = Some("=HYPERLINK(\"http://evil\")".into());
        record.session_id = Some("line\nbreak".into());
        let line = csv_of(&record);
        assert!(line.contains(",\"a,b\","), "{line}");
        assert!(
            line.contains(",\"'=HYPERLINK(\"\"http://evil\"\")\","),
            "{line}"
        );
        assert!(line.contains(",\"line\nbreak\","), "{line}");
        assert_eq!(
            CSV_HEADER.trim_end().split(',').count(),
            18,
            "a header name per field"
        );
    }

    #[test]
    fn jsonl_is_one_record_per_line_and_reads_back() {
        let mut record = ActivityRecord::new(RecordType::ToolCall, Source::Mcp, "fs", "read");
        record.error_message = Some("two\nlines".into());
        let mut out = Vec::new();
        ExportFormat::Jsonl.write(&record, &mut out);
        ExportFormat::Jsonl.write(&record, &mut out);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 2);
        let back: ActivityRecord = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(back.error_message.as_deref(), Some("two\nlines"));
    }

    #[test]
    fn formats_parse_with_a_clear_error() {
        assert_eq!("csv".parse(), Ok(ExportFormat::Csv));
        assert_eq!(
            "xml".parse::<ExportFormat>().unwrap_err(),
            "format 'xml' is not valid: use jsonl or csv"
        );
    }
}
