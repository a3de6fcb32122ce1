//! Upstream MCP servers: one long-lived rmcp client session per configured server (stdio
//! child process or streamable HTTP), shared by every proxied call.
//!
//! Each upstream has a supervisor task that connects, lists tools, keeps the registry and
//! the search index current (on `notifications/tools/list_changed` and on a periodic
//! sweep), notices when the session dies, and reconnects with capped exponential backoff.
//! Calls take the current session's peer, so many can be in flight at once.
//!
//! Every listing is vetted against the trust store (`vetting`): a quarantined server is
//! connected and listed but none of its tools is searchable or callable until a person
//! approves it; on other servers, tools that are new or changed since they were pinned are
//! held back, and each change is reported on the [`Upstreams::take_changes`] channel.

mod call_result;
mod child;
mod convert;
mod lane;
pub(crate) mod log;
mod reach;
mod supervisor;
mod vetting;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rmcp::model::{CallToolResult, ClientRequest, ServerResult};
use rmcp::service::PeerRequestOptions;
use rmcp::service::{Peer, RoleClient};
use serde::Serialize;
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::back_channel::{BackChannel, CallOrigin};
use crate::config::{ServerConfig, Transport, UpstreamConfig};
use crate::index::ToolIndex;
use crate::trust::{Review, Standing, ToolStanding, TrustStore};
use mcpproxy_policy::Tool;

pub(crate) use convert::tool_from_mcp;

pub(crate) use vetting::{Approval, ChangeKind, ToolChange};

/// Why an upstream call did not produce a result.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Error {
    #[error(
        "upstream server '{server}' is not connected ({state}); the call was not sent. It reconnects by itself; check `mcpproxy serve` logs or the server's command/url"
    )]
    NotConnected { server: String, state: String },
    #[error(
        "upstream server '{server}' is quarantined: review it with `mcpproxy upstream inspect {server}` and approve it with `mcpproxy upstream approve {server}`"
    )]
    Quarantined { server: String },
    #[error("upstream server '{server}' is disabled in mcp_config.json (\"enabled\": false)")]
    Disabled { server: String },
    #[error("upstream server '{server}' did not answer the call to '{tool}' within {} ms; raise tool_call_timeout_ms if it is slow", timeout.as_millis())]
    Timeout {
        server: String,
        tool: String,
        timeout: Duration,
    },
    #[error("upstream server '{server}' returned an error for '{tool}': {message}")]
    Call {
        server: String,
        tool: String,
        message: String,
    },
    /// The server answered with a JSON-RPC error, kept whole (code, message, data) so a
    /// transparent endpoint can pass it on as it is.
    #[error("upstream server '{server}' returned an error for '{tool}': {}", error.message)]
    Rejected {
        server: String,
        tool: String,
        error: rmcp::ErrorData,
    },
    #[error(
        "the connection to upstream server '{server}' failed during the call to '{tool}': {message}; it reconnects by itself"
    )]
    Connection {
        server: String,
        tool: String,
        message: String,
    },
}

/// The reason a client's cancellation is forwarded upstream with.
const CLIENT_CANCELLED: &str = "the client cancelled the request";
/// The error of a call the client cancelled.
const CANCELLED_UPSTREAM: &str = "the client cancelled the request; the server was told";

/// What a server answered a `tools/call`.
#[derive(Debug, Clone)]
pub(crate) enum CallAnswer {
    /// The result.
    Complete(CallToolResult),
    /// The server needs input from the client first (2026-07-28 multi-round-trip): the
    /// client answers the requests and calls again with `inputResponses` and
    /// `requestState`.
    InputRequired(rmcp::model::InputRequiredResult),
    /// The server runs the call as a task (the tasks extension): the client follows it
    /// with `tasks/get`, answers its questions with `tasks/update`, may `tasks/cancel` it.
    Task(rmcp::model::CreateTaskResult),
}

/// A server's tools as it listed them: in its order, found by name.
#[derive(Debug, Default)]
pub(crate) struct WireTools {
    pub tools: Vec<rmcp::model::Tool>,
    position: std::collections::HashMap<String, usize>,
}

impl WireTools {
    pub(crate) fn new(tools: Vec<rmcp::model::Tool>) -> Self {
        let position = tools
            .iter()
            .enumerate()
            .map(|(at, t)| (t.name.to_string(), at))
            .collect();
        Self { tools, position }
    }
}

