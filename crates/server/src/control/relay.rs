//! The HTTP front-end: when the data dir's owner serves stdio only (an IDE started it), a
//! `serve` on a loopback address forwards each TCP connection to the owner's control
//! socket, byte for byte, so the owner answers `/mcp`, `/api/v1` and the page as if it
//! listened there itself.
//!
//! The relay watches the owner (a `@watch` connection, which ends when the owner does) and,
//! when it is gone, tells its process ([`Hooks::gone`](super::bridge::Hooks)), which tries
//! to take the data dir over. A connection that arrives while no owner answers waits up to
//! [`OWNER_WAIT`] for one (this process, or another front-end that won) instead of failing.
//! When this process becomes the owner it asks for the listener back ([`Relay::hand_back`])
//! and serves it itself.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::attach::{self, Preamble};

/// How long a connection that finds no owner waits for one.
pub const OWNER_WAIT: Duration = Duration::from_secs(10);
/// How often a waiting connection, or the watch, tries the socket.
const POLL: Duration = Duration::from_millis(25);

/// A running relay.
pub struct Relay {
    task: tokio::task::JoinHandle<TcpListener>,
    stop: CancellationToken,
}

impl Relay {
    /// Forwards connections from `listener` to the owner of `data_dir` until `shutdown` or
    /// [`Self::hand_back`]; notifies `gone` each time it finds the owner gone.
    pub fn start(
        listener: TcpListener,
        data_dir: PathBuf,
        gone: Arc<Notify>,
        shutdown: CancellationToken,
    ) -> Self {
        let stop = shutdown.child_token();
        let watch = tokio::spawn(watch(data_dir.clone(), gone.clone(), stop.clone()));
        let task = tokio::spawn(serve(listener, data_dir, gone, stop.clone(), watch));
        Self { task, stop }
    }

    /// Stops accepting and returns the listener (connections being relayed go on to their
    /// end); `None` if the relay's task failed.
    pub async fn hand_back(self) -> Option<TcpListener> {
        self.stop.cancel();
        self.task.await.ok()
    }
}

/// Holds a `@watch` connection to the owner; notifies `gone` when it ends or no owner
/// answers, then waits for an owner to watch again.
async fn watch(data_dir: PathBuf, gone: Arc<Notify>, stop: CancellationToken) {
    loop {
        let watched = async {
            let stream = super::connect(&data_dir).await?;
            let mut stream = tokio::io::BufReader::new(stream);
            attach::send(&mut stream, &Preamble::Watch).await.ok()?;
            let mut sink = tokio::io::sink();
            let _ = tokio::io::copy(&mut stream, &mut sink).await;
            Some(())
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = watched => {}
        }
        gone.notify_one();
        // Until an owner answers again.
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(POLL) => {}
            }
            if super::connect(&data_dir).await.is_some() {
                break;
            }
        }
    }
}

async fn serve(
    listener: TcpListener,
    data_dir: PathBuf,
    gone: Arc<Notify>,
    stop: CancellationToken,
    watch: tokio::task::JoinHandle<()>,
) -> TcpListener {
    let connections = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let Ok((mut client, _)) = accepted else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let data_dir = data_dir.clone();
        let gone = gone.clone();
        connections.spawn(async move {
            let _ = client.set_nodelay(true);
            match owner(&data_dir, &gone).await {
                Some(mut owner) => {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut owner).await;
                }
                None => refuse(client, &data_dir).await,
            }
        });
    }
    watch.abort();
    connections.close();
    listener
}

/// The owner's socket, waiting up to [`OWNER_WAIT`] for one to answer.
async fn owner(data_dir: &Path, gone: &Notify) -> Option<UnixStream> {
    if let Some(owner) = super::connect(data_dir).await {
        return Some(owner);
    }
    gone.notify_one();
    let deadline = tokio::time::Instant::now() + OWNER_WAIT;
    while tokio::time::Instant::now() < deadline {
        // Even after the relay stopped (this process became the owner): its socket
        // answers soon.
        tokio::time::sleep(POLL).await;
        if let Some(owner) = super::connect(data_dir).await {
            return Some(owner);
        }
    }
    None
}

/// A 503 that says why: no owner answered in time.
async fn refuse(mut client: TcpStream, data_dir: &Path) {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": -32000,
            "message": format!(
                "mcpproxy is not running for {}: the process this front-end forwarded to stopped, and no mcpproxy took the data dir over within {} s (see this process's log for why). Start `mcpproxy serve` there again.",
                data_dir.display(),
                OWNER_WAIT.as_secs()
            ),
        },
    })
    .to_string();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(response.as_bytes()).await;
    let _ = client.shutdown().await;
}
