//! `mcpproxy client list | add NAME | remove NAME`: writes mcpproxy into an MCP client's own
//! config file (Cursor, Claude Desktop, VS Code, Windsurf) so nobody edits JSON by hand.
//!
//! An edit keeps every other key and entry of the client's file in its place (the file is
//! edited as ordered JSON, [`config::document::with_object_entry`]), takes a backup of the
//! file first (`FILE.mcpproxy-backup`), changes nothing when the file already says the same
//! (and says so), and with `--dry-run` only prints the change as a diff. A file with
//! comments (VS Code's JSONC) is read, never rewritten: the entry to paste is printed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};

use mcpproxy_config as config;

use super::Globals;
use super::output::{Format, Tone, print_data, print_table_toned};

/// The name of mcpproxy's entry in a client's config.
const ENTRY: &str = "mcpproxy";

#[derive(Debug, Subcommand)]
pub(super) enum ClientCommand {
    /// Each known client: its config file and whether mcpproxy is set up there.
    List(ListArgs),
    /// Add mcpproxy to a client's MCP config (a backup of the file is taken first).
    Add(ChangeArgs),
    /// Remove mcpproxy from a client's MCP config (a backup of the file is taken first).
    Remove(ChangeArgs),
}

#[derive(Debug, Args)]
pub(super) struct ListArgs {
    /// Output format.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
}

#[derive(Debug, Args)]
pub(super) struct ChangeArgs {
    /// The client.
    #[arg(value_enum)]
    client: Client,
    /// The client's config file, instead of its usual place.
    #[arg(long, value_name = "PATH")]
    config_file: Option<PathBuf>,
    /// Connect over HTTP to a running `mcpproxy serve` (the config's `listen` address)
    /// instead of starting `mcpproxy serve --stdio` from the client.
    #[arg(long)]
    http: bool,
    /// Print the change as a diff; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// mcpproxy's config file, for the `listen` address of `--http`.
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

/// The MCP clients mcpproxy can set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum Client {
    Cursor,
    ClaudeDesktop,
    Vscode,
    Windsurf,
}

impl Client {
    const ALL: [Client; 4] = [
        Client::Cursor,
        Client::ClaudeDesktop,
        Client::Vscode,
        Client::Windsurf,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Cursor => "cursor",
            Self::ClaudeDesktop => "claude-desktop",
            Self::Vscode => "vscode",
            Self::Windsurf => "windsurf",
        }
    }

    /// Where the client reads its user-wide MCP servers, under `home`.
    fn config_path(self, home: &Path) -> PathBuf {
        let macos = cfg!(target_os = "macos");
        let app_support = home.join("Library/Application Support");
        match self {
            Self::Cursor => home.join(".cursor/mcp.json"),
            Self::ClaudeDesktop if macos => app_support.join("Claude/claude_desktop_config.json"),
            Self::ClaudeDesktop => home.join(".config/Claude/claude_desktop_config.json"),
            Self::Vscode if macos => app_support.join("Code/User/mcp.json"),
            Self::Vscode => home.join(".config/Code/User/mcp.json"),
            Self::Windsurf => home.join(".codeium/windsurf/mcp_config.json"),
        }
    }

    /// The object in the file that maps server names to servers.
    fn servers_key(self) -> &'static str {
        match self {
            Self::Vscode => "servers",
            _ => "mcpServers",
        }
    }

    /// mcpproxy's entry, in this client's words.
    fn entry(self, launch: &Launch) -> Result<Vec<(&'static str, Value)>> {
        Ok(match (self, launch) {
            (Self::Vscode, Launch::Stdio(exe)) => vec![
                ("type", json!("stdio")),
                ("command", json!(exe)),
                ("args", json!(["serve", "--stdio"])),
            ],
            (Self::Vscode, Launch::Http(url)) => vec![("type", json!("http")), ("url", json!(url))],
            (Self::ClaudeDesktop, Launch::Http(_)) => bail!(
                "Claude Desktop starts the servers of its config file itself and connects to \
                 none by URL: set it up without --http (it runs `mcpproxy serve --stdio`, which \
                 attaches to a running mcpproxy)"
            ),
            (Self::Windsurf, Launch::Http(url)) => vec![("serverUrl", json!(url))],
            (_, Launch::Http(url)) => vec![("url", json!(url))],
            (_, Launch::Stdio(exe)) => vec![
                ("command", json!(exe)),
                ("args", json!(["serve", "--stdio"])),
            ],
        })
    }
}

