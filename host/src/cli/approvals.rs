//! `mcpproxy approvals list|approve|deny`: the calls waiting for a person (`approvals` in
//! the config), and a person's answer to one, through the running server's REST API.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use mcpproxy_config as config;
use mcpproxy_server::proxy::PendingApproval;

use super::Globals;
use super::output::{Format, print_data};
use super::remote::Remote;

/// How long an answer may take to reach the server.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Subcommand)]
pub(super) enum ApprovalsCommand {
    /// The calls waiting for a person, oldest first: id, server and tool, arguments, who
    /// called, until when they wait.
    List(ListArgs),
    /// Approve one waiting call: it is sent to its server.
    Approve(AnswerArgs),
    /// Deny one waiting call: it is refused, and its caller told so.
    Deny(AnswerArgs),
}

#[derive(Debug, Args)]
pub(super) struct ListArgs {
    /// The config file (to find the running server).
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Output: `table` (readable), `json` or `jsonl`.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
}

#[derive(Debug, Args)]
pub(super) struct AnswerArgs {
    /// The approval's id, as `mcpproxy approvals list` shows it.
    id: String,
    /// Why, kept with the call's record.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    /// The config file (to find the running server).
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

impl ApprovalsCommand {
    pub(super) fn run(self, globals: &Globals) -> Result<ExitCode> {
        let runtime = crate::cli::runtime::current_thread()?;
        runtime.block_on(async {
            match self {
                Self::List(args) => {
                    let remote = server(args.config.as_deref(), globals).await?;
                    let data = remote.get("/approvals", &[]).await?;
                    let pending: Vec<PendingApproval> = serde_json::from_value(data.clone())
                        .context("the server's list of approvals is not one this mcpproxy reads")?;
                    if !print_data(&data, args.output)? {
                        print_pending(&pending);
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Self::Approve(args) => answer(args, true, globals).await,
                Self::Deny(args) => answer(args, false, globals).await,
            }
        })
    }
}

/// The running server of the config's data dir; an error saying how to start one.
async fn server(config_path: Option<&std::path::Path>, globals: &Globals) -> Result<Remote> {
    let loaded = config::load(config_path, globals.home.as_deref())?;
    let data_dir = globals.data_dir(loaded.config.data_dir.as_deref());
    match Remote::find(&loaded.config, &data_dir).await? {
        Some(remote) => Ok(remote),
        None => bail!(
            "no mcpproxy owns {}: calls wait for approval only in a running server (`mcpproxy \
             serve`), and none runs there",
            data_dir.display()
        ),
    }
}

async fn answer(args: AnswerArgs, approve: bool, globals: &Globals) -> Result<ExitCode> {
    let remote = server(args.config.as_deref(), globals).await?;
    post_answer(&remote, &args.id, approve, "cli", args.reason.as_deref()).await?;
    println!(
        "{} {}",
        if approve { "approved" } else { "denied" },
        args.id
    );
    Ok(ExitCode::SUCCESS)
}

/// Answers the approval `id` on the running server: `approve` or deny, by `by`, with an
/// optional reason.
pub(super) async fn post_answer(
    remote: &Remote,
    id: &str,
    approve: bool,
    by: &str,
    reason: Option<&str>,
) -> Result<()> {
    let verb = if approve { "approve" } else { "deny" };
    let mut body = json!({ "by": by });
    if let Some(reason) = reason {
        body["reason"] = Value::String(reason.to_owned());
    }
    // Everything but RFC 3986's unreserved characters is escaped: one path segment.
    let path = format!(
        "/approvals/{}/{verb}",
        mcpproxy_config::reference::encode_query_value(id)
    );
    remote.post(&path, &body, ANSWER_TIMEOUT).await?;
    Ok(())
}

fn print_pending(pending: &[PendingApproval]) {
    if pending.is_empty() {
        println!("no call waits for approval");
        return;
    }
    for p in pending {
        println!(
            "{}  {}:{}  {} ({})  asked {}  waits until {}",
            p.id,
            mcpproxy_support::quote(&p.server),
            mcpproxy_support::quote(&p.tool),
            p.class,
            p.variant,
            p.asked_at,
            p.expires_at
        );
        let who = match (&p.caller, &p.client) {
            (Some(caller), _) => format!("caller {}", mcpproxy_support::quote(caller)),
            (None, Some(client)) => format!("client {}", mcpproxy_support::quote(client)),
            (None, None) => "an unnamed caller".to_owned(),
        };
        println!("    by {who}; arguments {}", p.arguments);
        if let Some(intent) = &p.intent {
            println!("    intent {intent}");
        }
    }
}
