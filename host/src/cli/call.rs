//! `mcpproxy call tool-read | tool-write | tool-destructive`: call an upstream tool from the
//! shell with the same intent model, pipeline and audit trail as agents. Through the running
//! server's REST API when one is up, else in-process with the same config and plugins.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use mcpproxy_activity::Source;
use mcpproxy_config as config;
use mcpproxy_policy::{OperationType, is_data_sensitivity};
use mcpproxy_server::mcp::LEGACY_CALL_TOOL_MESSAGE;
use mcpproxy_server::proxy::{CallContext, CallReport, Ending, parse_call, split_name};
use mcpproxy_server::runtime::Runtime;
use mcpproxy_support::quote;

use super::call_approval;
use super::output::{
    Format, Tone, Wording, cli_wording, paint_err, print_data, quote_lines, quote_message,
    verdict_line,
};
use super::remote::Remote;
use super::{EXIT_USAGE, Globals};

/// The policy rejected the call.
pub(super) const EXIT_REJECTED: u8 = 3;
/// The upstream could not be reached or failed.
pub(super) const EXIT_UPSTREAM: u8 = 4;
/// The tool answered with `isError: true`.
pub(super) const EXIT_TOOL_ERROR: u8 = 5;

#[derive(Debug, Subcommand)]
pub(super) enum CallCommand {
    /// Call a read-only tool (operation type: read).
    ToolRead(CallArgs),
    /// Call a tool that creates or changes things (operation type: write).
    ToolWrite(CallArgs),
    /// Call a tool that deletes or overwrites (operation type: destructive).
    ToolDestructive(CallArgs),
    /// Removed: use tool-read, tool-write or tool-destructive.
    #[command(hide = true)]
    Tool {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        rest: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub(super) struct CallArgs {
    /// The tool, as server:tool.
    #[arg(value_name = "SERVER:TOOL", required_unless_present = "tool_name")]
    tool: Option<String>,
    /// The tool, as server:tool (instead of the positional argument).
    #[arg(
        short = 't',
        long = "tool-name",
        value_name = "SERVER:TOOL",
        conflicts_with = "tool"
    )]
    tool_name: Option<String>,
    /// The tool's arguments as a JSON object.
    #[arg(
        short = 'j',
        long = "args",
        visible_alias = "json_args",
        value_name = "JSON"
    )]
    args: Option<String>,
    /// Why you make this call (recorded in the audit trail, at most 1000 characters).
    #[arg(long)]
    reason: Option<String>,
    /// The data's sensitivity: public, internal, private or unknown.
    #[arg(long)]
    sensitivity: Option<String>,
    /// Seconds to wait for the upstream.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// Show the verdict without calling the upstream (nothing changes; it is recorded).
    #[arg(long)]
    dry_run: bool,
    /// Approve the call in advance if a rule of `approvals` makes it wait for a person
    /// (recorded as `--yes`); without it a terminal is asked, else the call waits for
    /// `mcpproxy approvals approve`.
    #[arg(short = 'y', long)]
    yes: bool,
    /// Output: `table` (readable), or the tool's result as `json` (indented) or `jsonl`
    /// (one line); a call that did not reach the tool prints its report instead.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
    /// The config file.
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

impl CallCommand {
    pub(super) fn run(self, globals: &Globals) -> Result<ExitCode> {
        let (variant, args) = match self {
            Self::ToolRead(args) => (OperationType::Read, args),
            Self::ToolWrite(args) => (OperationType::Write, args),
            Self::ToolDestructive(args) => (OperationType::Destructive, args),
            Self::Tool { .. } => {
                eprintln!(
                    "error: `mcpproxy call tool` was removed. Use `mcpproxy call tool-read`, \
                     `mcpproxy call tool-write` or `mcpproxy call tool-destructive` SERVER:TOOL. \
                     ({LEGACY_CALL_TOOL_MESSAGE})"
                );
                return Ok(ExitCode::from(EXIT_USAGE));
            }
        };
        match args.request(variant) {
            Ok(request) => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()
                    .context("cannot start the async runtime")?;
                runtime.block_on(args.execute(globals, variant, request))
            }
            Err(message) => {
                eprintln!("error: {message}");
                Ok(ExitCode::from(EXIT_USAGE))
            }
        }
    }
}

