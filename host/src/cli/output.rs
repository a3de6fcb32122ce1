//! Output helpers shared by commands: the one `-o table|json|jsonl` vocabulary, colour on
//! a terminal, and plain-text tables.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

use mcpproxy_policy::quote;

/// How a command prints its result: the same words for every command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(super) enum Format {
    /// For people: a table or readable text (colour on a terminal).
    #[default]
    #[value(alias = "pretty")]
    Table,
    /// One indented JSON document (a list for commands that list).
    Json,
    /// Compact JSON, one value per line: each item of a list on a line of its own.
    Jsonl,
    /// YAML, kept for scripts written against earlier versions of `activity`.
    #[value(hide = true)]
    Yaml,
}

/// Prints `value` in the machine-readable `format` and returns true; returns false for
/// [`Format::Table`], whose readable form each command prints itself.
pub(super) fn print_data<T: Serialize + ?Sized>(
    value: &T,
    format: Format,
) -> serde_json::Result<bool> {
    match format {
        Format::Table => return Ok(false),
        Format::Json => println!("{}", serde_json::to_string_pretty(value)?),
        Format::Yaml => print!("{}", to_yaml(&serde_json::to_value(value)?)),
        Format::Jsonl => match serde_json::to_value(value)? {
            serde_json::Value::Array(items) => {
                for item in items {
                    println!("{item}");
                }
            }
            single => println!("{single}"),
        },
    }
    Ok(true)
}

/// When to colour output (`--color`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(super) enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set (to anything but an empty string) or
    /// `TERM` is `dumb`.
    #[default]
    Auto,
    Always,
    Never,
}

static COLOUR_STDOUT: AtomicBool = AtomicBool::new(false);
static COLOUR_STDERR: AtomicBool = AtomicBool::new(false);

/// Decides, once per process, whether stdout and stderr get colour.
pub(super) fn init_colour(choice: ColorChoice) {
    let env_allows = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var_os("TERM").is_none_or(|t| t != "dumb");
    let decide = |terminal: bool| match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => terminal && env_allows,
    };
    COLOUR_STDOUT.store(decide(std::io::stdout().is_terminal()), Ordering::Relaxed);
    COLOUR_STDERR.store(decide(std::io::stderr().is_terminal()), Ordering::Relaxed);
}

/// Whether stderr gets colour (the log uses it too).
pub(super) fn stderr_colour() -> bool {
    COLOUR_STDERR.load(Ordering::Relaxed)
}

/// What a coloured word means: the colour follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tone {
    /// Allowed, succeeded, ready (green).
    Good,
    /// Rejected, failed, unreachable (red).
    Bad,
    /// Warned, held, pending, a dry run (yellow).
    Caution,
}

impl Tone {
    fn sgr(self) -> &'static str {
        match self {
            Tone::Good => "32",
            Tone::Bad => "31",
            Tone::Caution => "33",
        }
    }

    /// The tone of a status, decision or state word mcpproxy prints; `None` for others.
    pub(super) fn of_word(word: &str) -> Option<Tone> {
        match word {
            "success" | "allow" | "ready" | "ok" | "pass" | "passed" => Some(Tone::Good),
            "error" | "failed" | "fail" | "blocked" | "reject" | "refused" | "disconnected"
            | "alert" => Some(Tone::Bad),
            "warn" | "held" | "pending" | "dry-run" | "connecting" | "quarantined" | "disabled" => {
                Some(Tone::Caution)
            }
            _ => None,
        }
    }
}

fn paint_if(on: bool, text: &str, tone: Option<Tone>) -> String {
    match tone {
        Some(tone) if on && !text.is_empty() => format!("\x1b[{}m{text}\x1b[0m", tone.sgr()),
        _ => text.to_owned(),
    }
}

/// `text` in its tone's colour when stdout is coloured. Only mcpproxy's own words are
/// painted; text from callers, upstreams and plugins is escaped before it gets here.
pub(super) fn paint(text: &str, tone: Option<Tone>) -> String {
    paint_if(COLOUR_STDOUT.load(Ordering::Relaxed), text, tone)
}

/// [`paint`] for stderr (`error:`, `warning:` and verdict lines).
pub(super) fn paint_err(text: &str, tone: Option<Tone>) -> String {
    paint_if(stderr_colour(), text, tone)
}

/// Prints rows as left-aligned columns under a header. Cells come from callers, upstreams
/// and plugins, so control, bidirectional and zero-width characters are shown escaped
/// ([`mcpproxy_policy::quote`]): no cell can move the cursor, clear the screen or print a row
/// of its own.
///
/// On a terminal, the last column is cut (ending in `…`) so that no line is wider than the
/// terminal; piped output is never cut.
pub(super) fn print_table(header: &[&str], rows: &[Vec<String>]) {
    print_table_toned(header, rows, |_, _| None);
}

/// [`print_table`], with cells coloured by `tone(column, cell)` when stdout is coloured
/// (the width is measured before the colour codes are added).
pub(super) fn print_table_toned(
    header: &[&str],
    rows: &[Vec<String>],
    tone: impl Fn(usize, &str) -> Option<Tone>,
) {
    let mut rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| quote(cell)).collect())
        .collect();
    if let Some(columns) = terminal_width() {
        fit_last_column(header, &mut rows, columns);
    }
    let rows = rows.as_slice();
    let mut widths: Vec<usize> = header.iter().map(|h| display_width(h)).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(display_width(cell));
            }
        }
    }
    let line = |cells: Vec<&str>, toned: bool| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let shown = if toned {
                paint(cell, tone(i, cell))
            } else {
                (*cell).to_owned()
            };
            out.push_str(&shown);
            if i + 1 < cells.len() {
                let pad = widths[i].saturating_sub(display_width(cell));
                out.push_str(&" ".repeat(pad + 2));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header.to_vec(), false);
    for row in rows {
        line(row.iter().map(String::as_str).collect(), true);
    }
}