/// How the client reaches mcpproxy.
enum Launch {
    /// It starts this binary, by its absolute path.
    Stdio(String),
    /// It connects to this URL.
    Http(String),
}

impl ClientCommand {
    pub(super) fn run(self, globals: &Globals) -> Result<ExitCode> {
        let home = globals
            .home
            .clone()
            .context("HOME is not set: give the client's file with --config-file")?;
        match self {
            Self::List(args) => list(&home, args.output),
            Self::Add(args) => change(globals, &home, args, true),
            Self::Remove(args) => change(globals, &home, args, false),
        }
    }
}

/// The address a client connects to over HTTP: the one the running mcpproxy of the data
/// dir listens on; else the config's `listen`, saying on stderr that nothing answers there
/// yet (and, when the config does not set `listen`, that the address is the default).
fn http_address(globals: &Globals, home: &Path, config_path: Option<&Path>) -> Result<String> {
    let loaded = config::load(config_path, Some(home))?;
    let data_dir = globals.data_dir(loaded.config.data_dir.as_deref());
    let runtime = crate::cli::runtime::current_thread()?;
    let running = runtime.block_on(async {
        match super::remote::Remote::find(&loaded.config, &data_dir).await {
            Ok(Some(remote)) => remote.get("/status", &[]).await.ok(),
            Ok(None) | Err(_) => None,
        }
    });
    let configured = format!("http://{}/mcp", loaded.config.listen);
    let Some(status) = running else {
        let set = loaded
            .path
            .as_deref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .is_some_and(|file| file.get("listen").is_some());
        super::output::print_note(&format!(
            "no mcpproxy is running on {}: the client is set up for {configured}, {}; start `mcpproxy serve` before the client connects",
            data_dir.display(),
            if set {
                "the config's `listen`"
            } else {
                "the default address (the config does not set `listen`)"
            }
        ));
        return Ok(configured);
    };
    match status["listening"].as_str() {
        Some(url) => Ok(url.to_owned()),
        None => {
            super::output::print_note(&format!(
                "the mcpproxy running on {} serves stdio, not HTTP: the client is set up for {configured} (the config's `listen`), where `mcpproxy serve` listens once started",
                data_dir.display()
            ));
            Ok(configured)
        }
    }
}

/// A client's file as read: its text, and the JSON it holds (comments removed).
struct ClientFile {
    text: String,
    json: Value,
    /// It has comments or trailing commas: JSONC, never rewritten.
    jsonc: bool,
}

fn read(path: &Path) -> Result<Option<ClientFile>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    if text.trim().is_empty() {
        return Ok(Some(ClientFile {
            text,
            json: json!({}),
            jsonc: false,
        }));
    }
    if let Ok(json) = serde_json::from_str::<Value>(&text) {
        return Ok(Some(ClientFile {
            text,
            json,
            jsonc: false,
        }));
    }
    match serde_json::from_str::<Value>(&strip_jsonc(&text)) {
        Ok(json) => Ok(Some(ClientFile {
            text,
            json,
            jsonc: true,
        })),
        Err(e) => bail!(
            "{} is not JSON ({e}); fix it in the client, or give another file with --config-file",
            path.display()
        ),
    }
}

/// Whether and how mcpproxy is set up in a client's config.
fn setup_state(file: Option<&ClientFile>, client: Client) -> &'static str {
    let Some(file) = file else {
        return "no config file";
    };
    let entry = &file.json[client.servers_key()][ENTRY];
    if entry.get("command").is_some() {
        "set up (stdio)"
    } else if entry.get("url").is_some() || entry.get("serverUrl").is_some() {
        "set up (http)"
    } else {
        "not set up"
    }
}

