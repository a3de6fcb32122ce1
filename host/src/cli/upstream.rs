//! `mcpproxy upstream list | inspect NAME | approve NAME [--tool T]`: review quarantined
//! servers and tools that changed since approval, and approve them (the commands that
//! change servers are in [`super::servers`]). Through the running
//! server when one is up (approval takes effect there at once), else in-process on the data
//! dir (the server is connected to list its tools).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Subcommand};
use serde_json::json;

use mcpproxy_activity::Source;
use mcpproxy_server::runtime::Runtime;
use mcpproxy_support::quote;
use mcpproxy_trust::Analysis;
use mcpproxy_upstream::{Approval, ServerStatus};

use super::Globals;
use super::output::{Format, Tone, print_data, print_table_toned, print_wrapped};
use super::remote::Remote;
use super::states::{print_state_details, state_word};

#[derive(Debug, Subcommand)]
pub(super) enum UpstreamCommand {
    /// Every upstream: state, tools, quarantine, tools held since they changed.
    List(Common),
    /// The security analysis of one server: its tools, what changed, what the scanner found.
    Inspect(InspectArgs),
    /// Approve a server (clears its quarantine, accepts every tool as it is now), or with
    /// --tool, accept those tools' changes. Approving how a server starts (a server not
    /// started) names the launch reviewed: --fingerprint F (from `inspect`), or confirm the
    /// launch shown when run in a terminal.
    Approve(ApproveArgs),
    /// Add a server (quarantined until approved): `add NAME -- COMMAND ARGS...` or
    /// `add NAME --url URL`.
    Add(super::servers::AddArgs),
    /// Change a server's command and arguments, environment, sandbox grants and network, or
    /// URL and headers: shows the change, then makes it and approves the launch it shows.
    Edit(super::upstream_edit::EditArgs),
    /// Remove a server from the config (its session ends, its process stops).
    Remove(super::servers::NameArgs),
    /// Enable a server.
    Enable(super::servers::NameArgs),
    /// Disable a server (kept in the config, not connected).
    Disable(super::servers::NameArgs),
    /// End a server's session and start a new one (a new process for a stdio server).
    Restart(super::servers::NameArgs),
    /// A server's recent stderr lines (stdio servers), from the running mcpproxy.
    Logs(super::servers::LogsArgs),
    /// Import the servers of a Claude Desktop, Cursor or VS Code config file (quarantined);
    /// shows what would be added unless --yes.
    Import(super::servers::ImportArgs),
    /// Log in to an HTTP server that asks for an OAuth login (opens a browser).
    Login(super::login::LoginArgs),
    /// Forget an HTTP server's OAuth tokens.
    Logout(super::login::LogoutArgs),
}