/// A `subscriptions/listen` stream open on a server for one client stream; cancelled on
/// the server when dropped.
pub(crate) struct UpstreamStream {
    id: rmcp::model::RequestId,
    peer: Peer<RoleClient>,
    _handle: rmcp::service::RequestHandle<RoleClient>,
}

impl UpstreamStream {
    /// The id the server tags the stream's notifications with.
    pub(crate) fn id(&self) -> &rmcp::model::RequestId {
        &self.id
    }
}

impl Drop for UpstreamStream {
    fn drop(&mut self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        let notice = rmcp::model::CancelledNotificationParam::new(
            Some(self.id.clone()),
            Some("the client closed its subscriptions/listen stream".into()),
        );
        runtime.spawn(async move {
            if let Err(e) = peer.notify_cancelled(notice).await {
                tracing::debug!("cannot cancel an upstream listen stream: {e}");
            }
        });
    }
}

/// Where an upstream is in its life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "state", content = "detail", rename_all = "lowercase")]
pub(crate) enum State {
    Disconnected,
    Connecting,
    Ready,
    /// The last attempt failed; a retry is scheduled.
    Error(String),
    Disabled,
    /// Not started: how it starts (or where it connects) is not approved. Nothing of it
    /// runs until a person approves it.
    Unapproved,
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Disconnected => f.write_str("disconnected"),
            Self::Connecting => f.write_str("connecting"),
            Self::Ready => f.write_str("ready"),
            Self::Error(e) => write!(f, "error: {e}"),
            Self::Disabled => f.write_str("disabled"),
            Self::Unapproved => f.write_str("not started (launch not approved)"),
        }
    }
}

/// A snapshot of one upstream for status displays.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub(crate) struct Status {
    pub name: String,
    pub transport: String,
    #[serde(flatten)]
    pub state: State,
    /// Tools the server lists.
    pub tools: usize,
    /// Quarantined until a person approves it: listed, never called.
    #[serde(default)]
    pub quarantined: bool,
    /// Tools held back because they are new or changed since approval.
    #[serde(default)]
    pub pending: Vec<String>,
}

/// One upstream server.
pub(crate) struct Upstream {
    config: ServerConfig,
    settings: UpstreamConfig,
    default_timeout: Duration,
    state: watch::Sender<State>,
    peer: RwLock<Option<Peer<RoleClient>>>,
    /// The call lane of the current session, when it is a stdio session that began with
    /// `initialize` (requests of 2026-07-28 carry per-request metadata only rmcp adds).
    lane: RwLock<Option<lane::Lane>>,
    tools: RwLock<Arc<BTreeMap<String, Tool>>>,
    /// The same tools as the server sent them (title, icons, outputSchema, ...), for
    /// clients that see the server as it is (the direct endpoint, `retrieve_tools`).
    wire_tools: RwLock<Arc<WireTools>>,
    refresh: Notify,
    /// Quarantined now: its launch spec or its calls are not approved.
    quarantined: AtomicBool,
    /// Where it stood against the approvals when it was launched.
    standing: Standing,
    /// The last listing held against the pins.
    review: RwLock<Arc<Review>>,
    trust: Arc<TrustStore>,
    index: Arc<ToolIndex>,
    changes: mpsc::UnboundedSender<ToolChange>,
    /// Held-back tools already reported, with the fingerprint reported (a change is recorded
    /// once, not at every refresh).
    reported: std::sync::Mutex<BTreeMap<String, String>>,
    /// The server's recent stderr lines (stdio servers).
    log: std::sync::Mutex<log::Ring>,
    /// Routes from this server back to the clients whose calls it serves.
    back_channel: Arc<BackChannel>,
    /// What the server offers besides tools (prompts, resources, ...), from its
    /// `initialize` answer.
    capabilities: RwLock<Option<rmcp::model::ServerCapabilities>>,
    /// The protocol versions the server listed in `server/discover` (2026-07-28 and later);
    /// empty for a server that does not answer it.
    discovered_versions: RwLock<Vec<rmcp::model::ProtocolVersion>>,
}

impl Upstream {
    pub(crate) fn name(&self) -> &str {
        &self.config.name
    }

