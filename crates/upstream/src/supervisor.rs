//! The task that owns one upstream's session: connect, list tools, watch, reconnect.

// Logging and sampling are deprecated by SEP-2577 (2026-07-28), but the clients and servers
// of earlier versions use them, and mcpproxy carries them.
#![allow(
    deprecated,
    reason = "MCP logging and sampling are deprecated by SEP-2577; earlier clients and servers use them"
)]

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::Implementation;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

use crate::index::ToolIndex;
use crate::oauth::Watched;
use mcpproxy_config::{StdioLaunch, Transport};
use mcpproxy_support::quote;

use super::handler::{UpstreamClient, proxy_client_capabilities};
use super::listing::{Warned, is_listable_tool_name, list_tools};
use super::server::ServerSession;
use super::{State, Upstream, tool_from_mcp};
use mcpproxy_support::write_lock as write;

/// How long one connection attempt (spawn + initialize) may take; each tools/list has the
/// same bound of its own.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a connection attempt may take when the server's command is a package launcher
/// (`npx -y`, `uvx`): its first start downloads and installs the server before the server
/// says a word, which takes minutes on a slow network or a busy machine. Cutting it short
/// would kill the install half-way, and the next attempt would start it over.
const LAUNCHER_CONNECT_TIMEOUT: Duration = Duration::from_secs(600);

