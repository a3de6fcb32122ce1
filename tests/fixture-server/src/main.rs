//! `mcp-fixture`: a real MCP server used as mcpproxy's upstream in end-to-end
//! tests.
//!
//! ```text
//! mcp-fixture [--http ADDR] [--name NAME] [--call-log FILE] [--tool-overrides FILE]
//!             [--raw-tools FILE] [--leak SECRET]
//! ```
//!
//! Without `--http` it speaks MCP over stdio and exits when stdin closes.
//! With `--http` it serves MCP streamable HTTP at `/mcp`, prints
//! `MCP_FIXTURE_LISTENING http://<addr>/mcp` once listening, and exits on
//! SIGTERM or Ctrl-C. Logs always go to stderr.
//!
//! `--tool-overrides FILE` changes tool definitions at run time, like a rug
//! pull by the upstream: see [`overrides`] for the file format. The built-in
//! tool `announce_tools_changed` tells the client to list the tools again.
//! `--raw-tools FILE` adds tools/list entries written as raw JSON, malformed ones included:
//! see [`raw_tools`]. `--leak SECRET` adds a tool, a prompt and completions that return
//! the secret through every channel a client sees: see [`leaks`].

mod call_log;
mod leaks;
mod overrides;
mod raw_tools;
mod server;
mod tools;

use std::{io::Write, path::PathBuf, sync::Arc};

use anyhow::Context as _;
use axum::serve::ListenerExt as _;
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

use crate::{
    call_log::CallLog,
    raw_tools::{RawTools, Served},
    server::Fixture,
};

/// A real MCP server used as mcpproxy's test upstream.
#[derive(Debug, Parser)]
#[command(name = "mcp-fixture", version)]
struct Cli {
    /// Serve MCP streamable HTTP at `/mcp` on this address (e.g. 127.0.0.1:0)
    /// instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// Implementation name reported in `initialize` and by `get_status`.
    #[arg(long, value_name = "NAME", default_value = "mcp-fixture")]
    name: String,
    /// Append one JSON line `{"tool":..,"arguments":{..}}` per `tools/call`.
    #[arg(long, value_name = "FILE")]
    call_log: Option<PathBuf>,
    /// A JSON object mapping tool names to `{"description", "inputSchema",
    /// "annotations"}` overrides, re-read on every listing (a "rug pull").
    #[arg(long, value_name = "FILE")]
    tool_overrides: Option<PathBuf>,
    /// A JSON array of tools/list entries sent as written (malformed ones included),
    /// appended to every listing and re-read each time; calling one answers `raw NAME`.
    #[arg(long, value_name = "FILE")]
    raw_tools: Option<PathBuf>,
    /// Wait this long before serving (a slow server, as just after a proxy starts).
    #[arg(long, value_name = "MS")]
    startup_delay_ms: Option<u64>,
    /// Return SECRET through every channel a client sees: the `leak` tool, the `leaky`
    /// prompt and its completions (a test of the proxy's result guards).
    #[arg(long, value_name = "SECRET")]
    leak: Option<String>,
    /// Over stdio, keep running after stdin closes (a server that ignores EOF).
    #[arg(long)]
    ignore_eof: bool,
    /// Write this process's id to FILE at start.
    #[arg(long, value_name = "FILE")]
    pid_file: Option<PathBuf>,
    /// Over HTTP, answer 401 to every request whose `Authorization` is not
    /// `Bearer <the value of the environment variable VAR>` (a server that checks a token).
    #[arg(long, value_name = "VAR")]
    require_bearer_env: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("mcp_fixture=info,rmcp=warn")),
        )
        .init();

    if let Some(path) = &cli.pid_file {
        std::fs::write(path, std::process::id().to_string()).context("write the pid file")?;
    }
    if let Some(ms) = cli.startup_delay_ms {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    let raw_tools = cli.raw_tools.map(RawTools::new);
    let bearer = match &cli.require_bearer_env {
        Some(var) => Some(std::env::var(var).with_context(|| format!("{var} is not set"))?),
        None => None,
    };
    let fixture = Fixture::new(
        cli.name,
        cli.call_log.map(CallLog::new),
        cli.tool_overrides,
        raw_tools.clone(),
    )
    .with_leaks(cli.leak);
    let served = match cli.http {
        Some(addr) => serve_http(fixture, raw_tools, bearer, &addr).await,
        None => serve_stdio(Served::new(fixture, raw_tools)).await,
    };
    if cli.ignore_eof {
        tracing::info!("ignoring the end of stdin; running until killed");
        std::future::pending::<()>().await;
    }
    served
}

/// Serve one session over stdin/stdout until stdin reaches EOF.
async fn serve_stdio(fixture: Served) -> anyhow::Result<()> {
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

/// Serve streamable HTTP at `/mcp` until SIGTERM or Ctrl-C.
async fn serve_http(
    fixture: Fixture,
    raw_tools: Option<RawTools>,
    bearer: Option<String>,
    addr: &str,
) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    // A test fixture: accept any Host header so tests may use any address.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_cancellation_token(shutdown.child_token());
    let service = StreamableHttpService::new(
        move || Ok(fixture.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let mut router = axum::Router::new().nest_service("/mcp", service);
    if let Some(raw) = raw_tools {
        router = router.layer(axum::middleware::from_fn_with_state(
            raw,
            raw_tools::add_to_http_listings,
        ));
    }
    if let Some(token) = bearer {
        let expected = format!("Bearer {token}");
        router = router.layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let authorized = request
                    .headers()
                    .get("authorization")
                    .is_some_and(|v| v.as_bytes() == expected.as_bytes());
                async move {
                    if authorized {
                        next.run(request).await
                    } else {
                        axum::response::IntoResponse::into_response((
                            axum::http::StatusCode::UNAUTHORIZED,
                            "missing or wrong bearer token",
                        ))
                    }
                }
            },
        ));
    }

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

    // Small writes go out at once (as mcpproxy's listener sends them): with Nagle's algorithm
    // an event stream's second write waits for the client's delayed acknowledgement, ~40 ms,
    // whenever the client keeps its connection open.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
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
