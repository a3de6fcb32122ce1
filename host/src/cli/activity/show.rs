//! `mcpproxy activity show ID`: every field of one record, escaped, or the record as JSON.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::Value;

use mcpproxy_activity::{RecordType, parse_record_id};
use mcpproxy_policy::OperationType;

use crate::cli::Globals;
use crate::cli::output::{Format, Wording, print_data, verdict_line};
use mcpproxy_support::quote;

use super::record::ShownRecord;
use super::render::subscription_method;
use super::store::{Source, Store, Trail, open_trail};

#[derive(Debug, Args)]
pub(in crate::cli) struct ShowCommand {
    #[command(flatten)]
    source: Source,
    /// The record's id (from `activity list`).
    id: String,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
    /// Look the record up in the cluster journal (`cluster.journal`, the ClickHouse sink's
    /// table): a record any replica wrote.
    #[arg(long)]
    cluster: bool,
}

impl ShowCommand {
    pub(super) async fn run(self, globals: &Globals) -> Result<ExitCode> {
        let store = open_trail(&self.source, globals, self.cluster).await?;
        // Not a record id (a ULID): no record can have it.
        if parse_record_id(&self.id).is_none() {
            bail!(no_record(&self.id));
        }
        let shown = match &store {
            Trail::Store(Store::Remote(remote)) => {
                let record = remote.get(&format!("/activity/{}", self.id), &[]).await?;
                if print_data(&record, self.output)? {
                    return Ok(ExitCode::SUCCESS);
                }
                ShownRecord::read(&record)
                    .context("the server's answer is not an activity record")?
            }
            Trail::Store(Store::Local(journal)) => {
                let Some(record) = journal.get(&self.id)? else {
                    bail!(no_record(&self.id));
                };
                // As a JSON value, whose keys print sorted, as a server's answer does.
                if print_data(&serde_json::to_value(&record)?, self.output)? {
                    return Ok(ExitCode::SUCCESS);
                }
                ShownRecord::from(record)
            }
            Trail::Cluster(cluster) => {
                let Some(record) = cluster.get(&self.id).await? else {
                    bail!(
                        "no activity record with id '{}' in the cluster journal at {}; \
                         `mcpproxy activity list --cluster` shows the ids (a replica's newest \
                         records reach it after its sink delivers them)",
                        self.id,
                        cluster.shown_url()
                    );
                };
                // As a JSON value, whose keys print sorted, as a server's answer does.
                if print_data(&serde_json::to_value(&record)?, self.output)? {
                    return Ok(ExitCode::SUCCESS);
                }
                ShownRecord::from(record)
            }
        };
        print_record(&shown);
        super::tree::print_inner_calls(&store, &shown.record).await?;
        Ok(ExitCode::SUCCESS)
    }
}

/// The error for an id no record has (the REST API says the same).
fn no_record(id: &str) -> String {
    format!("no activity record with id '{id}'; `mcpproxy activity list` shows the ids")
}