#[derive(Debug, Args)]
pub(super) struct Common {
    /// Output format.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
    /// The config file.
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(super) struct InspectArgs {
    /// The server's name in mcp_config.json.
    name: String,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
pub(super) struct ApproveArgs {
    /// The server's name in mcp_config.json.
    name: String,
    /// Accept only this tool's change (repeatable); without it the whole server is approved.
    #[arg(long = "tool", value_name = "TOOL")]
    tools: Vec<String>,
    /// Approve only how the server starts (command, args, env, url): it starts and lists its
    /// tools, still quarantined, so you can inspect them before approving its calls.
    #[arg(long, conflicts_with = "tools")]
    launch_only: bool,
    /// The fingerprint of the launch you reviewed (`mcpproxy upstream inspect NAME` shows it
    /// after "Fingerprint:"). Needed to approve how a server starts: if the launch changed
    /// since, nothing is approved and what changed is shown. In a terminal, without it, the
    /// launch is shown and you confirm it.
    #[arg(long, value_name = "F")]
    fingerprint: Option<String>,
    #[command(flatten)]
    common: Common,
}

/// Where the answers come from.
enum Backend {
    Remote(Remote),
    Local(Box<Runtime>),
}

impl UpstreamCommand {
    pub(super) fn run(self, globals: &Globals) -> Result<ExitCode> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        runtime.block_on(async {
            match self {
                Self::Add(args) => super::servers::add(globals, args).await,
                Self::Remove(args) => super::servers::remove(globals, args).await,
                Self::Edit(args) => super::upstream_edit::edit(globals, args).await,
                Self::Enable(args) => super::servers::set_enabled(globals, args, true).await,
                Self::Disable(args) => super::servers::set_enabled(globals, args, false).await,
                Self::Restart(args) => super::servers::restart(globals, args).await,
                Self::Logs(args) => super::servers::logs(globals, args).await,
                Self::Import(args) => super::servers::import(globals, args).await,
                Self::Login(args) => super::login::login(globals, args).await,
                Self::Logout(args) => super::login::logout(globals, args).await,
                Self::List(common) => {
                    let backend = open(globals, &common, None).await?;
                    let statuses: Vec<ServerStatus> = match &backend {
                        Backend::Remote(remote) => {
                            serde_json::from_value(remote.get("/upstreams", &[]).await?)
                                .context("the server's answer is not an upstream list")?
                        }
                        Backend::Local(runtime) => runtime.proxy.upstreams().statuses(),
                    };
                    close(backend).await;
                    print_list(&statuses, common.output)?;
                    Ok(ExitCode::SUCCESS)
                }
                Self::Inspect(args) => {
                    let backend = open(globals, &args.common, Some(&args.name)).await?;
                    let analysis = analysis_of(&backend, &args.name).await;
                    close(backend).await;
                    let analysis = analysis?;
                    if !print_data(&analysis, args.common.output)? {
                        print_wrapped(&analysis.to_text());
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Self::Approve(args) => {
                    let backend = open(globals, &args.common, Some(&args.name)).await?;
                    let tools = (!args.tools.is_empty()).then(|| args.tools.clone());
                    let by = approver();
                    let fingerprint = match &args.fingerprint {
                        Some(given) => Some(given.clone()),
                        None if tools.is_none() && std::io::stdin().is_terminal() => {
                            let analysis = analysis_of(&backend, &args.name).await?;
                            confirm_launch(&analysis)?
                        }
                        None => None,
                    };
                    let approval: Approval = match &backend {
                        Backend::Remote(remote) => serde_json::from_value(
                            remote
                                .post(
                                    &format!("/upstreams/{}/approve", args.name),
                                    &json!({
                                        "tools": tools,
                                        "approved_by": by,
                                        "launch_only": args.launch_only,
                                        "fingerprint": fingerprint,
                                    }),
                                    Duration::from_secs(30),
                                )
                                .await?,
                        )
                        .context("the server's answer is not an approval")?,
                        Backend::Local(runtime) => {
                            let result = runtime
                                .proxy
                                .approve(
                                    &args.name,
                                    tools,
                                    &by,
                                    Source::Cli,
                                    args.launch_only,
                                    fingerprint.as_deref(),
                                )
                                .await;
                            result.map_err(|e| anyhow!(e))?
                        }
                    };
                    close(backend).await;
                    if !print_data(&approval, args.common.output)? {
                        print_approval(&approval);
                    }
                    Ok(ExitCode::SUCCESS)
                }
            }
        })
    }
}

/// The running server, or the proxy built here for `server` (or every server).
async fn open(globals: &Globals, common: &Common, server: Option<&str>) -> Result<Backend> {
    let loaded = match super::remote::Reading::load(globals, common.config.as_deref()).await? {
        super::remote::Reading::Config(loaded) => *loaded,
        super::remote::Reading::Owner(remote) => return Ok(Backend::Remote(remote)),
    };
    let config = loaded.config;
    // In a cluster the servers and their approvals are the cluster's, not the file's.
    let clustered = config.cluster.postgres.is_some();
    if let Some(name) = server
        && !clustered
        && config.server(name).is_none()
    {
        bail!("{}", config.unknown_server(name));
    }
    let data_dir = globals.data_dir(config.data_dir.as_deref());
    if let Some(remote) = Remote::find(&config, &data_dir).await? {
        return Ok(Backend::Remote(remote));
    }
    if clustered {
        bail!(
            "this config has cluster.postgres: the servers and their approvals are the \
             cluster's, so this runs against a running replica (start one on this data dir \
             with `mcpproxy serve`, or use the REST API of any replica)"
        );
    }
    let runtime = Runtime::build_for_one(config, &data_dir, loaded.path.as_deref(), server).await?;
    Ok(Backend::Local(Box::new(runtime)))
}

/// The security analysis of `server`, from the running server or the proxy built here.
async fn analysis_of(backend: &Backend, server: &str) -> Result<Analysis> {
    Ok(match backend {
        Backend::Remote(remote) => serde_json::from_value(
            remote
                .get(&format!("/upstreams/{server}/analysis"), &[])
                .await?,
        )
        .context("the server's answer is not an analysis")?,
        Backend::Local(runtime) => runtime
            .proxy
            .analysis(server)
            .await
            .map_err(|e| anyhow!(e))?,
    })
}

/// In a terminal, before an approval without `--fingerprint`: when it would approve how the
/// server starts, shows that launch and asks; the fingerprint of the launch confirmed, so a
/// launch changed after it was shown is refused. `None` when no launch is approved.
fn confirm_launch(analysis: &Analysis) -> Result<Option<String>> {
    if analysis.launch_approved {
        return Ok(None);
    }
    eprintln!(
        "Approving '{}' approves how it starts:",
        quote(&analysis.server)
    );
    eprintln!("  Launch: {}", analysis.launch);
    for change in &analysis.launch_changes {
        eprintln!("  changed since it was approved: {change}");
    }
    eprintln!("  Fingerprint: {}", analysis.launch_fingerprint);
    eprint!("Approve this launch? [y/N] ");
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .context("cannot read the answer")?;
    if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
        bail!(
            "nothing was approved (the answer was not yes); to approve this launch without a question: `mcpproxy upstream approve {} --fingerprint {}`",
            quote(&analysis.server),
            analysis.launch_fingerprint
        );
    }
    Ok(Some(analysis.launch_fingerprint.clone()))
}

async fn close(backend: Backend) {
    if let Backend::Local(runtime) = backend {
        runtime.shutdown().await;
    }
}

/// Who approves from this terminal: `$USER@host`, for the activity record.
fn approver() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("USERNAME"))
        .unwrap_or_else(|_| "unknown".to_owned());
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    let who = if host.is_empty() {
        format!("{user} (cli)")
    } else {
        format!("{user}@{host} (cli)")
    };
    who.chars().filter(|c| !c.is_control()).take(128).collect()
}