fn list(home: &Path, format: Format) -> Result<ExitCode> {
    let mut items = Vec::new();
    for client in Client::ALL {
        let path = client.config_path(home);
        let state = match read(&path) {
            Ok(file) => setup_state(file.as_ref(), client).to_owned(),
            Err(e) => format!("unreadable: {e:#}"),
        };
        items.push(json!({
            "client": client.name(),
            "config_file": path.display().to_string(),
            "state": state,
        }));
    }
    if !print_data(&items, format)? {
        let rows: Vec<Vec<String>> = items
            .iter()
            .map(|i| {
                ["client", "state", "config_file"]
                    .iter()
                    .map(|k| i[k].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .collect();
        print_table_toned(
            &["CLIENT", "STATE", "CONFIG FILE"],
            &rows,
            |column, cell| match (column, cell) {
                (1, s) if s.starts_with("set up") => Some(Tone::Good),
                (1, s) if s.starts_with("unreadable") => Some(Tone::Bad),
                _ => None,
            },
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn change(globals: &Globals, home: &Path, args: ChangeArgs, add: bool) -> Result<ExitCode> {
    let client = args.client;
    let path = args
        .config_file
        .clone()
        .unwrap_or_else(|| client.config_path(home));
    let fields = if add {
        let launch = if args.http {
            Launch::Http(http_address(globals, home, args.config.as_deref())?)
        } else {
            let exe = std::env::current_exe()
                .and_then(std::fs::canonicalize)
                .context("cannot find the path of this mcpproxy binary")?;
            Launch::Stdio(exe.display().to_string())
        };
        Some(client.entry(&launch)?)
    } else {
        None
    };
    let file = read(&path)?;
    if !add && file.is_none() {
        println!(
            "{} is not set up for mcpproxy: {} does not exist; nothing changed",
            client.name(),
            path.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let before = file.as_ref().map_or(String::new(), |f| f.text.clone());
    if let Some(file) = file.as_ref().filter(|f| f.jsonc) {
        let wanted = fields
            .as_ref()
            .map(|f| entry_json(f))
            .unwrap_or(Value::Null);
        if file.json[client.servers_key()].get(ENTRY) == Some(&wanted).filter(|w| !w.is_null())
            || (!add && file.json[client.servers_key()].get(ENTRY).is_none())
        {
            println!("{} is already as asked; nothing changed", path.display());
            return Ok(ExitCode::SUCCESS);
        }
        let what = match &fields {
            Some(_) => format!(
                "add this to its \"{}\" object by hand:\n\"{ENTRY}\": {}",
                client.servers_key(),
                serde_json::to_string_pretty(&wanted)?
            ),
            None => format!(
                "remove \"{ENTRY}\" from its \"{}\" object by hand",
                client.servers_key()
            ),
        };
        bail!(
            "{} has comments or trailing commas (JSONC); mcpproxy does not rewrite it, so \
             nothing of yours is lost: {what}",
            path.display()
        );
    }
    let after = config::document::with_object_entry(
        &before,
        &[client.servers_key()],
        ENTRY,
        fields.as_deref(),
    )
    .with_context(|| {
        format!(
            "{} is not a JSON object with a \"{}\" object: fix it in the client first",
            path.display(),
            client.servers_key()
        )
    })?;
    let unchanged = match &file {
        Some(f) => serde_json::from_str::<Value>(&after).ok().as_ref() == Some(&f.json),
        None => false,
    };
    if unchanged {
        println!(
            "{} {} {} already; nothing changed ({})",
            client.name(),
            if add {
                "has mcpproxy set up"
            } else {
                "has no mcpproxy entry"
            },
            if add { "as asked" } else { "" }.trim(),
            path.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if args.dry_run {
        println!("--- {}", path.display());
        println!(
            "+++ {} (after `client {}`)",
            path.display(),
            if add { "add" } else { "remove" }
        );
        print!("{}", diff(&before, &after));
        eprintln!("dry run: nothing was written");
        return Ok(ExitCode::SUCCESS);
    }
    let backup = if file.is_some() {
        let backup = backup_path(&path);
        std::fs::copy(&path, &backup).with_context(|| {
            format!("cannot back {} up to {}", path.display(), backup.display())
        })?;
        Some(backup)
    } else {
        None
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
    }
    config::document::write_atomically(&path, &after)
        .with_context(|| format!("cannot write {}", path.display()))?;
    let done = if add {
        format!(
            "set up mcpproxy in {} ({}); restart {} to use it",
            client.name(),
            path.display(),
            client.name()
        )
    } else {
        format!(
            "removed mcpproxy from {} ({})",
            client.name(),
            path.display()
        )
    };
    println!("{done}");
    if let Some(backup) = backup {
        println!("the file as it was: {}", backup.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn entry_json(fields: &[(&str, Value)]) -> Value {
    Value::Object(
        fields
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    )
}

/// `FILE.mcpproxy-backup`, or `FILE.mcpproxy-backup.N` for the first N not taken: an
/// earlier backup is never overwritten.
fn backup_path(path: &Path) -> PathBuf {
    let base = format!("{}.mcpproxy-backup", path.display());
    let first = PathBuf::from(&base);
    if !first.exists() {
        return first;
    }
    (1..)
        .map(|n| PathBuf::from(format!("{base}.{n}")))
        .find(|p| !p.exists())
        .unwrap_or(first)
}

/// The text of JSON with comments (`//`, `/* */`) and trailing commas removed: what VS Code
/// accepts in its settings and mcp.json.
fn strip_jsonc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => {
                    if let Some(next) = chars.next() {
                        out.push(next);
                    }
                }
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                for next in chars.by_ref() {
                    if next == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for next in chars.by_ref() {
                    if last == '*' && next == '/' {
                        break;
                    }
                    last = next;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    // Trailing commas: a comma followed (after blanks) by `}` or `]`.
    let mut cleaned = String::with_capacity(out.len());
    let chars: Vec<char> = out.chars().collect();
    let mut in_string = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if in_string {
            cleaned.push(c);
            if c == '\\' && i + 1 < chars.len() {
                cleaned.push(chars[i + 1]);
                i += 1;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            cleaned.push(c);
        } else if c == ','
            && chars[i + 1..]
                .iter()
                .find(|n| !n.is_whitespace())
                .is_some_and(|n| *n == '}' || *n == ']')
        {
            // dropped
        } else {
            cleaned.push(c);
        }
        i += 1;
    }
    cleaned
}

/// A line diff of `before` and `after` (`-` removed, `+` added, two lines of context).
fn diff(before: &str, after: &str) -> String {
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    // Longest common subsequence, by dynamic programming: config files are small (capped).
    if a.len().saturating_mul(b.len()) > 4_000_000 {
        return format!(
            "{}{}",
            a.iter().map(|l| format!("-{l}\n")).collect::<String>(),
            b.iter().map(|l| format!("+{l}\n")).collect::<String>()
        );
    }
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut lines: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            lines.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            lines.push(('-', a[i]));
            i += 1;
        } else {
            lines.push(('+', b[j]));
            j += 1;
        }
    }
    let near = |at: usize| {
        lines[at.saturating_sub(2)..(at + 3).min(lines.len())]
            .iter()
            .any(|(mark, _)| *mark != ' ')
    };
    let mut out = String::new();
    let mut skipped = false;
    for (at, (mark, line)) in lines.iter().enumerate() {
        if near(at) {
            if skipped {
                out.push_str("...\n");
                skipped = false;
            }
            out.push_str(&format!("{mark}{line}\n"));
        } else {
            skipped = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonc_comments_and_trailing_commas_are_removed_but_not_inside_strings() {
        let text = "{\n  // mine\n  \"servers\": {\"a\": {\"url\": \"http://x//y\",},}, /* c */\n}";
        let json: Value = serde_json::from_str(&strip_jsonc(text)).unwrap();
        assert_eq!(json, json!({"servers": {"a": {"url": "http://x//y"}}}));
    }

    #[test]
    fn a_diff_shows_what_changes_with_context() {
        let out = diff("{\n  \"a\": 1\n}\n", "{\n  \"a\": 1,\n  \"b\": 2\n}\n");
        assert_eq!(out, " {\n-  \"a\": 1\n+  \"a\": 1,\n+  \"b\": 2\n }\n");
    }

    #[test]
    fn each_client_gets_its_own_words() {
        let stdio = Launch::Stdio("/usr/bin/mcpproxy".into());
        let http = Launch::Http("http://127.0.0.1:8080/mcp".into());
        assert_eq!(
            entry_json(&Client::Vscode.entry(&stdio).unwrap()),
            json!({"type": "stdio", "command": "/usr/bin/mcpproxy", "args": ["serve", "--stdio"]})
        );
        assert_eq!(
            entry_json(&Client::Windsurf.entry(&http).unwrap()),
            json!({"serverUrl": "http://127.0.0.1:8080/mcp"})
        );
        assert!(Client::ClaudeDesktop.entry(&http).is_err());
        assert_eq!(Client::Vscode.servers_key(), "servers");
        assert_eq!(Client::Cursor.servers_key(), "mcpServers");
    }
}