    /// A snapshot for status displays.
    pub(crate) fn status(&self) -> Status {
        let quarantined = self.is_quarantined();
        Status {
            name: self.config.name.clone(),
            transport: self.transport_label().to_owned(),
            state: self.state(),
            tools: self.tools().len(),
            quarantined,
            pending: if quarantined {
                Vec::new()
            } else {
                self.review()
                    .pending()
                    .map(|(name, _)| name.to_owned())
                    .collect()
            },
        }
    }

    /// The configuration it runs with.
    pub(crate) fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The server's last `lines` stderr lines, oldest first, and how many it ever wrote.
    pub(crate) fn recent_log(&self, lines: usize) -> (Vec<log::LogLine>, u64) {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .tail(lines)
    }

    fn log_line(&self, line: &str) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line, now);
    }

    pub(crate) fn state(&self) -> State {
        self.state.borrow().clone()
    }

    /// Waits for the state to change (for startup summaries and tests).
    pub(crate) fn subscribe(&self) -> watch::Receiver<State> {
        self.state.subscribe()
    }

    /// The tool as the server describes it now.
    pub(crate) fn tool(&self, name: &str) -> Option<Tool> {
        read(&self.tools).get(name).cloned()
    }

    /// A tool as the server sent it.
    pub(crate) fn wire_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        let listing = read(&self.wire_tools).clone();
        listing
            .position
            .get(name)
            .and_then(|&at| listing.tools.get(at))
            .cloned()
    }

    /// The tools as the server sent them, in the order it listed them.
    pub(crate) fn wire_tools(&self) -> Arc<WireTools> {
        read(&self.wire_tools).clone()
    }

    pub(crate) fn tools(&self) -> Arc<BTreeMap<String, Tool>> {
        read(&self.tools).clone()
    }

    /// Whether the server is quarantined now (until a person approves it).
    pub(crate) fn is_quarantined(&self) -> bool {
        self.quarantined.load(Ordering::Acquire)
    }

    /// Where it stood against the approvals when it was launched (an approval since then
    /// may have cleared its quarantine: see [`Upstream::is_quarantined`]).
    pub(crate) fn standing(&self) -> &Standing {
        &self.standing
    }

    /// The last listing held against the pins.
    pub(crate) fn review(&self) -> Arc<Review> {
        read(&self.review).clone()
    }

    /// Whether `tool` may be searched and called: listed, pinned and unchanged, on a server
    /// that is not quarantined.
    pub(crate) fn is_trusted(&self, tool: &str) -> bool {
        !self.is_quarantined() && self.review().is_trusted(tool)
    }

    /// The tools that may be searched and called.
    pub(crate) fn trusted_tools(&self) -> Vec<Tool> {
        if self.is_quarantined() {
            return Vec::new();
        }
        let review = self.review();
        self.tools()
            .values()
            .filter(|t| review.standing.get(&t.name) == Some(&ToolStanding::Trusted))
            .cloned()
            .collect()
    }

    /// Whether the server is usable at all (not disabled, not quarantined).
    pub(crate) fn check_usable(&self) -> Result<(), Error> {
        if !self.config.enabled {
            return Err(Error::Disabled {
                server: self.config.name.clone(),
            });
        }
        if self.is_quarantined() {
            return Err(Error::Quarantined {
                server: self.config.name.clone(),
            });
        }
        Ok(())
    }

    /// The deadline of a call: the one asked for, else the server's, else the default.
    pub(crate) fn call_timeout(&self, requested: Option<Duration>) -> Duration {
        requested
            .or(self.config.tool_call_timeout)
            .unwrap_or(self.default_timeout)
    }

    /// Waits while the server is still connecting (as just after start), up to `timeout`;
    /// returns at once in any other state. `true` when it is ready.
    pub(crate) async fn wait_while_connecting(&self, timeout: Duration) -> bool {
        let mut states = self.subscribe();
        let _ = tokio::time::timeout(
            timeout,
            states.wait_for(|s| !matches!(s, State::Disconnected | State::Connecting)),
        )
        .await;
        matches!(self.state(), State::Ready)
    }

    /// The session's peer, if connected.
    fn connected_peer(&self) -> Result<Peer<RoleClient>, Error> {
        self.check_usable()?;
        read(&self.peer).clone().ok_or_else(|| Error::NotConnected {
            server: self.config.name.clone(),
            state: self.state().to_string(),
        })
    }

    /// Calls a tool on the server within `timeout` (else the server's own). With an
    /// `origin`, the client's `_meta` goes along, what the server sends about this call
    /// (progress, elicitation and sampling requests) is routed back to that client, and
    /// the client's cancellation is forwarded as `notifications/cancelled`.
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        timeout: Option<Duration>,
        origin: Option<&CallOrigin>,
    ) -> Result<CallAnswer, Error> {
        self.check_usable()?;
        let mut params = rmcp::model::CallToolRequestParams::new(tool.to_owned());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        if let Some(origin) = origin {
            params.input_responses = origin.input_responses.clone();
            params.request_state = origin.request_state.clone();
        }
        let lane = read(&self.lane).clone();
        if let Some(lane) = lane {
            return self.call_on_lane(&lane, params, timeout, origin).await;
        }
        let peer = self.connected_peer()?;
        let request = ClientRequest::CallToolRequest(rmcp::model::Request::new(params));
        let result = self.send(&peer, request, tool, timeout, origin).await?;
        match result {
            ServerResult::CallToolResult(result) => Ok(CallAnswer::Complete(result)),
            ServerResult::InputRequiredResult(result) => Ok(CallAnswer::InputRequired(result)),
            ServerResult::CreateTaskResult(task) => Ok(CallAnswer::Task(task)),
            _ => Err(Error::Call {
                server: self.config.name.clone(),
                tool: tool.to_owned(),
                message: "the server answered tools/call with another kind of result".into(),
            }),
        }
    }

    /// Sends one request and waits for its answer within `timeout`, routing what the server
    /// sends about it back to `origin` (see [`Upstream::call`]). `what` names the request in
    /// errors (the tool, or the method).
    async fn send(
        &self,
        peer: &Peer<RoleClient>,
        request: ClientRequest,
        what: &str,
        timeout: Option<Duration>,
        origin: Option<&CallOrigin>,
    ) -> Result<ServerResult, Error> {
        let timeout = self.call_timeout(timeout);
        let mut options = PeerRequestOptions::with_timeout(timeout);
        let meta = self.request_meta(origin);
        if !meta.0.is_empty() {
            options = options.with_meta(meta);
        }
        let handle = peer
            .send_request_with_option(request, options)
            .await
            .map_err(|e| self.connection_error(what, &e))?;
        let request_id = handle.id.clone();
        let route = origin.map(|o| {
            self.back_channel.register_call(
                self.name(),
                handle.id.clone(),
                handle.progress_token.clone(),
                o.clone(),
            )
        });
        let cancelled = origin.map(|o| o.cancelled.clone()).unwrap_or_default();
        let answer = tokio::select! {
            answer = handle.await_response() => {
                if let Some(route) = &route {
                    route.settle().await;
                }
                answer
            }
            () = cancelled.cancelled() => {
                let notice = rmcp::model::CancelledNotificationParam::new(
                    Some(request_id),
                    Some(CLIENT_CANCELLED.into()),
                );
                if let Err(e) = peer.notify_cancelled(notice).await {
                    tracing::debug!(server = self.name(), "cannot forward the cancellation: {e}");
                }
                return Err(Error::Call {
                    server: self.config.name.clone(),
                    tool: what.to_owned(),
                    message: CANCELLED_UPSTREAM.into(),
                });
            }
        };
        match answer {
            Ok(result) => Ok(result),
            Err(rmcp::ServiceError::Timeout { .. }) => Err(Error::Timeout {
                server: self.config.name.clone(),
                tool: what.to_owned(),
                timeout,
            }),
            Err(rmcp::ServiceError::McpError(error)) => Err(Error::Rejected {
                server: self.config.name.clone(),
                tool: what.to_owned(),
                error,
            }),
            Err(e) => Err(self.connection_error(what, &e)),
        }
    }

    /// The `_meta` a request carries for `origin`: the client's own (what may be passed
    /// on), and the client's protocol fields when the server speaks its version.
    fn request_meta(&self, origin: Option<&CallOrigin>) -> rmcp::model::RequestMetaObject {
        let mut meta = origin.and_then(|o| o.meta.clone()).unwrap_or_default();
        if let Some((version, protocol)) = origin.and_then(|o| o.protocol.as_ref())
            && read(&self.discovered_versions).contains(version)
        {
            for (key, value) in protocol.0.iter() {
                meta.0.insert(key.clone(), value.clone());
            }
        }
        meta
    }

    /// [`Upstream::call`] on the session's call lane ([`lane`]): the same request, `_meta`
    /// and progress token as rmcp would send, the same routes back to `origin`, the same
    /// cancellation and timeout, without rmcp's service loop on the way.
    async fn call_on_lane(
        &self,
        lane: &lane::Lane,
        mut params: rmcp::model::CallToolRequestParams,
        timeout: Option<Duration>,
        origin: Option<&CallOrigin>,
    ) -> Result<CallAnswer, Error> {
        let timeout = self.call_timeout(timeout);
        let tool = params.name.to_string();
        let mut request = lane.start();
        let id = request.id();
        let token = rmcp::model::ProgressToken(rmcp::model::NumberOrString::Number(id));
        let mut meta = self.request_meta(origin);
        meta.set_progress_token(token.clone());
        params.meta = Some(meta);
        let route = origin.map(|o| {
            self.back_channel.register_call(
                self.name(),
                rmcp::model::RequestId::Number(id),
                token,
                o.clone(),
            )
        });
        let cancelled = origin.map(|o| o.cancelled.clone()).unwrap_or_default();
        request
            .send("tools/call", &params)
            .await
            .map_err(|e| self.connection_error(&tool, &e))?;
        let reply = tokio::select! {
            reply = tokio::time::timeout(timeout, request.answer()) => match reply {
                Ok(Ok(reply)) => reply,
                Ok(Err(e)) => return Err(self.connection_error(&tool, &e)),
                Err(_) => {
                    if let Err(e) = request.cancel("request timeout").await {
                        tracing::debug!(server = self.name(), "cannot cancel a call that timed out: {e}");
                    }
                    return Err(Error::Timeout {
                        server: self.config.name.clone(),
                        tool,
                        timeout,
                    });
                }
            },
            () = cancelled.cancelled() => {
                if let Err(e) = request.cancel(CLIENT_CANCELLED).await {
                    tracing::debug!(server = self.name(), "cannot forward the cancellation: {e}");
                }
                return Err(Error::Call {
                    server: self.config.name.clone(),
                    tool,
                    message: CANCELLED_UPSTREAM.into(),
                });
            }
        };
        if let Some(route) = &route {
            route.settle_counted(reply.progress_before()).await;
        }
        match reply.outcome() {
            Ok(lane::Outcome::Result(result)) => {
                call_result::read(result).map_err(|message| Error::Call {
                    server: self.config.name.clone(),
                    tool,
                    message,
                })
            }
            Ok(lane::Outcome::Error(error)) => Err(Error::Rejected {
                server: self.config.name.clone(),
                tool,
                error,
            }),
            Err(e) => Err(Error::Call {
                server: self.config.name.clone(),
                tool,
                message: format!("its answer is not a JSON-RPC response mcpproxy can read: {e}"),
            }),
        }
    }

    /// A call (`what`) that failed on the session's pipes or connection, by rmcp's client or
    /// on the call lane.
    fn connection_error(&self, what: &str, e: &dyn std::fmt::Display) -> Error {
        // The session may be dead: let the supervisor look at it now.
        self.refresh.notify_one();
        let message = match &self.config.transport {
            // The HTTP stack quotes the URL, query (tokens) and user info included.
            Transport::Http { url, .. } => crate::secrets::mask_text_with_url(&e.to_string(), url),
            Transport::Stdio { .. } => crate::secrets::mask_text(&e.to_string()),
        };
        Error::Connection {
            server: self.config.name.clone(),
            tool: what.to_owned(),
            message,
        }
    }

    /// Runs one listing (`what` names it in errors) within the server's call timeout.
    async fn list<T, F>(
        &self,
        what: &str,
        list: impl FnOnce(Peer<RoleClient>) -> F,
    ) -> Result<T, Error>
    where
        F: Future<Output = Result<T, rmcp::ServiceError>>,
    {
        let peer = self.connected_peer()?;
        let timeout = self.call_timeout(None);
        match tokio::time::timeout(timeout, list(peer)).await {
            Err(_) => Err(Error::Timeout {
                server: self.config.name.clone(),
                tool: what.to_owned(),
                timeout,
            }),
            Ok(Ok(items)) => Ok(items),
            Ok(Err(rmcp::ServiceError::McpError(e))) => Err(Error::Call {
                server: self.config.name.clone(),
                tool: what.to_owned(),
                message: e.message.to_string(),
            }),
            Ok(Err(e)) => Err(self.connection_error(what, &e)),
        }
    }

    /// Every prompt of the server (all pages).
    pub(crate) async fn list_prompts(&self) -> Result<Vec<rmcp::model::Prompt>, Error> {
        self.list("prompts/list", |peer| async move {
            peer.list_all_prompts().await
        })
        .await
    }

    /// Every resource of the server (all pages).
    pub(crate) async fn list_resources(&self) -> Result<Vec<rmcp::model::Resource>, Error> {
        self.list("resources/list", |peer| async move {
            peer.list_all_resources().await
        })
        .await
    }

    /// Every resource template of the server (all pages).
    pub(crate) async fn list_resource_templates(
        &self,
    ) -> Result<Vec<rmcp::model::ResourceTemplate>, Error> {
        self.list("resources/templates/list", |peer| async move {
            peer.list_all_resource_templates().await
        })
        .await
    }

    /// What the server offers besides tools, from its `initialize` answer (`None` before
    /// the first connection).
    pub(crate) fn capabilities(&self) -> Option<rmcp::model::ServerCapabilities> {
        read(&self.capabilities).clone()
    }

    /// Sends a request other than `tools/call` (prompts, resources, completion) and returns
    /// the server's answer. `origin` routes what the server sends about it, as for calls.
    pub(crate) async fn request(
        &self,
        request: ClientRequest,
        origin: Option<&CallOrigin>,
    ) -> Result<ServerResult, Error> {
        let peer = self.connected_peer()?;
        let method = request.method().to_owned();
        self.send(&peer, request, &method, None, origin).await
    }

    /// Opens `subscriptions/listen` on the server for a client stream of `origin` (protocol
    /// 2026-07-28): `None` when the server does not speak the client's version (it then
    /// announces changes on its session, if at all, and those reach every stream). What
    /// the server sends on the stream arrives tagged with [`UpstreamStream::id`]; dropping
    /// the stream cancels it on the server.
    pub(crate) async fn listen(
        &self,
        filter: rmcp::model::SubscriptionFilter,
        origin: &CallOrigin,
    ) -> Result<Option<UpstreamStream>, Error> {
        let Some((version, protocol)) = origin.protocol.as_ref() else {
            return Ok(None);
        };
        if !read(&self.discovered_versions).contains(version) {
            return Ok(None);
        }
        let peer = self.connected_peer()?;
        let request = ClientRequest::SubscriptionsListenRequest(rmcp::model::Request::new(
            rmcp::model::SubscriptionsListenRequestParams::new(filter),
        ));
        let options = PeerRequestOptions::no_options().with_meta(protocol.clone());
        let handle = peer
            .send_request_with_option(request, options)
            .await
            .map_err(|e| self.connection_error("subscriptions/listen", &e))?;
        Ok(Some(UpstreamStream {
            id: handle.id.clone(),
            peer,
            _handle: handle,
        }))
    }

    fn transport_label(&self) -> &'static str {
        match self.config.transport {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }
}