impl CallArgs {
    /// The call as the MCP variants take it, checked for usage errors.
    fn request(&self, variant: OperationType) -> Result<Map<String, Value>, String> {
        let name = self
            .tool
            .clone()
            .or_else(|| self.tool_name.clone())
            .ok_or("give the tool as SERVER:TOOL")?;
        split_name(&name)?;
        let mut request = Map::new();
        request.insert("name".into(), Value::String(name));
        if let Some(text) = &self.args {
            match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(args)) => {
                    request.insert("args".into(), Value::Object(args));
                }
                Ok(_) => {
                    return Err(format!(
                        "--args must be a JSON object, like '{{\"id\": 7}}', not {text}"
                    ));
                }
                Err(e) => return Err(format!("--args is not valid JSON ({e}): {text}")),
            }
        }
        if let Some(sensitivity) = &self.sensitivity {
            if !is_data_sensitivity(sensitivity) {
                return Err(format!(
                    "invalid --sensitivity '{sensitivity}': must be public, internal, private, or unknown"
                ));
            }
            request.insert(
                "intent_data_sensitivity".into(),
                Value::String(sensitivity.clone()),
            );
        }
        if let Some(reason) = &self.reason {
            request.insert("intent_reason".into(), Value::String(reason.clone()));
        }
        if let Some(t) = self.timeout
            && !(t > 0.0 && t <= 3600.0)
        {
            return Err(format!(
                "--timeout {t} is not valid: give seconds from 0.001 to 3600"
            ));
        }
        // Same parser as the MCP tools, so the CLI accepts exactly what agents may send.
        parse_call(variant, &request)?;
        Ok(request)
    }

    async fn execute(
        &self,
        globals: &Globals,
        variant: OperationType,
        request: Map<String, Value>,
    ) -> Result<ExitCode> {
        let loaded = config::load(self.config.as_deref(), globals.home.as_deref())?;
        let config = loaded.config;
        let data_dir = globals.data_dir(config.data_dir.as_deref());
        let timeout = self.timeout.map(Duration::from_secs_f64);
        let request_id = call_approval::request_id();
        let answerer = call_approval::Answerer::of(self.yes);
        let report: CallReport = if let Some(remote) = Remote::find(&config, &data_dir).await? {
            let mut body = Value::Object(request);
            body["variant"] = json!(variant.as_str());
            body["dry_run"] = json!(self.dry_run);
            body["source"] = json!("cli");
            body["request_id"] = json!(request_id);
            if let Some(t) = timeout {
                body["timeout_ms"] = json!(t.as_millis().max(1) as u64);
            }
            // The call may wait for a person first, up to approvals.timeout_secs.
            let wait = timeout.unwrap_or(config.tool_call_timeout)
                + config.approvals.timeout
                + Duration::from_secs(30);
            let data = call_approval::answering(
                remote.post("/tools/call", &body, wait),
                &call_approval::RemoteApprovals(&remote),
                &request_id,
                answerer,
            )
            .await?;
            serde_json::from_value(data).context("the server's answer is not a call report")?
        } else {
            let input = parse_call(variant, &request).map_err(|e| anyhow!(e))?;
            let server = input.server.clone();
            if config.server(&server).is_none() {
                eprintln!("error: {}", config.unknown_server(&server));
                return Ok(ExitCode::from(EXIT_USAGE));
            }
            let runtime =
                Runtime::build_for_one(config, &data_dir, loaded.path.as_deref(), Some(&server))
                    .await?;
            let mut context = CallContext::new(Source::Cli);
            context.dry_run = self.dry_run;
            context.timeout = timeout;
            context.request_id = Some(request_id.clone());
            let report = call_approval::answering(
                runtime.proxy.call_reported(input, context),
                &call_approval::LocalApprovals(runtime.proxy.approvals()),
                &request_id,
                answerer,
            )
            .await;
            runtime.proxy.upstreams().shutdown().await;
            runtime.proxy.journal().flush().await?;
            report
        };
        Ok(print_report(&report, self.output))
    }
}

