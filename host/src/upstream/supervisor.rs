//! The task that owns one upstream's session: connect, list tools, watch, reconnect.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

use crate::config::Transport;
use crate::index::ToolIndex;
use crate::policy::MAX_QUALIFIED_NAME_BYTES;
use crate::trust::{is_unprintable, quote};

use super::{State, Upstream, tool_from_mcp, write};

/// How long one connection attempt (spawn + initialize) may take; each tools/list has the
/// same bound of its own.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The next line of a server's stderr, cut to [`super::log::MAX_LINE_BYTES`] (the rest of a
/// longer line is read and dropped, never held); `None` at the end.
async fn bounded_line<R: tokio::io::AsyncBufRead + Unpin>(reader: &mut R) -> Option<String> {
    let mut line = Vec::new();
    let mut read_any = false;
    loop {
        let buf = reader.fill_buf().await.ok()?;
        if buf.is_empty() {
            return read_any.then(|| String::from_utf8_lossy(&line).into_owned());
        }
        read_any = true;
        let (chunk, found) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        let room = super::log::MAX_LINE_BYTES.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = found.unwrap_or(buf.len());
        reader.consume(used);
        if found.is_some() {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Some(String::from_utf8_lossy(&line).into_owned());
        }
    }
}

/// rmcp's client-side handler: reacts to what the upstream tells us.
struct UpstreamClient {
    upstream: Weak<Upstream>,
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        // No `roots`: server-filesystem would replace its allowed directories with ours.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mcpproxy", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(upstream) = self.upstream.upgrade() {
            tracing::info!(
                server = upstream.name(),
                "received tools/list_changed from upstream server"
            );
            upstream.refresh.notify_one();
        }
    }
}

type Session = RunningService<RoleClient, UpstreamClient>;

/// Runs until `shutdown`: keeps one session alive, reconnecting with backoff.
pub(super) async fn run(
    upstream: Arc<Upstream>,
    index: Arc<ToolIndex>,
    shutdown: CancellationToken,
) {
    let name = upstream.name().to_owned();
    let initial = upstream.settings.reconnect_initial;
    let max = upstream.settings.reconnect_max.max(initial);
    let mut backoff = initial;
    loop {
        upstream.state.send_replace(State::Connecting);
        let connected = tokio::select! {
            _ = shutdown.cancelled() => break,
            result = tokio::time::timeout(CONNECT_TIMEOUT, connect(&upstream)) => result
                .unwrap_or_else(|_| Err(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()))),
        };
        match connected {
            Ok((session, child)) => {
                backoff = initial;
                let ended = serve_session(&upstream, session, &shutdown).await;
                drop(child);
                *write(&upstream.peer) = None;
                if let Err(e) = index.remove_server(&name) {
                    tracing::warn!(server = %name, "cannot drop tools from the index: {e}");
                }
                match ended {
                    SessionEnd::Shutdown => break,
                    SessionEnd::Lost(reason) => {
                        tracing::warn!(server = %name, "upstream connection lost: {reason}; reconnecting");
                        upstream.state.send_replace(State::Error(reason));
                        // A session that worked reconnects quickly once, then backs off.
                        tokio::select! {
                            _ = shutdown.cancelled() => break,
                            _ = tokio::time::sleep(initial) => continue,
                        }
                    }
                }
            }
            Err(reason) => {
                tracing::warn!(
                    server = %name,
                    "cannot connect to upstream: {reason}; retrying in {} ms",
                    backoff.as_millis()
                );
                upstream.state.send_replace(State::Error(reason));
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(max);
    }
    upstream.state.send_replace(State::Disconnected);
}

enum SessionEnd {
    Shutdown,
    Lost(String),
}

/// Lists tools, publishes them, and watches the session until it ends.
async fn serve_session(
    upstream: &Arc<Upstream>,
    session: Session,
    shutdown: &CancellationToken,
) -> SessionEnd {
    let peer = session.peer().clone();
    let session_token = session.cancellation_token();
    let mut waiter = tokio::spawn(session.waiting());
    *write(&upstream.peer) = Some(peer.clone());

    if let Err(reason) = refresh_tools(upstream, &peer).await {
        session_token.cancel();
        let _ = waiter.await;
        return SessionEnd::Lost(reason);
    }
    upstream.state.send_replace(State::Ready);
    tracing::info!(
        server = upstream.name(),
        tools = upstream.tools().len(),
        "upstream ready"
    );

    let mut sweep = tokio::time::interval(upstream.settings.tools_refresh);
    sweep.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => {
                session_token.cancel();
                let _ = (&mut waiter).await;
                return SessionEnd::Shutdown;
            }
            quit = &mut waiter => {
                let reason = match quit {
                    Ok(reason) => format!("session ended ({reason:?})"),
                    Err(e) => format!("session task failed: {e}"),
                };
                return SessionEnd::Lost(reason);
            }
            _ = upstream.refresh.notified() => {}
            _ = sweep.tick() => {}
        }
        if let Err(reason) = refresh_tools(upstream, &peer).await {
            session_token.cancel();
            let _ = (&mut waiter).await;
            return SessionEnd::Lost(reason);
        }
    }
}