/// Every configured upstream, with their supervisors. Servers can be added, removed and
/// restarted while the proxy runs ([`Upstreams::apply`], [`Upstreams::restart`]).
pub(crate) struct Upstreams {
    servers: RwLock<BTreeMap<String, Running>>,
    settings: UpstreamConfig,
    default_timeout: Duration,
    index: Arc<ToolIndex>,
    trust: Arc<TrustStore>,
    shutdown: CancellationToken,
    changes_tx: mpsc::UnboundedSender<ToolChange>,
    changes: std::sync::Mutex<Option<mpsc::UnboundedReceiver<ToolChange>>>,
    back_channel: Arc<BackChannel>,
}

/// One upstream and its supervisor.
struct Running {
    upstream: Arc<Upstream>,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// What [`Upstreams::apply`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Applied {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Servers whose configuration changed, restarted with the new one.
    pub restarted: Vec<String>,
}

impl Applied {
    pub(crate) fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.restarted.is_empty()
    }
}

impl Upstreams {
    /// Starts a supervisor per enabled server (quarantined ones included: they are listed,
    /// never called). Must run inside a tokio runtime.
    pub(crate) fn start(
        servers: &[ServerConfig],
        settings: &UpstreamConfig,
        default_timeout: Duration,
        index: Arc<ToolIndex>,
        trust: Arc<TrustStore>,
    ) -> Arc<Self> {
        let (changes_tx, receiver) = mpsc::unbounded_channel();
        let upstreams = Self {
            servers: RwLock::new(BTreeMap::new()),
            settings: *settings,
            default_timeout,
            index,
            trust,
            shutdown: CancellationToken::new(),
            changes_tx,
            changes: std::sync::Mutex::new(Some(receiver)),
            back_channel: BackChannel::new(),
        };
        {
            let mut map = write(&upstreams.servers);
            for config in servers {
                map.insert(config.name.clone(), upstreams.launch(config));
            }
        }
        Arc::new(upstreams)
    }

