//! The owner's side of the control socket: bind it with mode 0600 and serve each
//! connection as HTTP (the app of the TCP listener) or as an MCP session in
//! newline-delimited JSON-RPC (what a front-end `serve --stdio` forwards), after an
//! optional [`Preamble`] line (`@server NAME`, `@watch`).

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::attach::{self, Preamble};
use super::{Error, check_length, socket_path};

/// How long an HTTP client of the socket may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long open connections may finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Serves one MCP session over a connection (its read and write halves): of the aggregate
/// endpoint, or with `Some(name)` of upstream `name`'s direct endpoint.
pub type SessionServer = Arc<
    dyn Fn(
            Option<String>,
            tokio::io::ReadHalf<BufReader<UnixStream>>,
            tokio::io::WriteHalf<BufReader<UnixStream>>,
        ) -> Pin<Box<dyn Future<Output = ()> + Send>>
        + Send
        + Sync,
>;

/// Whether an upstream of this name exists (`Err` says which do).
pub type ServerCheck = Arc<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// What the owner serves MCP sessions with.
#[derive(Clone)]
pub struct Sessions {
    pub serve: SessionServer,
    pub check_server: ServerCheck,
}

/// The bound socket; its file is removed when this is dropped.
pub struct ControlSocket {
    listener: UnixListener,
    path: PathBuf,
    /// The socket file's inode, to remove only our own file.
    inode: u64,
}

