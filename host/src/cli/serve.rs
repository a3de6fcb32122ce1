//! `mcpproxy serve`: load the config and plugins, connect the upstreams, and serve MCP on
//! `http://<listen>/mcp` (or on stdio with `--stdio`) until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;
use tokio_util::sync::CancellationToken;

use mcpproxy_config::{self as config, is_secret_text};
use mcpproxy_policy::is_plugin_name;
use mcpproxy_server::Server;
use mcpproxy_server::serve::{Notice, Summary, Transport};

use super::Globals;

/// Sets (or replaces) `http.auth_token`, so the token need not be written in the file.
const AUTH_TOKEN_ENV: &str = "MCPPROXY_AUTH_TOKEN";

#[derive(Debug, Args)]
pub(super) struct ServeCommand {
    /// The config file [default: ~/.mcpproxy/mcp_config.json; none there means defaults].
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,

    /// Where to listen for MCP over HTTP [default: the config's `listen`, 127.0.0.1:8080].
    #[arg(long, env = "MCPPROXY_LISTEN", value_name = "ADDR")]
    listen: Option<SocketAddr>,

    /// A directory of *.wasm plugins, loaded after (and replacing) the embedded ones.
    #[arg(long, value_name = "DIR")]
    plugins: Option<PathBuf>,

    /// Serve MCP on stdin/stdout instead of HTTP (for IDEs that spawn their servers).
    #[arg(long)]
    stdio: bool,

    /// With --stdio: serve one upstream's tools, prompts and resources under their own
    /// names (every call still judged and recorded), as /mcp/servers/NAME does over HTTP.
    #[arg(long, value_name = "NAME", requires = "stdio")]
    server: Option<String>,

    /// Feed the activity journal to this sink plugin too (repeatable; adds to the config's
    /// `plugins.sinks`; its settings come from `plugins.settings.NAME`).
    #[arg(long = "sink", value_name = "NAME")]
    sinks: Vec<String>,

    /// Threads serving MCP and the upstream connections [default: half the cores, at
    /// least one]. Policy plugins loaded with --plugins, sinks and the journal writer run
    /// on threads of their own besides.
    #[arg(long, env = "MCPPROXY_WORKER_THREADS", value_name = "N")]
    worker_threads: Option<NonZeroUsize>,
}

/// The async runtime's worker threads when `--worker-threads` is not given: half of
/// `cores`, at least one. A call's own work on these threads is small (parsing, the
/// embedded policy plugins, a write to the upstream); every extra worker mostly adds
/// hand-offs between threads, and the other cores serve the upstream processes, the
/// journal writer and the blocking pool. On 2 cores one worker switched threads 6 times a
/// call instead of 11 and answered a lone call ~7% sooner than two, for ~10% fewer calls
/// per second at 16 in flight (docs/benchmarks.md): a proxy in front of one person's IDE
/// waits on single calls far more often than it serves sixteen at once.
fn default_worker_threads(cores: usize) -> usize {
    (cores / 2).max(1)
}

impl ServeCommand {
    pub(super) fn run(self, globals: &Globals) -> Result<ExitCode> {
        // Before any thread starts: a thread's first allocation picks its arena.
        mcpproxy_plugin_host::limit_malloc_arenas();
        let loaded = config::load(self.config.as_deref(), globals.home.as_deref());
        // The trace exporter's client and thread are made outside the async runtime.
        let traces = match loaded
            .as_ref()
            .ok()
            .and_then(|l| l.config.telemetry.otlp.as_ref())
        {
            Some(otlp) => Some(mcpproxy_server::telemetry::TraceExport::start(otlp)?),
            None => None,
        };
        super::init_logging(globals.verbose, true, traces.as_ref());
        if let Some(traces) = &traces {
            tracing::info!("exporting traces to {}", traces.url());
        }
        let workers = self.worker_threads.map_or_else(
            || {
                let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
                default_worker_threads(cores)
            },
            NonZeroUsize::get,
        );
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .worker_threads(workers)
            .thread_name("mcpproxy")
            .build()
            .context("cannot start the async runtime")?;
        let served = runtime.block_on(self.serve(globals, loaded?));
        drop(runtime);
        // A serve that ended before its summary (an error) shows the lines it held.
        super::startup_log::release();
        if let Some(traces) = traces {
            traces.shutdown();
        }
        served?;
        Ok(ExitCode::SUCCESS)
    }