/// Prints the outcome and maps it to the exit status.
fn print_report(report: &CallReport, format: Format) -> ExitCode {
    if format != Format::Table {
        let shown = match (&report.outcome, &report.result) {
            (Ending::Success | Ending::ToolError, Some(result)) => result.clone(),
            _ => serde_json::to_value(report).unwrap_or(Value::Null),
        };
        if let Err(e) = print_data(&shown, format) {
            eprintln!("error: cannot print the result: {e}");
        }
    }
    let message = report.message.as_deref().unwrap_or("");
    match report.outcome {
        Ending::Success | Ending::ToolError => {
            if format == Format::Table
                && let Some(result) = &report.result
            {
                print_result(result);
            }
            for w in report.verdict.iter().flat_map(|v| &v.warnings) {
                eprintln!(
                    "{} ({}): {}",
                    paint_err("warning", Some(Tone::Caution)),
                    quote(&w.plugin),
                    quote(&w.message)
                );
            }
            if report.outcome == Ending::ToolError {
                eprintln!(
                    "{} {} answered with an error",
                    paint_err("error:", Some(Tone::Bad)),
                    quote(&report.tool)
                );
                ExitCode::from(EXIT_TOOL_ERROR)
            } else {
                ExitCode::SUCCESS
            }
        }
        Ending::Blocked => {
            let plugin = report
                .verdict
                .as_ref()
                .and_then(|v| v.plugin.as_deref())
                .unwrap_or("policy");
            eprintln!(
                "{} {}: {}",
                paint_err("rejected by", Some(Tone::Bad)),
                quote(plugin),
                quote_message(&cli_wording(message))
            );
            ExitCode::from(EXIT_REJECTED)
        }
        Ending::Refused => {
            eprintln!(
                "{} {}",
                paint_err("error:", Some(Tone::Bad)),
                quote_message(&cli_wording(message))
            );
            ExitCode::from(EXIT_USAGE)
        }
        Ending::Held => {
            eprintln!(
                "{} {}",
                paint_err("held:", Some(Tone::Caution)),
                quote_message(&cli_wording(message))
            );
            ExitCode::from(EXIT_REJECTED)
        }
        Ending::UpstreamError => {
            eprintln!(
                "{} {}",
                paint_err("error:", Some(Tone::Bad)),
                quote_message(&cli_wording(message))
            );
            ExitCode::from(EXIT_UPSTREAM)
        }
        Ending::DryRun => {
            if format == Format::Table {
                print_dry_run(report);
            }
            if report.allowed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_REJECTED)
            }
        }
    }
}

/// The result's content blocks; its `structuredContent` too, but only when it adds
/// something: MCP servers send a structured result a second time as text, whole or as its
/// values (`-o json` prints the result as it came).
fn print_result(result: &Value) {
    let mut texts = Vec::new();
    if let Some(content) = result["content"].as_array() {
        for block in content {
            match block["type"].as_str() {
                Some("text") => {
                    let text = block["text"].as_str().unwrap_or("");
                    println!("{}", quote_lines(text));
                    texts.push(text);
                }
                Some(kind) => println!("[{kind} content: {} bytes]", block.to_string().len()),
                None => println!("{block}"),
            }
        }
    }
    if let Some(structured) = result
        .get("structuredContent")
        .filter(|v| !v.is_null() && !already_said(v, &texts))
    {
        println!(
            "{}",
            quote_lines(&serde_json::to_string_pretty(structured).unwrap_or_default())
        );
    }
}

/// Whether the text blocks already say what `structured` holds: one of them is the same
/// JSON, or every value in it (strings, numbers, booleans) appears in them.
fn already_said(structured: &Value, texts: &[&str]) -> bool {
    if texts
        .iter()
        .any(|t| serde_json::from_str::<Value>(t).is_ok_and(|v| &v == structured))
    {
        return true;
    }
    fn leaves(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => map.values().for_each(|v| leaves(v, out)),
            Value::Array(items) => items.iter().for_each(|v| leaves(v, out)),
            Value::String(s) if s.trim().is_empty() => {}
            Value::String(s) => out.push(s.trim().to_owned()),
            Value::Number(n) => out.push(n.to_string()),
            Value::Bool(b) => out.push(b.to_string()),
            Value::Null => {}
        }
    }
    let mut values = Vec::new();
    leaves(structured, &mut values);
    !texts.is_empty()
        && values
            .iter()
            .all(|v| texts.iter().any(|t| t.contains(v.as_str())))
}

fn print_dry_run(report: &CallReport) {
    let verdict = report.verdict.clone().unwrap_or_default();
    println!(
        "Dry run: {} via {} (the upstream was not called)",
        report.tool,
        report.variant.tool_name()
    );
    println!("Arguments:    {}", report.arguments);
    let annotations = report
        .annotations
        .as_ref()
        .and_then(|a| serde_json::to_string(a).ok())
        .unwrap_or_else(|| "none".to_owned());
    let source = report
        .annotation_source
        .as_ref()
        .map_or("none", |s| s.label());
    match &report.annotation_reason {
        Some(reason) => println!("Annotations:  {annotations} (from {source}: {reason})"),
        None => println!("Annotations:  {annotations} (from {source})"),
    }
    println!("Safety class: {}", report.safety_class.unwrap_or_default());
    println!("Verdict:      {}", verdict_line(&verdict, Wording::Cli));
}

#[cfg(test)]
mod output_tests {
    use super::already_said;
    use serde_json::json;

    #[test]
    fn structured_content_the_text_already_says_is_not_repeated() {
        let listing = "[FILE] a.txt\n[DIR] b";
        assert!(already_said(&json!({"content": listing}), &[listing]));
        assert!(already_said(&json!({"status": "ok"}), &["ok"]));
        assert!(already_said(&json!({"n": 3}), &["{\"n\": 3}"]));
        assert!(!already_said(
            &json!({"status": "ok", "load": 0.7}),
            &["ok"]
        ));
        assert!(!already_said(&json!({"status": "ok"}), &[]));
    }
}
