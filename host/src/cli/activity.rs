//! `mcpproxy activity list`, `show`, `sinks` and `repair`: the audit trail and its delivery
//! to sinks, read from the running server's REST API when one is up, else from the journal
//! file; `repair` saves the readable records of a damaged journal file (offline only).
//!
//! The library turns a panic of redb on a damaged page into an error; these commands also
//! keep the panic's own report off the terminal (a panic hook that stays silent for panics
//! raised inside redb, set only for the `activity` commands), so the user sees one message
//! saying what to do.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use serde_json::Value;

use crate::config::{self, Config};
use mcpproxy_activity::ExportFormat;
use mcpproxy_activity::{
    ActivityRecord, Filter, Journal, JournalOptions, RecordType, format_timestamp, now_ms,
    parse_timestamp,
};

use super::Globals;
use super::output::{
    Format, Tone, local_time, paint, print_data, print_table, print_table_toned, to_yaml,
    verdict_line,
};
use super::remote::Remote;
use crate::runtime::journal_path;
use crate::trust::quote;
use mcpproxy_policy::Outcome;

#[derive(Debug, Subcommand)]
pub(super) enum ActivityCommand {
    /// List activity records, newest first.
    List(ListCommand),
    /// Show every field of one record.
    Show(ShowCommand),
    /// Show each sink's delivery: backlog, lag, last delivery and last error.
    Sinks(SinksCommand),
    /// Write every matching record, oldest first, as JSON Lines or CSV (streamed: memory
    /// stays flat however many records match).
    Export(ExportCommand),
    /// Tool calls (or the records of `--type`) by server, tool, variant, status and
    /// decision, with p50/p99 durations.
    Stats(StatsCommand),
    /// Follow new records as calls finish (from the running server), until Ctrl-C.
    Watch(WatchCommand),
    /// Save the readable records of a damaged journal into a new journal file (the damaged
    /// file is kept aside as activity.redb.damaged-<time>). Stop the server first.
    Repair(RepairCommand),
}

#[derive(Debug, Args)]
pub(super) struct Source {
    /// The config file (to find the running server and the data dir).
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

/// The filters `list`, `export` and `stats` share.
#[derive(Debug, Clone, Args)]
pub(super) struct FilterArgs {
    /// Only calls with this operation type.
    #[arg(long, value_parser = ["read", "write", "destructive"])]
    intent_type: Option<String>,
    /// Only calls to this upstream server.
    #[arg(long)]
    server: Option<String>,
    /// Only calls of this tool (its name on the server).
    #[arg(long)]
    tool: Option<String>,
    /// Only records with this status.
    #[arg(long, value_parser = ["pending", "success", "error", "blocked"])]
    status: Option<String>,
    /// Only records of this type.
    #[arg(long = "type", value_parser = clap::builder::PossibleValuesParser::new(RecordType::names()))]
    record_type: Option<String>,
    /// Only records of this MCP session.
    #[arg(long)]
    session: Option<String>,
    /// Only records at or after this time: a duration ago (`30m`, `1h`, `7d`) or an RFC 3339
    /// time (`2026-11-22T04:10:00Z`).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Only records at or before this time (as --since).
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
}

impl FilterArgs {
    /// The journal filter, with --since and --until resolved against now.
    fn filter(&self) -> Result<Filter> {
        let time = |flag: &str, value: &Option<String>| {
            value
                .as_deref()
                .map(|v| parse_time_arg(v).map_err(|e| anyhow::anyhow!("--{flag} '{v}': {e}")))
                .transpose()
        };
        let filter = Filter {
            intent_type: self.intent_type.clone(),
            server: self.server.clone(),
            tool: self.tool.clone(),
            status: self.status.clone(),
            record_type: self.record_type.clone(),
            session: self.session.clone(),
            start_ms: time("since", &self.since)?,
            end_ms: time("until", &self.until)?,
        };
        if let (Some(start), Some(end)) = (filter.start_ms, filter.end_ms)
            && start > end
        {
            bail!("--since is after --until");
        }
        Ok(filter)
    }

