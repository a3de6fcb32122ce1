//! `mcpproxy tools search` and `mcpproxy tools list`: the same results as `retrieve_tools`,
//! as a table. Through the running server when one is up, else in-process.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use crate::config;
use crate::proxy::RetrievedTool;

use super::Globals;
use super::output::{Format, print_data, print_table};
use super::remote::Remote;
use crate::runtime::Runtime;

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
            let (common, tools) = match &self {
                Self::Search(args) => (
                    &args.common,
                    fetch(globals, &args.common, Some((&args.query, args.limit)), None).await?,
                ),
                Self::List(args) => (
                    &args.common,
                    fetch(globals, &args.common, None, args.server.clone()).await?,
                ),
            };
            print(&tools, common.output, matches!(self, Self::Search(_)))?;
            Ok(ExitCode::SUCCESS)
        })
    }
}

async fn fetch(
    globals: &Globals,
    common: &Common,
    search: Option<(&str, u64)>,
    server: Option<String>,
) -> Result<Vec<RetrievedTool>> {
    let loaded = config::load(common.config.as_deref(), globals.home.as_deref())?;
    let config = loaded.config;
    let data_dir = globals.data_dir(config.data_dir.as_deref());
    if let Some(remote) = Remote::find(&config, &data_dir).await? {
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
        return serde_json::from_value(data["tools"].clone())
            .context("the server's answer is not a tool list");
    }
    if let Some(name) = &server
        && config.server(name).is_none()
    {
        bail!("unknown server '{name}'");
    }
    let runtime =
        Runtime::build_for_one(config, &data_dir, loaded.path.as_deref(), server.as_deref())
            .await?;
    let tools = match search {
        Some((q, n)) => runtime.proxy.retrieve(q.to_owned(), n as usize).await,
        None => runtime.proxy.list_tools(server).await,
    };
    runtime.proxy.upstreams().shutdown().await;
    tools.map_err(|e| anyhow::anyhow!(e))
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
            let annotations = t.annotations.as_ref().map_or("-".to_owned(), |a| {
                serde_json::to_value(a)
                    .map(|v| v.to_string())
                    .unwrap_or_default()
            });
            let mut row = vec![
                t.name.clone(),
                t.call_with.clone(),
                format!("{} ({})", annotations, t.annotation_source),
            ];
            if with_score {
                row.push(format!("{:.2}", t.score));
            }
            row
        })
        .collect();
    let header: &[&str] = if with_score {
        &["NAME", "CALL_WITH", "ANNOTATIONS (SOURCE)", "SCORE"]
    } else {
        &["NAME", "CALL_WITH", "ANNOTATIONS (SOURCE)"]
    };
    print_table(header, &rows);
    Ok(())
}
