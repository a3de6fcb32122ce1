//! The task that owns one upstream's session: connect, list tools, watch, reconnect.

// Logging and sampling are deprecated by SEP-2577 (2026-07-28), but the clients and servers
// of earlier versions use them, and mcpproxy carries them.
#![allow(
    deprecated,
    reason = "MCP logging and sampling are deprecated by SEP-2577; earlier clients and servers use them"
)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientRequest, ClientResult, CreateMessageRequestParams,
    CreateMessageResult, CustomRequest, ElicitRequestParams, ElicitResult, ElicitationCapability,
    Implementation, LoggingMessageNotificationParam, ProgressNotificationParam, RequestId,
    ResourceUpdatedNotificationParam, ServerNotification, ServerRequest,
};
use rmcp::service::{
    InboundStreamOrigin, NotificationContext, PeerRequestOptions, RequestContext, RoleClient,
    RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

use crate::back_channel::{BackChannel, CallOrigin, ForwardedRequest, ask_client};
use crate::config::Transport;
use crate::index::ToolIndex;
use crate::trust::{is_unprintable, quote};
use mcpproxy_policy::MAX_QUALIFIED_NAME_BYTES;

use super::convert::tool_from_wire;
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

/// rmcp's client-side handler: reacts to what the upstream tells us, and passes what
/// concerns a client on to it through the [`BackChannel`].
struct UpstreamClient {
    upstream: Weak<Upstream>,
    server: String,
    back_channel: Arc<BackChannel>,
    warned: Arc<Warned>,
}

/// How long a client has to answer a question an upstream asked it (elicitation,
/// sampling): a person may be typing.
const CLIENT_ANSWER_TIMEOUT: Duration = Duration::from_secs(600);

/// The upstream request a server-to-client request arrived with, when the transport
/// tells (streamable HTTP delivers it on that request's stream; stdio does not).
fn associated_request(context: &RequestContext<RoleClient>) -> Option<RequestId> {
    match context.extensions.get::<InboundStreamOrigin>() {
        Some(InboundStreamOrigin::OutboundRequest(id)) => Some(id.clone()),
        _ => None,
    }
}

impl UpstreamClient {
    /// Forwards one server-to-client request to the client whose call caused it, records
    /// it, and answers the upstream with the client's answer or a clear error.
    async fn forward(
        &self,
        method: &'static str,
        params: serde_json::Value,
        request: ServerRequest,
        context: &RequestContext<RoleClient>,
        supported: fn(&CallOrigin) -> bool,
    ) -> Result<ClientResult, ErrorData> {
        let started = std::time::Instant::now();
        let origin = self
            .back_channel
            .origin_for_request(&self.server, associated_request(context).as_ref());
        let mut forwarded = ForwardedRequest {
            server: self.server.clone(),
            method,
            params,
            origin: origin.clone(),
            error: None,
            outcome: None,
            duration: Duration::ZERO,
        };
        let answer = match &origin {
            None => Err(format!(
                "mcpproxy cannot pass {method} on: no client call to server '{}' is in flight, so \
                 there is nobody to ask",
                self.server
            )),
            Some(origin) if !supported(origin) => Err(format!(
                "{} does not support {method} (it did not declare the capability), so mcpproxy \
                 cannot ask it; answer without it",
                origin.describe_client()
            )),
            Some(origin) => ask_client(origin, request, CLIENT_ANSWER_TIMEOUT)
                .await
                .map_err(|e| e.to_string()),
        };
        forwarded.duration = started.elapsed();
        match &answer {
            Ok(result) => forwarded.outcome = Some(describe_answer(result)),
            Err(message) => forwarded.error = Some(message.clone()),
        }
        self.back_channel.observe(forwarded);
        answer.map_err(|message| ErrorData::internal_error(message, None))
    }

    /// Relays a change the server announced. On its session (untagged), to `sessions` and
    /// to every listen stream that sees the server; on a listen stream mcpproxy opened for
    /// a client stream (tagged), to that client stream only.
    async fn relay_change(
        &self,
        context: &NotificationContext<RoleClient>,
        sessions: impl FnOnce() -> Vec<crate::back_channel::Recipient>,
        notification: ServerNotification,
    ) {
        let tag = context.meta.subscription_id();
        if tag.is_none() {
            self.back_channel.relay_change(sessions(), &notification);
        }
        self.back_channel
            .announce(&self.server, tag.as_ref(), notification);
    }
}

/// What mcpproxy declares to upstreams: elicitation (form and URL) and sampling, which it
/// passes on to the calling client; never roots.
fn proxy_client_capabilities() -> ClientCapabilities {
    let mut capabilities = ClientCapabilities::default();
    let mut elicitation = ElicitationCapability::default();
    elicitation.form = Some(Default::default());
    elicitation.url = Some(Default::default());
    capabilities.elicitation = Some(elicitation);
    capabilities.sampling = Some(Default::default());
    capabilities
}

/// A client's answer in one word, for the record.
fn describe_answer(result: &ClientResult) -> String {
    match result {
        ClientResult::ElicitResult(r) => serde_json::to_value(&r.action)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "answered".into()),
        ClientResult::CreateMessageResult(_) => "message".into(),
        _ => "answered".into(),
    }
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        // Elicitation and sampling are passed on to the client whose call caused them (a
        // client without the capability gets the request refused with a clear error). No
        // `roots`: the upstream session is shared by every client, and server-filesystem
        // would replace its configured directories with whatever one client sent.
        ClientConfig::new(
            proxy_client_capabilities(),
            Implementation::new("mcpproxy", env!("CARGO_PKG_VERSION")),
        )
    }

    /// The server's tools changed: listed again and vetted now, then announced to the
    /// sessions of its direct endpoint and to the listen streams the change is for (the
    /// aggregate endpoint's own tools do not change).
    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        let Some(upstream) = self.upstream.upgrade() else {
            return;
        };
        tracing::info!(
            server = upstream.name(),
            "received tools/list_changed from upstream server"
        );
        if let Err(e) = refresh_tools(&upstream, &context.peer, &self.warned).await {
            let e = shown(&upstream, &e);
            tracing::warn!(server = upstream.name(), "cannot list tools again: {e}");
            upstream.refresh.notify_one();
        }
        self.relay_change(
            &context,
            || self.back_channel.direct_sessions(&self.server),
            ServerNotification::ToolListChangedNotification(Default::default()),
        )
        .await;
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let params = serde_json::to_value(&request).unwrap_or_default();
        let forwarded = ServerRequest::ElicitRequest(rmcp::model::Request::new(request));
        match self
            .forward(
                "elicitation/create",
                params,
                forwarded,
                &context,
                CallOrigin::can_elicit,
            )
            .await?
        {
            ClientResult::ElicitResult(result) => Ok(result),
            _ => Err(ErrorData::internal_error(
                "the client answered elicitation/create with another kind of result",
                None,
            )),
        }
    }

    #[allow(
        deprecated,
        reason = "MCP logging and sampling are deprecated by SEP-2577; earlier clients and servers use them"
    )]
    async fn create_message(
        &self,
        request: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let params = serde_json::to_value(&request).unwrap_or_default();
        let forwarded = ServerRequest::CreateMessageRequest(rmcp::model::Request::new(request));
        match self
            .forward(
                "sampling/createMessage",
                params,
                forwarded,
                &context,
                CallOrigin::can_sample,
            )
            .await?
        {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            _ => Err(ErrorData::internal_error(
                "the client answered sampling/createMessage with another kind of result",
                None,
            )),
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let Some((origin, relaying)) = self
            .back_channel
            .origin_by_progress(&self.server, &params.progress_token)
        else {
            return;
        };
        let Some(token) = origin.progress_token.clone() else {
            return;
        };
        let mut relayed = params;
        relayed.progress_token = token;
        relayed.message = relayed
            .message
            .map(|m| cap_text(&m, MAX_RELAYED_TEXT_BYTES));
        self.back_channel.relay_progress(&origin, relayed, relaying);
    }

    #[allow(
        deprecated,
        reason = "MCP logging and sampling are deprecated by SEP-2577; earlier clients and servers use them"
    )]
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let receivers = self.back_channel.log_receivers(&self.server, params.level);
        if receivers.is_empty() {
            return;
        }
        let mut relayed = params;
        // Tagged with the server, so a client can tell whose message it is.
        relayed.logger = Some(match &relayed.logger {
            Some(logger) => format!("{}:{}", self.server, cap_text(logger, 256)),
            None => self.server.clone(),
        });
        if serde_json::to_vec(&relayed.data).map_or(0, |b| b.len()) > MAX_RELAYED_TEXT_BYTES {
            relayed.data = serde_json::Value::String(format!(
                "(a log message of more than {} KiB from server '{}' was not relayed)",
                MAX_RELAYED_TEXT_BYTES >> 10,
                self.server
            ));
        }
        self.back_channel
            .relay_log(&self.server, receivers, relayed);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        let subscribers = || self.back_channel.subscribers(&self.server, &params.uri);
        let notification = ServerNotification::ResourceUpdatedNotification(
            rmcp::model::ResourceUpdatedNotification::new(params.clone()),
        );
        self.relay_change(&context, subscribers, notification).await;
    }

    async fn on_resource_list_changed(&self, context: NotificationContext<RoleClient>) {
        self.relay_change(
            &context,
            || self.back_channel.all_sessions(),
            ServerNotification::ResourceListChangedNotification(Default::default()),
        )
        .await;
    }

    async fn on_prompt_list_changed(&self, context: NotificationContext<RoleClient>) {
        self.relay_change(
            &context,
            || self.back_channel.all_sessions(),
            ServerNotification::PromptListChangedNotification(Default::default()),
        )
        .await;
    }
}

