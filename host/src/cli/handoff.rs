//! A `serve` that starts beside a running owner is its front-end: `--stdio` carries the
//! IDE's session to it ([`mcpproxy_server::control::bridge`]), HTTP relays connections to it
//! ([`mcpproxy_server::control::relay`]). When the owner goes away the front-end says so, and `serve`
//! tries to take the data dir over (see `serve.rs`); this module holds the running
//! front-end across those attempts and hands its stdio or its listener to the new owner.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use mcpproxy_server::control::attach::Preamble;
use mcpproxy_server::control::bridge::{self, Hooks};
use mcpproxy_server::control::relay::Relay;

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
    pub(super) async fn start(
        owner: tokio::net::UnixStream,
        stdio: Option<Option<String>>,
        data_dir: &Path,
        listen: SocketAddr,
        shutdown: CancellationToken,
    ) -> Result<Self> {
        if let Some(server) = stdio {
            eprintln!(
                "mcpproxy {}: {} is owned by a running mcpproxy; this stdio session is forwarded to it (its upstreams, journal and policy){}",
                env!("CARGO_PKG_VERSION"),
                data_dir.display(),
                server
                    .as_ref()
                    .map(|s| format!(", serving upstream {s}'s own endpoint"))
                    .unwrap_or_default()
            );
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
            return Ok(Self::Stdio { task, hooks });
        }
        drop(owner);
        if !listen.ip().is_loopback() {
            bail!(
                "{} is already owned by a running mcpproxy, and a second one may only relay to it on a loopback address, not {listen}: stop the owner and start this one alone to listen there",
                data_dir.display()
            );
        }
        let socket = super::serve::bind_tcp(listen).await?;
        let bound = socket
            .local_addr()
            .context("cannot read the bound address")?;
        eprintln!(
            "{} is owned by a running mcpproxy (serving stdio); this one relays HTTP to it, and takes over if it stops",
            data_dir.display()
        );
        eprintln!(
            "mcpproxy {} listening on http://{bound}/mcp",
            env!("CARGO_PKG_VERSION")
        );
        let gone = Arc::new(Notify::new());
        let relay = Relay::start(socket, data_dir.to_owned(), gone.clone(), shutdown);
        Ok(Self::Http { relay, gone })
    }

    /// Waits until the owner is gone or the front-end ends.
    pub(super) async fn next(&mut self) -> Result<Event> {
        match self {
            Self::Stdio { task, hooks } => tokio::select! {
                _ = hooks.gone.notified() => Ok(Event::OwnerGone),
                ended = task => {
                    ended
                        .context("the stdio session's task failed")?
                        .context("the stdio session to the owner failed")?;
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