/// The bound of one connection attempt of `upstream`.
fn connect_timeout(upstream: &Upstream) -> Duration {
    match &upstream.config.transport {
        Transport::Stdio { command, args, .. }
            if mcpproxy_sandbox::launcher_kind(command, args).is_some() =>
        {
            LAUNCHER_CONNECT_TIMEOUT
        }
        _ => CONNECT_TIMEOUT,
    }
}

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
    let warned = Arc::new(Warned::default());
    // A lazy server whose tools are known (published from its pins, `idle`) waits for its
    // first call; one never listed is started to learn them, and left to idle.
    if upstream.state() == State::Idle && super::lazy::wait_until_wanted(&upstream, &shutdown).await
    {
        return;
    }
    let timeout = connect_timeout(&upstream);
    loop {
        upstream.state.send_replace(State::Connecting);
        let connected = tokio::select! {
            _ = shutdown.cancelled() => break,
            result = tokio::time::timeout(timeout, connect(&upstream, &warned)) => result
                .unwrap_or_else(|_| Err(format!("no answer within {} s", timeout.as_secs()))),
        };
        match connected {
            Ok(Connection {
                session,
                child,
                lane,
            }) => {
                backoff = initial;
                let ended = serve_session(&upstream, session, lane, &shutdown, &warned).await;
                let ended_session = upstream.session().disconnected();
                upstream.set_session(ended_session);
                drop(child);
                // An idle lazy server's tools stay known: its next call starts it.
                if !matches!(ended, SessionEnd::Idle)
                    && let Err(e) = index.remove_server(&name)
                {
                    tracing::warn!(server = %name, "cannot drop tools from the index: {e}");
                }
                match ended {
                    SessionEnd::Shutdown => break,
                    SessionEnd::Idle => {
                        tracing::info!(
                            server = %name,
                            "stopped after {} s without a call (start: lazy); its next call starts it",
                            upstream.config.start.idle_stop.as_secs()
                        );
                        upstream.state.send_replace(State::Idle);
                        if super::lazy::wait_until_wanted(&upstream, &shutdown).await {
                            break;
                        }
                        continue;
                    }
                    SessionEnd::Lost(reason) => {
                        if let Some(challenge) = upstream.needs_login() {
                            if wait_for_login(&upstream, &challenge, &shutdown).await {
                                break;
                            }
                            continue;
                        }
                        let reason = shown(&upstream, &reason);
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
                if let Some(challenge) = upstream.needs_login() {
                    if wait_for_login(&upstream, &challenge, &shutdown).await {
                        break;
                    }
                    backoff = initial;
                    continue;
                }
                let reason = shown(&upstream, &reason);
                // A lazy server whose tools are known is tried again by its next call.
                if upstream.is_lazy() && !upstream.tools().is_empty() {
                    tracing::warn!(server = %name, "cannot start upstream: {reason}; its next call tries again");
                    upstream.state.send_replace(State::Error(reason));
                    if super::lazy::wait_until_wanted(&upstream, &shutdown).await {
                        break;
                    }
                    continue;
                }
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

/// Puts the upstream in "login required" with why, and waits until a login finishes;
/// `true` when the proxy shuts down first. Nothing is retried meanwhile: a server that
/// refuses the tokens would refuse them again. A login the authorization server refused
/// for good (it forgot the client or the grant) is forgotten: the next login registers anew.
async fn wait_for_login(
    upstream: &Upstream,
    challenge: &crate::oauth::Challenge,
    shutdown: &CancellationToken,
) -> bool {
    let name = upstream.name();
    let hint = super::login::login_hint(name, &challenge.reason());
    tracing::warn!(server = name, "login required: {hint}");
    upstream.state.send_replace(State::LoginRequired(hint));
    if let Some(refusal) = &challenge.refused {
        let (store, server) = (upstream.credentials.clone(), name.to_owned());
        let client_id = refusal.client_id.clone();
        let forgot = tokio::task::spawn_blocking(move || {
            crate::oauth::forget_refused(&store, &server, &client_id)
        })
        .await;
        match forgot {
            Ok(Ok(true)) => tracing::info!(
                server = name,
                "forgot the login the authorization server refused ({})",
                refusal.error
            ),
            Ok(Ok(false)) => {}
            Ok(Err(e)) => tracing::warn!(server = name, "cannot forget the refused login: {e}"),
            Err(e) => tracing::warn!(server = name, "cannot forget the refused login: {e}"),
        }
    }
    tokio::select! {
        _ = shutdown.cancelled() => true,
        _ = upstream.login_done.notified() => false,
    }
}

/// `reason` (a failure of the upstream's session) as logs and statuses show it: in words
/// (rmcp's Rust type names gone), the secrets of the upstream's URL, and anything else that
/// looks secret, masked.
pub(super) fn shown(upstream: &Upstream, reason: &str) -> String {
    let reason = super::error::in_words(reason);
    match &upstream.config.transport {
        Transport::Http { url, .. } => mcpproxy_auth::masking::mask_text_with_url(&reason, url),
        Transport::Stdio { .. } => mcpproxy_auth::masking::mask_text(&reason),
    }
}

/// Why a session's task ended, in words.
fn quit_reason(quit: &rmcp::service::QuitReason) -> String {
    match quit {
        rmcp::service::QuitReason::Cancelled => "it was cancelled".to_owned(),
        rmcp::service::QuitReason::Closed => "the connection closed".to_owned(),
        rmcp::service::QuitReason::JoinError(e) => format!("its task failed: {e}"),
        _ => "it stopped".to_owned(),
    }
}

enum SessionEnd {
    Shutdown,
    Lost(String),
    /// A lazy server went `idle_stop_secs` without a call.
    Idle,
}

/// The protocol versions of 2026-07-28 and later the server implements, from
/// `server/discover`; empty when it does not answer (a server of an earlier version).
async fn discover_versions(
    peer: &rmcp::service::Peer<RoleClient>,
) -> Vec<rmcp::model::ProtocolVersion> {
    let mut meta = rmcp::model::RequestMetaObject::default();
    meta.set_protocol_version(rmcp::model::ProtocolVersion::V_2026_07_28);
    meta.set_client_capabilities(proxy_client_capabilities());
    meta.set_client_info(Implementation::new("mcpproxy", env!("CARGO_PKG_VERSION")));
    match tokio::time::timeout(DISCOVER_TIMEOUT, peer.discover(meta)).await {
        Ok(Ok(result)) => result
            .supported_versions
            .into_iter()
            .filter(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str())
            .collect(),
        _ => Vec::new(),
    }
}

/// How long `server/discover` may take at connection; a server that does not know it
/// usually answers at once with an error.
const DISCOVER_TIMEOUT: Duration = Duration::from_secs(5);

/// Lists tools, publishes them, and watches the session until it ends.
async fn serve_session(
    upstream: &Arc<Upstream>,
    session: Session,
    lane: Option<super::lane::Lane>,
    shutdown: &CancellationToken,
    warned: &Arc<Warned>,
) -> SessionEnd {
    let peer = session.peer().clone();
    let session_token = session.cancellation_token();
    let mut waiter = tokio::spawn(session.waiting());
    // A session without `initialize` (2026-07-28) has rmcp add per-request metadata.
    let began_with_initialize = peer
        .peer_info()
        .is_some_and(|info| info.protocol_version.has_initialize());
    upstream.set_session(ServerSession {
        peer: Some(peer.clone()),
        lane: lane.filter(|_| began_with_initialize),
        capabilities: peer.peer_info().map(|info| info.capabilities.clone()),
        discovered_versions: upstream.session().discovered_versions.clone(),
    });
    // Only stdio servers are asked: over streamable HTTP, rmcp's client carries on in
    // per-request mode after `server/discover`, and the session's next requests fail.
    if matches!(upstream.config.transport, Transport::Stdio { .. }) {
        let discovered_versions = discover_versions(&peer).await;
        let session = upstream.session();
        upstream.set_session(ServerSession {
            discovered_versions,
            ..ServerSession::clone(&session)
        });
    }

    if let Err(reason) = refresh_tools(upstream, &peer, warned).await {
        session_token.cancel();
        let _ = waiter.await;
        return SessionEnd::Lost(reason);
    }
    super::watch::watch_tool_list(upstream, &peer, warned.clone());
    upstream.state.send_replace(State::Ready);
    // Clients that asked for log messages before this (re)connection still want them.
    if let Some(level) = upstream.back_channel.most_verbose_level()
        && peer
            .peer_info()
            .is_some_and(|info| info.capabilities.logging.is_some())
    {
        #[allow(
            deprecated,
            reason = "MCP logging and sampling are deprecated by SEP-2577; earlier clients and servers use them"
        )]
        if let Err(e) = peer
            .set_level(rmcp::model::SetLevelRequestParams::new(level))
            .await
        {
            tracing::debug!(server = upstream.name(), "logging/setLevel not taken: {e}");
        }
    }
    tracing::info!(
        server = upstream.name(),
        tools = upstream.tools().len(),
        "upstream ready"
    );

    let mut sweep = tokio::time::interval(upstream.settings.tools_refresh);
    sweep.tick().await;
    let mut idle_check = tokio::time::interval(upstream.idle_check_every());
    idle_check.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => {
                session_token.cancel();
                let _ = (&mut waiter).await;
                return SessionEnd::Shutdown;
            }
            quit = &mut waiter => {
                let reason = match quit {
                    Ok(Ok(reason)) => format!("session ended ({})", quit_reason(&reason)),
                    Ok(Err(e)) | Err(e) => format!("session task failed: {e}"),
                };
                return SessionEnd::Lost(reason);
            }
            _ = upstream.refresh.notified() => {}
            _ = sweep.tick() => {}
            _ = idle_check.tick(), if upstream.is_lazy() => {
                if upstream.is_idle_now() {
                    session_token.cancel();
                    let _ = (&mut waiter).await;
                    return SessionEnd::Idle;
                }
                continue;
            }
        }
        // A request met a challenge the stored login cannot answer (a refused refresh, a
        // step-up to more scopes): the session waits for a person's login.
        if upstream.needs_login().is_some() {
            session_token.cancel();
            let _ = (&mut waiter).await;
            return SessionEnd::Lost("the server asks for a login".to_owned());
        }
        if let Err(reason) = refresh_tools(upstream, &peer, warned).await {
            session_token.cancel();
            let _ = (&mut waiter).await;
            return SessionEnd::Lost(reason);
        }
    }
}

/// Re-reads the tool list after the server said it changed ([`refresh_tools`]); when that
/// fails, says so and lets the supervisor look at the session at once.
pub(super) async fn relist_after_change(
    upstream: &Upstream,
    peer: &rmcp::service::Peer<RoleClient>,
    warned: &Warned,
) {
    if let Err(e) = refresh_tools(upstream, peer, warned).await {
        let e = shown(upstream, &e);
        tracing::warn!(server = upstream.name(), "cannot list tools again: {e}");
        upstream.refresh.notify_one();
    }
}

/// Re-reads the tool list, vets it against the trust store, and publishes it.
pub(super) async fn refresh_tools(
    upstream: &Upstream,
    peer: &rmcp::service::Peer<RoleClient>,
    warned: &Warned,
) -> Result<(), String> {
    let name = upstream.name();
    let listed = list_tools(peer, name, warned).await?;
    let (listable, unlistable): (Vec<_>, Vec<_>) = listed
        .into_iter()
        .partition(|t| is_listable_tool_name(name, &t.name));
    if !unlistable.is_empty() {
        let names: Vec<String> = unlistable.iter().map(|t| quote(&t.name)).collect();
        let message = format!(
            "ignoring {} tool(s) whose names have control or invisible characters or are too long to call: {}",
            names.len(),
            names.join(", ")
        );
        if warned.first_time(&message) {
            tracing::warn!(server = name, "{message}");
        }
    }
    publish_listing(upstream, listable);
    Ok(())
}

/// Makes `listed` the server's tools: for the direct endpoint as listed, and for the search
/// and the policy vetted against the pins (re-pinning those of an earlier format that still
/// match). A listing from the server, or (a lazy server not running) the one its pins hold.
pub(super) fn publish_listing(upstream: &Upstream, listed: Vec<rmcp::model::Tool>) {
    let (tools, review) = vet_listing(upstream, listed);
    upstream.publish(tools, review);
}

/// Stores `listed` as [`publish_listing`] does, but leaves the search index to the caller,
/// who indexes several servers in one commit.
pub(super) fn store_listing(upstream: &Upstream, listed: Vec<rmcp::model::Tool>) {
    let (tools, review) = vet_listing(upstream, listed);
    upstream.store_listing(tools, review);
}

fn vet_listing(
    upstream: &Upstream,
    listed: Vec<rmcp::model::Tool>,
) -> (
    BTreeMap<String, mcpproxy_policy::Tool>,
    mcpproxy_trust::Review,
) {
    let name = upstream.name();
    let tools: BTreeMap<String, mcpproxy_policy::Tool> = listed
        .iter()
        .map(|t| (t.name.to_string(), tool_from_mcp(name, t)))
        .collect();
    *write(&upstream.wire_tools) = Arc::new(super::WireTools::new(listed));
    if !upstream.is_quarantined() {
        upgrade_outdated_pins(upstream, &tools);
    }
    let review = upstream.vet(&tools);
    (tools, review)
}

/// Re-pins in the current format the pins of an earlier mcpproxy that still match the
/// listed tools (see [`mcpproxy_trust::upgrade_pins`]); writes the trust file only when there
/// is one.
fn upgrade_outdated_pins(upstream: &Upstream, tools: &BTreeMap<String, mcpproxy_policy::Tool>) {
    let name = upstream.name();
    let outdated = upstream
        .trust
        .server(name)
        .is_some_and(|pins| mcpproxy_trust::has_outdated_pins(&pins, tools));
    if !outdated {
        return;
    }
    match upstream
        .trust
        .update(name, |pins| mcpproxy_trust::upgrade_pins(pins, tools))
    {
        Ok(upgraded) => tracing::info!(
            server = name,
            "re-pinned {} unchanged tool(s) in the pin format of this version (their output schema, annotations title and _meta are pinned from now on)",
            upgraded.len()
        ),
        Err(e) => tracing::warn!(server = name, "cannot re-pin the server's tools: {e}"),
    }
}

/// A session with a server.
struct Connection {
    session: Session,
    /// The server's process when it is a stdio server (dropped when the session is over).
    child: Option<super::child::ChildGuard>,
    /// The call lane of a stdio session.
    lane: Option<super::lane::Lane>,
}

/// A session over streamable HTTP: through the server's stored OAuth tokens when it has
/// a login, and always through a client that notices the server's challenges.
async fn http_session(
    upstream: &Upstream,
    handler: UpstreamClient,
    url: &str,
    config: StreamableHttpClientTransportConfig,
) -> Result<Result<Session, rmcp::service::ClientInitializeError>, String> {
    let slot = upstream.challenge.clone();
    let secret = upstream.client_secret()?;
    let binding = match &upstream.config.transport {
        Transport::Http { url, .. } => url.as_str(),
        Transport::Stdio { .. } => url,
    };
    let authorized = crate::oauth::authorized_client(
        upstream.name(),
        binding,
        url,
        &upstream.config.oauth,
        secret.as_ref().map(|s| s.expose()),
        &upstream.credentials,
        &slot,
    )
    .await
    .map_err(|e| format!("cannot use the stored login: {e}"))?;
    let session = match authorized {
        Some(client) => super::lifecycle::serve_http(handler, client, config).await,
        None => {
            let client = Watched::new(crate::oauth::upstream_http_client(), slot);
            super::lifecycle::serve_http(handler, client, config).await
        }
    };
    if session.is_ok() {
        upstream.challenge.clear();
    }
    Ok(session)
}

/// Starts a session with the server, its `${env:}`/`${secret:}` references resolved now
/// (a message about the attempt never shows a resolved value).
async fn connect(upstream: &Arc<Upstream>, warned: &Arc<Warned>) -> Result<Connection, String> {
    let resolved = super::references::resolve(&upstream.config.transport, &upstream.credentials)?;
    connect_to(upstream, warned, &resolved.transport)
        .await
        .map_err(|message| resolved.scrub(message))
}

/// How long a failed start waits for the rest of the server's stderr (what it was refused).
const STDERR_DRAIN: Duration = Duration::from_millis(500);

/// Starts a session with the server over `transport` (the config's, resolved).
async fn connect_to(
    upstream: &Arc<Upstream>,
    warned: &Arc<Warned>,
    transport: &Transport,
) -> Result<Connection, String> {
    let handler = UpstreamClient {
        upstream: Arc::downgrade(upstream),
        server: upstream.name().to_owned(),
        back_channel: upstream.back_channel.clone(),
        warned: warned.clone(),
    };
    match transport {
        Transport::Stdio {
            command,
            args,
            env,
            working_dir,
        } => {
            let launch = StdioLaunch {
                command,
                args,
                env,
                working_dir: working_dir.as_deref(),
            };
            let mut sandbox = super::sandbox::prepare(upstream, launch)?;
            let egress = sandbox.as_mut().and_then(|s| {
                let rules = s.report.network.egress().cloned().unwrap_or_default();
                s.egress.take().map(|receiver| (receiver, rules))
            });
            // A version manager's shim: the program it resolves to runs (the sandbox grants
            // that program's prefix, not the manager's root).
            let program = match sandbox.as_ref().and_then(|s| s.shim.as_ref()) {
                Some(shim) => {
                    upstream.log_line(&format!(
                        "mcpproxy: `{command}` is a {} shim: runs {}",
                        shim.manager,
                        shim.program.display()
                    ));
                    shim.program.as_os_str().to_owned()
                }
                None => std::ffi::OsString::from(command),
            };
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(args);
            if let Some(dir) = working_dir {
                cmd.current_dir(dir);
            }
            if sandbox.is_none() {
                cmd.envs(env);
            }
            let (mut child, pipes) = super::child::spawn(cmd, sandbox)
                .map_err(|e| format!("cannot start `{command}`: {e}"))?;
            if let Some((receiver, rules)) = egress {
                child.attach_egress(super::sandbox::start_egress(upstream, receiver, rules));
            }
            let stderr = pipes.stderr;
            let (lane, stdout, stdin) = super::lane::split(pipes.stdout, pipes.stdin);
            let transport = (stdout, stdin);
            let mut stderr_reader = None;
            if let Some(stderr) = stderr {
                let weak = Arc::downgrade(upstream);
                stderr_reader = Some(tokio::spawn(async move {
                    let mut reader = tokio::io::BufReader::new(stderr);
                    while let Some(line) = bounded_line(&mut reader).await {
                        let Some(upstream) = weak.upgrade() else {
                            break;
                        };
                        tracing::debug!(server = %upstream.name(), "stderr: {}", quote(&line));
                        upstream.log_line(&line);
                    }
                }));
            }
            let session = match handler.serve(transport).await {
                Ok(session) => session,
                Err(e) => {
                    // What the server said before it ended names what its sandbox refused.
                    if let Some(reader) = stderr_reader {
                        let _ = tokio::time::timeout(STDERR_DRAIN, reader).await;
                    }
                    let mut message = format!("MCP initialize with `{command}` failed: {e}");
                    let refusals = upstream.refusals();
                    if !refusals.is_empty() && upstream.config.isolation.enabled {
                        let said = refusals.describe();
                        upstream.log_line(&format!("mcpproxy: {said}"));
                        message.push_str(&format!("; {said}"));
                    } else if let Some(hint) =
                        super::sandbox::start_hint(&upstream.config.isolation, command)
                    {
                        message.push_str(&format!("; {hint}"));
                    }
                    return Err(message);
                }
            };
            Ok(Connection {
                session,
                child: Some(child),
                lane: Some(lane),
            })
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
            let session = http_session(upstream, handler, url, config)
                .await?
                .map_err(|e| {
                    let message = match &e {
                        rmcp::service::ClientInitializeError::TransportError { error, .. } => {
                            super::reach::describe_http_failure(url.as_str(), error.error.as_ref())
                        }
                        _ => format!("MCP initialize with {url} failed: {e}"),
                    };
                    // The message goes to logs, the startup summary and /api/v1/status.
                    mcpproxy_auth::masking::mask_text_with_url(&message, url)
                })?;
            Ok(Connection {
                session,
                child: None,
                lane: None,
            })
        }
    }
}
