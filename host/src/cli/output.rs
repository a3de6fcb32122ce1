//! Output helpers shared by commands: the one `-o table|json|jsonl` vocabulary, colour on
//! a terminal, and plain-text tables.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

use mcpproxy_support::quote;

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
/// ([`mcpproxy_support::quote`]): no cell can move the cursor, clear the screen or print a row
/// of its own.
///
/// The table fits the output's width ([`output_width`]: `COLUMNS`, else the terminal's);
/// see [`fit_widths`] for how. Output to a pipe with `COLUMNS` unset is never cut.
pub(super) fn print_table(header: &[&str], rows: &[Vec<String>]) {
    print_table_fit(header, rows, |_, _| None, Fit::default());
}

/// [`print_table`], with cells coloured by `tone(column, cell)` when stdout is coloured
/// (the width is measured before the colour codes are added).
pub(super) fn print_table_toned(
    header: &[&str],
    rows: &[Vec<String>],
    tone: impl Fn(usize, &str) -> Option<Tone>,
) {
    print_table_fit(header, rows, tone, Fit::default());
}

/// The fewest columns a reason or message keeps in its column; with less room it goes on
/// a line of its own under its row.
const READABLE_MIN: usize = 24;

/// Which columns of a table matter when it must be narrowed.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Fit<'a> {
    /// A reason or a message: it gets the width left over, at least [`READABLE_MIN`]
    /// columns; when the other columns leave less, it is printed, wrapped, on the lines
    /// under its row instead.
    pub(super) readable: Option<usize>,
    /// Columns cut only when nothing else is left to narrow (an ID a reader copies).
    pub(super) keep: &'a [usize],
    /// Columns cut from their start, keeping their end (a time, whose date gives way before
    /// its time of day): never narrower than the cells after their first word, behind `…`.
    pub(super) ends: &'a [usize],
}

/// [`print_table_toned`], narrowed as `fit` says.
pub(super) fn print_table_fit(
    header: &[&str],
    rows: &[Vec<String>],
    tone: impl Fn(usize, &str) -> Option<Tone>,
    fit: Fit<'_>,
) {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| quote(cell)).collect())
        .collect();
    let layout = layout(header, &rows, fit, output_width());
    let shown: Vec<usize> = (0..header.len())
        .filter(|i| Some(*i) != layout.below)
        .collect();
    let line = |cells: &[String], toned: bool| {
        let mut out = String::new();
        for (n, &i) in shown.iter().enumerate() {
            let cell = cells.get(i).map_or("", String::as_str);
            let cell = if fit.ends.contains(&i) {
                truncate_start(cell, layout.widths[i])
            } else {
                truncate(cell, layout.widths[i])
            };
            let width = display_width(&cell);
            out.push_str(&if toned {
                paint(&cell, tone(i, &cell))
            } else {
                cell
            });
            if n + 1 < shown.len() {
                out.push_str(&" ".repeat(layout.widths[i].saturating_sub(width) + 2));
            }
        }
        println!("{}", out.trim_end());
    };
    let header_cells: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    line(&header_cells, false);
    for row in &rows {
        line(row, true);
        if let Some(below) = layout.below
            && let Some(text) = row.get(below).filter(|t| !t.is_empty() && *t != "-")
        {
            let indent = "    ";
            let room = layout
                .total
                .map_or(usize::MAX, |t| t.saturating_sub(indent.len()).max(8));
            for part in wrap(text, room) {
                println!("{indent}{part}");
            }
        }
    }
}

/// How a table is laid out: each column's width, and the readable column printed under
/// its row instead of beside it.
struct Layout {
    widths: Vec<usize>,
    below: Option<usize>,
    total: Option<usize>,
}