    async fn serve(self, globals: &Globals, loaded: config::Loaded) -> Result<()> {
        for name in &self.sinks {
            if !is_plugin_name(name) {
                bail!(
                    "--sink '{name}' is not a plugin name: use lowercase letters, digits and '-'"
                );
            }
            if let Some(problem) = loaded.config.plugins.sink_grant_problem(name) {
                bail!("--sink {name}: {problem}");
            }
        }
        let data_dir = globals.data_dir(loaded.config.data_dir.as_deref());
        let transport = if self.stdio {
            Transport::Stdio {
                server: self.server.clone(),
            }
        } else {
            Transport::Http {
                listen: self.listen.unwrap_or(loaded.config.listen),
            }
        };
        let shutdown = CancellationToken::new();
        tokio::spawn(signal_shutdown(shutdown.clone()));
        let config_path = loaded.path.clone();
        let mut server = Server::builder(loaded.config, data_dir)
            .config_path(loaded.path)
            .home(globals.home.clone())
            .plugins_dir(self.plugins.clone())
            .extra_sinks(&self.sinks)
            .transport(transport)
            .on_notice(move |notice| show(&notice, config_path.as_deref()))
            .shutdown(shutdown);
        if !self.stdio
            && let Some(token) = auth_token_from_env()?
        {
            server = server.auth_token(token);
        }
        server.serve().await?;
        Ok(())
    }
}

/// The bearer token of `MCPPROXY_AUTH_TOKEN`, when it is set.
fn auth_token_from_env() -> Result<Option<String>> {
    let Some(token) = std::env::var_os(AUTH_TOKEN_ENV) else {
        return Ok(None);
    };
    let token = token
        .into_string()
        .ok()
        .filter(|t| is_secret_text(t) && t.len() >= 16)
        .with_context(|| {
            format!(
                "{AUTH_TOKEN_ENV} must be at least 16 characters with no spaces or control characters"
            )
        })?;
    Ok(Some(token))
}

/// Shows a server's notice on stderr.
fn show(notice: &Notice, config_path: Option<&Path>) {
    let version = env!("CARGO_PKG_VERSION");
    match notice {
        Notice::Forwarding { data_dir, server } => eprintln!(
            "mcpproxy {version}: {} is owned by a running mcpproxy; this stdio session is forwarded to it (its upstreams, journal and policy){}",
            data_dir.display(),
            server
                .as_ref()
                .map(|s| format!(", serving upstream {s}'s own endpoint"))
                .unwrap_or_default()
        ),
        Notice::Relaying { data_dir, bound } => {
            eprintln!(
                "{} is owned by a running mcpproxy (serving stdio); this one relays HTTP to it, and takes over if it stops",
                data_dir.display()
            );
            eprintln!("mcpproxy {version} listening on http://{bound}/mcp");
        }
        Notice::TookOver { data_dir } => eprintln!(
            "mcpproxy {version}: the owner of {} stopped; this process took the data dir over and owns it now (its upstreams start here; clients of the old owner initialize again)",
            data_dir.display()
        ),
        Notice::ServingStdio { data_dir, control } => match control {
            Some(path) => eprintln!(
                "mcpproxy {version} serving MCP on stdio; other mcpproxy processes on {} use it through {}",
                data_dir.display(),
                path.display()
            ),
            None => eprintln!("mcpproxy {version} serving MCP on stdio"),
        },
        Notice::Listening { bound } => {
            eprintln!("mcpproxy {version} listening on http://{bound}/mcp");
            eprintln!("page: http://{bound}/ (`mcpproxy api-key` prints the key it asks for)");
        }
        Notice::Started(summary) => show_summary(summary, config_path),
        Notice::ShuttingDown => {
            eprintln!("shutting down: closing upstream sessions, flushing the activity journal")
        }
        _ => {}
    }
    // The log a start held back follows its summary, or the notice that says this process
    // forwards to another (no summary comes then).
    if !matches!(
        notice,
        Notice::Listening { .. } | Notice::ServingStdio { .. } | Notice::TookOver { .. }
    ) {
        super::startup_log::release();
    }
}

