//! The MCP handler of one client session ([`ProxyServer`]): the built-in tools, listing and
//! calling through the shared proxy, and what a client reads of a call's outcome.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, SKILLS_EXTENSION_ID, ServerCapabilities,
    ServerConfig, SubscribeRequestParams, TASKS_EXTENSION_ID, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};
use rmcp::{ErrorData, ServerHandler};

use crate::manage::Manager;
use crate::proxy::{CallContext, CatalogError, Proxy, Scope, SubscriptionMethod};
use mcpproxy_activity::{ClientRecord, Source};
use mcpproxy_policy::OperationType;
use mcpproxy_upstream::back_channel::{CallOrigin, forwardable_meta, protocol_meta};

use super::client_session::SessionSlot;
use super::{LEGACY_CALL_TOOL_MESSAGE, builtin_tools_with};

/// One MCP session's handler; all sessions share the proxy.
#[derive(Clone)]
pub struct ProxyServer {
    pub(super) proxy: Arc<Proxy>,
    /// Offers `upstream_servers` when set (and `management.upstream_servers_tool` is on), to
    /// the callers [`crate::manage::check_grant`] lets manage.
    pub(super) manager: Option<Arc<Manager>>,
    /// Every request sees this server only (`/mcp/servers/NAME`, `serve --stdio --server
    /// NAME`).
    pub(super) fixed_server: Option<String>,
    session: Arc<SessionSlot>,
}

impl ProxyServer {
    pub fn new(proxy: Arc<Proxy>) -> Self {
        Self {
            session: SessionSlot::new(proxy.clone()),
            proxy,
            manager: None,
            fixed_server: None,
        }
    }

    /// Serves the direct view of one upstream on every request.
    pub fn for_server(mut self, server: String) -> Self {
        self.fixed_server = Some(server);
        self
    }

    /// The handler of a new session: the same views, a session of its own in the back channel.
    pub fn for_new_session(&self) -> Self {
        Self {
            session: SessionSlot::new(self.proxy.clone()),
            ..self.clone()
        }
    }

    /// The extensions this endpoint offers. Tasks: on the aggregate endpoint always (any
    /// upstream may answer a call with a task), on a direct one when the server declares
    /// them. Skills: on a direct endpoint, as the server declares them.
    fn extensions(&self) -> Option<rmcp::model::ExtensionCapabilities> {
        let Some(server) = &self.fixed_server else {
            let mut extensions = rmcp::model::ExtensionCapabilities::new();
            extensions.insert(TASKS_EXTENSION_ID.to_owned(), Default::default());
            return Some(extensions);
        };
        let declared = self
            .proxy
            .upstreams()
            .get(server)?
            .capabilities()?
            .extensions?;
        let carried: rmcp::model::ExtensionCapabilities = declared
            .into_iter()
            .filter(|(id, _)| id == TASKS_EXTENSION_ID || id == SKILLS_EXTENSION_ID)
            .collect();
        (!carried.is_empty()).then_some(carried)
    }

    /// The server whose skills this endpoint serves (a direct endpoint's); the aggregate
    /// endpoint declares no skills, so rmcp answers -32601 before asking.
    fn skills_server(&self) -> Result<&str, ErrorData> {
        self.fixed_server.as_deref().ok_or_else(|| {
            ErrorData::invalid_request(
                "skills are served on the direct endpoint of their server, /mcp/servers/NAME",
                None,
            )
        })
    }

    /// Which servers this session sees: one on a direct endpoint, else all.
    pub(super) fn scope(&self) -> Scope<'_> {
        match &self.fixed_server {
            Some(server) => Scope::Server(server),
            None => Scope::All,
        }
    }

    /// Where the client request came from, for routing what the upstream sends about it.
    fn origin(&self, context: &RequestContext<RoleServer>) -> CallOrigin {
        CallOrigin {
            session: self.session.key,
            peer: context.peer.clone(),
            request_id: context.id.clone(),
            progress_token: context.meta.get_progress_token(),
            capabilities: context.client_capabilities(),
            meta: forwardable_meta(&context.meta),
            cancelled: context.ct.clone(),
            client: client_record(context),
            session_id: session_id(context),
            input_responses: None,
            request_state: None,
            protocol: protocol_meta(
                context.protocol_version(),
                context.client_capabilities(),
                context.client_info(),
                &context.meta,
            ),
            stateless: is_stateless(context),
        }
    }

    /// Offers the `upstream_servers` tool, changing servers through `manager`, unless the
    /// config turns the tool off.
    pub fn with_manager(mut self, manager: Arc<Manager>) -> Self {
        if manager.settings().upstream_servers_tool {
            self.manager = Some(manager);
        }
        self
    }

    /// Whether the caller of `context` may use the `upstream_servers` tool: it is offered
    /// (`management.upstream_servers_tool`), and the caller is the owner (no identity) or
    /// holds the management grant and is not scoped.
    fn manages(&self, context: &RequestContext<RoleServer>) -> bool {
        self.manager.as_ref().is_some_and(|manager| {
            crate::manage::check_grant(
                manager.settings(),
                identity(context).as_ref(),
                self.view(context).is_some(),
            )
            .is_ok()
        })
    }
}

