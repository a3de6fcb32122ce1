//! A `serve` that starts beside a running owner is its front-end: on stdio it carries the
//! IDE's session to the owner ([`crate::control::bridge`]), over HTTP it relays connections
//! to it ([`crate::control::relay`]). When the owner goes away the front-end says so and
//! [`super::owner`] tries to take the data dir over; this module holds the running
//! front-end across those attempts and hands its stdio or its listener to the new owner.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Error, Notice, Notices, Transport, bind_tcp};
use crate::control::attach::Preamble;
use crate::control::bridge::{self, Hooks};
use crate::control::relay::Relay;

/// The front-end this process runs.
pub(super) enum FrontEnd {
    /// The IDE's stdio session, carried to the owner.
    Stdio {
        task: tokio::task::JoinHandle<std::io::Result<()>>,
        hooks: Hooks,
    },
    /// TCP connections relayed to the owner.
    Http { relay: Relay, gone: Arc<Notify> },
}

/// What a front-end waited for.
pub(super) enum Event {
    /// The owner is gone: try to take the data dir over.
    OwnerGone,
    /// The front-end ended (the IDE closed its session): so does this process.
    Ended,
}

impl FrontEnd {
    /// Starts the front-end on `owner`, the owner's socket.
    ///
    /// Over HTTP, an owner that serves HTTP itself is not relayed to: the error names the
    /// address it serves, which clients use instead. `api_key` is the config's `api_key`
    /// (else the data dir's key file is read), to ask the owner where it listens.
    pub(super) async fn start(
        owner: tokio::net::UnixStream,
        transport: &Transport,
        data_dir: &Path,
        api_key: Option<&str>,
        notices: &Notices,
        shutdown: CancellationToken,
    ) -> Result<Self, Error> {
        let listen = match transport {
            Transport::Stdio { server } => {
                return Ok(Self::bridge(
                    owner,
                    server.clone(),
                    data_dir,
                    notices,
                    shutdown,
                ));
            }
            Transport::Http { listen } => *listen,
        };
        drop(owner);
        if let Some(url) = owner_http_address(data_dir, api_key).await {
            return Err(Error::AlreadyServing {
                data_dir: data_dir.to_owned(),
                url,
            });
        }
        if !listen.ip().is_loopback() {
            return Err(Error::RelayNotLoopback {
                data_dir: data_dir.to_owned(),
                listen,
            });
        }
        let socket = bind_tcp(listen).await?;
        let bound = local_addr(&socket)?;
        notices.send(Notice::Relaying {
            data_dir: data_dir.to_owned(),
            bound,
        });
        let gone = Arc::new(Notify::new());
        let relay = Relay::start(socket, data_dir.to_owned(), gone.clone(), shutdown);
        Ok(Self::Http { relay, gone })
    }

    /// Carries this process's stdio session to the owner.
    fn bridge(
        owner: tokio::net::UnixStream,
        server: Option<String>,
        data_dir: &Path,
        notices: &Notices,
        shutdown: CancellationToken,
    ) -> Self {
        notices.send(Notice::Forwarding {
            data_dir: data_dir.to_owned(),
            server: server.clone(),
        });
        let preamble = server.map(Preamble::Server);
        let hooks = Hooks::default();
        let stdin = mcpproxy_upstream::line_guard::LineGuard::new(
            tokio::io::stdin(),
            mcpproxy_upstream::line_guard::oversized_request,
        );
        let data_dir = data_dir.to_owned();
        let bridge_hooks = hooks.clone();
        let task = tokio::spawn(async move {
            bridge::run(
                &data_dir,
                owner,
                preamble,
                stdin,
                tokio::io::stdout(),
                bridge_hooks,
                shutdown,
            )
            .await
        });
        Self::Stdio { task, hooks }
    }

    /// Waits until the owner is gone or the front-end ends.
    pub(super) async fn next(&mut self) -> Result<Event, Error> {
        match self {
            Self::Stdio { task, hooks } => tokio::select! {
                _ = hooks.gone.notified() => Ok(Event::OwnerGone),
                ended = task => {
                    ended
                        .map_err(|e| Error::Task { what: "the stdio session", message: e.to_string() })?
                        .map_err(Error::Bridge)?;
                    Ok(Event::Ended)
                }
            },
            Self::Http { gone, .. } => {
                gone.notified().await;
                Ok(Event::OwnerGone)
            }
        }
    }
}

/// The address a listener is bound to.
pub(super) fn local_addr(socket: &tokio::net::TcpListener) -> Result<SocketAddr, Error> {
    socket.local_addr().map_err(Error::BoundAddress)
}

/// The MCP endpoint the owner of `data_dir` serves over HTTP (`listening` of its
/// `GET /api/v1/status`, asked on its control socket), or `None` when it serves stdio only
/// or cannot say.
async fn owner_http_address(data_dir: &Path, api_key: Option<&str>) -> Option<String> {
    let key = crate::api::key::load_existing(data_dir, api_key)?;
    mcpproxy_auth::install_crypto_providers();
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(5))
        .unix_socket(crate::control::socket_path(data_dir))
        .build()
        .ok()?;
    let status: serde_json::Value = http
        .get("http://localhost/api/v1/status")
        .header("X-API-Key", key)
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    status["data"]["listening"].as_str().map(str::to_owned)
}
