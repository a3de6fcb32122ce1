//! `mcpproxy serve`: load the config and plugins, connect the upstreams, and serve MCP on
//! `http://<listen>/mcp` (or on stdio with `--stdio`) until Ctrl-C or SIGTERM.

use std::future::Future;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use mcpproxy_auth::access::Access;
use mcpproxy_config::{self as config, Config, is_secret_text};
use mcpproxy_policy::is_plugin_name;
use mcpproxy_server::api::{self, ApiState, key};
use mcpproxy_server::listener;
use mcpproxy_server::manage::Manager;
use mcpproxy_server::mcp::{self, ProxyServer};
use mcpproxy_server::runtime::Runtime;

use super::Globals;
use super::handoff::{Event, FrontEnd};

/// How long a sink's in-flight batch may finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How long open HTTP connections may take to finish at shutdown.
const CONNECTION_GRACE: Duration = Duration::from_secs(2);
/// How long a starting `serve` waits for the process that holds the journal to answer on
/// its control socket.
const OWNER_START_WAIT: Duration = Duration::from_secs(10);
/// How soon a front-end whose owner stopped tries the journal again while it is still held
/// (the old owner closing, or another front-end that won it and opens its socket soon).
const TAKEOVER_RETRY: Duration = Duration::from_millis(100);
/// How soon it tries again after a takeover failed for another reason (the error logged).
const TAKEOVER_FAILED_RETRY: Duration = Duration::from_secs(5);
/// How long a process that took over waits for its upstreams before it answers.
const TAKEOVER_SETTLE: Duration = Duration::from_secs(5);
/// Sets (or replaces) `http.auth_token`, so the token need not be written in the file.
const AUTH_TOKEN_ENV: &str = "MCPPROXY_AUTH_TOKEN";

#[derive(Debug, Args)]
pub(super) struct ServeCommand {
    /// The config file [default: ~/.mcpproxy/mcp_config.json; none there means defaults].
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,