fn layout(header: &[&str], rows: &[Vec<String>], fit: Fit<'_>, total: Option<usize>) -> Layout {
    let readable = fit.readable;
    let mut natural: Vec<usize> = header.iter().map(|h| display_width(h)).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = natural.get_mut(i) {
                *w = (*w).max(display_width(cell));
            }
        }
    }
    let Some(total) = total else {
        return Layout {
            widths: natural,
            below: None,
            total: None,
        };
    };
    let heads: Vec<usize> = header.iter().map(|h| display_width(h)).collect();
    let mins: Vec<usize> = header
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let floor = if Some(i) == readable {
                READABLE_MIN
            } else if fit.keep.contains(&i) {
                usize::MAX
            } else if fit.ends.contains(&i) {
                rows.iter()
                    .filter_map(|row| row.get(i))
                    .filter_map(|cell| cell.split_once(' '))
                    .map(|(_, end)| display_width(end) + 1)
                    .max()
                    .unwrap_or(8)
            } else {
                8
            };
            display_width(h).max(natural[i].min(floor))
        })
        .collect();
    // Kept columns are narrowed only after every other one is down to its header.
    let kept_heads: Vec<usize> = (0..header.len())
        .map(|i| {
            if fit.keep.contains(&i) {
                mins[i]
            } else {
                heads[i]
            }
        })
        .collect();
    let passes: [&[usize]; 3] = [&mins, &kept_heads, &heads];
    let mut widths = natural.clone();
    if fit_widths(&mut widths, &passes, total, None) {
        return Layout {
            widths,
            below: None,
            total: Some(total),
        };
    }
    // Too narrow for the readable column beside the others: it goes under its row.
    let mut widths = natural;
    if let Some(r) = readable {
        fit_widths(&mut widths, &passes, total, Some(r));
        return Layout {
            widths,
            below: Some(r),
            total: Some(total),
        };
    }
    fit_widths(&mut widths, &passes, total, None);
    Layout {
        widths,
        below: None,
        total: Some(total),
    }
}

/// Narrows the widest columns until the row, with its two-space gaps and without column
/// `skip`, fits `total`: never below the first floors of `passes`, then, if that is not
/// enough, below them down to the next ones (the last are the headers' widths, so no header
/// is cut). Whether it fits without going below the first floors.
fn fit_widths(
    widths: &mut [usize],
    passes: &[&[usize]],
    total: usize,
    skip: Option<usize>,
) -> bool {
    let used = |widths: &[usize]| -> usize {
        let shown: Vec<usize> = widths
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != skip)
            .map(|(_, w)| *w)
            .collect();
        shown.iter().sum::<usize>() + 2 * shown.len().saturating_sub(1)
    };
    for (pass, floors) in passes.iter().enumerate() {
        while used(widths) > total {
            let widest = widths
                .iter()
                .enumerate()
                .filter(|(i, w)| Some(*i) != skip && **w > floors[*i])
                .max_by_key(|(i, w)| (**w - floors[*i], usize::MAX - i))
                .map(|(i, _)| i);
            match widest {
                Some(i) => widths[i] -= 1,
                None => break,
            }
        }
        if used(widths) <= total {
            return pass == 0;
        }
    }
    false
}

/// `cell` cut to its last `width` columns, starting with `…` when cut.
fn truncate_start(cell: &str, width: usize) -> String {
    if display_width(cell) <= width {
        return cell.to_owned();
    }
    let mut kept: Vec<char> = Vec::new();
    let mut kept_width = 1; // the `…`
    for c in cell.chars().rev() {
        kept_width += display_width(c.encode_utf8(&mut [0; 4]));
        if kept_width > width {
            break;
        }
        kept.push(c);
    }
    std::iter::once('…').chain(kept.into_iter().rev()).collect()
}

/// `cell` cut to `width` columns, ending in `…` when cut.
fn truncate(cell: &str, width: usize) -> String {
    if display_width(cell) <= width {
        return cell.to_owned();
    }
    let mut cut = String::new();
    for c in cell.chars() {
        if display_width(&cut) + display_width(c.encode_utf8(&mut [0; 4])) + 1 > width {
            break;
        }
        cut.push(c);
    }
    cut.push('…');
    cut
}

