//! One entry point for a running mcpproxy: [`Server::builder`] takes a config and where
//! things are, [`Builder::serve`] serves MCP over HTTP or stdio until the shutdown token
//! is cancelled. Serving means owning the data dir (the journal, the upstreams, the control
//! socket) or, when another process owns it, being its front-end and taking over when it
//! stops ([`owner`]).
//!
//! The server prints nothing: what a person running it should see (where it listens, what
//! it loaded, a takeover) is sent as a [`Notice`] to the caller, which decides how to show
//! it; problems while running go to `tracing`.

mod app;
mod front_end;
mod owner;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use mcpproxy_config::Config;
use mcpproxy_plugin_host::Plugin;
use mcpproxy_upstream::ServerStatus;

use crate::listener;
use crate::metrics::Open;
use crate::runtime::{self, Runtime};
use app::Files;
use front_end::{FrontEnd, local_addr};

/// How long a sink's in-flight batch may finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How long open HTTP connections may take to finish at shutdown.
const CONNECTION_GRACE: Duration = Duration::from_secs(2);
/// How long a process that took over waits for its upstreams before it answers.
const TAKEOVER_SETTLE: Duration = Duration::from_secs(5);
/// How long the start-up summary waits for the upstreams' first tool lists.
const START_SETTLE: Duration = Duration::from_secs(10);