    /// A new upstream for `config`, its supervisor started unless it is disabled or its
    /// launch spec is not approved.
    fn launch(&self, config: &ServerConfig) -> Running {
        let standing = self.trust.standing(config);
        let initial = if !config.enabled {
            State::Disabled
        } else if !standing.may_start() {
            State::Unapproved
        } else {
            State::Disconnected
        };
        let upstream = Arc::new(Upstream {
            config: config.clone(),
            settings: self.settings,
            default_timeout: self.default_timeout,
            state: watch::Sender::new(initial.clone()),
            peer: RwLock::new(None),
            lane: RwLock::new(None),
            tools: RwLock::new(Arc::new(BTreeMap::new())),
            wire_tools: RwLock::new(Arc::default()),
            refresh: Notify::new(),
            quarantined: AtomicBool::new(standing.is_quarantined()),
            standing,
            review: RwLock::new(Arc::new(Review::default())),
            trust: self.trust.clone(),
            index: self.index.clone(),
            changes: self.changes_tx.clone(),
            reported: std::sync::Mutex::new(BTreeMap::new()),
            log: std::sync::Mutex::new(log::Ring::default()),
            back_channel: self.back_channel.clone(),
            capabilities: RwLock::new(None),
            discovered_versions: RwLock::new(Vec::new()),
        });
        let stop = self.shutdown.child_token();
        let task = (initial == State::Disconnected).then(|| {
            tokio::spawn(supervisor::run(
                upstream.clone(),
                self.index.clone(),
                stop.clone(),
            ))
        });
        Running {
            upstream,
            stop,
            task,
        }
    }

