//! Output helpers shared by commands: the `-o` format and plain-text tables.

use crate::trust::quote;

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    #[default]
    Table,
    Json,
}

/// Prints rows as left-aligned columns under a header. Cells come from callers, upstreams
/// and plugins, so control, bidirectional and zero-width characters are shown escaped
/// ([`crate::trust::quote`]): no cell can move the cursor, clear the screen or print a row
/// of its own.
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| quote(cell)).collect())
        .collect();
    let rows = rows.as_slice();
    let mut widths: Vec<usize> = header.iter().map(|h| display_width(h)).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(display_width(cell));
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                let pad = widths[i].saturating_sub(display_width(cell));
                out.push_str(cell);
                out.push_str(&" ".repeat(pad + 2));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// Terminal columns a cell takes: emoji are two wide, variation selectors none. Enough
/// for what mcpproxy prints (the intent icons); not a full Unicode width table.
fn display_width(s: &str) -> usize {
    s.chars()
        .map(|c| match c as u32 {
            0xFE00..=0xFE0F | 0x200D => 0,
            0x2600..=0x27BF | 0x1F000..=0x1FAFF => 2,
            _ => 1,
        })
        .sum()
}

/// `reject by intent-matrix: <message>` from a verdict's JSON (`decision`, `plugin`, `message`).
pub fn verdict_line(verdict: &crate::policy::Outcome) -> String {
    let mut line = verdict.decision.as_str().to_owned();
    if let Some(plugin) = &verdict.plugin {
        line.push_str(&format!(" by {}", quote(plugin)));
    }
    if let Some(message) = &verdict.message {
        line.push_str(&format!(": {}", quote(message)));
    }
    line
}

/// JSON as YAML: block mappings and sequences, scalars in JSON form (valid YAML).
pub fn to_yaml(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_yaml(value, 0, &mut out);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

fn write_yaml(value: &serde_json::Value, indent: usize, out: &mut String) {
    use serde_json::Value;
    let pad = " ".repeat(indent);
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, v) in map {
                out.push_str(&format!("{pad}{}:", yaml_key(key)));
                match v {
                    Value::Object(m) if !m.is_empty() => {
                        out.push('\n');
                        write_yaml(v, indent + 2, out);
                    }
                    Value::Array(a) if !a.is_empty() => {
                        out.push('\n');
                        write_yaml(v, indent, out);
                    }
                    _ => out.push_str(&format!(" {v}\n")),
                }
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                match item {
                    Value::Object(m) if !m.is_empty() => {
                        let mut nested = String::new();
                        write_yaml(item, indent + 2, &mut nested);
                        let trimmed = nested.trim_start();
                        out.push_str(&format!("{pad}- {trimmed}"));
                    }
                    Value::Array(a) if !a.is_empty() => {
                        out.push_str(&format!("{pad}-\n"));
                        write_yaml(item, indent + 2, out);
                    }
                    _ => out.push_str(&format!("{pad}- {item}\n")),
                }
            }
        }
        scalar => out.push_str(&format!("{pad}{scalar}\n")),
    }
}

fn yaml_key(key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        key.to_owned()
    } else {
        serde_json::Value::String(key.to_owned()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn icons_count_as_two_columns() {
        assert_eq!(display_width("📖 read"), 7);
        assert_eq!(display_width("✏️ write"), 8);
        assert_eq!(display_width("⚠️ destructive"), 14);
    }

    #[test]
    fn yaml_of_nested_json() {
        let yaml = to_yaml(
            &json!([{"id": "a", "intent": {"reason": "x: y"}, "tags": [1, 2], "empty": {}}]),
        );
        assert_eq!(
            yaml,
            "- empty: {}\n  id: \"a\"\n  intent:\n    reason: \"x: y\"\n  tags:\n  - 1\n  - 2\n"
        );
    }
}
