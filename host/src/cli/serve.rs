//! `mcpproxy serve`: load the config and plugins, connect the upstreams, and serve MCP on
//! `http://<listen>/mcp` (or on stdio with `--stdio`) until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use crate::activity::{self, Journal, JournalOptions};
use crate::api::{self, ApiState, key};
use crate::config::{self, Config, Durability};
use crate::delivery::{Delivery, DeliveryOptions, Sink};
use crate::index::ToolIndex;
use crate::mcp::{self, ProxyServer};
use crate::plugin::limits::Limits;
use crate::plugin::{EngineOptions, PluginEngine, PluginKind, PluginSet, PluginSettings};
use crate::policy::Pipeline;
use crate::proxy::{ActivitySettings, Proxy};
use crate::upstream::Upstreams;

use super::Globals;

/// How long a sink's in-flight batch may finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Args)]
pub struct ServeCommand {
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

    /// Feed the activity journal to this sink plugin too (repeatable; adds to the config's
    /// `plugins.sinks`; its settings come from `plugins.settings.NAME`).
    #[arg(long = "sink", value_name = "NAME")]
    sinks: Vec<String>,
}

/// Everything `serve` builds before it starts listening; shared with other commands.
pub struct Runtime {
    pub config: Config,
    pub proxy: Arc<Proxy>,
    /// The sink plugins named by `plugins.sinks`, in order.
    pub sinks: Vec<Arc<crate::plugin::Plugin>>,
}

/// The activity journal's file in the data dir.
pub fn journal_path(data_dir: &std::path::Path) -> PathBuf {
    data_dir.join("activity.redb")
}

impl ServeCommand {
    pub fn run(self, globals: &Globals) -> Result<ExitCode> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("mcpproxy")
            .build()
            .context("cannot start the async runtime")?;
        runtime.block_on(self.serve(globals))?;
        Ok(ExitCode::SUCCESS)
    }

    async fn serve(self, globals: &Globals) -> Result<()> {
        let loaded = config::load(self.config.as_deref(), globals.home.as_deref())?;
        let mut config = loaded.config;
        for name in &self.sinks {
            if !crate::plugin::is_valid_name(name) {
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
        let plugins_dir = self.plugins.clone().or_else(|| config.plugins.dir.clone());
        let listen = self.listen.unwrap_or(config.listen);

        let runtime = build(config, &data_dir, plugins_dir)?;
        close_interrupted(runtime.proxy.journal()).await;
        let d = &runtime.config.activity.delivery;
        let delivery = Arc::new(
            Delivery::start(
                runtime.proxy.journal().clone(),
                runtime
                    .sinks
                    .iter()
                    .map(|p| p.clone() as Arc<dyn Sink>)
                    .collect(),
                DeliveryOptions {
                    batch_records: d.batch_records,
                    batch_bytes: d.batch_bytes,
                    interval: d.interval,
                    max_backoff: d.max_backoff,
                },
            )
            .context("cannot start delivering activity to the sinks")?,
        );
        let shutdown = CancellationToken::new();
        tokio::spawn(signal_shutdown(shutdown.clone()));

        if self.stdio {
            eprintln!(
                "mcpproxy {} serving MCP on stdio",
                env!("CARGO_PKG_VERSION")
            );
            summary(&runtime, loaded.path.as_deref()).await;
            let service = ProxyServer::new(runtime.proxy.clone())
                .serve(rmcp::transport::stdio())
                .await
                .context("cannot start MCP on stdio")?;
            let token = service.cancellation_token();
            tokio::select! {
                _ = shutdown.cancelled() => token.cancel(),
                _ = service.waiting() => {}
            }
        } else {
            let access = mcp::http::Access {
                allowed_hosts: runtime.config.allowed_hosts.clone(),
                allowed_origins: runtime.config.allowed_origins.clone(),
            };
            let api_key = key::load_or_create(&data_dir, runtime.config.api_key.as_deref())?;
            let api_state = ApiState {
                proxy: runtime.proxy.clone(),
                journal: runtime.proxy.journal().clone(),
                delivery: Some(delivery.clone()),
                api_key: Arc::from(api_key),
                allowed_hosts: runtime.config.allowed_hosts.clone().into(),
                allowed_origins: runtime.config.allowed_origins.clone().into(),
            };
            let app = mcp::http::router(runtime.proxy.clone(), &access, shutdown.child_token())
                .merge(api::router(api_state));
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .with_context(|| {
                    format!(
                        "cannot listen on {listen}: is another mcpproxy running? use --listen ADDR"
                    )
                })?;
            let bound = listener
                .local_addr()
                .context("cannot read the bound address")?;
            if !bound.ip().is_loopback() {
                tracing::warn!(
                    "listening on {bound}, which is not a loopback address: anyone who can reach it can use your tools"
                );
            }
            eprintln!(
                "mcpproxy {} listening on http://{bound}/mcp",
                env!("CARGO_PKG_VERSION")
            );
            let server_shutdown = shutdown.clone();
            let server = tokio::spawn(async move {
                axum::serve(listener, app)
                    .with_graceful_shutdown(async move { server_shutdown.cancelled().await })
                    .await
            });
            summary(&runtime, loaded.path.as_deref()).await;
            match server.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => bail!("the HTTP server failed: {e}"),
                Err(e) => bail!("the HTTP server task failed: {e}"),
            }
        }
        eprintln!("shutting down: closing upstream sessions, flushing the activity journal");
        delivery.shutdown(SHUTDOWN_GRACE).await;
        runtime.proxy.upstreams().shutdown().await;
        if let Err(e) = runtime.proxy.journal().flush().await {
            tracing::error!("cannot flush the activity journal: {e}");
        }
        Ok(())
    }
}