/// `text` in lines of at most `width` columns, broken at spaces where it can be (a word
/// longer than a line is split), and at its own line breaks.
pub(super) fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let char_width = |c: char| display_width(c.encode_utf8(&mut [0; 4]));
    let mut lines = Vec::new();
    for paragraph in text.split('\n') {
        let mut line = String::new();
        let mut line_width = 0;
        for word in paragraph.split(' ') {
            let word_width = display_width(word);
            if line_width > 0 && line_width + 1 + word_width <= width {
                line.push(' ');
                line.push_str(word);
                line_width += 1 + word_width;
                continue;
            }
            if line_width > 0 {
                lines.push(std::mem::take(&mut line));
                line_width = 0;
            }
            for c in word.chars() {
                let w = char_width(c);
                if line_width > 0 && line_width + w > width {
                    lines.push(std::mem::take(&mut line));
                    line_width = 0;
                }
                line.push(c);
                line_width += w;
            }
        }
        lines.push(line);
    }
    lines
}

/// Prints a report (lines of text, some indented) on stdout, each line wrapped to the
/// output's width ([`output_width`]) with its later parts indented four columns past the
/// line's own indent; whole for a pipe with `COLUMNS` unset.
pub(super) fn print_wrapped(text: &str) {
    let width = output_width();
    for line in text.lines() {
        let Some(width) = width.filter(|w| display_width(line) > *w) else {
            println!("{line}");
            continue;
        };
        let body = line.trim_start_matches(' ');
        let indent = " ".repeat(line.len() - body.len());
        let hang = format!("{indent}    ");
        let first = wrap(body, width.saturating_sub(indent.len()).max(20));
        let head = first.first().map_or("", String::as_str);
        println!("{indent}{head}");
        // The rest, wrapped again to the narrower room under the hanging indent.
        let rest = match body.strip_prefix(head) {
            Some(rest) => rest.trim_start().to_owned(),
            None => first[1..].join(" "),
        };
        if !rest.is_empty() {
            for part in wrap(&rest, width.saturating_sub(hang.len()).max(20)) {
                println!("{hang}{part}");
            }
        }
    }
}

/// How wide output may be: `COLUMNS` when set to a number, else the width of the terminal
/// stdout is, else `None` (a pipe or a file: lines are never cut, so scripts get them whole).
pub(super) fn output_width() -> Option<usize> {
    columns_env().or_else(terminal_width)
}

/// `COLUMNS`, when set to a number above 0.
fn columns_env() -> Option<usize> {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|c| *c > 0)
}

/// [`output_width`] for what goes to stderr: `COLUMNS`, else the width of the terminal stderr
/// is, else `None`.
fn stderr_width() -> Option<usize> {
    columns_env().or_else(|| {
        std::io::stderr()
            .is_terminal()
            .then(|| window_columns(libc::STDERR_FILENO))
            .flatten()
    })
}

/// The width of the terminal stdout is, or `None` when stdout is not a terminal.
fn terminal_width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    window_columns(libc::STDOUT_FILENO)
}

/// The columns of the terminal `fd` is, when the kernel says.
#[allow(
    unsafe_code,
    reason = "libc has no safe wrapper for the TIOCGWINSZ ioctl"
)]
fn window_columns(fd: libc::c_int) -> Option<usize> {
    // SAFETY: TIOCGWINSZ writes a winsize into the struct we own.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    if unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut size) } == 0 && size.ws_col > 0 {
        return Some(usize::from(size.ws_col));
    }
    None
}

/// Prints `note: TEXT` on stderr, on lines of its own, wrapped to the width stderr shows
/// ([`stderr_width`]; whole when that is unknown, for a pipe) with the later lines under the
/// text.
pub(super) fn print_note(text: &str) {
    const LABEL: &str = "note:";
    let lines = match stderr_width() {
        Some(width) => wrap(text, width.saturating_sub(LABEL.len() + 1).max(20)),
        None => vec![text.to_owned()],
    };
    for (i, line) in lines.iter().enumerate() {
        if i == 0 {
            eprintln!("{} {line}", paint_err(LABEL, Some(Tone::Caution)));
        } else {
            eprintln!("{:indent$} {line}", "", indent = LABEL.len());
        }
    }
}