    /// The same filter as REST query parameters.
    fn query(&self) -> Result<Vec<(&'static str, String)>> {
        let filter = self.filter()?;
        let mut query = Vec::new();
        for (key, value) in [
            ("intent_type", &filter.intent_type),
            ("server", &filter.server),
            ("tool", &filter.tool),
            ("status", &filter.status),
            ("type", &filter.record_type),
            ("session", &filter.session),
        ] {
            if let Some(v) = value {
                query.push((key, v.clone()));
            }
        }
        if let Some(ms) = filter.start_ms {
            query.push(("start_time", format_timestamp(ms)));
        }
        if let Some(ms) = filter.end_ms {
            query.push(("end_time", format_timestamp(ms)));
        }
        Ok(query)
    }
}

/// A time given on the command line: a duration ago (`90s`, `30m`, `1h`, `7d`, `2w`) or an
/// RFC 3339 timestamp; unix milliseconds.
fn parse_time_arg(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let unit_ms: Option<u64> = match text.chars().last() {
        Some('s') => Some(1_000),
        Some('m') => Some(60_000),
        Some('h') => Some(3_600_000),
        Some('d') => Some(86_400_000),
        Some('w') => Some(7 * 86_400_000),
        _ => None,
    };
    let digits = &text[..text.len().saturating_sub(1)];
    if let Some(unit) = unit_ms
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
    {
        let n: u64 = digits
            .parse()
            .map_err(|_| format!("'{digits}' is too large"))?;
        return Ok(now_ms().saturating_sub(n.saturating_mul(unit)));
    }
    parse_timestamp(text).map_err(|e| format!("{e}; or a duration ago: 90s, 30m, 1h, 7d, 2w"))
}

#[derive(Debug, Args)]
pub(super) struct ListCommand {
    #[command(flatten)]
    source: Source,
    #[command(flatten)]
    filters: FilterArgs,
    /// How many records.
    #[arg(short = 'n', long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=1000))]
    limit: u64,
    /// Skip this many matching records.
    #[arg(long, default_value_t = 0)]
    offset: u64,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
    /// Words instead of icons for the intent.
    #[arg(long)]
    no_icons: bool,
    /// Times in UTC instead of the local time zone.
    #[arg(long)]
    utc: bool,
}

#[derive(Debug, Args)]
pub(super) struct ShowCommand {
    #[command(flatten)]
    source: Source,
    /// The record's id (from `activity list`).
    id: String,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
}

#[derive(Debug, Args)]
pub(super) struct ExportCommand {
    #[command(flatten)]
    source: Source,
    #[command(flatten)]
    filters: FilterArgs,
    /// `jsonl`: every field, one record per line; `csv`: one row per record with the
    /// columns a spreadsheet wants.
    #[arg(long, default_value = "jsonl", value_parser = ["jsonl", "csv"])]
    format: String,
}

impl ExportCommand {
    async fn run(self, globals: &Globals) -> Result<ExitCode> {
        use std::io::Write;
        let format: ExportFormat = self
            .format
            .parse()
            .map_err(|e: String| anyhow::anyhow!(e))?;
        let store = open(&self.source, globals).await?;
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
        let written = match &store {
            Store::Remote(remote) => {
                let mut query = self.filters.query()?;
                query.push(("format", self.format.clone()));
                let mut response = remote.get_stream("/activity/export", &query).await?;
                let mut written = Ok(());
                while let Some(chunk) = response
                    .chunk()
                    .await
                    .context("the export from the server stopped before its end")?
                {
                    written = out.write_all(&chunk);
                    if written.is_err() {
                        break;
                    }
                }
                written
            }
            Store::Local(journal) => {
                let filter = self.filters.filter()?;
                let mut written = out.write_all(format.header().as_bytes());
                let mut buf = Vec::new();
                if written.is_ok() {
                    journal.for_each_chunk(&filter, None, |chunk| {
                        buf.clear();
                        for record in chunk {
                            format.write(record, &mut buf);
                        }
                        written = out.write_all(&buf);
                        written.is_ok()
                    })?;
                }
                written
            }
        };
        match written.and_then(|()| out.flush()) {
            Ok(()) => Ok(ExitCode::SUCCESS),
            // `export | head`: the reader has what it wanted.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
            Err(e) => Err(e).context("cannot write the export"),
        }
    }
}

#[derive(Debug, Args)]
pub(super) struct StatsCommand {
    #[command(flatten)]
    source: Source,
    #[command(flatten)]
    filters: FilterArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
}

impl StatsCommand {
    async fn run(self, globals: &Globals) -> Result<ExitCode> {
        let store = open(&self.source, globals).await?;
        let stats: Value = match &store {
            Store::Remote(remote) => {
                remote
                    .get("/activity/stats", &self.filters.query()?)
                    .await?
            }
            Store::Local(journal) => {
                serde_json::to_value(journal.call_stats(&self.filters.filter()?)?)?
            }
        };
        if !print_data(&stats, self.output)? {
            print_stats(&stats);
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// The statistics as one table per grouping.
fn print_stats(stats: &Value) {
    let calls = stats["calls"].as_u64().unwrap_or(0);
    let what = match stats["type"].as_str() {
        None | Some("tool_call") => "calls".to_owned(),
        Some(other) => format!("{} records", quote(other)),
    };
    if calls == 0 {
        eprintln!("no matching {what}");
        return;
    }
    println!(
        "{calls} {what} from {} to {}; p50 {} ms, p99 {} ms",
        quote(stats["first"].as_str().unwrap_or("?")),
        quote(stats["last"].as_str().unwrap_or("?")),
        stats["p50_ms"],
        stats["p99_ms"]
    );
    for (title, key) in [
        ("SERVER", "by_server"),
        ("TOOL", "by_tool"),
        ("VARIANT", "by_variant"),
        ("STATUS", "by_status"),
        ("DECISION", "by_decision"),
    ] {
        let rows: Vec<Vec<String>> = stats[key]
            .as_array()
            .map(|groups| {
                groups
                    .iter()
                    .map(|g| {
                        vec![
                            quote(g["key"].as_str().unwrap_or("")),
                            g["calls"].to_string(),
                            format!("{} ms", g["p50_ms"]),
                            format!("{} ms", g["p99_ms"]),
                        ]
                    })
                    .collect()
            })
            .unwrap_or_default();
        println!();
        print_table(&[title, "CALLS", "P50", "P99"], &rows);
    }
}

#[derive(Debug, Args)]
pub(super) struct WatchCommand {
    #[command(flatten)]
    source: Source,
    #[command(flatten)]
    filters: FilterArgs,
    /// `table`: one line per record; `jsonl` (or `json`): each record as one compact JSON
    /// line, as it arrives.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
    /// Words instead of icons for the intent.
    #[arg(long)]
    no_icons: bool,
}

impl WatchCommand {
    async fn run(self, globals: &Globals) -> Result<ExitCode> {
        use std::io::Write;
        let Store::Remote(remote) = open(&self.source, globals).await? else {
            bail!(
                "no mcpproxy is running on this config's listen address: `activity watch` follows a running server (`mcpproxy serve`); `activity list` reads the journal"
            );
        };
        let mut response = remote
            .get_stream("/activity/stream", &self.filters.query()?)
            .await?;
        eprintln!("following new activity; Ctrl-C to stop");
        let mut pending = String::new();
        let stdout = std::io::stdout();
        loop {
            let chunk = tokio::select! {
                chunk = response.chunk() => chunk.context("the server's activity feed stopped")?,
                _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
            };
            let Some(chunk) = chunk else {
                bail!("the server closed the activity feed (did it stop?)");
            };
            pending.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = pending.find("\n\n") {
                let event: String = pending.drain(..end + 2).collect();
                let data: String = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect::<Vec<_>>()
                    .join("\n");
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                let Ok(record) = serde_json::from_str::<Value>(&data) else {
                    continue;
                };
                let line = match self.output {
                    Format::Json | Format::Jsonl => record.to_string(),
                    Format::Yaml => format!("---\n{}", to_yaml(&record).trim_end()),
                    Format::Table => watch_line(&record, !self.no_icons),
                };
                let mut out = stdout.lock();
                if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                    return Ok(ExitCode::SUCCESS); // `watch | head`
                }
            }
        }
    }
}

/// One record as one line of `activity watch`: time, server:tool, intent, status, duration,
/// and the verdict's reason when the policy did not simply allow; caller text escaped.
fn watch_line(record: &Value, icons: bool) -> String {
    let text = |key: &str| quote(record[key].as_str().unwrap_or(""));
    let time: String = text("timestamp")
        .replace('T', " ")
        .chars()
        .take(23)
        .collect();
    let status = status_label(record);
    let mut line = format!(
        "{time}  {}:{}  {}  {}  {}ms",
        text("server_name"),
        text("tool_name"),
        intent_label(record, icons),
        paint(&quote(&status), Tone::of_word(&status)),
        record["duration_ms"].as_u64().unwrap_or(0)
    );
    if let Some(message) = record["verdict"]["message"].as_str() {
        line.push_str("  ");
        line.push_str(&quote(message));
    }
    line
}

#[derive(Debug, Args)]
pub(super) struct RepairCommand {
    #[command(flatten)]
    source: Source,
}

#[derive(Debug, Args)]
pub(super) struct SinksCommand {
    #[command(flatten)]
    source: Source,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
}

impl ActivityCommand {
    pub(super) fn run(self, globals: &Globals) -> Result<ExitCode> {
        quiet_redb_panics();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        runtime.block_on(async {
            match self {
                Self::List(cmd) => cmd.run(globals).await,
                Self::Show(cmd) => cmd.run(globals).await,
                Self::Sinks(cmd) => cmd.run(globals).await,
                Self::Repair(cmd) => cmd.run(globals).await,
                Self::Export(cmd) => cmd.run(globals).await,
                Self::Stats(cmd) => cmd.run(globals).await,
                Self::Watch(cmd) => cmd.run(globals).await,
            }
        })
    }
}

/// Keeps the report of a panic raised inside redb (a damaged page, which the journal turns
/// into an error) off stderr; any other panic is reported as before.
fn quiet_redb_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_redb = info.location().is_some_and(|l| {
            let file = l.file().replace('\\', "/");
            file.contains("/redb-") || file.contains("/redb/")
        });
        if !in_redb {
            previous(info);
        }
    }));
}

