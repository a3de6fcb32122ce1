//! The egress proxy of a sandboxed server with `"network": {"allow": [...]}`: it accepts on a
//! listener bound inside the server's own network namespace (handed over by the sandbox, see
//! [`mcpproxy_sandbox::EgressReceiver`]), speaks HTTP (`CONNECT`, and plain `http://`
//! requests) and SOCKS5 on that one port, resolves names itself, connects from mcpproxy's
//! network only to the destinations the rules allow (never to an internal address a name
//! resolves to, unless that address is itself allowed), and reports every connection, refused
//! or not, with the bytes each way, as an [`EgressEvent`].
//!
//! The server has no other way out: its namespace holds nothing but its loopback.

mod http;
mod socks;
mod stats;

pub use stats::{EgressStats, Refused};

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpproxy_sandbox::egress::{Decision, EgressRules, destination};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// How many connections of one server the proxy carries at once; more wait in the
/// listener's backlog (each holds two of mcpproxy's file descriptors).
const MAX_CONNECTIONS: usize = 256;
/// How long a client may take to say where it wants to go.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long resolving a name may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting to one address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How a connection through the proxy ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Connected and carried until either side closed.
    Connected,
    /// Not allowed by the rules (or not understood), with why.
    Refused(String),
    /// Allowed, but resolving or connecting failed, with why.
    Failed(String),
}

impl Outcome {
    /// `connected`, `refused` or `failed`: the metrics' label and the record's word.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Connected => "connected",
            Self::Refused(_) => "refused",
            Self::Failed(_) => "failed",
        }
    }
}

/// One connection a server asked the proxy for.
#[derive(Debug, Clone)]
pub struct EgressEvent {
    pub server: Arc<str>,
    /// The host as the server asked for it (a name or an address), capped and checked; empty
    /// when the request could not be read.
    pub host: String,
    pub port: u16,
    /// The address connected to (or refused), when one was chosen.
    pub address: Option<IpAddr>,
    /// `connect` (HTTP CONNECT), `http` (a plain HTTP request) or `socks5`.
    pub protocol: &'static str,
    /// Bytes from the server to the destination, and back.
    pub sent: u64,
    pub received: u64,
    pub outcome: Outcome,
    pub duration: Duration,
}

impl EgressEvent {
    /// `host:port` for people.
    pub fn destination(&self) -> String {
        if self.host.is_empty() {
            "(unreadable request)".to_owned()
        } else {
            destination(&self.host, self.port)
        }
    }
}

/// Accepts connections on `listener` until the task is dropped (when the server's process
/// ends), and reports each one to `report`.
pub async fn serve(
    listener: TcpListener,
    rules: Arc<EgressRules>,
    server: Arc<str>,
    report: Arc<dyn Fn(EgressEvent) + Send + Sync>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // EMFILE and kin: wait a little rather than spin.
                tracing::debug!(server = %server, "egress proxy: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let rules = rules.clone();
        let server = server.clone();
        let report = report.clone();
        tokio::spawn(async move {
            let event = carry(stream, &rules, server).await;
            report(event);
            drop(permit);
        });
    }
}

/// What a client asked for: where, and how to answer it.
pub struct Request {
    pub host: String,
    pub port: u16,
    pub protocol: &'static str,
}