/// Text from an upstream or the proxy, whole, with its line breaks and tabs kept but every
/// other control or invisible character (escape sequences included) shown escaped
/// ([`mcpproxy_support::is_unprintable`]).
pub(super) fn quote_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c != '\n' && c != '\t' && mcpproxy_support::is_unprintable(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// [`quote_lines`] for a message (a refusal, a held call's analysis), cut at 20,000
/// characters.
pub(super) fn quote_message(text: &str) -> String {
    const MAX_CHARS: usize = 20_000;
    match text.char_indices().nth(MAX_CHARS) {
        Some((at, _)) => format!("{}…", quote_lines(&text[..at])),
        None => quote_lines(text),
    }
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

/// A message written for MCP clients (which name the MCP tools: `retrieve_tools`,
/// `call_tool_destructive`), as the CLI says it: naming the commands a person types. The
/// MCP side keeps its exact texts; only what the CLI prints is reworded.
pub(super) fn cli_wording(message: &str) -> String {
    const PHRASES: &[(&str, &str)] = &[
        (
            "Use retrieve_tools to find tools.",
            "Find tools with `mcpproxy tools search WORDS`.",
        ),
        ("(see retrieve_tools)", "(see `mcpproxy tools list`)"),
        (
            "retrieve_tools lists the names",
            "`mcpproxy tools list` lists the names",
        ),
        (
            "use call_tool_destructive",
            "use `mcpproxy call tool-destructive`",
        ),
        ("use call_tool_write", "use `mcpproxy call tool-write`"),
        (
            "call_tool_read is enough",
            "`mcpproxy call tool-read` is enough",
        ),
    ];
    let mut text = message.to_owned();
    for (mcp, cli) in PHRASES {
        if text.contains(mcp) {
            text = text.replace(mcp, cli);
        }
    }
    text
}

/// Whose words a verdict's message is printed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wording {
    /// As the caller received it (a record: an agent's refused call read `use
    /// call_tool_write`, and its record must say the same).
    AsSent,
    /// Reworded for the person at the CLI ([`cli_wording`]): the CLI's own call.
    Cli,
}

/// `reject by intent-matrix: <message>` from a verdict's JSON (`decision`, `plugin`, `message`).
pub(super) fn verdict_line(verdict: &mcpproxy_policy::Outcome, wording: Wording) -> String {
    let mut line = verdict.decision.as_str().to_owned();
    if let Some(plugin) = &verdict.plugin {
        line.push_str(&format!(" by {}", quote(plugin)));
    }
    if let Some(message) = &verdict.message {
        let message = match wording {
            Wording::AsSent => message.clone(),
            Wording::Cli => cli_wording(message),
        };
        line.push_str(&format!(": {}", quote(&message)));
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
    fn a_table_fits_by_narrowing_its_widest_column_never_a_header() {
        let rows = vec![
            vec!["a".to_owned(), "x".repeat(100), "short".to_owned()],
            vec!["b".to_owned(), "y".to_owned(), "z".to_owned()],
        ];
        let fit = layout(
            &["ID", "DESCRIPTION", "STATE"],
            &rows,
            Fit::default(),
            Some(40),
        );
        assert_eq!(fit.widths, vec![2, 29, 5]);
        assert_eq!(truncate(&rows[0][1], 29).chars().count(), 29);
        assert!(truncate(&rows[0][1], 29).ends_with('…'));
        // Unlimited: nothing cut.
        assert_eq!(
            layout(&["ID", "DESCRIPTION", "STATE"], &rows, Fit::default(), None).widths,
            vec![2, 100, 5]
        );
        // Headers are never split, whatever the width.
        let tight = layout(
            &["IDENTIFIER", "DESCRIPTION"],
            &rows,
            Fit::default(),
            Some(10),
        );
        assert_eq!(tight.widths, vec![10, 11]);
    }

    #[test]
    fn a_reason_keeps_its_room_or_goes_under_its_row() {
        let rows = vec![vec!["x".repeat(30), "y".repeat(20), "a reason ".repeat(10)]];
        let fit = Fit {
            readable: Some(2),
            keep: &[0],
            ends: &[],
        };
        let wide = layout(&["ID", "TOOL", "REASON"], &rows, fit, Some(100));
        assert_eq!(wide.below, None);
        assert!(wide.widths[2] >= READABLE_MIN);
        assert!(wide.widths.iter().sum::<usize>() + 4 <= 100);
        let narrow = layout(&["ID", "TOOL", "REASON"], &rows, fit, Some(66));
        assert_eq!(narrow.below, None, "{:?}", narrow.widths);
        assert_eq!(narrow.widths[0], 30, "the ID is kept whole");
        let tiny = layout(&["ID", "TOOL", "REASON"], &rows, fit, Some(40));
        assert_eq!(tiny.below, Some(2));
        assert_eq!(tiny.widths, vec![30, 8, 90]);
    }

    #[test]
    fn a_kept_id_stays_whole_while_the_other_columns_can_give_way() {
        let header = ["ID", "TIME", "SERVER", "TOOL", "STATUS", "REASON"];
        let rows = vec![vec![
            "01M8DG4MSBJZCWYDRVS477NSXC".to_owned(),
            "2026-11-27 03:17:46 UTC".to_owned(),
            "mem".to_owned(),
            "get_status".to_owned(),
            "blocked".to_owned(),
            "a reason ".repeat(8),
        ]];
        let fit = Fit {
            readable: Some(5),
            keep: &[0],
            ends: &[1],
        };
        let at = layout(&header, &rows, fit, Some(60));
        assert_eq!(at.below, Some(5));
        assert_eq!(at.widths[0], 26, "{:?}", at.widths);
        let shown: usize = at.widths[..5].iter().sum::<usize>() + 8;
        assert!(shown <= 60, "{:?}", at.widths);
        // With room for every column's floor, the time gives way from its start: its time
        // of day stays.
        let at = layout(&header, &rows, fit, Some(72));
        assert_eq!(at.widths[0], 26, "{:?}", at.widths);
        assert!((13..23).contains(&at.widths[1]), "{:?}", at.widths);
        assert!(
            truncate_start("2026-11-27 03:17:46 UTC", at.widths[1]).ends_with("03:17:46 UTC"),
            "{:?}",
            at.widths
        );
        assert_eq!(truncate_start("2026-11-27 03:17:46", 9), "…03:17:46");
        assert_eq!(truncate_start("short", 9), "short");
    }

    #[test]
    fn wrapping_breaks_at_spaces_and_splits_long_words() {
        assert_eq!(wrap("one two three", 7), vec!["one two", "three"]);
        assert_eq!(wrap("abcdefghij", 4), vec!["abcd", "efgh", "ij"]);
        assert_eq!(wrap("a\nb", 10), vec!["a", "b"]);
    }

    #[test]
    fn messages_keep_their_lines_but_not_escape_sequences() {
        assert_eq!(quote_lines("a\n\tb"), "a\n\tb");
        assert_eq!(quote_lines("x\u{1b}[2Jy\r"), "x\\u{1b}[2Jy\\u{d}");
        let long = "z".repeat(5000);
        assert_eq!(quote_lines(&long), long, "never cut");
        assert_eq!(quote_message(&"m".repeat(30_000)).chars().count(), 20_001);
    }

    #[test]
    fn cli_messages_name_cli_commands() {
        assert_eq!(
            cli_wording(
                "Unknown server 'x' in 'x:y'. Known servers: fx. Use retrieve_tools to find tools."
            ),
            "Unknown server 'x' in 'x:y'. Known servers: fx. Find tools with `mcpproxy tools search WORDS`."
        );
        assert_eq!(
            cli_wording("Tool 'fx:d' is marked destructive by server, use call_tool_destructive"),
            "Tool 'fx:d' is marked destructive by server, use `mcpproxy call tool-destructive`"
        );
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
