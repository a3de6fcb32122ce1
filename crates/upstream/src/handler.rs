//! rmcp's client-side handler of an upstream session ([`UpstreamClient`]): what the server
//! tells the proxy (its tools changed, progress, log messages, resource updates) and what it
//! asks a client (elicitation, sampling), passed on through the back channel.

// Logging and sampling are deprecated by SEP-2577 (2026-07-28), but the clients and servers
// of earlier versions use them, and mcpproxy carries them.
#![allow(
    deprecated,
    reason = "MCP logging and sampling are deprecated by SEP-2577; earlier clients and servers use them"
)]

use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::ErrorData;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientResult, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationCapability, Implementation,
    LoggingMessageNotificationParam, ProgressNotificationParam, RequestId,
    ResourceUpdatedNotificationParam, ServerNotification, ServerRequest,
};
use rmcp::service::{InboundStreamOrigin, NotificationContext, RequestContext, RoleClient};

use crate::back_channel::{BackChannel, CallOrigin, ForwardedRequest, ask_client};

use super::Upstream;
use super::listing::Warned;
use super::supervisor::relist_after_change;

/// rmcp's client-side handler: reacts to what the upstream tells us, and passes what
/// concerns a client on to it through the [`BackChannel`].
#[derive(Clone)]
pub(super) struct UpstreamClient {
    pub(super) upstream: Weak<Upstream>,
    pub(super) server: String,
    pub(super) back_channel: Arc<BackChannel>,
    pub(super) warned: Arc<Warned>,
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
pub(super) fn proxy_client_capabilities() -> ClientCapabilities {
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
        relist_after_change(&upstream, &context.peer, &self.warned).await;
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
            .map(|m| mcpproxy_support::cut_to(&m, MAX_RELAYED_TEXT_BYTES));
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
            Some(logger) => format!("{}:{}", self.server, mcpproxy_support::cut_to(logger, 256)),
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