/// Loads plugins, starts upstreams and builds the proxy. Must run inside a tokio runtime.
pub fn build(
    config: Config,
    data_dir: &std::path::Path,
    plugins_dir: Option<PathBuf>,
) -> Result<Runtime> {
    let max_memory = std::iter::once(&config.plugins.limits)
        .chain(config.plugins.plugin_limits.values())
        .map(|l| l.memory_bytes)
        .max()
        .unwrap_or(Limits::default().memory_bytes);
    let engine = PluginEngine::new(EngineOptions {
        cache_dir: Some(data_dir.join("cache").join("plugins")),
        max_memory_bytes: max_memory,
        ..Default::default()
    })?;
    let intent = config.intent.as_settings();
    let settings_for = |name: &str, kind: PluginKind| {
        let limits = match kind {
            // A delivery waits on a remote store: the validators' 50 ms would never do.
            PluginKind::Sink => config
                .plugins
                .sink_limits_for(name, crate::plugin::limits::DEFAULT_SINK_TIMEOUT),
            _ => config.plugins.limits_for(name),
        };
        let mut settings = intent.clone();
        if let (Some(merged), serde_json::Value::Object(own)) =
            (settings.as_object_mut(), config.plugins.settings_for(name))
        {
            merged.extend(own);
        }
        PluginSettings {
            limits: Limits {
                timeout: limits.timeout,
                memory_bytes: limits.memory_bytes,
            },
            settings,
            reuse_instance: limits.reuse_instance,
        }
    };
    let plugins = PluginSet::load(&engine, plugins_dir.as_deref(), &settings_for)?;
    let pipeline = Pipeline::new(
        select(
            &plugins,
            PluginKind::Annotator,
            config.plugins.annotators.as_deref(),
            "plugins.annotators",
        )?,
        select(
            &plugins,
            PluginKind::Validator,
            config.plugins.validators.as_deref(),
            "plugins.validators",
        )?,
    );
    let sinks = if config.plugins.sinks.is_empty() {
        Vec::new()
    } else {
        select(
            &plugins,
            PluginKind::Sink,
            Some(&config.plugins.sinks),
            "plugins.sinks",
        )?
    };
    if pipeline.validators().is_empty() {
        tracing::warn!("no validator is active: every call is allowed");
    }
    let journal = open_journal(&config, data_dir)?;
    journal.spawn_retention();
    let index = Arc::new(ToolIndex::new().context("cannot create the tool index")?);
    let upstreams = Upstreams::start(
        &config.servers,
        &config.upstream,
        config.tool_call_timeout,
        index.clone(),
    );
    let activity = ActivitySettings {
        max_argument_bytes: config.activity.max_argument_bytes,
        redact_keys: config.activity.redact_keys.clone(),
    };
    let proxy = Arc::new(Proxy::new(
        Arc::new(pipeline),
        upstreams,
        index,
        journal,
        activity,
    ));
    Ok(Runtime {
        config,
        proxy,
        sinks,
    })
}