/// Where records come from: the server, or the journal file.
enum Store {
    Remote(Remote),
    Local(std::sync::Arc<Journal>),
}

async fn open(source: &Source, globals: &Globals) -> Result<Store> {
    let loaded = config::load(source.config.as_deref(), globals.home.as_deref())?;
    let config: Config = loaded.config;
    let data_dir = globals.data_dir(config.data_dir.as_deref());
    if let Some(remote) = Remote::find(&config, &data_dir).await? {
        return Ok(Store::Remote(remote));
    }
    let path = journal_path(&data_dir);
    if !path.exists() {
        bail!(
            "no activity yet: {} does not exist and no mcpproxy answers on {} (start one with `mcpproxy serve`)",
            path.display(),
            config.listen
        );
    }
    // The error says what is wrong (held by another process, damaged, unreadable) and what
    // to do; no context is added, so nothing is said twice.
    let journal = Journal::open(&path, JournalOptions::default())?;
    Ok(Store::Local(journal))
}

impl ListCommand {
    async fn run(self, globals: &Globals) -> Result<ExitCode> {
        let store = open(&self.source, globals).await?;
        let records: Vec<Value> = match &store {
            Store::Remote(remote) => {
                let mut query = vec![
                    ("limit", self.limit.to_string()),
                    ("offset", self.offset.to_string()),
                ];
                query.extend(self.filters.query()?);
                let data = remote.get("/activity", &query).await?;
                data["records"].as_array().cloned().unwrap_or_default()
            }
            Store::Local(journal) => {
                let filter = self.filters.filter()?;
                let page = journal.query(&filter, self.limit as usize, self.offset as usize)?;
                page.records
                    .iter()
                    .map(serde_json::to_value)
                    .collect::<Result<_, _>>()?
            }
        };
        if !print_data(&records, self.output)? {
            {
                let rows: Vec<Vec<String>> = records
                    .iter()
                    .map(|r| {
                        vec![
                            r["id"].as_str().unwrap_or("").to_owned(),
                            local_time(r["timestamp"].as_str().unwrap_or(""), self.utc),
                            r["server_name"].as_str().unwrap_or("").to_owned(),
                            r["tool_name"].as_str().unwrap_or("").to_owned(),
                            intent_label(r, !self.no_icons),
                            status_label(r),
                            format!("{}ms", r["duration_ms"].as_u64().unwrap_or(0)),
                            reason(r),
                        ]
                    })
                    .collect();
                if rows.is_empty() {
                    eprintln!("no matching activity");
                } else {
                    print_table_toned(
                        &[
                            "ID", "TIME", "SERVER", "TOOL", "INTENT", "STATUS", "DURATION",
                            "REASON",
                        ],
                        &rows,
                        |column, cell| (column == 5).then(|| Tone::of_word(cell)).flatten(),
                    );
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// The STATUS column: the record's status, or `dry-run` for a dry run (which never reached
/// the upstream, whatever the policy said).
fn status_label(record: &Value) -> String {
    if record["dry_run"] == Value::Bool(true) {
        "dry-run".to_owned()
    } else {
        record["status"].as_str().unwrap_or("").to_owned()
    }
}

/// The REASON column: why the policy warned or rejected, else the error; empty for a plain
/// success.
fn reason(record: &Value) -> String {
    let decision = record["verdict"]["decision"].as_str().unwrap_or("allow");
    let message = record["verdict"]["message"].as_str();
    match (decision, message) {
        ("warn" | "reject", Some(message)) => message.to_owned(),
        _ => record["error_message"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    }
}

/// `📖 read`, `✏️ write`, `⚠️ destructive` (or the word alone); for records that are not
/// calls, what they are: `🚨 alert`, `💬 prompt`, `🔤 completion`, `🔔 subscribe`,
/// `🔕 unsubscribe`, `📡 listen`; a summarised record's label ends in `(summarised)`.
fn intent_label(record: &Value, icons: bool) -> String {
    let label = intent_word(record, icons);
    if record["summarised"] == Value::Bool(true) {
        format!("{label} (summarised)")
    } else {
        label
    }
}

fn intent_word(record: &Value, icons: bool) -> String {
    if let Some((icon, word)) = kind_label(record) {
        return if icons {
            format!("{icon} {word}")
        } else {
            word.to_owned()
        };
    }
    let op = record["intent"]["operation_type"].as_str().unwrap_or("-");
    if !icons {
        return op.to_owned();
    }
    let icon = match op {
        "read" => "📖",
        "write" => "✏️",
        "destructive" => "⚠️",
        _ => "•",
    };
    format!("{icon} {op}")
}

/// The icon and word of a record that is not a call and carries no intent; `None` for calls
/// (and types shown by their intent).
fn kind_label(record: &Value) -> Option<(&'static str, &'static str)> {
    let kind = RecordType::parse(record["type"].as_str()?)?;
    Some(match kind {
        RecordType::Alert => ("🚨", "alert"),
        RecordType::PromptGet => ("💬", "prompt"),
        RecordType::Completion => ("🔤", "completion"),
        RecordType::Subscription => match record["details"]["method"].as_str() {
            Some("resources/unsubscribe") => ("🔕", "unsubscribe"),
            Some("subscriptions/listen") => ("📡", "listen"),
            _ => ("🔔", "subscribe"),
        },
        RecordType::ServerChange => ("🛠", "server"),
        _ => return None,
    })
}

impl ShowCommand {
    async fn run(self, globals: &Globals) -> Result<ExitCode> {
        let store = open(&self.source, globals).await?;
        let record: Value = match &store {
            Store::Remote(remote) => remote.get(&format!("/activity/{}", self.id), &[]).await?,
            Store::Local(journal) => match journal.get(&self.id).or_else(|e| match e {
                mcpproxy_activity::Error::InvalidId(_) => Ok(None),
                e => Err(e),
            })? {
                Some(record) => serde_json::to_value(&record)?,
                None => bail!(
                    "no activity record with id '{}'; `mcpproxy activity list` shows the ids",
                    self.id
                ),
            },
        };
        if !print_data(&record, self.output)? {
            print_record(&record);
        }
        Ok(ExitCode::SUCCESS)
    }
}

fn print_record(record: &Value) {
    let parsed: Option<ActivityRecord> = serde_json::from_value(record.clone()).ok();
    // Every value may come from a caller, an upstream or a plugin: print it escaped.
    let field = |k: &str| match &record[k] {
        Value::Null => "-".to_owned(),
        Value::String(s) => quote(s),
        other => quote(&other.to_string()),
    };
    println!("ID:          {}", field("id"));
    println!("Time:        {}", field("timestamp"));
    println!(
        "Type:        {} (source: {})",
        field("type"),
        field("source")
    );
    match RecordType::parse(record["type"].as_str().unwrap_or("")) {
        Some(RecordType::PromptGet) => println!(
            "Prompt:      {}:{}",
            field("server_name"),
            field("tool_name")
        ),
        Some(RecordType::Completion) => println!(
            "Completes:   {}:{}",
            field("server_name"),
            field("tool_name")
        ),
        Some(RecordType::ServerChange) => println!(
            "Server:      {} ({} by {})",
            field("server_name"),
            field("tool_name"),
            quote(record["details"]["actor"].as_str().unwrap_or("-"))
        ),
        Some(RecordType::Subscription) => match record["details"]["method"].as_str() {
            Some(method @ "subscriptions/listen") => {
                println!("Stream:      {} ({method})", field("server_name"))
            }
            method => println!(
                "Resource:    {}:{} ({})",
                field("server_name"),
                field("tool_name"),
                quote(method.unwrap_or("-"))
            ),
        },
        _ => println!(
            "Tool:        {}:{} via {}",
            field("server_name"),
            field("tool_name"),
            field("tool_variant")
        ),
    }
    println!(
        "Status:      {}{}",
        field("status"),
        if record["dry_run"] == Value::Bool(true) {
            " (dry run)"
        } else {
            ""
        }
    );
    println!("Duration:    {} ms", field("duration_ms"));
    let intent = &record["intent"];
    println!("Intent:");
    println!(
        "  operation_type:   {}",
        quote(intent["operation_type"].as_str().unwrap_or("-"))
    );
    println!(
        "  data_sensitivity: {}",
        quote(intent["data_sensitivity"].as_str().unwrap_or("-"))
    );
    println!(
        "  reason:           {}",
        quote(intent["reason"].as_str().unwrap_or("-"))
    );
    println!(
        "Annotations: {} (from {}; safety class {})",
        field("annotations"),
        field("annotation_source"),
        field("safety_class")
    );
    let verdict: Outcome = serde_json::from_value(record["verdict"].clone()).unwrap_or_default();
    println!("Verdict:     {}", verdict_line(&verdict));
    for w in &verdict.warnings {
        println!("  warning from {}: {}", quote(&w.plugin), quote(&w.message));
    }
    println!(
        "Arguments:   {}{}",
        field("arguments"),
        if record["arguments_truncated"] == Value::Bool(true) {
            " (truncated)"
        } else {
            ""
        }
    );
    println!("Response:    {} bytes", field("response_bytes"));
    if !record["details"].is_null() {
        println!("Details:     {}", field("details"));
    }
    if record["error_message"] != Value::Null {
        println!("Error:       {}", field("error_message"));
    }
    println!(
        "Session:     {}  Request: {}",
        field("session_id"),
        field("request_id")
    );
    if let Some(client) = parsed.and_then(|r| r.client) {
        println!(
            "Client:      {} {}",
            quote(&client.name),
            quote(&client.version)
        );
    }
}

impl RepairCommand {
    async fn run(self, globals: &Globals) -> Result<ExitCode> {
        let loaded = config::load(self.source.config.as_deref(), globals.home.as_deref())?;
        let data_dir = globals.data_dir(loaded.config.data_dir.as_deref());
        if Remote::find(&loaded.config, &data_dir).await?.is_some() {
            bail!(
                "a server is running on {} with this journal; stop it (Ctrl-C or kill its process), \
                 then run `mcpproxy activity repair` again",
                loaded.config.listen
            );
        }
        let path = journal_path(&data_dir);
        if !path.exists() {
            bail!("nothing to repair: {} does not exist", path.display());
        }
        let report = tokio::task::spawn_blocking(move || Journal::repair(&path))
            .await
            .context("the repair task failed")??;
        println!(
            "saved {} records into a new journal; {} unreadable ranges skipped, {} unreadable records left out",
            report.saved, report.unreadable_ranges, report.unreadable_records
        );
        if report.sinks > 0 {
            println!(
                "{} sinks carried over; {} records queued for them again",
                report.sinks, report.requeued
            );
        }
        println!(
            "the damaged file is kept as {}",
            report.damaged_copy.display()
        );
        Ok(ExitCode::SUCCESS)
    }
}

impl SinksCommand {
    async fn run(self, globals: &Globals) -> Result<ExitCode> {
        let store = open(&self.source, globals).await?;
        let sinks: Value = match &store {
            Store::Remote(remote) => remote.get("/activity/sinks", &[]).await?,
            Store::Local(journal) => {
                serde_json::to_value(mcpproxy_activity::offline_report(journal)?)?
            }
        };
        let list = sinks.as_array().cloned().unwrap_or_default();
        if print_data(&sinks, self.output)? {
        } else if list.is_empty() {
            eprintln!(
                "no sinks: add one to plugins.sinks in the config, or run `mcpproxy serve --sink NAME` (see docs/sinks.md)"
            );
        } else {
            {
                let rows: Vec<Vec<String>> = list.iter().map(sink_row).collect();
                print_table_toned(
                    &[
                        "SINK",
                        "STATE",
                        "BACKLOG",
                        "LAG",
                        "DELIVERED",
                        "LAST DELIVERY",
                        "LAST ERROR",
                    ],
                    &rows,
                    |column, cell| (column == 1).then(|| Tone::of_word(cell)).flatten(),
                );
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

fn sink_row(s: &Value) -> Vec<String> {
    let ms = |v: &Value| v.as_u64();
    let when = |v: &Value| {
        ms(v).map_or("-".to_owned(), |t| {
            format_timestamp(t)
                .replace('T', " ")
                .chars()
                .take(19)
                .collect()
        })
    };
    let mut state = s["activity"].as_str().unwrap_or("-").replace('_', " ");
    if let Some(retry) = ms(&s["retry_in_ms"]) {
        state = format!("{state} (retry in {})", human_ms(retry));
    }
    if let Some(limit) = ms(&s["batch_limit"]) {
        state = format!("{state}, batches of {limit} (memory)");
    }
    let mut error = s["last_error"].as_str().unwrap_or("-").to_owned();
    if let Some(n) = ms(&s["failures"]).filter(|n| *n > 0) {
        error = format!("{error} ({n} failed attempts)");
    }
    if let Some(n) = ms(&s["dropped"]).filter(|n| *n > 0) {
        error = format!("{error}; {n} records dropped by retention");
    }
    vec![
        s["name"].as_str().unwrap_or("?").to_owned(),
        state,
        ms(&s["backlog"]).unwrap_or(0).to_string(),
        ms(&s["lag_ms"]).map_or("-".to_owned(), human_ms),
        ms(&s["delivered"]).unwrap_or(0).to_string(),
        when(&s["last_delivery_ms"]),
        error,
    ]
}

/// `850ms`, `12.3s`, `4m10s`, `2h05m`.
fn human_ms(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms}ms"),
        1000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_that_are_not_calls_say_what_they_are() {
        use serde_json::json;
        let label = |record: Value| (intent_label(&record, true), intent_label(&record, false));
        let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        assert_eq!(
            label(json!({"type": "tool_call", "intent": {"operation_type": "read"}})),
            pair("📖 read", "read")
        );
        assert_eq!(label(json!({"type": "alert"})), pair("🚨 alert", "alert"));
        assert_eq!(
            label(json!({"type": "prompt_get"})),
            pair("💬 prompt", "prompt")
        );
        assert_eq!(
            label(json!({"type": "completion", "summarised": true})),
            pair("🔤 completion (summarised)", "completion (summarised)")
        );
        let subscription =
            |method: &str| json!({"type": "subscription", "details": {"method": method}});
        assert_eq!(
            label(subscription("resources/subscribe")),
            pair("🔔 subscribe", "subscribe")
        );
        assert_eq!(
            label(subscription("resources/unsubscribe")),
            pair("🔕 unsubscribe", "unsubscribe")
        );
        assert_eq!(
            label(subscription("subscriptions/listen")),
            pair("📡 listen", "listen")
        );
        assert_eq!(
            label(json!({"type": "server_change"})),
            pair("🛠 server", "server")
        );
        // A type this build does not know is shown by its intent, as before.
        assert_eq!(label(json!({"type": "future_kind"})), pair("• -", "-"));
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(human_ms(850), "850ms");
        assert_eq!(human_ms(12_340), "12.3s");
        assert_eq!(human_ms(250_000), "4m10s");
        assert_eq!(human_ms(7_500_000), "2h05m");
    }

    #[test]
    fn a_sink_row_shows_state_lag_and_errors() {
        let row = sink_row(&serde_json::json!({
            "name": "clickhouse-sink", "activity": "backing_off", "retry_in_ms": 4000,
            "backlog": 12, "lag_ms": 65_000, "delivered": 100, "last_delivery_ms": 1_790_000_000_000u64,
            "last_error": "connection refused", "failures": 3, "dropped": 0,
        }));
        assert_eq!(row[0], "clickhouse-sink");
        assert_eq!(row[1], "backing off (retry in 4.0s)");
        assert_eq!(row[2], "12");
        assert_eq!(row[3], "1m05s");
        assert_eq!(row[4], "100");
        assert!(row[5].starts_with("2026-"), "{}", row[5]);
        assert_eq!(row[6], "connection refused (3 failed attempts)");
    }

    #[test]
    fn a_sink_row_says_when_batches_are_smaller_for_memory() {
        let row = sink_row(&serde_json::json!({
            "name": "http-sink", "activity": "delivering", "batch_limit": 125, "backlog": 900,
        }));
        assert_eq!(row[1], "delivering, batches of 125 (memory)");
    }
}