fn session_id(context: &RequestContext<RoleServer>) -> Option<String> {
    context
        .extensions
        .get::<::http::request::Parts>()
        .and_then(|parts| parts.headers.get("mcp-session-id"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Whether the request stands alone: over HTTP without an `Mcp-Session-Id` (rmcp makes a
/// handler for each such request), or on a session that never initialized (2026-07-28
/// inline lifecycle).
fn is_stateless(context: &RequestContext<RoleServer>) -> bool {
    match context.extensions.get::<::http::request::Parts>() {
        Some(parts) => !parts.headers.contains_key("mcp-session-id"),
        None => context.peer.peer_info().is_none(),
    }
}

/// The identity the `/mcp` gate found in the request's access token, if any.
pub(super) fn identity(
    context: &RequestContext<RoleServer>,
) -> Option<mcpproxy_activity::IdentityRecord> {
    context
        .extensions
        .get::<::http::request::Parts>()
        .and_then(|parts| {
            parts
                .extensions
                .get::<mcpproxy_auth::client_auth::Identity>()
        })
        .map(|identity| mcpproxy_activity::IdentityRecord {
            subject: identity.subject.clone(),
            groups: identity.groups.clone(),
        })
}

fn client_record(context: &RequestContext<RoleServer>) -> Option<ClientRecord> {
    context.client_info().map(|info| ClientRecord {
        name: info.name,
        version: info.version,
    })
}

impl ProxyServer {
    /// Who is calling, from the MCP request: session, request id, client name and version,
    /// and the request itself for routing what the upstream sends back.
    pub(super) fn call_context(&self, context: &RequestContext<RoleServer>) -> CallContext {
        CallContext {
            source: Source::Mcp,
            dry_run: false,
            timeout: None,
            session_id: session_id(context),
            request_id: Some(context.id.to_string()),
            client: client_record(context),
            origin: Some(self.origin(context)),
            parent_id: None,
            record_id: None,
            identity: identity(context),
        }
    }
}

/// A catalog failure as the JSON-RPC error a client expects: a name or URI that leads
/// nowhere is `invalid params` (the spec's answer for an unknown prompt or resource),
/// anything else an internal error with the reason.
pub(super) fn catalog_error(error: CatalogError) -> ErrorData {
    match error {
        // The server's own JSON-RPC error, passed on as it is (code and data included).
        CatalogError::Upstream(mcpproxy_upstream::Error::Rejected { error, .. }) => error,
        CatalogError::NotFound(message) => ErrorData::invalid_params(message, None),
        CatalogError::Refused(message) => ErrorData::invalid_request(message, None),
        CatalogError::Upstream(e) => ErrorData::internal_error(e.to_string(), None),
    }
}

/// A handler's outcome as a record takes it: the error's message, if any.
fn error_text(outcome: &Result<(), ErrorData>) -> Result<(), String> {
    outcome
        .as_ref()
        .map(|_| ())
        .map_err(|e| e.message.to_string())
}

impl ServerHandler for ProxyServer {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::default();
        let mut tools = rmcp::model::ToolsCapability::default();
        // A direct endpoint's tools are the server's: they change when its do.
        tools.list_changed = self.fixed_server.is_some().then_some(true);
        capabilities.tools = Some(tools);
        capabilities.logging = Some(Default::default());
        capabilities.completions = Some(Default::default());
        let mut prompts = rmcp::model::PromptsCapability::default();
        prompts.list_changed = Some(true);
        capabilities.prompts = Some(prompts);
        let mut resources = rmcp::model::ResourcesCapability::default();
        resources.list_changed = Some(true);
        resources.subscribe = Some(true);
        capabilities.resources = Some(resources);
        if let Some(extensions) = self.extensions() {
            capabilities.extensions = Some(extensions);
        }
        let instructions = match &self.fixed_server {
            Some(server) => format!(
                "mcpproxy serves the tools, prompts and resources of the upstream server \
                 '{server}' under their own names; every tool call passes mcpproxy's policy and \
                 is recorded."
            ),
            None => {
                "mcpproxy aggregates many MCP servers. Find tools with retrieve_tools, then call \
                     them with call_tool_read, call_tool_write or call_tool_destructive as each \
                     result's call_with says. Prompts and resources of every server are listed \
                     as server:name."
                    .to_owned()
            }
        };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("mcpproxy", env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions)
    }

    /// A tool of the direct view, for rmcp's checks of the `Mcp-Param-*` headers against
    /// the tool's schema. The aggregate view's tools take no such parameters.
    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        let server = self.fixed_server.as_ref()?;
        let upstream = self.proxy.upstreams().get(server)?;
        if upstream.is_quarantined() || !upstream.is_trusted(name) {
            return None;
        }
        upstream.wire_tool(name)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.session
            .open(&context.peer, self.fixed_server.as_deref());
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let view = self.view(&context);
        if let Some(server) = &self.fixed_server {
            return self.direct_list_tools(server, view.as_deref()).await;
        }
        // Only the owner and callers granted management (and not scoped: the tool would
        // list every server) see the management tool.
        let mut tools = builtin_tools_with(self.manages(&context));
        if self.proxy.code_execution().is_some() {
            tools.push(super::tools::code_execution_tool());
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(server) = &self.fixed_server {
            return self.direct_call_tool(server, request, &context).await;
        }
        let arguments = request.arguments.unwrap_or_default();
        let variant = match request.name.as_ref() {
            "call_tool_read" => Some(OperationType::Read),
            "call_tool_write" => Some(OperationType::Write),
            "call_tool_destructive" => Some(OperationType::Destructive),
            _ => None,
        };
        if let Some(variant) = variant {
            let mut call = self.call_context(&context);
            if let Some(origin) = &mut call.origin {
                origin.input_responses = request.input_responses;
                origin.request_state = request.request_state;
            }
            return self.call_variant(variant, &arguments, call, &context).await;
        }
        match request.name.as_ref() {
            super::tools::RETRIEVE_TOOLS => Ok(self
                .retrieve_tools(&arguments, self.view(&context))
                .await
                .into()),
            super::tools::UPSTREAM_SERVERS if self.manager.is_some() => {
                Ok(self.upstream_servers(&arguments, &context).await.into())
            }
            mcpproxy_upstream::line_guard::OVERSIZED_REQUEST_TOOL => {
                Err(ErrorData::invalid_request(
                    format!(
                        "the request was larger than {} MiB, the most mcpproxy reads on stdio; send \
                     smaller arguments",
                        (mcpproxy_upstream::line_guard::MAX_LINE_BYTES >> 20) + 1
                    ),
                    None,
                ))
            }
            super::tools::CODE_EXECUTION => {
                let call = self.call_context(&context);
                super::code_tool::code_execution(&self.proxy, &arguments, call).await
            }
            super::tools::LEGACY_CALL_TOOL => {
                Err(ErrorData::invalid_params(LEGACY_CALL_TOOL_MESSAGE, None))
            }
            other => Err(ErrorData::invalid_params(
                format!(
                    "Tool '{other}' not found. mcpproxy's tools are retrieve_tools, call_tool_read, \
                     call_tool_write and call_tool_destructive; upstream tools are called through them."
                ),
                None,
            )),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let prompts = self
            .listed(self.proxy.list_prompts(self.scope()), &context, |p| &p.name)
            .await?;
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let call = self.call_context(&context);
        let mut response = self
            .proxy
            .get_prompt(self.scope(), request, call)
            .await
            .map_err(catalog_error)?;
        if let GetPromptResponse::Complete(result) = &mut response {
            result
                .result_type
                .get_or_insert(rmcp::model::ResultType::COMPLETE);
        }
        Ok(response)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = self
            .listed(self.proxy.list_resources(self.scope()), &context, |r| {
                &r.name
            })
            .await?;
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let templates = self
            .listed(
                self.proxy.list_resource_templates(self.scope()),
                &context,
                |t| &t.name,
            )
            .await?;
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let call = self.call_context(&context);
        let mut response = self
            .proxy
            .read_resource(self.scope(), request, call)
            .await
            .map_err(catalog_error)?;
        if let ReadResourceResponse::Complete(result) = &mut response {
            result
                .result_type
                .get_or_insert(rmcp::model::ResultType::COMPLETE);
        }
        Ok(response)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let call = self.call_context(&context);
        self.proxy
            .complete(self.scope(), request, call)
            .await
            .map_err(catalog_error)
    }

    /// Registers the session's interest in a resource, and subscribes upstream when it is
    /// the first session to watch it; recorded as a `subscription`.
    #[allow(
        deprecated,
        reason = "resources/subscribe is legacy-only in rmcp; pre-2026 clients send it"
    )]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let call = self.call_context(&context);
        let pending = self
            .proxy
            .subscription_route(
                self.scope(),
                SubscriptionMethod::Subscribe,
                &request.uri,
                &call,
            )
            .await
            .map_err(catalog_error)?;
        let owner = pending.server().to_owned();
        let (sent, outcome) = match self.session.back_channel().subscribe(
            self.session.key,
            &context.peer,
            &owner,
            &request.uri,
        ) {
            Err(message) => (false, Err(ErrorData::invalid_request(message, None))),
            Ok(false) => (false, Ok(())),
            Ok(true) => match self.proxy.subscribe(self.scope(), &request.uri).await {
                Ok(_) => (true, Ok(())),
                Err(e) => {
                    self.session
                        .back_channel()
                        .unsubscribe(self.session.key, &owner, &request.uri);
                    (true, Err(catalog_error(e)))
                }
            },
        };
        self.proxy
            .subscription_done(pending, sent, error_text(&outcome))
            .await;
        outcome
    }

    /// Forgets the session's interest in a resource, and unsubscribes upstream when no
    /// other session watches it; recorded as a `subscription`.
    #[allow(
        deprecated,
        reason = "resources/subscribe is legacy-only in rmcp; pre-2026 clients send it"
    )]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let call = self.call_context(&context);
        let pending = self
            .proxy
            .subscription_route(
                self.scope(),
                SubscriptionMethod::Unsubscribe,
                &request.uri,
                &call,
            )
            .await
            .map_err(catalog_error)?;
        let owner = pending.server().to_owned();
        let last = self
            .session
            .back_channel()
            .unsubscribe(self.session.key, &owner, &request.uri);
        let outcome = if last {
            self.proxy
                .unsubscribe(&owner, &request.uri)
                .await
                .map_err(catalog_error)
        } else {
            Ok(())
        };
        self.proxy
            .subscription_done(pending, last, error_text(&outcome))
            .await;
        outcome
    }

    // `logging/setLevel` is deprecated by SEP-2577 but still sent by clients: the session
    // gets upstream log messages at that level and above, tagged with their server.
    #[allow(
        deprecated,
        reason = "MCP logging and sampling are deprecated by SEP-2577; earlier clients and servers use them"
    )]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tracing::debug!(level = ?request.level, "client set the logging level");
        let back_channel = self.session.back_channel();
        back_channel.set_log_level(self.session.key, &context.peer, request.level);
        if let Some(level) = back_channel.most_verbose_level() {
            self.proxy.set_upstream_log_level(self.scope(), level).await;
        }
        Ok(())
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        let origin = self.origin(&context);
        self.proxy
            .get_task(self.scope(), request, &origin)
            .await
            .map_err(catalog_error)
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let origin = self.origin(&context);
        self.proxy
            .update_task(self.scope(), request, &origin)
            .await
            .map_err(catalog_error)
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let origin = self.origin(&context);
        self.proxy
            .cancel_task(self.scope(), request, &origin)
            .await
            .map_err(catalog_error)
    }

    /// `subscriptions/listen`: everything asked for is carried (rmcp keeps only what the
    /// capabilities declare).
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        Some(requested.clone())
    }

    /// Serves one listen stream: registered with the back channel, with a stream opened on
    /// each server this endpoint sees that speaks the client's version, until the client
    /// ends it.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let origin = self.origin(context.request_context());
        let call = self.call_context(context.request_context());
        let guard = self
            .session
            .back_channel()
            .add_listener(self.fixed_server.as_deref(), context.sink().clone())
            .map_err(|message| ErrorData::invalid_request(message, None))?;
        let streams = self
            .proxy
            .listen_upstreams(self.scope(), context.accepted(), &origin, &call, &guard)
            .await;
        context.cancelled().await;
        drop(streams);
        drop(guard);
        Ok(())
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListSkillsResult, ErrorData> {
        let server = self.skills_server()?;
        let origin = self.origin(&context);
        self.proxy
            .list_skills(server, request, &origin)
            .await
            .map_err(catalog_error)
    }

    async fn get_skill(
        &self,
        request: rmcp::model::GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetSkillResult, ErrorData> {
        let server = self.skills_server()?;
        let origin = self.origin(&context);
        self.proxy
            .get_skill(server, request, &origin)
            .await
            .map_err(catalog_error)
    }

    async fn read_resource_directory(
        &self,
        request: rmcp::model::ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceDirectoryResult, ErrorData> {
        let server = self.skills_server()?;
        let origin = self.origin(&context);
        self.proxy
            .read_resource_directory(server, request, &origin)
            .await
            .map_err(catalog_error)
    }
}
