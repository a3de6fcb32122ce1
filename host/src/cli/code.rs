//! `mcpproxy code run FILE.js`: runs a `code_execution` script through the running
//! `mcpproxy serve` (its REST API), with the same limits, policy and records as the MCP
//! tool. Prints the result (or the whole report with `-o json`); `console.log` lines and
//! the error go to stderr.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use mcpproxy_config as config;
use mcpproxy_server::proxy::CodeReport;
use mcpproxy_support::quote;

use super::output::{Format, Tone, paint_err, print_data};
use super::remote::Remote;
use super::{EXIT_FAILURE, EXIT_USAGE, Globals};

#[derive(Debug, Subcommand)]
pub(super) enum CodeCommand {
    /// Run a script (a JavaScript function body) through the running mcpproxy.
    Run(RunArgs),
}

#[derive(Debug, Args)]
pub(super) struct RunArgs {
    /// The script: a JavaScript function body whose `return` value is the result.
    #[arg(value_name = "FILE.js")]
    file: PathBuf,
    /// The script's global `input`, as JSON.
    #[arg(long, value_name = "JSON")]
    input: Option<String>,
    /// The ceiling of every call the script makes: read (default), write or destructive.
    #[arg(long, value_name = "read|write|destructive")]
    intent: Option<String>,
    /// Why the script runs (recorded in the audit trail, at most 1000 characters).
    #[arg(long)]
    reason: Option<String>,
    /// The data's sensitivity: public, internal, private or unknown.
    #[arg(long)]
    sensitivity: Option<String>,
    /// Milliseconds the script may run (at most the config's code_execution.timeout_ms).
    #[arg(long, value_name = "MS")]
    timeout_ms: Option<u64>,
    /// Tool calls the script may make (at most code_execution.max_tool_calls).
    #[arg(long, value_name = "N")]
    max_tool_calls: Option<u64>,
    /// Servers the script may call (repeat or separate with commas); all when not given.
    #[arg(long, value_name = "SERVER", value_delimiter = ',')]
    allow_server: Vec<String>,
    /// Output: the result (`table`), or the whole report as `json` or `jsonl`.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
    /// The config file.
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

impl CodeCommand {
    pub(super) fn run(self, globals: &Globals) -> Result<ExitCode> {
        let Self::Run(args) = self;
        let body = match args.body() {
            Ok(body) => body,
            Err(e) => {
                eprintln!("error: {e:#}");
                return Ok(ExitCode::from(EXIT_USAGE));
            }
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        runtime.block_on(args.execute(globals, body))
    }
}

impl RunArgs {
    /// The request body, checked for usage errors (the server checks the rest).
    fn body(&self) -> Result<Value> {
        let code = std::fs::read_to_string(&self.file)
            .with_context(|| format!("cannot read the script {}", self.file.display()))?;
        let mut body = Map::new();
        body.insert("code".into(), Value::String(code));
        if let Some(text) = &self.input {
            let input: Value = serde_json::from_str(text)
                .map_err(|e| anyhow!("--input is not valid JSON ({e}): {}", quote(text)))?;
            body.insert("input".into(), input);
        }
        let mut intent = Map::new();
        if let Some(op) = &self.intent {
            if !matches!(op.as_str(), "read" | "write" | "destructive") {
                bail!(
                    "invalid --intent '{}': use read, write or destructive",
                    quote(op)
                );
            }
            intent.insert("operation_type".into(), json!(op));
        }
        if let Some(reason) = &self.reason {
            intent.insert("reason".into(), json!(reason));
        }
        if let Some(sensitivity) = &self.sensitivity {
            intent.insert("data_sensitivity".into(), json!(sensitivity));
        }
        if !intent.is_empty() {
            body.insert("intent".into(), Value::Object(intent));
        }
        let mut options = Map::new();
        if let Some(ms) = self.timeout_ms {
            options.insert("timeout_ms".into(), json!(ms));
        }
        if let Some(n) = self.max_tool_calls {
            options.insert("max_tool_calls".into(), json!(n));
        }
        if !self.allow_server.is_empty() {
            options.insert("allowed_servers".into(), json!(self.allow_server));
        }
        if !options.is_empty() {
            body.insert("options".into(), Value::Object(options));
        }
        body.insert("source".into(), json!("cli"));
        Ok(Value::Object(body))
    }

    async fn execute(&self, globals: &Globals, body: Value) -> Result<ExitCode> {
        let loaded = config::load(self.config.as_deref(), globals.home.as_deref())?;
        let config = loaded.config;
        let data_dir = globals.data_dir(config.data_dir.as_deref());
        let Some(remote) = Remote::find(&config, &data_dir).await? else {
            eprintln!(
                "error: `mcpproxy code run` runs scripts in a running mcpproxy, and none owns {}: \
                 start `mcpproxy serve` (with \"code_execution\": {{\"enabled\": true}}) first",
                data_dir.display()
            );
            return Ok(ExitCode::from(EXIT_FAILURE));
        };
        let wait = Duration::from_millis(
            self.timeout_ms
                .unwrap_or(config.code_execution.timeout.as_millis() as u64),
        ) + Duration::from_secs(60);
        let data = remote.post("/code/run", &body, wait).await?;
        let report: CodeReport =
            serde_json::from_value(data).context("the server's answer is not a script report")?;
        Ok(print_report(&report, self.output))
    }
}

fn print_report(report: &CodeReport, format: Format) -> ExitCode {
    if format == Format::Table {
        for line in &report.logs {
            eprintln!("{} {}", paint_err("log:", Some(Tone::Caution)), quote(line));
        }
        if report.logs_dropped > 0 {
            eprintln!("({} more log lines dropped)", report.logs_dropped);
        }
        if let Some(result) = &report.result {
            println!(
                "{}",
                serde_json::to_string_pretty(result).unwrap_or_default()
            );
        }
    } else if let Err(e) = print_data(report, format) {
        eprintln!("error: cannot print the report: {e}");
    }
    eprintln!(
        "{} tool calls, {} ms (activity {})",
        report.tool_calls, report.duration_ms, report.activity_id
    );
    match &report.error {
        None => ExitCode::SUCCESS,
        Some(error) => {
            eprintln!("{} {}", paint_err("error:", Some(Tone::Bad)), quote(error));
            ExitCode::from(EXIT_FAILURE)
        }
    }
}