/// The most bytes of upstream text (a progress message, a log message) relayed to clients.
const MAX_RELAYED_TEXT_BYTES: usize = 16 << 10;

/// `text` cut to at most `max` bytes on a character boundary.
fn cap_text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
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
    loop {
        upstream.state.send_replace(State::Connecting);
        let connected = tokio::select! {
            _ = shutdown.cancelled() => break,
            result = tokio::time::timeout(CONNECT_TIMEOUT, connect(&upstream, &warned)) => result
                .unwrap_or_else(|_| Err(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()))),
        };
        match connected {
            Ok(Connection {
                session,
                child,
                lane,
            }) => {
                backoff = initial;
                let ended = serve_session(&upstream, session, lane, &shutdown, &warned).await;
                *write(&upstream.lane) = None;
                drop(child);
                *write(&upstream.peer) = None;
                if let Err(e) = index.remove_server(&name) {
                    tracing::warn!(server = %name, "cannot drop tools from the index: {e}");
                }
                match ended {
                    SessionEnd::Shutdown => break,
                    SessionEnd::Lost(reason) => {
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
                let reason = shown(&upstream, &reason);
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

/// `reason` (a failure of the upstream's session) as logs and statuses show it: the
/// secrets of the upstream's URL, and anything else that looks secret, masked.
fn shown(upstream: &Upstream, reason: &str) -> String {
    match &upstream.config.transport {
        Transport::Http { url, .. } => crate::secrets::mask_text_with_url(reason, url),
        Transport::Stdio { .. } => crate::secrets::mask_text(reason),
    }
}

enum SessionEnd {
    Shutdown,
    Lost(String),
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
    warned: &Warned,
) -> SessionEnd {
    let peer = session.peer().clone();
    let session_token = session.cancellation_token();
    let mut waiter = tokio::spawn(session.waiting());
    *write(&upstream.peer) = Some(peer.clone());
    // A session without `initialize` (2026-07-28) has rmcp add per-request metadata.
    let began_with_initialize = peer
        .peer_info()
        .is_some_and(|info| info.protocol_version.has_initialize());
    *write(&upstream.lane) = lane.filter(|_| began_with_initialize);
    *write(&upstream.capabilities) = peer.peer_info().map(|info| info.capabilities.clone());
    // Only stdio servers are asked: over streamable HTTP, rmcp's client carries on in
    // per-request mode after `server/discover`, and the session's next requests fail.
    if matches!(upstream.config.transport, Transport::Stdio { .. }) {
        *write(&upstream.discovered_versions) = discover_versions(&peer).await;
    }

    if let Err(reason) = refresh_tools(upstream, &peer, warned).await {
        session_token.cancel();
        let _ = waiter.await;
        return SessionEnd::Lost(reason);
    }
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
        if let Err(reason) = refresh_tools(upstream, &peer, warned).await {
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
    let tools: BTreeMap<String, mcpproxy_policy::Tool> = listable
        .iter()
        .map(|t| (t.name.to_string(), tool_from_mcp(name, t)))
        .collect();
    *write(&upstream.wire_tools) = Arc::new(super::WireTools::new(listable));
    if !upstream.is_quarantined() {
        upgrade_outdated_pins(upstream, &tools);
    }
    let review = upstream.vet(&tools);
    upstream.publish(tools, review);
    Ok(())
}

/// Re-pins in the current format the pins of an earlier mcpproxy that still match the
/// listed tools (see [`crate::trust::upgrade_pins`]); writes the trust file only when there
/// is one.
fn upgrade_outdated_pins(upstream: &Upstream, tools: &BTreeMap<String, mcpproxy_policy::Tool>) {
    let name = upstream.name();
    let outdated = upstream
        .trust
        .server(name)
        .is_some_and(|pins| crate::trust::has_outdated_pins(&pins, tools));
    if !outdated {
        return;
    }
    match upstream
        .trust
        .update(name, |pins| crate::trust::upgrade_pins(pins, tools))
    {
        Ok(upgraded) => tracing::info!(
            server = name,
            "re-pinned {} unchanged tool(s) in the pin format of this version (their output schema, annotations title and _meta are pinned from now on)",
            upgraded.len()
        ),
        Err(e) => tracing::warn!(server = name, "cannot re-pin the server's tools: {e}"),
    }
}

/// The most pages one listing reads; a server with more is listed up to there (warned).
const MAX_LIST_PAGES: usize = 1000;
/// The most tools one listing keeps; the rest are left out (warned).
const MAX_LISTED_TOOLS: usize = 100_000;

/// Warnings about a server's listings already given, so each is given once for as long as
/// the server is configured (across reconnections). Bounded: past [`Warned::MAX`]
/// different warnings it starts over.
#[derive(Default)]
struct Warned(std::sync::Mutex<HashSet<u64>>);

impl Warned {
    const MAX: usize = 4096;

    /// Whether `message` was not warned before (and is now taken as warned).
    fn first_time(&self, message: &str) -> bool {
        let key = hash_of(message);
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= Self::MAX {
            seen.clear();
        }
        seen.insert(key)
    }

    /// Logs `message` about `server` as a warning, the first time only.
    fn warn(&self, server: &str, message: &str) {
        if self.first_time(message) {
            tracing::warn!(server, "tools/list: {message}");
        }
    }
}

/// The tools of one `tools/list` answer, and its `nextCursor` as sent. A page rmcp could
/// read as a whole is taken as it is (every entry a valid tool, every hint a boolean or
/// absent); any other is read entry by entry from its JSON ([`tool_from_wire`]), each
/// problem warned once. `position` counts the entries read so far, across pages.
fn read_page(
    result: rmcp::model::ServerResult,
    position: &mut usize,
    server: &str,
    warned: &Warned,
) -> Result<(Vec<rmcp::model::Tool>, Option<serde_json::Value>), String> {
    if let rmcp::model::ServerResult::ListToolsResult(page) = result {
        *position += page.tools.len();
        return Ok((page.tools, page.next_cursor.map(serde_json::Value::String)));
    }
    let mut result = serde_json::to_value(result)
        .map_err(|e| format!("tools/list answered with what cannot be read: {e}"))?;
    let Some(serde_json::Value::Array(entries)) =
        result.get_mut("tools").map(serde_json::Value::take)
    else {
        return Err(
            "tools/list failed: the answer has no `tools` list, so it is not a tools/list result"
                .to_owned(),
        );
    };
    let mut tools = Vec::with_capacity(entries.len());
    for entry in entries {
        *position += 1;
        let (tool, problems) = tool_from_wire(entry, *position);
        for problem in problems {
            warned.warn(server, &problem.to_string());
        }
        match tool {
            Ok(tool) => tools.push(tool),
            Err(problem) => warned.warn(server, &problem.to_string()),
        }
    }
    Ok((
        tools,
        result.get_mut("nextCursor").map(serde_json::Value::take),
    ))
}

/// A hash of `value`, to remember it without keeping it (the text is the upstream's).
fn hash_of<T: std::hash::Hash + ?Sized>(value: &T) -> u64 {
    use std::hash::Hasher;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// Lists the server's tools page by page with a `tools/list` request whose answer rmcp
/// hands back untyped when it cannot read it as a listing, then takes each entry of such a
/// page on its own ([`read_page`]): one malformed tool is left out, a hint of the wrong
/// type is dropped, each warned once, instead of rmcp's typed listing failing the whole
/// page, and with it every tool of the server. A page rmcp reads whole costs what it did. Pagination follows `nextCursor` up to [`MAX_LIST_PAGES`] pages and
/// [`MAX_LISTED_TOOLS`] tools, stopping at a cursor seen before; the whole listing has
/// [`CONNECT_TIMEOUT`].
async fn list_tools(
    peer: &rmcp::service::Peer<RoleClient>,
    server: &str,
    warned: &Warned,
) -> Result<Vec<rmcp::model::Tool>, String> {
    let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
    let fetch = |cursor: Option<String>| async move {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err("tools/list did not answer".to_owned());
        }
        let params = cursor.map(|c| serde_json::json!({ "cursor": c }));
        let request = ClientRequest::CustomRequest(CustomRequest::new("tools/list", params));
        let answer = match peer
            .send_request_with_option(request, PeerRequestOptions::with_timeout(left))
            .await
        {
            Ok(handle) => handle.await_response().await,
            Err(e) => Err(e),
        };
        match answer {
            Ok(result) => Ok(result),
            Err(rmcp::ServiceError::Timeout { .. }) => Err("tools/list did not answer".to_owned()),
            Err(e) => Err(format!("tools/list failed: {e}")),
        }
    };
    list_pages(fetch, server, warned).await
}

/// Follows a listing's pages: `fetch` gets the page after a cursor (`None`: the first).
async fn list_pages<F, Fut>(
    mut fetch: F,
    server: &str,
    warned: &Warned,
) -> Result<Vec<rmcp::model::Tool>, String>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<rmcp::model::ServerResult, String>>,
{
    let mut tools = Vec::new();
    let mut cursors = HashSet::new();
    let mut cursor: Option<String> = None;
    let mut position = 0;
    for _ in 0..MAX_LIST_PAGES {
        let result = fetch(cursor.take()).await?;
        let (page, next) = read_page(result, &mut position, server, warned)?;
        for tool in page {
            if tools.len() == MAX_LISTED_TOOLS {
                warned.warn(
                    server,
                    &format!(
                        "the server lists more than {MAX_LISTED_TOOLS} tools; leaving out the rest"
                    ),
                );
                return Ok(tools);
            }
            tools.push(tool);
        }
        let next = match next {
            None | Some(serde_json::Value::Null) => return Ok(tools),
            Some(serde_json::Value::String(next)) => next,
            Some(_) => {
                warned.warn(
                    server,
                    "the answer's nextCursor is not a string; listing the pages read so far only",
                );
                return Ok(tools);
            }
        };
        if !cursors.insert(hash_of(next.as_str())) {
            warned.warn(
                server,
                "the server repeats a page cursor; listing the pages read so far only",
            );
            return Ok(tools);
        }
        cursor = Some(next);
    }
    warned.warn(
        server,
        &format!(
            "the server has more than {MAX_LIST_PAGES} pages of tools; listing the first {MAX_LIST_PAGES} only"
        ),
    );
    Ok(tools)
}

/// Whether a tool's name can be listed and called: printable (no control, bidirectional or
/// zero-width characters, which could forge what a terminal shows) and short enough that
/// `server:tool` fits [`MAX_QUALIFIED_NAME_BYTES`].
fn is_listable_tool_name(server: &str, tool: &str) -> bool {
    !tool.is_empty()
        && server.len() + 1 + tool.len() <= MAX_QUALIFIED_NAME_BYTES
        && !tool.chars().any(is_unprintable)
}

/// A session with a server.
struct Connection {
    session: Session,
    /// The server's process when it is a stdio server (dropped when the session is over).
    child: Option<super::child::ChildGuard>,
    /// The call lane of a stdio session.
    lane: Option<super::lane::Lane>,
}

/// Starts a session with the server.
async fn connect(upstream: &Arc<Upstream>, warned: &Arc<Warned>) -> Result<Connection, String> {
    let handler = UpstreamClient {
        upstream: Arc::downgrade(upstream),
        server: upstream.name().to_owned(),
        back_channel: upstream.back_channel.clone(),
        warned: warned.clone(),
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
            let (lane, stdout, stdin) = super::lane::split(pipes.stdout, pipes.stdin);
            let transport = (stdout, stdin);
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
            let transport = StreamableHttpClientTransport::from_config(config);
            let session = handler.serve(transport).await.map_err(|e| {
                let message = match &e {
                    rmcp::service::ClientInitializeError::TransportError { error, .. } => {
                        super::reach::describe_http_failure(url.as_str(), error.error.as_ref())
                    }
                    _ => format!("MCP initialize with {url} failed: {e}"),
                };
                // The message goes to logs, the startup summary and /api/v1/status.
                crate::secrets::mask_text_with_url(&message, url)
            })?;
            Ok(Connection {
                session,
                child: None,
                lane: None,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake server's pages: page `i` (cursor `p{i}`, none for the first) answers
    /// `pages[i]`.
    async fn list(pages: Vec<serde_json::Value>, warned: &Warned) -> (Vec<String>, usize) {
        let asked = std::cell::Cell::new(0);
        let fetch = |cursor: Option<String>| {
            asked.set(asked.get() + 1);
            let at = cursor.map_or(0, |c| c.trim_start_matches('p').parse().unwrap_or(0));
            let page = pages.get(at).cloned().unwrap_or_default();
            async move {
                serde_json::from_value::<rmcp::model::ServerResult>(page).map_err(|e| e.to_string())
            }
        };
        let tools = list_pages(fetch, "fx", warned).await.unwrap();
        (
            tools.iter().map(|t| t.name.to_string()).collect(),
            asked.get(),
        )
    }

    fn tool(name: &str) -> serde_json::Value {
        serde_json::json!({"name": name, "inputSchema": {"type": "object"}})
    }

    #[tokio::test]
    async fn every_page_is_listed_and_a_malformed_entry_is_left_out_of_its_page_only() {
        let warned = Warned::default();
        let pages = vec![
            serde_json::json!({"tools": [tool("a"), tool("b")], "nextCursor": "p1"}),
            serde_json::json!({
                "tools": [tool("c"), {"inputSchema": {}}, {"name": "d", "inputSchema": {}, "annotations": {"readOnlyHint": "true"}}],
                "nextCursor": "p2"
            }),
            serde_json::json!({"tools": [tool("e")]}),
        ];
        let (names, asked) = list(pages.clone(), &warned).await;
        assert_eq!(names, ["a", "b", "c", "d", "e"]);
        assert_eq!(asked, 3);
        // The problems were warned (and are not warned again).
        assert!(!warned.first_time("leaving out the tool at position 4: it has no name"));
        assert!(!warned.first_time(
            "tool 'd': ignoring annotations.readOnlyHint, which is a string instead of true or false; the MCP spec's default applies"
        ));
    }

    #[tokio::test]
    async fn paging_stops_at_a_repeated_or_unusable_cursor_and_at_the_page_bound() {
        let warned = Warned::default();
        let looping = vec![
            serde_json::json!({"tools": [tool("a")], "nextCursor": "p1"}),
            serde_json::json!({"tools": [tool("b")], "nextCursor": "p1"}),
        ];
        let (names, asked) = list(looping, &warned).await;
        assert_eq!((names, asked), (vec!["a".to_owned(), "b".to_owned()], 2));

        let odd_cursor = vec![serde_json::json!({"tools": [tool("a")], "nextCursor": 7})];
        let (names, _) = list(odd_cursor, &warned).await;
        assert_eq!(names, ["a"]);

        let endless: Vec<serde_json::Value> = (0..MAX_LIST_PAGES + 5)
            .map(|i| serde_json::json!({"tools": [], "nextCursor": format!("p{}", i + 1)}))
            .collect();
        let (_, asked) = list(endless, &warned).await;
        assert_eq!(asked, MAX_LIST_PAGES);
    }

    #[tokio::test]
    async fn an_answer_that_is_no_listing_fails_the_listing() {
        let fetch = |_| async { Ok(rmcp::model::ServerResult::empty(())) };
        let err = list_pages(fetch, "fx", &Warned::default())
            .await
            .unwrap_err();
        assert!(err.contains("has no `tools` list"), "{err}");
    }

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