/// Re-reads the tool list, vets it against the trust store, and publishes it.
async fn refresh_tools(
    upstream: &Upstream,
    peer: &rmcp::service::Peer<RoleClient>,
) -> Result<(), String> {
    let listed = tokio::time::timeout(CONNECT_TIMEOUT, peer.list_all_tools())
        .await
        .map_err(|_| "tools/list did not answer".to_owned())?
        .map_err(|e| format!("tools/list failed: {e}"))?;
    let name = upstream.name();
    let (listable, unlistable): (Vec<_>, Vec<_>) = listed
        .iter()
        .partition(|t| is_listable_tool_name(name, &t.name));
    if !unlistable.is_empty() {
        let names: Vec<String> = unlistable.iter().map(|t| quote(&t.name)).collect();
        tracing::warn!(
            server = name,
            "ignoring {} tool(s) whose names have control or invisible characters or are too long to call: {}",
            names.len(),
            names.join(", ")
        );
    }
    let tools: BTreeMap<String, crate::policy::Tool> = listable
        .into_iter()
        .map(|t| (t.name.to_string(), tool_from_mcp(name, t)))
        .collect();
    let review = upstream.vet(&tools);
    upstream.publish(tools, review);
    Ok(())
}

/// Whether a tool's name can be listed and called: printable (no control, bidirectional or
/// zero-width characters, which could forge what a terminal shows) and short enough that
/// `server:tool` fits [`MAX_QUALIFIED_NAME_BYTES`].
fn is_listable_tool_name(server: &str, tool: &str) -> bool {
    !tool.is_empty()
        && server.len() + 1 + tool.len() <= MAX_QUALIFIED_NAME_BYTES
        && !tool.chars().any(is_unprintable)
}

/// A session with the server, and its process when it is a stdio server (dropped when the
/// session is over).
async fn connect(
    upstream: &Arc<Upstream>,
) -> Result<(Session, Option<super::child::ChildGuard>), String> {
    let handler = UpstreamClient {
        upstream: Arc::downgrade(upstream),
    };
    match &upstream.config.transport {
        Transport::Stdio {
            command,
            args,
            env,
            working_dir,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).envs(env);
            if let Some(dir) = working_dir {
                cmd.current_dir(dir);
            }
            let (child, pipes) =
                super::child::spawn(cmd).map_err(|e| format!("cannot start `{command}`: {e}"))?;
            let stderr = pipes.stderr;
            let transport = (pipes.stdout, pipes.stdin);
            if let Some(stderr) = stderr {
                let weak = Arc::downgrade(upstream);
                tokio::spawn(async move {
                    let mut reader = tokio::io::BufReader::new(stderr);
                    while let Some(line) = bounded_line(&mut reader).await {
                        let Some(upstream) = weak.upgrade() else {
                            break;
                        };
                        tracing::debug!(server = %upstream.name(), "stderr: {}", quote(&line));
                        upstream.log_line(&line);
                    }
                });
            }
            let session = handler
                .serve(transport)
                .await
                .map_err(|e| format!("MCP initialize with `{command}` failed: {e}"))?;
            Ok((session, Some(child)))
        }
        Transport::Http { url, headers } => {
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            let mut custom = HashMap::new();
            for (key, value) in headers {
                let key = http::HeaderName::try_from(key.as_str())
                    .map_err(|e| format!("header name '{key}' is not valid: {e}"))?;
                let value = http::HeaderValue::try_from(value.as_str())
                    .map_err(|e| format!("header '{key}' has a value that is not valid: {e}"))?;
                custom.insert(key, value);
            }
            config.custom_headers = custom;
            let transport = StreamableHttpClientTransport::from_config(config);
            let session = handler.serve(transport).await.map_err(|e| {
                let message = match &e {
                    rmcp::service::ClientInitializeError::TransportError { error, .. } => {
                        super::reach::describe_http_failure(url.as_str(), error.error.as_ref())
                    }
                    _ => format!("MCP initialize with {url} failed: {e}"),
                };
                // The message goes to logs, the startup summary and /api/v1/status.
                super::reach::hide_url_password(&message, url)
            })?;
            Ok((session, None))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_with_names_that_could_forge_output_or_not_be_called_are_not_listed() {
        assert!(is_listable_tool_name("fs", "read_file"));
        assert!(is_listable_tool_name("fs", "lire_données"));
        for bad in [
            "",
            "x\r01FAKE",
            "x\n",
            "\u{1b}[2J",
            "rev\u{202e}txt",
            "zero\u{200b}w",
        ] {
            assert!(!is_listable_tool_name("fs", bad), "{bad:?}");
        }
        let longest = "a".repeat(MAX_QUALIFIED_NAME_BYTES - "fs:".len());
        assert!(is_listable_tool_name("fs", &longest));
        assert!(!is_listable_tool_name("fs", &format!("{longest}a")));
    }
}