    /// Where to listen for MCP over HTTP [default: the config's `listen`, 127.0.0.1:8080].
    #[arg(long, value_name = "ADDR")]
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
        if let Some(traces) = traces {
            traces.shutdown();
        }
        served?;
        Ok(ExitCode::SUCCESS)
    }

    async fn serve(self, globals: &Globals, loaded: config::Loaded) -> Result<()> {
        let mut config = loaded.config.clone();
        for name in &self.sinks {
            if !is_plugin_name(name) {
                bail!(
                    "--sink '{name}' is not a plugin name: use lowercase letters, digits and '-'"
                );
            }
            if let Some(problem) = config.plugins.sink_grant_problem(name) {
                bail!("--sink {name}: {problem}");
            }
            if !config.plugins.sinks.contains(name) {
                config.plugins.sinks.push(name.clone());
            }
        }
        let data_dir = globals.data_dir(config.data_dir.as_deref());
        let listen = self.listen.unwrap_or(config.listen);
        if !self.stdio {
            auth_token_from_env(&mut config)?;
            if !listen.ip().is_loopback()
                && config.http.auth_token.is_none()
                && config.auth.is_none()
            {
                bail!(
                    "refusing to listen on {listen}: it is not a loopback address, so anyone who can \
                     reach it could call your tools. Set http.auth_token in mcp_config.json (or \
                     {AUTH_TOKEN_ENV}) so clients must send `Authorization: Bearer <token>`, set \
                     `auth` so clients log in with access tokens, or listen on 127.0.0.1"
                );
            }
        }

        let shutdown = CancellationToken::new();
        tokio::spawn(signal_shutdown(shutdown.clone()));

        // An owner already runs on this data dir: be its front-end, and take the data dir
        // over when it goes away (one front-end wins the journal; the others attach to it).
        let mut front: Option<FrontEnd> = None;
        let stdio = self.stdio.then(|| self.server.clone());
        // A replica of a cluster: the state the replicas share, joined before anything runs.
        let cluster = match config.cluster.postgres {
            Some(_) => Some(
                mcpproxy_cluster::Cluster::join(
                    &config.cluster,
                    &mcpproxy_auth::credentials::CredentialStore::open(&data_dir)?,
                    shutdown.clone(),
                )
                .await?,
            ),
            None => None,
        };
        let mut running_config = loaded.config.clone();
        if let Some(cluster) = &cluster {
            let servers = mcpproxy_server::manage::cluster_servers(
                cluster,
                loaded.path.as_deref(),
                globals.home.as_deref(),
            )
            .await?;
            config.servers = servers.clone();
            running_config.servers = servers;
        }
        let build = || {
            // Loading the plugins and opening the journal block: off the async workers.
            tokio::task::block_in_place(|| {
                Runtime::build_with(
                    config.clone(),
                    &data_dir,
                    loaded.path.as_deref(),
                    self.plugins.clone(),
                    cluster.as_ref().map(|c| c.trust().clone()),
                    cluster.as_ref().map(|c| {
                        Arc::new(mcpproxy_cluster::SharedBuckets::new(c.clone()))
                            as Arc<dyn mcpproxy_rate_limit::BucketStore>
                    }),
                )
            })
        };
        let runtime = loop {
            if let Some(running) = front.as_mut() {
                let event = tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    event = running.next() => event?,
                };
                if let Event::Ended = event {
                    return Ok(());
                }
                match take_over(&data_dir, &build, &shutdown).await {
                    Some(runtime) => break runtime,
                    // Another front-end won: this one's bridge or relay attaches to it.
                    None => continue,
                }
            }
            if let Some(owner) = mcpproxy_server::control::connect(&data_dir).await {
                let started =
                    FrontEnd::start(owner, stdio.clone(), &data_dir, listen, shutdown.clone());
                front = Some(started.await?);
                continue;
            }
            match build() {
                Ok(runtime) => break runtime,
                // Another process became the owner as this one started.
                Err(e @ mcpproxy_server::runtime::Error::Held { .. }) => {
                    let Some(owner) = wait_for_owner(&data_dir, &shutdown).await else {
                        return Err(e.into());
                    };
                    let started =
                        FrontEnd::start(owner, stdio.clone(), &data_dir, listen, shutdown.clone());
                    front = Some(started.await?);
                }
                Err(e) => return Err(e.into()),
            }
        };
        if front.is_some() {
            eprintln!(
                "mcpproxy {}: the owner of {} stopped; this process took the data dir over and owns it now (its upstreams start here; clients of the old owner initialize again)",
                env!("CARGO_PKG_VERSION"),
                data_dir.display()
            );
        }
        runtime.close_interrupted().await;
        if front.is_some() {
            // The front-ends replay their clients' requests as soon as the socket answers:
            // let the upstreams connect first, so those requests find their tools.
            runtime.proxy.upstreams().settle(TAKEOVER_SETTLE).await;
        }
        let delivery = Arc::new(runtime.start_delivery()?);
        runtime.watch_upstream_metrics(shutdown.clone());
        // Without the socket this process still serves; only other mcpproxy processes on
        // the data dir cannot reach it (they say so).
        let control = match mcpproxy_server::control::owner::ControlSocket::bind(&data_dir) {
            Ok(control) => Some(control),
            Err(e) => {
                tracing::warn!(
                    "{e}; other mcpproxy processes (IDE windows, the CLI) cannot use this one and will find the data dir busy"
                );
                None
            }
        };
        let config_path = loaded.path.clone().or_else(|| {
            globals
                .home
                .as_deref()
                .map(|h| config::default_path(Some(h)))
        });
        let manager = Arc::new(
            Manager::new(
                config_path,
                globals.home.clone(),
                runtime.proxy.clone(),
                running_config,
            )
            .with_cluster(cluster.clone()),
        );
        if let Some(cluster) = &cluster {
            mcpproxy_server::manage::follow_cluster(
                manager.clone(),
                cluster.clone(),
                shutdown.clone(),
            );
        }
        if let Err(e) = mcpproxy_server::manage::watch(manager.clone(), shutdown.clone()) {
            tracing::warn!(
                "cannot watch the config file for edits (restart mcpproxy after editing it): {e}"
            );
        }
        let mcp_server = ProxyServer::new(runtime.proxy.clone()).with_manager(manager.clone());

        let access = Access {
            allowed_hosts: runtime.config.allowed_hosts.clone(),
            allowed_origins: runtime.config.allowed_origins.clone(),
        };
        let reloader = Arc::new(mcpproxy_server::runtime::Reloader::new(
            runtime.config.clone(),
            data_dir.clone(),
            self.plugins.clone(),
            runtime.proxy.clone(),
        ));
        if let Err(e) = mcpproxy_server::runtime::watch_plugins(reloader.clone(), shutdown.clone())
        {
            tracing::warn!(
                "cannot watch the plugins dir for changes (run `mcpproxy plugins reload` after changing it): {e}"
            );
        }
        let api_key = key::load_or_create(&data_dir, runtime.config.api_key.as_deref())?;
        let api_state = ApiState {
            proxy: runtime.proxy.clone(),
            journal: runtime.proxy.journal().clone(),
            delivery: Some(delivery.clone()),
            api_key: Arc::from(api_key),
            access: Arc::new(access.clone()),
            metrics_public: runtime.config.http.metrics_public,
            manager: Some(manager.clone()),
            reloader: Some(reloader),
            cluster_journal: mcpproxy_cluster::journal::ClusterJournal::from_config(
                &runtime.config,
            )
            .map(Arc::new)
            .map_err(|e| e.to_string()),
        };
        let http = &runtime.config.http;
        let endpoint = mcp::http::Endpoint {
            access: access.clone(),
            auth_token: http.auth_token.clone(),
            sessions: mcp::sessions::SessionBounds {
                max_sessions: http.max_sessions,
                max_sessions_per_client: http.max_sessions_per_client,
                idle: http.session_idle,
            },
            auth: runtime
                .config
                .auth
                .clone()
                .map(|auth| Arc::new(mcpproxy_auth::client_auth::Verifier::new(auth))),
        };
        let mut mcp_router =
            mcp::http::router(mcp_server.clone(), endpoint, shutdown.child_token());
        if let Some(replica) = &runtime.config.cluster.replica {
            mcp_router = mcp::sticky::mark(mcp_router, replica);
        }
        let app = mcp_router
            .merge(api::router(api_state))
            .merge(mcpproxy_server::web::router(Arc::new(access.clone())));
        let control_path = control.as_ref().map(|c| c.path().to_owned());
        let control_server = control.map(|control| {
            tokio::spawn(control.serve(
                app.clone(),
                session_server(mcp_server.clone(), runtime.proxy.clone()),
                shutdown.clone(),
            ))
        });

        if let Some(FrontEnd::Stdio { task, hooks }) = front {
            // This process took over from its stdio bridge: the bridge carries on, attached
            // to this process's own socket now (the IDE's handshake replayed).
            hooks.retry.notify_one();
            summary(&runtime, loaded.path.as_deref()).await;
            tokio::select! {
                _ = shutdown.cancelled() => {}
                ended = task => {
                    if let Ok(Err(e)) = ended {
                        tracing::warn!("the stdio session ended: {e}");
                    }
                    shutdown.cancel();
                }
            }
        } else if self.stdio {
            match &control_path {
                Some(path) => eprintln!(
                    "mcpproxy {} serving MCP on stdio; other mcpproxy processes on {} use it through {}",
                    env!("CARGO_PKG_VERSION"),
                    data_dir.display(),
                    path.display()
                ),
                None => eprintln!(
                    "mcpproxy {} serving MCP on stdio",
                    env!("CARGO_PKG_VERSION")
                ),
            }
            summary(&runtime, loaded.path.as_deref()).await;
            // A request over 16 MiB is answered with an error instead of being dropped.
            let stdin = mcpproxy_upstream::line_guard::LineGuard::new(
                tokio::io::stdin(),
                mcpproxy_upstream::line_guard::oversized_request,
            );
            let mut stdio_server = mcp_server.for_new_session();
            if let Some(server) = &self.server {
                if runtime.proxy.upstreams().get(server).is_none() {
                    bail!(
                        "--server {server}: there is no upstream server of that name; configured: {}",
                        runtime.proxy.upstreams().names().join(", ")
                    );
                }
                stdio_server = stdio_server.for_server(server.clone());
            }
            let _open = runtime
                .proxy
                .metrics()
                .opened(mcpproxy_server::metrics::Open::Session, "stdio");
            let service = stdio_server
                .serve((stdin, tokio::io::stdout()))
                .await
                .context("cannot start MCP on stdio")?;
            let token = service.cancellation_token();
            tokio::select! {
                _ = shutdown.cancelled() => token.cancel(),
                _ = service.waiting() => shutdown.cancel(),
            }
        } else {
            let bounds = listener::Bounds {
                max_connections: http.max_connections,
                header_timeout: http.header_timeout,
                shutdown_grace: CONNECTION_GRACE,
            };
            let wanted = bounds.max_connections as u64 + listener::RESERVED_FDS;
            if let Some(fds) = listener::raise_fd_limit(wanted)
                && fds < wanted
            {
                tracing::warn!(
                    "this process may open {fds} files, fewer than http.max_connections ({}) plus {} for its own use: raise `ulimit -n` or lower http.max_connections",
                    bounds.max_connections,
                    listener::RESERVED_FDS
                );
            }
            // A relay that took over hands its listener on: the same address keeps working.
            let relayed = match front {
                Some(FrontEnd::Http { relay, .. }) => relay.hand_back().await,
                _ => None,
            };
            let socket = match relayed {
                Some(socket) => socket,
                None => bind_tcp(listen).await?,
            };
            let bound = socket
                .local_addr()
                .context("cannot read the bound address")?;
            if !bound.ip().is_loopback() {
                tracing::warn!(
                    "listening on {bound}, which is not a loopback address: /mcp needs the bearer token, /api/v1 the API key"
                );
            }
            eprintln!(
                "mcpproxy {} listening on http://{bound}/mcp",
                env!("CARGO_PKG_VERSION")
            );
            eprintln!("page: http://{bound}/ (`mcpproxy api-key` prints the key it asks for)");
            let server_shutdown = shutdown.clone();
            let server = tokio::spawn(listener::serve(socket, app, bounds, server_shutdown));
            summary(&runtime, loaded.path.as_deref()).await;
            match server.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => bail!("the HTTP server failed: {e}"),
                Err(e) => bail!("the HTTP server task failed: {e}"),
            }
        }
        if let Some(control_server) = control_server {
            let _ = control_server.await;
        }
        eprintln!("shutting down: closing upstream sessions, flushing the activity journal");
        delivery.shutdown(SHUTDOWN_GRACE).await;
        runtime.shutdown().await;
        Ok(())
    }
}