fn print_list(statuses: &[ServerStatus], format: Format) -> Result<()> {
    if print_data(statuses, format)? {
        return Ok(());
    }
    if statuses.is_empty() {
        println!("no upstream servers are configured");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = statuses
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                state_word(&s.state).to_owned(),
                s.tools.to_string(),
                if s.quarantined { "yes" } else { "no" }.to_owned(),
                if s.pending.is_empty() {
                    "-".to_owned()
                } else {
                    s.pending
                        .iter()
                        .map(|t| quote(t))
                        .collect::<Vec<_>>()
                        .join(", ")
                },
                s.sandbox
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |sandbox| quote(&sandbox.brief())),
            ]
        })
        .collect();
    print_table_toned(
        &["NAME", "STATE", "TOOLS", "QUARANTINED", "HELD", "SANDBOX"],
        &rows,
        |column, cell| match (column, cell) {
            (1, state) => Tone::of_word(state),
            (3, "yes") => Some(Tone::Caution),
            (5, "OFF") => Some(Tone::Caution),
            _ => None,
        },
    );
    print_state_details(statuses);
    Ok(())
}

fn print_approval(approval: &Approval) {
    if let Some(launch) = &approval.launch {
        println!(
            "approved how server '{}' starts ({launch}; fingerprint {}); it starts now{}",
            approval.server,
            approval.launch_fingerprint.as_deref().unwrap_or("-"),
            if approval.unquarantined {
                ", and its tools are pinned as it first lists them"
            } else {
                ", quarantined: review its tools with `mcpproxy upstream inspect` and approve it again"
            }
        );
    } else if approval.unquarantined {
        println!(
            "approved server '{}': quarantine cleared, {} tool{} pinned as they are now{}",
            approval.server,
            approval.tools.len(),
            if approval.tools.len() == 1 { "" } else { "s" },
            approval
                .launch_fingerprint
                .as_deref()
                .map(|f| format!(" (launch fingerprint {f})"))
                .unwrap_or_default()
        );
    } else {
        println!(
            "approved on '{}': {}",
            approval.server,
            approval
                .tools
                .iter()
                .map(|t| quote(t))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}
