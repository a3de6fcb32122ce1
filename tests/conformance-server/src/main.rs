//! `mcp-conformance-fixture`: an MCP server implementing the test tools,
//! prompts and resources of the MCP conformance suite's server scenarios
//! (`@modelcontextprotocol/conformance`), used to check that mcpproxy carries
//! everything MCP carries.
//!
//! ```text
//! mcp-conformance-fixture [--http ADDR] [--name NAME]
//! ```
//!
//! Without `--http` it speaks MCP over stdio and exits when stdin closes.
//! With `--http` it serves MCP streamable HTTP at `/mcp` (loopback `Host`
//! headers only, as the suite's DNS-rebinding scenario requires), prints
//! `MCP_FIXTURE_LISTENING http://<addr>/mcp` once listening, and exits on
//! SIGTERM or Ctrl-C. Logs always go to stderr.

mod changes;
mod completion;
mod diagnostics;
mod input;
mod logging;
mod media;
mod prompts;
mod resources;
mod server;
mod skills;
mod state;
mod tasks;
mod tools;

use std::{io::Write, sync::Arc};

use anyhow::Context as _;
use clap::Parser;
use rmcp::{
    ServiceExt,
    service::ServerInitializeError,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService, stdio,
        streamable_http_server::session::local::LocalSessionManager,
    },
};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

use crate::server::{Fixture, Shared};

/// An MCP server implementing the MCP conformance suite's server scenarios.
#[derive(Debug, Parser)]
#[command(name = "mcp-conformance-fixture", version)]
struct Cli {
    /// Serve MCP streamable HTTP at `/mcp` on this address (e.g. 127.0.0.1:0)
    /// instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// Implementation name reported in `initialize` and `server/discover`.
    #[arg(long, value_name = "NAME", default_value = "mcp-conformance-fixture")]
    name: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("mcp_conformance_fixture=info,rmcp=warn")),
        )
        .init();
    let name: Arc<str> = Arc::from(cli.name.as_str());
    let shared = Arc::new(Shared::new()?);
    match cli.http {
        Some(addr) => serve_http(name, shared, &addr).await,
        None => serve_stdio(Fixture::new(name, shared)).await,
    }
}

/// Serve one session over stdin/stdout until stdin reaches EOF.
async fn serve_stdio(fixture: Fixture) -> anyhow::Result<()> {
    tracing::info!("serving MCP on stdio");
    let running = match fixture.serve(stdio()).await {
        Ok(running) => running,
        Err(ServerInitializeError::ConnectionClosed(reason)) => {
            tracing::info!(%reason, "stdin closed before initialize");
            return Ok(());
        }
        Err(error) => return Err(error).context("MCP initialize over stdio failed"),
    };
    let reason = running
        .waiting()
        .await
        .context("stdio session task failed")?;
    tracing::info!(?reason, "stdio session ended");
    Ok(())
}

/// Serve streamable HTTP at `/mcp` until SIGTERM or Ctrl-C; each session gets
/// its own [`Fixture`].
async fn serve_http(name: Arc<str>, shared: Arc<Shared>, addr: &str) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    // The default config accepts loopback Host headers only (DNS-rebinding protection).
    let config =
        StreamableHttpServerConfig::default().with_cancellation_token(shutdown.child_token());
    let service = StreamableHttpService::new(
        move || Ok(Fixture::new(name.clone(), shared.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().nest_service("/mcp", service);

    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "MCP_FIXTURE_LISTENING http://{local}/mcp")?;
        stdout.flush()?;
    }
    tracing::info!(%local, "serving MCP streamable HTTP at /mcp");

    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            tracing::info!("shutting down");
            shutdown.cancel();
        })
        .await
        .context("HTTP server failed")
}

/// Resolve on Ctrl-C, or on SIGTERM where there is one.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