fn print_record(shown: &ShownRecord) {
    let record = &shown.record;
    // Every value may come from a caller, an upstream or a plugin: print it escaped.
    let text = |value: Option<&str>| quote(value.unwrap_or("-"));
    let server = quote(&record.server_name);
    let tool = quote(&record.tool_name);
    println!("ID:          {}", quote(&record.id));
    println!("Time:        {}", quote(&record.timestamp));
    println!(
        "Type:        {} (source: {})",
        quote(shown.type_name()),
        quote(record.source.as_str())
    );
    match shown.record_type() {
        Some(RecordType::PromptGet) => println!("Prompt:      {server}:{tool}"),
        Some(RecordType::Completion) => println!("Completes:   {server}:{tool}"),
        Some(RecordType::ServerChange) => println!(
            "Server:      {server} ({tool} by {})",
            text(
                record
                    .details
                    .as_ref()
                    .and_then(|d| d.get("actor"))
                    .and_then(Value::as_str)
            )
        ),
        Some(RecordType::Subscription) => match subscription_method(record) {
            Some(method @ "subscriptions/listen") => {
                println!("Stream:      {server} ({method})")
            }
            method => println!("Resource:    {server}:{tool} ({})", text(method)),
        },
        Some(RecordType::Approval) => println!("Approved:    {}", approved(record)),
        Some(RecordType::Egress) => println!("Connection:  {server} to {tool}"),
        _ => match record.tool_variant {
            Some(variant) => println!("Tool:        {server}:{tool} via {}", variant.tool_name()),
            None if tool.is_empty() => println!("Server:      {server}"),
            None => println!("Tool:        {server}:{tool}"),
        },
    }
    println!(
        "Status:      {}{}",
        quote(record.status.as_str()),
        if record.dry_run { " (dry run)" } else { "" }
    );
    println!("Duration:    {} ms", record.duration_ms);
    let intent = record.intent.clone().unwrap_or_default();
    println!("Intent:");
    println!(
        "  operation_type:   {}",
        text(intent.operation_type.map(OperationType::as_str))
    );
    println!(
        "  data_sensitivity: {}",
        text(intent.data_sensitivity.as_deref())
    );
    println!("  reason:           {}", text(intent.reason.as_deref()));
    // As a JSON value, whose keys print sorted, as they always have.
    let annotations = record
        .annotations
        .and_then(|a| serde_json::to_value(a).ok());
    println!(
        "Annotations: {} (from {}; safety class {})",
        json_text(annotations.as_ref()),
        quote(record.annotation_source.label()),
        quote(record.safety_class.as_str())
    );
    println!(
        "Verdict:     {}",
        // In the words its caller got: the CLI's advice names commands, an agent's names
        // MCP tools.
        verdict_line(
            &record.verdict,
            if record.source == mcpproxy_activity::Source::Cli {
                Wording::Cli
            } else {
                Wording::AsSent
            }
        )
    );
    for w in &record.verdict.warnings {
        println!("  warning from {}: {}", quote(&w.plugin), quote(&w.message));
    }
    println!(
        "Arguments:   {}{}",
        json_text(record.arguments.as_ref()),
        if record.arguments_truncated {
            " (truncated)"
        } else {
            ""
        }
    );
    println!("Response:    {} bytes", record.response_bytes);
    if !record.guards.is_empty() {
        println!("Guards:");
    }
    for g in &record.guards {
        println!(
            "  {}: {} {} ({})",
            quote(&g.plugin),
            g.action.as_str(),
            g.count,
            quote(&g.kinds.join(", "))
        );
    }
    if let Some(details) = record.details.as_ref().filter(|d| !d.is_null()) {
        println!("Details:     {}", json_text(Some(details)));
    }
    if let Some(error) = &record.error_message {
        println!("Error:       {}", quote(error));
    }
    println!(
        "Session:     {}  Request: {}",
        text(record.session_id.as_deref()),
        text(record.request_id.as_deref())
    );
    if let Some(parent) = &record.parent_id {
        println!(
            "Parent:      {} (`mcpproxy activity show` it)",
            quote(parent)
        );
    }
    if let Some(client) = &record.client {
        println!(
            "Client:      {} {}",
            quote(&client.name),
            quote(&client.version)
        );
    }
    if let Some(replica) = &record.replica {
        println!("Replica:     {}", quote(replica));
    }
    if let Some(identity) = &record.identity {
        if identity.groups.is_empty() {
            println!("Identity:    {}", quote(&identity.subject));
        } else {
            println!(
                "Identity:    {} (groups: {})",
                quote(&identity.subject),
                quote(&identity.groups.join(", "))
            );
        }
    }
}

/// What an approval record approved, and who: `server fs (quarantine cleared; 3 tools
/// pinned) by ann@host (cli)`, `tools fs:write_file by ...`, `how server fs starts (...)`.
fn approved(record: &mcpproxy_activity::ActivityRecord) -> String {
    let details = record.details.clone().unwrap_or(Value::Null);
    let server = quote(&record.server_name);
    let tools: Vec<String> = details["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|t| format!("{server}:{}", quote(t)))
        .collect();
    let what = if let Some(launch) = details["launch"].as_str() {
        format!("how server {server} starts ({})", quote(launch))
    } else if details["unquarantined"] == Value::Bool(true) {
        format!(
            "server {server} (quarantine cleared; {} tool{} pinned)",
            tools.len(),
            if tools.len() == 1 { "" } else { "s" }
        )
    } else if tools.is_empty() {
        format!("server {server}")
    } else {
        format!(
            "tool{} {}",
            if tools.len() == 1 { "" } else { "s" },
            tools.join(", ")
        )
    };
    match details["approved_by"].as_str() {
        Some(by) => format!("{what} by {}", quote(by)),
        None => what,
    }
}

/// A free-form JSON field of a record, escaped: `-` when absent, a string as itself,
/// anything else as compact JSON.
fn json_text(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "-".to_owned(),
        Some(Value::String(s)) => quote(s),
        Some(other) => quote(&other.to_string()),
    }
}
