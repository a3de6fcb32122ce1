//! `mcpproxy tools search` and `mcpproxy tools list`: the same results as `retrieve_tools`,
//! as a table. Through the running server when one is up, else in-process.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use mcpproxy_server::proxy::{RetrievedTool, Withheld};
use mcpproxy_upstream::ServerStatus;

use super::Globals;
use super::output::{Fit, Format, print_data, print_note, print_table_fit};
use super::remote::Remote;
use mcpproxy_server::runtime::Runtime;

#[derive(Debug, Subcommand)]
pub(super) enum ToolsCommand {
    /// BM25 search over every upstream tool.
    Search(SearchArgs),
    /// Every upstream tool (or one server's).
    List(ListArgs),
}

#[derive(Debug, Args)]
pub(super) struct SearchArgs {
    /// What you want to do, in words.
    query: String,
    /// How many results (1 to 100).
    #[arg(short = 'n', long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=100))]
    limit: u64,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
pub(super) struct ListArgs {
    /// Only this server's tools.
    #[arg(long)]
    server: Option<String>,
    #[command(flatten)]
    common: Common,
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

impl ToolsCommand {
    pub(super) fn run(self, globals: &Globals) -> Result<ExitCode> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        runtime.block_on(async {
            let (common, listing) = match &self {
                Self::Search(args) => (
                    &args.common,
                    fetch(globals, &args.common, Some((&args.query, args.limit)), None).await?,
                ),
                Self::List(args) => (
                    &args.common,
                    fetch(globals, &args.common, None, args.server.clone()).await?,
                ),
            };
            print(
                &listing.tools,
                common.output,
                matches!(self, Self::Search(_)),
            )?;
            Ok(say_withheld(&listing, &self))
        })
    }
}

/// A listing and what it leaves out.
struct Listing {
    tools: Vec<RetrievedTool>,
    withheld: Withheld,
}

/// Says on stderr what the listing leaves out (quarantined servers, held tools) and how a
/// person approves it. A `tools list --server NAME` whose server waits for approval exits
/// with 3, as a held call does, so a script sees why the list is empty; otherwise 0.
fn say_withheld(listing: &Listing, command: &ToolsCommand) -> ExitCode {
    let Some(note) = listing.withheld.note() else {
        return ExitCode::SUCCESS;
    };
    print_note(&note);
    match command {
        ToolsCommand::List(ListArgs {
            server: Some(_), ..
        }) if !listing.withheld.servers.is_empty() => ExitCode::from(super::call::EXIT_REJECTED),
        _ => ExitCode::SUCCESS,
    }
}

async fn fetch(
    globals: &Globals,
    common: &Common,
    search: Option<(&str, u64)>,
    server: Option<String>,
) -> Result<Listing> {
    let (loaded, owner) =
        match super::remote::Reading::load(globals, common.config.as_deref()).await? {
            super::remote::Reading::Config(loaded) => (Some(*loaded), None),
            super::remote::Reading::Owner(remote) => (None, Some(remote)),
        };
    let config = loaded
        .as_ref()
        .map(|l| l.config.clone())
        .unwrap_or_default();
    let data_dir = globals.data_dir(config.data_dir.as_deref());
    let remote = match owner {
        Some(remote) => Some(remote),
        None => Remote::find(&config, &data_dir).await?,
    };
    if let Some(remote) = remote {
        let data = match (search, &server) {
            (Some((q, n)), _) => {
                remote
                    .get(
                        "/tools/search",
                        &[("q", q.to_owned()), ("limit", n.to_string())],
                    )
                    .await?
            }
            (None, Some(s)) => remote.get("/tools", &[("server", s.clone())]).await?,
            (None, None) => remote.get("/tools", &[]).await?,
        };
        let tools = serde_json::from_value(data["tools"].clone())
            .context("the server's answer is not a tool list")?;
        let statuses: Vec<ServerStatus> =
            serde_json::from_value(remote.get("/upstreams", &[]).await?)
                .context("the server's answer is not an upstream list")?;
        return Ok(Listing {
            tools,
            withheld: Withheld::of(&statuses, server.as_deref()),
        });
    }
    if let Some(name) = &server
        && config.server(name).is_none()
    {
        bail!("unknown server '{name}'");
    }
    let config_path = loaded.and_then(|l| l.path);
    let runtime =
        Runtime::build_for_one(config, &data_dir, config_path.as_deref(), server.as_deref())
            .await?;
    let tools = match search {
        Some((q, n)) => runtime.proxy.retrieve(q.to_owned(), n as usize).await,
        None => runtime.proxy.list_tools(server.clone()).await,
    };
    let withheld = Withheld::of(&runtime.proxy.upstreams().statuses(), server.as_deref());
    runtime.proxy.upstreams().shutdown().await;
    Ok(Listing {
        tools: tools.map_err(|e| anyhow::anyhow!(e))?,
        withheld,
    })
}

fn print(tools: &[RetrievedTool], format: Format, with_score: bool) -> Result<()> {
    if print_data(tools, format)? {
        return Ok(());
    }
    if tools.is_empty() {
        eprintln!("no tools found");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = tools
        .iter()
        .map(|t| {
            let mut row = vec![
                t.name.clone(),
                t.call_with.clone(),
                flags(t.annotations.as_ref()),
                t.annotation_source.clone(),
            ];
            if with_score {
                row.push(format!("{:.2}", t.score));
            }
            row
        })
        .collect();
    let header: &[&str] = if with_score {
        &["NAME", "CALL_WITH", "FLAGS", "SOURCE", "SCORE"]
    } else {
        &["NAME", "CALL_WITH", "FLAGS", "SOURCE"]
    };
    print_table_fit(
        header,
        &rows,
        |_, _| None,
        Fit {
            readable: None,
            keep: &[0],
            ends: &[],
        },
    );
    Ok(())
}

/// A tool's effective annotations as short flags (`ro`, `destructive`, `idempotent`,
/// `open-world`; `-` for none): the hints set to true. `-o json` has them whole.
fn flags(annotations: Option<&mcpproxy_policy::Annotations>) -> String {
    let Some(a) = annotations else {
        return "-".to_owned();
    };
    let flags: Vec<&str> = [
        (a.read_only_hint, "ro"),
        (a.destructive_hint, "destructive"),
        (a.idempotent_hint, "idempotent"),
        (a.open_world_hint, "open-world"),
    ]
    .into_iter()
    .filter(|(hint, _)| *hint == Some(true))
    .map(|(_, flag)| flag)
    .collect();
    if flags.is_empty() {
        "-".to_owned()
    } else {
        flags.join(",")
    }
}