/// The owner went away: tries to become the owner until that works (`Some`) or another
/// process's socket answers (`None`: it won). The journal is still held while the old owner
/// closes (or while the winner starts): tried again every [`TAKEOVER_RETRY`].
async fn take_over(
    data_dir: &std::path::Path,
    build: &impl Fn() -> mcpproxy_server::runtime::Result<Runtime>,
    shutdown: &CancellationToken,
) -> Option<Runtime> {
    while !shutdown.is_cancelled() {
        if mcpproxy_server::control::answers(data_dir).await {
            return None;
        }
        match build() {
            Ok(runtime) => return Some(runtime),
            Err(mcpproxy_server::runtime::Error::Held { .. }) => {
                tokio::time::sleep(TAKEOVER_RETRY).await
            }
            Err(e) => {
                tracing::error!(
                    "the owner of {} stopped and this process cannot take it over: {e}",
                    data_dir.display()
                );
                tokio::time::sleep(TAKEOVER_FAILED_RETRY).await;
            }
        }
    }
    None
}

/// Waits a little for a process that holds the journal to open its control socket (two
/// `serve --stdio` started together: one becomes the owner, the other its front-end).
async fn wait_for_owner(
    data_dir: &std::path::Path,
    shutdown: &CancellationToken,
) -> Option<tokio::net::UnixStream> {
    let deadline = tokio::time::Instant::now() + OWNER_START_WAIT;
    while tokio::time::Instant::now() < deadline && !shutdown.is_cancelled() {
        if let Some(owner) = mcpproxy_server::control::connect(data_dir).await {
            return Some(owner);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

pub(super) async fn bind_tcp(listen: SocketAddr) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| {
            format!("cannot listen on {listen}: is another program using it? use --listen ADDR")
        })
}

/// MCP sessions on the control socket: each served as on stdio, of the aggregate endpoint
/// or (after `@server NAME`) of one upstream's direct endpoint.
fn session_server(
    server: ProxyServer,
    proxy: Arc<mcpproxy_server::proxy::Proxy>,
) -> mcpproxy_server::control::owner::Sessions {
    let metrics = proxy.metrics().clone();
    let check_server = Arc::new(move |name: &str| {
        if proxy.upstreams().get(name).is_some() {
            return Ok(());
        }
        Err(format!(
            "--server {}: there is no upstream server of that name; configured: {}",
            mcpproxy_support::quote(name),
            proxy.upstreams().names().join(", ")
        ))
    });
    let serve = Arc::new(move |fixed: Option<String>, read, write| {
        let open = metrics.opened(mcpproxy_server::metrics::Open::Session, "socket");
        let mut server = server.for_new_session();
        if let Some(name) = fixed {
            server = server.for_server(name);
        }
        Box::pin(async move {
            let _open = open;
            let read = mcpproxy_upstream::line_guard::LineGuard::new(
                read,
                mcpproxy_upstream::line_guard::oversized_request,
            );
            match server.serve((read, write)).await {
                Ok(service) => {
                    let _ = service.waiting().await;
                }
                Err(e) => tracing::debug!("a forwarded stdio session did not start: {e}"),
            }
        }) as std::pin::Pin<Box<dyn Future<Output = ()> + Send>>
    });
    mcpproxy_server::control::owner::Sessions {
        serve,
        check_server,
    }
}

/// Takes the bearer token from the environment when it is set there.
fn auth_token_from_env(config: &mut Config) -> Result<()> {
    let Some(token) = std::env::var_os(AUTH_TOKEN_ENV) else {
        return Ok(());
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
    config.http.auth_token = Some(token);
    Ok(())
}

async fn summary(runtime: &Runtime, config_path: Option<&std::path::Path>) {
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
    eprintln!("annotators: {}", names(&runtime.annotators));
    eprintln!("validators: {}", names(&runtime.validators));
    eprintln!("result guards: {}", names(&runtime.guards));
    if let Some(scanner) = &runtime.scanner {
        eprintln!("scanner: {} {}", scanner.name(), scanner.info().version);
    }
    for sink in &runtime.sinks {
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
    let upstreams = runtime.proxy.upstreams();
    upstreams.settle(Duration::from_secs(10)).await;
    // Start-up is over (plugins loaded, the upstreams' first tool lists indexed): give the
    // kernel back what it freed, so an idle proxy holds only what it uses.
    mcpproxy_plugin_host::release_freed_memory();
    let statuses = upstreams.statuses();
    if statuses.is_empty() {
        eprintln!("upstreams: none configured");
    }
    for s in statuses {
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
            "upstream {} ({}): {} — {} tools{trust}",
            s.name, s.transport, s.state, s.tools
        );
    }
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
    use super::default_worker_threads;

    #[test]
    fn half_the_cores_serve_and_never_none() {
        assert_eq!(default_worker_threads(0), 1);
        assert_eq!(default_worker_threads(1), 1);
        assert_eq!(default_worker_threads(2), 1);
        assert_eq!(default_worker_threads(3), 1);
        assert_eq!(default_worker_threads(8), 4);
    }
}