/// Why serving failed or stopped early.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "refusing to listen on {listen}: it is not a loopback address, so anyone who can reach it could call your tools. Set http.auth_token in mcp_config.json (or MCPPROXY_AUTH_TOKEN) so clients must send `Authorization: Bearer <token>`, set `auth` so clients log in with access tokens, or listen on 127.0.0.1"
    )]
    Unprotected { listen: SocketAddr },
    #[error(
        "{} is already owned by a running mcpproxy, and a second one may only relay to it on a loopback address, not {listen}: stop the owner and start this one alone to listen there",
        data_dir.display()
    )]
    RelayNotLoopback {
        data_dir: PathBuf,
        listen: SocketAddr,
    },
    /// A `serve` over HTTP beside an owner that serves HTTP itself.
    #[error(
        "the mcpproxy that owns {} already serves MCP at {url}: connect clients there (`mcpproxy client add CLIENT --http` writes it); to run a second proxy, give it a data dir of its own (--data-dir)",
        data_dir.display()
    )]
    AlreadyServing { data_dir: PathBuf, url: String },
    #[error("cannot listen on {listen}: is another program using it? use --listen ADDR")]
    Bind {
        listen: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the bound address: {0}")]
    BoundAddress(#[source] std::io::Error),
    #[error("--server {name}: there is no upstream server of that name; configured: {configured}")]
    UnknownServer { name: String, configured: String },
    #[error("cannot start MCP on stdio: {0}")]
    Stdio(String),
    #[error("the stdio session to the owner failed: {0}")]
    Bridge(#[source] std::io::Error),
    #[error("{what} failed: {message}")]
    Task { what: &'static str, message: String },
    #[error("the HTTP server failed: {0}")]
    Http(#[source] std::io::Error),
    #[error(transparent)]
    Runtime(#[from] runtime::Error),
    #[error(transparent)]
    Cluster(#[from] mcpproxy_cluster::Error),
    #[error(transparent)]
    ClusterServers(#[from] crate::manage::Error),
    #[error(transparent)]
    Credentials(#[from] mcpproxy_auth::credentials::CredentialError),
    #[error(transparent)]
    ApiKey(#[from] crate::api::key::Error),
}

/// How clients reach the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// MCP over HTTP at `http://<listen>/mcp`, with the REST API and the page.
    Http { listen: SocketAddr },
    /// MCP on this process's stdin/stdout (an IDE spawned it): the aggregate endpoint, or
    /// `server`'s own endpoint.
    Stdio { server: Option<String> },
}

/// What a person running the server should be told.
#[derive(Debug)]
#[non_exhaustive]
pub enum Notice {
    /// Another process owns the data dir: this stdio session is forwarded to it.
    Forwarding {
        data_dir: PathBuf,
        server: Option<String>,
    },
    /// Another process owns the data dir (serving stdio): HTTP is relayed to it at `bound`.
    Relaying {
        data_dir: PathBuf,
        bound: SocketAddr,
    },
    /// The owner this process was a front-end of stopped; this process owns the data dir.
    TookOver { data_dir: PathBuf },
    /// Serving MCP on stdio; other processes reach this one through `control`.
    ServingStdio {
        data_dir: PathBuf,
        control: Option<PathBuf>,
    },
    /// Serving MCP over HTTP at `bound`.
    Listening { bound: SocketAddr },
    /// Started: what was loaded and how the upstreams are, once they settled.
    Started(Box<Summary>),
    /// Shutting down: closing upstream sessions, flushing the journal.
    ShuttingDown,
}

/// What a started server runs.
#[derive(Debug)]
pub struct Summary {
    pub annotators: Vec<Arc<Plugin>>,
    pub validators: Vec<Arc<Plugin>>,
    pub guards: Vec<Arc<Plugin>>,
    pub scanner: Option<Arc<Plugin>>,
    pub sinks: Vec<Arc<Plugin>>,
    pub upstreams: Vec<ServerStatus>,
}

/// Where notices go.
#[derive(Clone)]
pub(crate) struct Notices(Arc<dyn Fn(Notice) + Send + Sync>);

impl Notices {
    fn send(&self, notice: Notice) {
        (self.0)(notice);
    }
}

/// A running mcpproxy, built by [`Server::builder`].
pub struct Server;

impl Server {
    /// A server of `config` (the config file's, or the defaults) owning `data_dir` (the
    /// journal, trust, credentials, the control socket); the rest has defaults.
    pub fn builder(config: Config, data_dir: PathBuf) -> Builder {
        Builder {
            file_config: config.clone(),
            transport: Transport::Http {
                listen: config.listen,
            },
            config,
            files: Files {
                data_dir,
                config_path: None,
                home: None,
                plugins_dir: None,
            },
            notices: Notices(Arc::new(|_| {})),
            shutdown: CancellationToken::new(),
        }
    }
}

/// How a [`Server`] is set up; [`Builder::serve`] runs it.
pub struct Builder {
    /// The config as the file says it: the live manager writes changes back to it.
    file_config: Config,
    /// The config the server runs: the file's, with the caller's additions.
    config: Config,
    files: Files,
    transport: Transport,
    notices: Notices,
    shutdown: CancellationToken,
}

impl Builder {
    /// The file the config came from, which the server watches and writes changes to.
    pub fn config_path(mut self, path: Option<PathBuf>) -> Self {
        self.files.config_path = path;
        self
    }

    /// The home dir (`~/.mcpproxy` by default) whose config file is written when there was
    /// none.
    pub fn home(mut self, home: Option<PathBuf>) -> Self {
        self.files.home = home;
        self
    }

    /// A directory of `*.wasm` plugins loaded after (and replacing) the embedded ones.
    pub fn plugins_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.files.plugins_dir = dir;
        self
    }

    /// Feeds the journal to these sink plugins too (valid names whose hosts are granted:
    /// the caller checks), without writing them to the config file.
    pub fn extra_sinks(mut self, names: &[String]) -> Self {
        for name in names {
            if !self.config.plugins.sinks.contains(name) {
                self.config.plugins.sinks.push(name.clone());
            }
        }
        self
    }

    /// The bearer token clients of `/mcp` must send, in place of the config's
    /// `http.auth_token` (not written to the config file).
    pub fn auth_token(mut self, token: String) -> Self {
        self.config.http.auth_token = Some(token);
        self
    }

    /// How clients reach the server [default: HTTP on the config's `listen`].
    pub fn transport(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }

    /// Where [`Notice`]s go [default: nowhere].
    pub fn on_notice(mut self, notices: impl Fn(Notice) + Send + Sync + 'static) -> Self {
        self.notices = Notices(Arc::new(notices));
        self
    }

    /// The token whose cancellation stops the server (Ctrl-C, SIGTERM).
    pub fn shutdown(mut self, token: CancellationToken) -> Self {
        self.shutdown = token;
        self
    }

    /// Serves until the shutdown token is cancelled or the stdio session ends, then closes
    /// the upstream sessions and flushes the journal.
    pub async fn serve(mut self) -> Result<(), Error> {
        if let Transport::Http { listen } = self.transport
            && !listen.ip().is_loopback()
            && self.config.http.auth_token.is_none()
            && self.config.auth.is_none()
        {
            return Err(Error::Unprotected { listen });
        }
        // Says to commands on this data dir that a server is starting (held until it ends).
        let _marker = crate::control::holder::mark_serving(&self.files.data_dir)
            .inspect_err(|e| {
                tracing::debug!(
                    "cannot open {}: {e}",
                    crate::control::holder::serve_marker(&self.files.data_dir).display()
                );
            })
            .ok();
        // A replica of a cluster: the state the replicas share, joined before anything runs.
        let cluster = match self.config.cluster.postgres {
            Some(_) => Some(
                mcpproxy_cluster::Cluster::join(
                    &self.config.cluster,
                    &mcpproxy_auth::credentials::CredentialStore::open(&self.files.data_dir)?,
                    self.shutdown.clone(),
                )
                .await?,
            ),
            None => None,
        };
        if let Some(cluster) = &cluster {
            let servers = crate::manage::cluster_servers(
                cluster,
                self.files.config_path.as_deref(),
                self.files.home.as_deref(),
            )
            .await?;
            self.config.servers = servers.clone();
            self.file_config.servers = servers;
        }
        let build = || {
            // Loading the plugins and opening the journal block: off the async workers.
            tokio::task::block_in_place(|| {
                Runtime::build_with(
                    self.config.clone(),
                    &self.files.data_dir,
                    self.files.config_path.as_deref(),
                    self.files.plugins_dir.clone(),
                    cluster.as_ref().map(|c| c.trust().clone()),
                    cluster.as_ref().map(|c| {
                        Arc::new(mcpproxy_cluster::SharedBuckets::new(c.clone()))
                            as Arc<dyn mcpproxy_rate_limit::BucketStore>
                    }),
                )
            })
        };
        let Some(owned) = owner::own(
            &self.files.data_dir,
            &self.transport,
            self.file_config.api_key.as_deref(),
            &build,
            &self.notices,
            &self.shutdown,
        )
        .await?
        else {
            return Ok(());
        };
        self.run_owner(owned, cluster).await
    }

    /// Serves as the owner of the data dir.
    async fn run_owner(
        self,
        owned: owner::Owned,
        cluster: Option<Arc<mcpproxy_cluster::Cluster>>,
    ) -> Result<(), Error> {
        let owner::Owned { runtime, front } = owned;
        if front.is_some() {
            self.notices.send(Notice::TookOver {
                data_dir: self.files.data_dir.clone(),
            });
        }
        runtime.close_interrupted().await;
        if front.is_some() {
            // The front-ends replay their clients' requests as soon as the socket answers:
            // let the upstreams connect first, so those requests find their tools.
            runtime.proxy.upstreams().settle(TAKEOVER_SETTLE).await;
        }
        let delivery = Arc::new(runtime.start_delivery()?);
        runtime.watch_upstream_metrics(self.shutdown.clone());
        let app = app::assemble(
            &runtime,
            self.file_config.clone(),
            &self.files,
            cluster.as_ref(),
            delivery.clone(),
            &self.shutdown,
        )?;
        let control_path = app.control.as_ref().map(|c| c.path().to_owned());
        let control_server = app.control.map(|control| {
            tokio::spawn(control.serve(
                app.router.clone(),
                app::control_sessions(app.mcp_server.clone(), runtime.proxy.clone()),
                self.shutdown.clone(),
            ))
        });
        let served = match (front, &self.transport) {
            (Some(FrontEnd::Stdio { task, hooks }), _) => {
                // This process took over from its stdio bridge: the bridge carries on,
                // attached to this process's own socket now (the IDE's handshake replayed).
                hooks.retry.notify_one();
                self.started(&runtime).await;
                tokio::select! {
                    _ = self.shutdown.cancelled() => {}
                    ended = task => {
                        if let Ok(Err(e)) = ended {
                            tracing::warn!("the stdio session ended: {e}");
                        }
                        self.shutdown.cancel();
                    }
                }
                Ok(())
            }
            (_, Transport::Stdio { server }) => {
                self.notices.send(Notice::ServingStdio {
                    data_dir: self.files.data_dir.clone(),
                    control: control_path,
                });
                self.started(&runtime).await;
                self.serve_stdio(&runtime, app.mcp_server, server.as_deref())
                    .await
            }
            (front, Transport::Http { listen }) => {
                // A relay that took over hands its listener on: the same address keeps
                // working.
                let relayed = match front {
                    Some(FrontEnd::Http { relay, .. }) => relay.hand_back().await,
                    _ => None,
                };
                self.serve_http(&runtime, app.router, relayed, *listen, &app.listening)
                    .await
            }
        };
        // A failure to serve stops the rest (the control socket, the sinks) too.
        if served.is_err() {
            self.shutdown.cancel();
        }
        if let Some(control_server) = control_server {
            let _ = control_server.await;
        }
        self.notices.send(Notice::ShuttingDown);
        delivery.shutdown(SHUTDOWN_GRACE).await;
        runtime.shutdown().await;
        served
    }

    /// Serves MCP on this process's stdin/stdout until the session ends or shutdown.
    async fn serve_stdio(
        &self,
        runtime: &Runtime,
        mcp_server: crate::mcp::ProxyServer,
        server: Option<&str>,
    ) -> Result<(), Error> {
        // A request over 16 MiB is answered with an error instead of being dropped.
        let stdin = mcpproxy_upstream::line_guard::LineGuard::new(
            tokio::io::stdin(),
            mcpproxy_upstream::line_guard::oversized_request,
        );
        let mut stdio_server = mcp_server.for_new_session();
        if let Some(server) = server {
            if runtime.proxy.upstreams().get(server).is_none() {
                return Err(Error::UnknownServer {
                    name: server.to_owned(),
                    configured: runtime.proxy.upstreams().names().join(", "),
                });
            }
            stdio_server = stdio_server.for_server(server.to_owned());
        }
        let _open = runtime.proxy.metrics().opened(Open::Session, "stdio");
        let service = stdio_server
            .serve((stdin, tokio::io::stdout()))
            .await
            .map_err(|e| Error::Stdio(e.to_string()))?;
        let token = service.cancellation_token();
        tokio::select! {
            _ = self.shutdown.cancelled() => token.cancel(),
            _ = service.waiting() => self.shutdown.cancel(),
        }
        Ok(())
    }

    /// Serves `router` over HTTP on `relayed` (the listener a relay handed back) or on a
    /// new listener at `listen`, until shutdown.
    async fn serve_http(
        &self,
        runtime: &Runtime,
        router: axum::Router,
        relayed: Option<tokio::net::TcpListener>,
        listen: SocketAddr,
        listening: &std::sync::OnceLock<SocketAddr>,
    ) -> Result<(), Error> {
        let http = &runtime.config.http;
        let bounds = listener::Bounds {
            max_connections: http.max_connections,
            header_timeout: http.header_timeout,
            shutdown_grace: CONNECTION_GRACE,
        };
        warn_of_low_fd_limit(bounds.max_connections);
        let socket = match relayed {
            Some(socket) => socket,
            None => bind_tcp(listen).await?,
        };
        let bound = local_addr(&socket)?;
        if !bound.ip().is_loopback() {
            tracing::warn!(
                "listening on {bound}, which is not a loopback address: /mcp needs the bearer token, /api/v1 the API key"
            );
        }
        let _ = listening.set(bound);
        self.notices.send(Notice::Listening { bound });
        let server = tokio::spawn(listener::serve(
            socket,
            router,
            bounds,
            self.shutdown.clone(),
        ));
        self.started(runtime).await;
        match server.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Error::Http(e)),
            Err(e) => Err(Error::Task {
                what: "the HTTP server's task",
                message: e.to_string(),
            }),
        }
    }

    /// Waits for the upstreams' first tool lists, gives the kernel back what start-up
    /// freed, and sends the start-up [`Summary`].
    async fn started(&self, runtime: &Runtime) {
        let upstreams = runtime.proxy.upstreams();
        upstreams.settle(START_SETTLE).await;
        // Start-up is over (plugins loaded, the upstreams' first tool lists indexed): give
        // the kernel back what it freed and take start-up's code out of the resident set,
        // so an idle proxy holds only what it uses.
        let code = crate::idle::give_back();
        tracing::debug!(
            bytes = code,
            "released the executable's resident code pages"
        );
        // And again whenever the proxy goes quiet after serving.
        tokio::spawn(crate::idle::release_when_quiet(self.shutdown.clone()));
        self.notices.send(Notice::Started(Box::new(Summary {
            annotators: runtime.annotators.clone(),
            validators: runtime.validators.clone(),
            guards: runtime.guards.clone(),
            scanner: runtime.scanner.clone(),
            sinks: runtime.sinks.clone(),
            upstreams: upstreams.statuses(),
        })));
    }
}

/// Warns when this process may open fewer files than the listener's connection cap needs
/// (raising its soft limit first).
fn warn_of_low_fd_limit(max_connections: usize) {
    let wanted = max_connections as u64 + listener::RESERVED_FDS;
    if let Some(fds) = listener::raise_fd_limit(wanted)
        && fds < wanted
    {
        tracing::warn!(
            "this process may open {fds} files, fewer than http.max_connections ({max_connections}) plus {} for its own use: raise `ulimit -n` or lower http.max_connections",
            listener::RESERVED_FDS
        );
    }
}

/// Listens on `listen`, saying what to do when the address is taken.
pub async fn bind_tcp(listen: SocketAddr) -> Result<tokio::net::TcpListener, Error> {
    tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|source| Error::Bind { listen, source })
}