/// The proxy for a one-shot command: only `server`'s upstream (or all, if `None`) is
/// started, and the call waits until it has connected or failed once.
pub async fn build_for_one(
    mut config: Config,
    data_dir: &std::path::Path,
    server: Option<&str>,
) -> Result<Runtime> {
    if let Some(server) = server {
        config.servers.retain(|s| s.name == server);
    }
    let plugins_dir = config.plugins.dir.clone();
    let runtime = build(config, data_dir, plugins_dir)?;
    close_interrupted(runtime.proxy.journal()).await;
    runtime
        .proxy
        .upstreams()
        .settle(Duration::from_secs(30))
        .await;
    Ok(runtime)
}

/// Closes the calls an earlier process left pending (see [`Journal::close_interrupted`]).
async fn close_interrupted(journal: &Journal) {
    match journal.close_interrupted().await {
        Ok(0) => {}
        Ok(n) => tracing::warn!(
            "{n} calls were still running when mcpproxy last stopped; their records are now closed as errors (outcome unknown)"
        ),
        Err(e) => tracing::error!("cannot close the calls left pending by the last run: {e}"),
    }
}

/// Opens (or creates) the journal with the config's durability and retention.
pub fn open_journal(config: &Config, data_dir: &std::path::Path) -> Result<Arc<Journal>> {
    let settings = &config.activity;
    let options = JournalOptions {
        durability: match settings.durability {
            Durability::Sync => activity::Durability::Sync,
            Durability::Async => activity::Durability::Async {
                flush: settings.async_flush,
            },
        },
        retention: activity::Retention {
            max_age: settings.retention.max_age,
            max_records: settings.retention.max_records,
            max_bytes: settings.retention.max_bytes,
            max_undelivered_bytes: settings.retention.max_undelivered_bytes,
        },
        ..Default::default()
    };
    let path = journal_path(data_dir);
    Journal::open(&path, options).with_context(|| {
        format!(
            "cannot open the activity journal {} (is another mcpproxy using this data dir?)",
            path.display()
        )
    })
}

/// The active plugins of a kind: the configured list in its order, or all of them.
fn select(
    plugins: &PluginSet,
    kind: PluginKind,
    names: Option<&[String]>,
    key: &str,
) -> Result<Vec<Arc<crate::plugin::Plugin>>> {
    let Some(names) = names else {
        return Ok(plugins.of_kind(kind).cloned().collect());
    };
    names
        .iter()
        .map(|name| match plugins.get(name) {
            Some(p) if p.kind() == kind => Ok(p.clone()),
            Some(p) => bail!("{key} names '{name}', which is {} plugin, not {}", p.kind().with_article(), kind.with_article()),
            None => {
                let loaded: Vec<&str> = plugins.of_kind(kind).map(|p| p.name()).collect();
                bail!("{key} names '{name}', but no {kind} plugin of that name is loaded (loaded: {}); add it with --plugins DIR", loaded.join(", "))
            }
        })
        .collect()
}

async fn summary(runtime: &Runtime, config_path: Option<&std::path::Path>) {
    match config_path {
        Some(path) => eprintln!("config: {}", path.display()),
        None => eprintln!(
            "config: none (defaults; create ~/.mcpproxy/mcp_config.json to add upstream servers)"
        ),
    }
    let pipeline = runtime.proxy.pipeline();
    let names = |ps: &[Arc<crate::plugin::Plugin>]| {
        ps.iter()
            .map(|p| format!("{} {}", p.name(), p.info().version))
            .collect::<Vec<_>>()
            .join(", ")
    };
    eprintln!("annotators: {}", names(pipeline.annotators()));
    eprintln!("validators: {}", names(pipeline.validators()));
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
    let statuses = upstreams.statuses();
    if statuses.is_empty() {
        eprintln!("upstreams: none configured");
    }
    for s in statuses {
        eprintln!(
            "upstream {} ({}): {} — {} tools",
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