/// The start-up summary: the config, the plugins loaded, each upstream's state.
fn show_summary(summary: &Summary, config_path: Option<&Path>) {
    match config_path {
        Some(path) => eprintln!("config: {}", path.display()),
        None => eprintln!(
            "config: none (defaults; create ~/.mcpproxy/mcp_config.json to add upstream servers)"
        ),
    }
    let names = |ps: &[Arc<mcpproxy_plugin_host::Plugin>]| {
        ps.iter()
            .map(|p| format!("{} {}", p.name(), p.info().version))
            .collect::<Vec<_>>()
            .join(", ")
    };
    eprintln!("annotators: {}", names(&summary.annotators));
    eprintln!("validators: {}", names(&summary.validators));
    eprintln!("result guards: {}", names(&summary.guards));
    if let Some(scanner) = &summary.scanner {
        eprintln!("scanner: {} {}", scanner.name(), scanner.info().version);
    }
    for sink in &summary.sinks {
        eprintln!(
            "sink: {} {} -> {}",
            sink.name(),
            sink.info().version,
            sink.granted_hosts()
                .filter(|h| !h.is_empty())
                .map(|h| h.join(", "))
                .unwrap_or_else(|| "no host granted (set its url setting)".into())
        );
    }
    if summary.upstreams.is_empty() {
        eprintln!("upstreams: none configured");
    }
    for s in &summary.upstreams {
        let trust = if s.quarantined {
            format!(
                " — quarantined: review with `mcpproxy upstream inspect {}`",
                s.name
            )
        } else if !s.pending.is_empty() {
            format!(
                " — {} held since they changed: `mcpproxy upstream inspect {}`",
                s.pending.len(),
                s.name
            )
        } else {
            String::new()
        };
        eprintln!(
            "{}{trust}",
            upstream_line(
                &s.name,
                &s.transport.to_string(),
                &s.state.to_string(),
                s.tools
            )
        );
    }
}

/// `upstream fs (stdio): ready — 14 tools` (`1 tool`).
fn upstream_line(name: &str, transport: &str, state: &str, tools: usize) -> String {
    format!(
        "upstream {name} ({transport}): {state} — {tools} tool{}",
        if tools == 1 { "" } else { "s" }
    )
}

async fn signal_shutdown(token: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    token.cancel();
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    token.cancel();
}

#[cfg(test)]
mod tests {
    use super::{default_worker_threads, upstream_line};

    #[test]
    fn a_summary_line_counts_its_tools_in_words() {
        assert_eq!(
            upstream_line("fs", "stdio", "ready", 1),
            "upstream fs (stdio): ready — 1 tool"
        );
        assert_eq!(
            upstream_line("fs", "stdio", "ready", 14),
            "upstream fs (stdio): ready — 14 tools"
        );
    }

    #[test]
    fn half_the_cores_serve_and_never_none() {
        assert_eq!(default_worker_threads(0), 1);
        assert_eq!(default_worker_threads(1), 1);
        assert_eq!(default_worker_threads(2), 1);
        assert_eq!(default_worker_threads(3), 1);
        assert_eq!(default_worker_threads(8), 4);
    }
}