impl ControlSocket {
    /// Binds `<data_dir>/mcpproxy.sock`. Call it only while holding the data dir's journal:
    /// then no other owner can be running, and a socket file already there is one an owner
    /// that died left behind, replaced here. The socket is bound under a temporary name,
    /// given mode 0600, then renamed into place, so it is never reachable with wider
    /// permissions.
    pub fn bind(data_dir: &Path) -> Result<Self, Error> {
        let path = socket_path(data_dir);
        check_length(&path)?;
        let temporary = data_dir.join(format!(".{}.{}", super::SOCKET_FILE, std::process::id()));
        check_length(&temporary)?;
        let failed = |source| Error::Bind {
            path: path.clone(),
            source,
        };
        let _ = std::fs::remove_file(&temporary);
        let listener = UnixListener::bind(&temporary).map_err(failed)?;
        std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))
            .and_then(|()| std::fs::rename(&temporary, &path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&temporary);
                failed(e)
            })?;
        let inode = {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(&path).map_err(failed)?.ino()
        };
        Ok(Self {
            listener,
            path,
            inode,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accepts connections until `shutdown`, then gives open ones [`SHUTDOWN_GRACE`].
    pub async fn serve(self, app: Router, sessions: Sessions, shutdown: CancellationToken) {
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let connections = tokio_util::task::TaskTracker::new();
        loop {
            let accepted = tokio::select! {
                _ = shutdown.cancelled() => break,
                accepted = self.listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::debug!("control socket: cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            // A server mcpproxy started must not reach the owner through its socket (it would
            // get the owner's session: other servers' tools and grants, management).
            if let Some(why) = refused_peer(&stream) {
                tracing::warn!("control socket: refused a connection: {why}");
                continue;
            }
            // Telling the protocol apart waits for the client's first byte: done in the
            // connection's own task, so a client that sends nothing holds up no other.
            let app = app.clone();
            let sessions = sessions.clone();
            let ended = shutdown.clone();
            let watcher = graceful.watcher();
            connections.spawn(async move {
                serve_connection(stream, app, sessions, watcher, ended).await;
            });
        }
        // Closed at once (the file removed): a front-end that tries the socket from now on
        // finds no owner and may take the data dir over as soon as the journal is free.
        drop(self);
        connections.close();
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, async {
            graceful.shutdown().await;
            connections.wait().await;
        })
        .await;
    }
}

/// Why the peer of `stream` may not use the socket: a sandboxed process (a stdio server
/// mcpproxy started, or anything it started), or a peer whose credentials cannot be read.
fn refused_peer(stream: &UnixStream) -> Option<String> {
    let credentials = match stream.peer_cred() {
        Ok(credentials) => credentials,
        Err(e) => return Some(format!("its credentials cannot be read: {e}")),
    };
    #[cfg(target_os = "linux")]
    {
        let Some(pid) = credentials.pid() else {
            return Some("the kernel gave no pid for it".to_owned());
        };
        mcpproxy_sandbox::sandboxed_peer(pid)
            .map(|why| format!("{why}: a sandboxed server may not use mcpproxy's control socket"))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = credentials;
        None
    }
}

/// One connection: an MCP session if it starts with JSON, else HTTP.
async fn serve_connection(
    stream: UnixStream,
    app: Router,
    sessions: Sessions,
    watcher: hyper_util::server::graceful::Watcher,
    shutdown: CancellationToken,
) {
    let mut reader = BufReader::new(stream);
    let first = match tokio::time::timeout(HEADER_TIMEOUT, reader.fill_buf()).await {
        Ok(Ok(buf)) => buf.first().copied(),
        _ => return,
    };
    match first {
        None => {}
        Some(b'@') => match Preamble::read(&mut reader).await {
            Ok(Preamble::Watch) => {
                // Held open until the owner stops; whatever the front-end sends is ignored.
                let mut sink = tokio::io::sink();
                tokio::select! {
                    _ = tokio::io::copy(&mut reader, &mut sink) => {}
                    _ = shutdown.cancelled() => {}
                }
            }
            Ok(Preamble::Server(name)) => {
                let checked = (sessions.check_server)(&name);
                let answered = attach::answer(reader.get_mut(), &checked).await;
                if checked.is_ok() && answered.is_ok() {
                    let (read, write) = tokio::io::split(reader);
                    tokio::select! {
                        _ = (sessions.serve)(Some(name), read, write) => {}
                        _ = shutdown.cancelled() => {}
                    }
                }
            }
            Err(why) => {
                let _ = attach::answer(reader.get_mut(), &Err(why)).await;
            }
        },
        Some(b'{') | Some(b' ') | Some(b'\n') | Some(b'\r') | Some(b'\t') => {
            let (read, write) = tokio::io::split(reader);
            tokio::select! {
                _ = (sessions.serve)(None, read, write) => {}
                _ = shutdown.cancelled() => {}
            }
        }
        Some(_) => {
            let service =
                hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
                    // Socket clients are local: they count as loopback ones.
                    request
                        .extensions_mut()
                        .insert(ConnectInfo(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))));
                    app.clone().oneshot(request)
                });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(reader), service);
            if let Err(e) = watcher.watch(connection).await {
                tracing::debug!("control socket connection ended: {e}");
            }
        }
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        // Only our own socket: once the journal is released, a new owner may have put its
        // own file in place.
        use std::os::unix::fs::MetadataExt;
        if std::fs::metadata(&self.path).is_ok_and(|m| m.ino() == self.inode) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn binds_owner_only_replaces_a_stale_file_and_removes_its_own() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        // A file an owner that died left behind.
        std::fs::write(socket_path(dir.path()), b"stale").unwrap();
        let socket = ControlSocket::bind(dir.path()).unwrap();
        let mode = std::fs::metadata(socket.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(crate::control::connect(dir.path()).await.is_some());
        drop(socket);
        assert!(!socket_path(dir.path()).exists());
        assert!(crate::control::connect(dir.path()).await.is_none());
    }

    #[test]
    fn a_path_too_long_for_a_socket_is_named() {
        let dir = PathBuf::from(format!("/tmp/{}", "d".repeat(120)));
        match ControlSocket::bind(&dir) {
            Err(Error::PathTooLong { len, .. }) => assert!(len > 107),
            other => panic!(
                "expected PathTooLong, got {:?}",
                other.map(|s| s.path.clone())
            ),
        }
    }
}