/// Handles one client connection to its end.
pub async fn carry(mut client: TcpStream, rules: &EgressRules, server: Arc<str>) -> EgressEvent {
    let started = Instant::now();
    let mut event = EgressEvent {
        server: server.clone(),
        host: String::new(),
        port: 0,
        address: None,
        protocol: "unknown",
        sent: 0,
        received: 0,
        outcome: Outcome::Refused(String::new()),
        duration: Duration::ZERO,
    };
    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&mut client)).await;
    let handshake = match handshake {
        Ok(Ok(handshake)) => handshake,
        Ok(Err(why)) => {
            event.outcome = Outcome::Refused(why);
            event.duration = started.elapsed();
            return event;
        }
        Err(_) => {
            event.outcome = Outcome::Refused(format!(
                "the client did not say where to connect within {} s",
                HANDSHAKE_TIMEOUT.as_secs()
            ));
            event.duration = started.elapsed();
            return event;
        }
    };
    event.host = handshake.request.host.clone();
    event.port = handshake.request.port;
    event.protocol = handshake.request.protocol;
    match open(rules, &handshake.request.host, handshake.request.port).await {
        Ok((upstream, address)) => {
            event.address = Some(address.ip());
            match handshake.answer.connected(&mut client, upstream).await {
                Ok((sent, received)) => {
                    event.sent = sent;
                    event.received = received;
                    event.outcome = Outcome::Connected;
                }
                Err((sent, received, why)) => {
                    event.sent = sent;
                    event.received = received;
                    event.outcome = if sent + received == 0 {
                        Outcome::Failed(why)
                    } else {
                        // Carried, then one side broke off: still a connection.
                        Outcome::Connected
                    };
                }
            }
        }
        Err(refusal) => {
            event.address = refusal.address;
            let why = refusal.why(&server, &event.host, event.port);
            handshake.answer.refused(&mut client, &refusal, &why).await;
            event.outcome = if refusal.kind == RefusalKind::NotAllowed {
                Outcome::Refused(why)
            } else {
                Outcome::Failed(why)
            };
        }
    }
    event.duration = started.elapsed();
    event
}

/// A request read, and the protocol's way of answering it.
struct Handshake {
    request: Request,
    answer: Answer,
}

/// How to answer the client once the destination is open or refused.
enum Answer {
    Http(http::HttpAnswer),
    Socks,
}

impl Answer {
    /// Tells the client it is connected and carries bytes both ways until either side
    /// closes: `(sent, received)`, or those with what broke.
    async fn connected(
        self,
        client: &mut TcpStream,
        mut upstream: TcpStream,
    ) -> Result<(u64, u64), (u64, u64, String)> {
        let preface = match self {
            Answer::Http(answer) => answer.connected(client, &mut upstream).await,
            Answer::Socks => socks::connected(client).await.map(|()| 0),
        }
        .map_err(|e| (0, 0, format!("answering the client failed: {e}")))?;
        pipe(client, &mut upstream)
            .await
            .map(|(sent, received)| (sent + preface, received))
            .map_err(|(sent, received, e)| (sent + preface, received, e))
    }

    async fn refused(self, client: &mut TcpStream, refusal: &Refusal, why: &str) {
        let answered = match self {
            Answer::Http(_) => http::refused(client, refusal.kind, why).await,
            Answer::Socks => socks::refused(client, refusal.kind).await,
        };
        if let Err(e) = answered {
            tracing::debug!("egress proxy: answering a refusal failed: {e}");
        }
    }
}

/// Reads the first bytes and the request of the protocol they belong to.
async fn handshake(client: &mut TcpStream) -> Result<Handshake, String> {
    let mut first = [0u8; 1];
    let peeked = client
        .peek(&mut first)
        .await
        .map_err(|e| format!("reading the request failed: {e}"))?;
    if peeked == 0 {
        return Err("the client closed before asking for anything".to_owned());
    }
    if first[0] == socks::VERSION {
        let request = socks::handshake(client).await?;
        Ok(Handshake {
            request,
            answer: Answer::Socks,
        })
    } else {
        let (request, answer) = http::handshake(client).await?;
        Ok(Handshake {
            request,
            answer: Answer::Http(answer),
        })
    }
}

/// Why no connection was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// The rules do not allow it.
    NotAllowed,
    /// The name did not resolve.
    Unresolved,
    /// Every allowed address refused or timed out.
    Unreachable,
}

#[derive(Debug)]
pub struct Refusal {
    kind: RefusalKind,
    /// The rules' words, or the resolver's or the connection's error.
    reason: String,
    /// The address refused or that failed, when there was one.
    address: Option<IpAddr>,
}

impl Refusal {
    /// The whole message, with what to add to the config when the rules refused it.
    fn why(&self, server: &str, host: &str, port: u16) -> String {
        match self.kind {
            RefusalKind::NotAllowed => {
                let grant = match self.address {
                    Some(address) if host.parse::<IpAddr>().is_err() => {
                        destination(&address.to_string(), port)
                    }
                    _ => destination(host.trim_start_matches('[').trim_end_matches(']'), port),
                };
                format!(
                    "{}; to allow it, add \"{grant}\" to \"isolation\": {{\"network\": {{\"allow\": [...]}}}} of server '{server}'",
                    self.reason
                )
            }
            _ => self.reason.clone(),
        }
    }
}