    /// Makes the running servers match `servers`: new ones start, removed ones stop (their
    /// sessions closed, their processes ended, their tools out of the index), changed ones
    /// restart with their new configuration; the others are not touched.
    pub(crate) async fn apply(&self, servers: &[ServerConfig]) -> Applied {
        let mut applied = Applied::default();
        let mut stopping = Vec::new();
        {
            let mut map = write(&self.servers);
            let wanted: BTreeMap<&str, &ServerConfig> =
                servers.iter().map(|s| (s.name.as_str(), s)).collect();
            let gone: Vec<String> = map
                .keys()
                .filter(|name| !wanted.contains_key(name.as_str()))
                .cloned()
                .collect();
            for name in gone {
                if let Some(running) = map.remove(&name) {
                    stopping.push(running);
                    // A server removed and added again is new: nothing of it is trusted.
                    if let Err(e) = self.trust.forget(&name) {
                        tracing::error!(
                            "cannot forget the approvals of removed server '{name}': {e}"
                        );
                    }
                    applied.removed.push(name);
                }
            }
            for (name, config) in wanted {
                match map.get(name) {
                    Some(running) if running.upstream.config == *config => {}
                    Some(running) => {
                        if config.quarantined
                            && !running.upstream.config.quarantined
                            && let Err(e) = self.revoke_approval(name)
                        {
                            tracing::error!("cannot quarantine '{name}' again: {e}");
                        }
                        if let Some(old) = map.insert(name.to_owned(), self.launch(config)) {
                            stopping.push(old);
                        }
                        applied.restarted.push(name.to_owned());
                    }
                    None => {
                        map.insert(name.to_owned(), self.launch(config));
                        applied.added.push(name.to_owned());
                    }
                }
            }
        }
        for running in stopping {
            stop(running).await;
        }
        applied
    }

