//! Requests to one upstream: `tools/call` (on rmcp's session or on the stdio call lane),
//! the other requests a client sends on (prompts, resources, completion), the listings of
//! prompts and resources, and `subscriptions/listen`. What the server sends about a request
//! is routed back to the client that made it through the back channel.

use std::time::Duration;

use rmcp::model::{CallToolResult, ClientRequest, ServerResult};
use rmcp::service::PeerRequestOptions;
use rmcp::service::{Peer, RoleClient};

use crate::back_channel::CallOrigin;
use mcpproxy_config::Transport;

use super::handler::proxy_client_capabilities;
use super::{Error, Upstream, call_result, lane};

/// The reason a client's cancellation is forwarded upstream with.
const CLIENT_CANCELLED: &str = "the client cancelled the request";
/// The error of a call the client cancelled.
const CANCELLED_UPSTREAM: &str = "the client cancelled the request; the server was told";

/// What a server answered a `tools/call`.
#[derive(Debug, Clone)]
pub enum CallAnswer {
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

/// What mcpproxy declares for a request of a client that can follow a task: what it
/// declared for the session, plus the tasks extension. The upstream session is shared, so
/// the extension is never declared for the session: a server would then answer every
/// client's call with a task, also the calls of clients that cannot follow one. Declared
/// per request (SEP-2663 negotiates it per request), only the calls of clients that
/// declared it may become tasks, and their `tasks/*` requests are not refused as coming
/// from a client without it; the rest stays what the session said, so the server still
/// asks for elicitation and sampling as it would without the extension.
fn capabilities_following_tasks() -> rmcp::model::ClientCapabilities {
    let mut capabilities = proxy_client_capabilities();
    capabilities
        .extensions
        .get_or_insert_with(Default::default)
        .insert(
            rmcp::model::TASKS_EXTENSION_ID.to_owned(),
            Default::default(),
        );
    capabilities
}

/// A `subscriptions/listen` stream open on a server for one client stream; cancelled on
/// the server when dropped.
pub struct UpstreamStream {
    id: rmcp::model::RequestId,
    peer: Peer<RoleClient>,
    _handle: rmcp::service::RequestHandle<RoleClient>,
}

impl UpstreamStream {
    /// The id the server tags the stream's notifications with.
    pub fn id(&self) -> &rmcp::model::RequestId {
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

impl Upstream {
    /// The session's peer, if connected.
    fn connected_peer(&self) -> Result<Peer<RoleClient>, Error> {
        self.check_usable()?;
        self.session().peer.clone().ok_or_else(|| {
            let (server, state) = (self.config.name.clone(), self.state());
            if self.is_lazy() {
                Error::NotStarted { server, state }
            } else {
                Error::NotConnected { server, state }
            }
        })
    }

    /// Calls a tool on the server within `timeout` (else the server's own). With an
    /// `origin`, the client's `_meta` goes along, what the server sends about this call
    /// (progress, elicitation and sampling requests) is routed back to that client, and
    /// the client's cancellation is forwarded as `notifications/cancelled`.
    ///
    /// When the call fails while the server's sandbox refuses a path or a connection, the
    /// error says so ([`super::explain`]).
    pub async fn call(
        &self,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        timeout: Option<Duration>,
        origin: Option<&CallOrigin>,
    ) -> Result<CallAnswer, Error> {
        let window = self.call_window();
        let answer = self
            .call_unexplained(tool, arguments, timeout, origin)
            .await;
        match window {
            Some(window) => self.explain(window, answer).await,
            None => answer,
        }
    }

    async fn call_unexplained(
        &self,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        timeout: Option<Duration>,
        origin: Option<&CallOrigin>,
    ) -> Result<CallAnswer, Error> {
        let _in_flight = self.ensure_started(self.call_timeout(timeout)).await;
        self.check_usable()?;
        let mut params = rmcp::model::CallToolRequestParams::new(tool.to_owned());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        if let Some(origin) = origin {
            params.input_responses = origin.input_responses.clone();
            params.request_state = origin.request_state.clone();
        }
        let lane = self.session().lane.clone();
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
    /// on), and the client's protocol fields when the server speaks its version. Failing
    /// that (a client of an earlier version, which declared its capabilities at
    /// `initialize`, or a server that does not speak the client's version), a client that
    /// declared the tasks extension has it declared for this request alone
    /// ([`capabilities_following_tasks`]) to a server that declared it too.
    fn request_meta(&self, origin: Option<&CallOrigin>) -> rmcp::model::RequestMetaObject {
        let mut meta = origin.and_then(|o| o.meta.clone()).unwrap_or_default();
        let Some(origin) = origin else {
            return meta;
        };
        if let Some((version, protocol)) = origin.protocol.as_ref()
            && self.session().discovered_versions.contains(version)
        {
            for (key, value) in protocol.0.iter() {
                meta.0.insert(key.clone(), value.clone());
            }
        } else if origin.can_follow_tasks()
            && self.capabilities().is_some_and(|c| c.supports_tasks())
        {
            meta.set_client_capabilities(capabilities_following_tasks());
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
            Ok(lane::ReplyContent::Result(result)) => {
                call_result::read(result).map_err(|message| Error::Call {
                    server: self.config.name.clone(),
                    tool,
                    message,
                })
            }
            Ok(lane::ReplyContent::Error(error)) => Err(Error::Rejected {
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
        if let Some(challenge) = self.needs_login() {
            return Error::LoginRequired {
                server: self.config.name.clone(),
                reason: challenge.reason(),
            };
        }
        // In words: rmcp's errors name its Rust types.
        let text = super::error::in_words(&e.to_string());
        let message = match &self.config.transport {
            // The HTTP stack quotes the URL, query (tokens) and user info included.
            Transport::Http { url, .. } => mcpproxy_auth::masking::mask_text_with_url(&text, url),
            Transport::Stdio { .. } => mcpproxy_auth::masking::mask_text(&text),
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
    pub async fn list_prompts(&self) -> Result<Vec<rmcp::model::Prompt>, Error> {
        self.list("prompts/list", |peer| async move {
            peer.list_all_prompts().await
        })
        .await
    }

    /// Every resource of the server (all pages).
    pub async fn list_resources(&self) -> Result<Vec<rmcp::model::Resource>, Error> {
        self.list("resources/list", |peer| async move {
            peer.list_all_resources().await
        })
        .await
    }

    /// Every resource template of the server (all pages).
    pub async fn list_resource_templates(
        &self,
    ) -> Result<Vec<rmcp::model::ResourceTemplate>, Error> {
        self.list("resources/templates/list", |peer| async move {
            peer.list_all_resource_templates().await
        })
        .await
    }

    /// Sends a request other than `tools/call` (prompts, resources, completion) and returns
    /// the server's answer. `origin` routes what the server sends about it, as for calls.
    pub async fn request(
        &self,
        request: ClientRequest,
        origin: Option<&CallOrigin>,
    ) -> Result<ServerResult, Error> {
        let _in_flight = self.ensure_started(self.call_timeout(None)).await;
        let peer = self.connected_peer()?;
        let method = request.method().to_owned();
        self.send(&peer, request, &method, None, origin).await
    }

    /// Opens `subscriptions/listen` on the server for a client stream of `origin` (protocol
    /// 2026-07-28): `None` when the server does not speak the client's version (it then
    /// announces changes on its session, if at all, and those reach every stream). What
    /// the server sends on the stream arrives tagged with [`UpstreamStream::id`]; dropping
    /// the stream cancels it on the server.
    pub async fn listen(
        &self,
        filter: rmcp::model::SubscriptionFilter,
        origin: &CallOrigin,
    ) -> Result<Option<UpstreamStream>, Error> {
        let Some((version, protocol)) = origin.protocol.as_ref() else {
            return Ok(None);
        };
        if !self.session().discovered_versions.contains(version) {
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
}