/// Cuts each row's last cell so the row fits in `columns` (with the two-space gaps).
fn fit_last_column(header: &[&str], rows: &mut [Vec<String>], columns: usize) {
    let Some(last) = header.len().checked_sub(1) else {
        return;
    };
    let mut widths: Vec<usize> = header.iter().map(|h| display_width(h)).collect();
    for row in rows.iter() {
        for (i, cell) in row.iter().enumerate().take(last) {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(display_width(cell));
            }
        }
    }
    let used: usize = widths[..last].iter().map(|w| w + 2).sum();
    let room = columns.saturating_sub(used).max(8);
    for row in rows.iter_mut() {
        if let Some(cell) = row.get_mut(last)
            && display_width(cell) > room
        {
            let mut cut = String::new();
            for c in cell.chars() {
                if display_width(&cut) + display_width(c.encode_utf8(&mut [0; 4])) + 1 > room {
                    break;
                }
                cut.push(c);
            }
            cut.push('…');
            *cell = cut;
        }
    }
}

/// The width of the terminal stdout is, or `None` when stdout is not a terminal.
#[allow(
    unsafe_code,
    reason = "libc has no safe wrapper for the TIOCGWINSZ ioctl"
)]
pub(super) fn terminal_width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    #[cfg(unix)]
    {
        // SAFETY: TIOCGWINSZ writes a winsize into the struct we own.
        let mut size: libc::winsize = unsafe { std::mem::zeroed() };
        if unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0
            && size.ws_col > 0
        {
            return Some(usize::from(size.ws_col));
        }
    }
    std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok())
}

/// A record's RFC 3339 UTC timestamp as the reader's local time with its zone
/// (`2026-11-23 23:16:57 CET`), or in UTC with `utc`; the text unchanged if it is not a
/// timestamp.
pub(super) fn local_time(timestamp: &str, utc: bool) -> String {
    let Ok(ms) = mcpproxy_activity::parse_timestamp(timestamp) else {
        return timestamp.to_owned();
    };
    let secs = i64::try_from(ms / 1000).unwrap_or(i64::MAX);
    let (offset, zone) = if utc {
        (0, "UTC".to_owned())
    } else {
        local_offset(secs)
    };
    match time::OffsetDateTime::from_unix_timestamp(secs.saturating_add(i64::from(offset))) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02} {zone}",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        ),
        Err(_) => timestamp.to_owned(),
    }
}

/// The local zone's offset from UTC in seconds at `secs`, and its name (`CET`, or
/// `+01:00` when the system gives none); UTC when it cannot be found.
#[allow(unsafe_code, reason = "libc has no safe wrapper for localtime_r")]
fn local_offset(secs: i64) -> (i32, String) {
    #[cfg(unix)]
    {
        let time: libc::time_t = secs as libc::time_t;
        // SAFETY: localtime_r reads `time` and fills the tm we own; tm_zone, when set,
        // points to a static zone name.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        if !unsafe { libc::localtime_r(&time, &mut tm) }.is_null() {
            let offset = i32::try_from(tm.tm_gmtoff).unwrap_or(0);
            let name = if tm.tm_zone.is_null() {
                String::new()
            } else {
                unsafe { std::ffi::CStr::from_ptr(tm.tm_zone) }
                    .to_string_lossy()
                    .into_owned()
            };
            let name = if name.is_empty() {
                format!("{:+03}:{:02}", offset / 3600, (offset.abs() % 3600) / 60)
            } else {
                name
            };
            return (offset, name);
        }
    }
    let _ = secs;
    (0, "UTC".to_owned())
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
pub(super) fn verdict_line(verdict: &mcpproxy_policy::Outcome) -> String {
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
pub(super) fn to_yaml(value: &serde_json::Value) -> String {
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

    #[test]
    fn the_last_column_is_cut_to_fit() {
        let mut rows = vec![
            vec!["a".to_owned(), "x".repeat(100)],
            vec!["b".to_owned(), "short".to_owned()],
        ];
        fit_last_column(&["ID", "REASON"], &mut rows, 40);
        assert_eq!(display_width(&rows[0][1]), 36);
        assert!(rows[0][1].ends_with('…'));
        assert_eq!(rows[1][1], "short");
    }

    #[test]
    fn times_show_in_utc_with_the_zone_named() {
        assert_eq!(
            local_time("2026-11-23T22:16:57.661Z", true),
            "2026-11-23 22:16:57 UTC"
        );
        assert_eq!(local_time("not a time", true), "not a time");
        // Local time: whatever the zone, it ends in a zone name.
        let local = local_time("2026-11-23T22:16:57.661Z", false);
        assert!(local.starts_with("2026-11-2"), "{local}");
        assert!(local.len() > "2026-11-23 22:16:57 ".len(), "{local}");
    }
    use serde_json::json;

    #[test]
    fn colour_only_when_on_and_only_for_known_words() {
        assert_eq!(
            paint_if(true, "success", Tone::of_word("success")),
            "\x1b[32msuccess\x1b[0m"
        );
        assert_eq!(
            paint_if(true, "blocked", Tone::of_word("blocked")),
            "\x1b[31mblocked\x1b[0m"
        );
        assert_eq!(paint_if(false, "blocked", Some(Tone::Bad)), "blocked");
        assert_eq!(paint_if(true, "github", Tone::of_word("github")), "github");
        assert_eq!(paint_if(true, "", Some(Tone::Bad)), "");
    }

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