    /// Forgets that a person approved `name`'s calls (its approved launch spec and its pinned
    /// tools stay): it is quarantined again when it restarts.
    pub(crate) fn revoke_approval(&self, name: &str) -> Result<(), crate::trust::Error> {
        if self
            .trust
            .server(name)
            .is_some_and(|s| s.approved_at.is_some())
        {
            self.trust.update(name, |server| {
                server.approved_at = None;
                server.approved_by = None;
            })?;
        }
        Ok(())
    }

    /// Approves how `name` starts as configured now and, with `calls`, its calls; restarts it
    /// so the approval takes effect (a server whose launch was not approved starts now).
    pub(crate) async fn approve_launch(
        &self,
        name: &str,
        calls: bool,
        by: &str,
        at: &str,
    ) -> Result<bool, crate::trust::Error> {
        let Some(config) = self.get(name).map(|u| u.config.clone()) else {
            return Ok(false);
        };
        self.trust.approve_launch(&config, calls, by, at)?;
        Ok(self.restart(name).await)
    }

    /// The trust decisions the upstreams are held against.
    pub(crate) fn trust(&self) -> &Arc<TrustStore> {
        &self.trust
    }

    /// Stops `name`'s session and starts a new one with the same configuration (a new
    /// process for a stdio server). `false` if there is no such server.
    pub(crate) async fn restart(&self, name: &str) -> bool {
        let old = {
            let mut map = write(&self.servers);
            let Some(config) = map.get(name).map(|r| r.upstream.config.clone()) else {
                return false;
            };
            map.insert(name.to_owned(), self.launch(&config))
        };
        if let Some(old) = old {
            stop(old).await;
        }
        true
    }