/// Opens a connection to `host:port` if the rules allow it.
async fn open(
    rules: &EgressRules,
    host: &str,
    port: u16,
) -> Result<(TcpStream, SocketAddr), Refusal> {
    let candidates: Vec<SocketAddr> = match rules.decide(host, port) {
        Decision::Refused(reason) => {
            return Err(Refusal {
                kind: RefusalKind::NotAllowed,
                reason,
                address: None,
            });
        }
        Decision::ConnectAddress(address) => vec![SocketAddr::new(address, port)],
        Decision::ResolveName => {
            let name = mcpproxy_sandbox::egress::host_name(host).unwrap_or_default();
            let resolved = tokio::time::timeout(
                RESOLVE_TIMEOUT,
                tokio::net::lookup_host((name.as_str(), port)),
            )
            .await;
            let addresses: Vec<SocketAddr> = match resolved {
                Ok(Ok(addresses)) => addresses.collect(),
                Ok(Err(e)) => {
                    return Err(Refusal {
                        kind: RefusalKind::Unresolved,
                        reason: format!("{name} did not resolve: {e}"),
                        address: None,
                    });
                }
                Err(_) => {
                    return Err(Refusal {
                        kind: RefusalKind::Unresolved,
                        reason: format!(
                            "{name} did not resolve within {} s",
                            RESOLVE_TIMEOUT.as_secs()
                        ),
                        address: None,
                    });
                }
            };
            let allowed: Vec<SocketAddr> = addresses
                .iter()
                .copied()
                .filter(|a| rules.address_allowed(a.ip(), port))
                .collect();
            if allowed.is_empty() {
                let Some(first) = addresses.first() else {
                    return Err(Refusal {
                        kind: RefusalKind::Unresolved,
                        reason: format!("{name} resolved to no address"),
                        address: None,
                    });
                };
                return Err(Refusal {
                    kind: RefusalKind::NotAllowed,
                    reason: format!(
                        "{name} resolves to {}, an address of this machine or a private network, which a name in the allow-list may not reach unless the address itself is listed (DNS rebinding)",
                        first.ip()
                    ),
                    address: Some(first.ip()),
                });
            }
            allowed
        }
    };
    let mut last = String::new();
    for address in &candidates {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                return Ok((stream, *address));
            }
            Ok(Err(e)) => last = format!("connecting to {address} failed: {e}"),
            Err(_) => {
                last = format!(
                    "connecting to {address} timed out after {} s",
                    CONNECT_TIMEOUT.as_secs()
                )
            }
        }
    }
    Err(Refusal {
        kind: RefusalKind::Unreachable,
        reason: last,
        address: candidates.first().map(SocketAddr::ip),
    })
}

/// Copies both ways until both sides are done: `(client to upstream, upstream to client)`,
/// counted even when one side breaks off.
async fn pipe(
    client: &mut TcpStream,
    upstream: &mut TcpStream,
) -> Result<(u64, u64), (u64, u64, String)> {
    let mut counted = Counted {
        inner: client,
        read: 0,
        written: 0,
    };
    let carried = tokio::io::copy_bidirectional(&mut counted, upstream).await;
    match carried {
        Ok(_) => Ok((counted.read, counted.written)),
        Err(e) => Err((counted.read, counted.written, e.to_string())),
    }
}

/// A stream that counts what is read from it and written to it.
struct Counted<'a> {
    inner: &'a mut TcpStream,
    read: u64,
    written: u64,
}

impl AsyncRead for Counted<'_> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut *self.inner).poll_read(cx, buf);
        self.read += (buf.filled().len() - before) as u64;
        polled
    }
}

impl AsyncWrite for Counted<'_> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let polled = std::pin::Pin::new(&mut *self.inner).poll_write(cx, data);
        if let std::task::Poll::Ready(Ok(n)) = polled {
            self.written += n as u64;
        }
        polled
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut *self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut *self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
