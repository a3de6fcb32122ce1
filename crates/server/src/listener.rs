//! The TCP listener that carries `/mcp` and `/api/v1`: HTTP/1.1 connections served by
//! hyper, with the bounds that keep one caller from taking the listener from the others.
//!
//! - At most `max_connections` connections are open; one more is answered `503` with the
//!   reason and closed at once, so a client never hangs in the accept queue.
//! - A connection must send a request's headers within `header_timeout`; the same timeout
//!   closes a keep-alive connection that sits idle between requests. Idle sockets therefore
//!   cost a bounded time, not a slot forever.
//! - Each request carries the client's address as [`ConnectInfo`] (the `/mcp` session
//!   bounds are per client address).
//! - Running out of file descriptors is survived: accept waits a moment and goes on. The
//!   soft descriptor limit is raised toward the hard one at start ([`raise_fd_limit`]).
//!
//! Depends on nothing else in the crate.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// The listener's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Open connections at most.
    pub max_connections: usize,
    /// How long a request's headers may take to arrive, and how long an idle keep-alive
    /// connection stays open.
    pub header_timeout: Duration,
    /// How long open connections may take to finish at shutdown.
    pub shutdown_grace: Duration,
}

/// How long a refused connection's `503` may take to write.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long accept waits after running out of file descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// At most one warning about refused connections in this interval.
const WARN_INTERVAL: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `shutdown` fires, then lets open connections finish
/// for up to `bounds.shutdown_grace`.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    bounds: Bounds,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(bounds.max_connections));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let warnings = RateLimitedWarning::new();
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                warnings.warn(|| tracing::warn!("cannot accept a connection ({e}); retrying"));
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            warnings.warn(|| {
                tracing::warn!(
                    "refused a connection from {peer}: all {} connection slots are in use (http.max_connections)",
                    bounds.max_connections
                )
            });
            tokio::spawn(refuse(stream, bounds.max_connections));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            app.clone().oneshot(request)
        });
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(bounds.header_timeout)
            .serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("connection from {peer} ended: {e}");
            }
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(bounds.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::debug!(
            "connections still open after {:?} at shutdown; closing them",
            bounds.shutdown_grace
        );
    }
    Ok(())
}

/// Errors of one connection that says nothing about the listener.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Answers a connection past the cap with a `503` saying why, then closes it.
async fn refuse(mut stream: TcpStream, max_connections: usize) {
    let body = format!(
        "mcpproxy has {max_connections} connections open, its limit (http.max_connections); \
         retry in a moment or raise the limit in mcp_config.json\n"
    );
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(REFUSAL_WRITE_TIMEOUT, async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
}

/// Logs at most once per [`WARN_INTERVAL`], so a flood does not become a log flood.
struct RateLimitedWarning {
    start: Instant,
    last_ms: AtomicU64,
}

impl RateLimitedWarning {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            last_ms: AtomicU64::new(u64::MAX),
        }
    }

    fn warn(&self, log: impl FnOnce()) {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.last_ms.load(Ordering::Relaxed);
        let due = last == u64::MAX || now.saturating_sub(last) >= WARN_INTERVAL.as_millis() as u64;
        if due
            && self
                .last_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            log();
        }
    }
}

/// Raises the soft limit on open file descriptors toward the hard limit, enough for
/// `wanted` connections plus the proxy's own files; returns the soft limit now in force.
/// Where the hard limit is lower, the connection cap is effectively lower too: the caller
/// says so.
#[cfg(unix)]
#[allow(
    clippy::unnecessary_cast,
    reason = "rlim_t is u64 on Linux, not on every unix"
)]
#[allow(
    unsafe_code,
    reason = "libc has no safe wrapper for getrlimit and setrlimit"
)]
pub fn raise_fd_limit(wanted: u64) -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    let target = wanted.min(limit.rlim_max as u64);
    if (limit.rlim_cur as u64) < target {
        let raised = libc::rlimit {
            rlim_cur: target as libc::rlim_t,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Some(target);
        }
    }
    Some(limit.rlim_cur as u64)
}

#[cfg(not(unix))]
pub fn raise_fd_limit(_wanted: u64) -> Option<u64> {
    None
}

/// Descriptors kept for the proxy's own files, upstream pipes and journal besides the
/// connections.
pub const RESERVED_FDS: u64 = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_rate_limited() {
        let warnings = RateLimitedWarning::new();
        let mut logged = 0;
        for _ in 0..1000 {
            warnings.warn(|| logged += 1);
        }
        assert_eq!(logged, 1);
    }

    #[tokio::test]
    async fn a_connection_past_the_cap_gets_a_503_with_the_reason() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().route("/", axum::routing::get(|| async { "hello" }));
        let shutdown = CancellationToken::new();
        let bounds = Bounds {
            max_connections: 1,
            header_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(1),
        };
        let server = tokio::spawn(serve(listener, app, bounds, shutdown.clone()));
        // The first connection holds the only slot (it never sends a request).
        let _idle = TcpStream::connect(addr).await.unwrap();
        tokio::task::yield_now().await;
        let mut second = TcpStream::connect(addr).await.unwrap();
        second
            .write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        second.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.contains("http.max_connections"), "{answer}");
        shutdown.cancel();
        server.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_connection_that_sends_nothing_is_closed_after_the_header_timeout() {
        use tokio::io::AsyncReadExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().route("/", axum::routing::get(|| async { "hello" }));
        let shutdown = CancellationToken::new();
        let bounds = Bounds {
            max_connections: 8,
            header_timeout: Duration::from_millis(200),
            shutdown_grace: Duration::from_secs(1),
        };
        let server = tokio::spawn(serve(listener, app, bounds, shutdown.clone()));
        let mut idle = TcpStream::connect(addr).await.unwrap();
        let mut buf = Vec::new();
        // Without the timeout this read would never end (the test would hang, not pass).
        tokio::time::timeout(Duration::from_secs(30), idle.read_to_end(&mut buf))
            .await
            .expect("the idle connection was not closed")
            .ok();
        assert!(
            buf.is_empty() || buf.starts_with(b"HTTP/1.1 408"),
            "{buf:?}"
        );
        shutdown.cancel();
        server.await.unwrap().unwrap();
    }
}