    /// The tool changes the supervisors notice (new, changed, removed tools), for the
    /// activity journal. `None` after the first call: there is one consumer.
    pub(crate) fn take_changes(&self) -> Option<mpsc::UnboundedReceiver<ToolChange>> {
        self.changes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// The routes from upstreams back to clients (progress, logs, questions for the user).
    pub(crate) fn back_channel(&self) -> &Arc<BackChannel> {
        &self.back_channel
    }

    pub(crate) fn get(&self, name: &str) -> Option<Arc<Upstream>> {
        read(&self.servers).get(name).map(|r| r.upstream.clone())
    }

    pub(crate) fn names(&self) -> Vec<String> {
        read(&self.servers).keys().cloned().collect()
    }

    /// Every upstream, by name.
    pub(crate) fn all(&self) -> Vec<Arc<Upstream>> {
        read(&self.servers)
            .values()
            .map(|r| r.upstream.clone())
            .collect()
    }

    pub(crate) fn statuses(&self) -> Vec<Status> {
        self.all().iter().map(|u| u.status()).collect()
    }

    /// Waits until no upstream is still on its first connection attempt, or the timeout.
    pub(crate) async fn settle(&self, timeout: Duration) {
        let upstreams = self.all();
        let wait_all = async {
            for upstream in &upstreams {
                let mut rx = upstream.subscribe();
                let _ = rx
                    .wait_for(|s| !matches!(s, State::Disconnected | State::Connecting))
                    .await;
            }
        };
        let _ = tokio::time::timeout(timeout, wait_all).await;
    }

    /// Stops every supervisor, closes every session and ends child processes.
    pub(crate) async fn shutdown(&self) {
        self.shutdown.cancel();
        let running: Vec<Running> = std::mem::take(&mut *write(&self.servers))
            .into_values()
            .collect();
        for running in running {
            stop(running).await;
        }
    }
}

/// Stops one supervisor and waits for it (its session closed, its tools out of the index).
async fn stop(mut running: Running) {
    running.stop.cancel();
    if let Some(task) = running.task.take() {
        let _ = task.await;
    }
    running.upstream.state.send_replace(State::Disconnected);
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}
