//! The fixture's [`ServerHandler`]: advertises tools, prompts, resources (with
//! subscriptions), completions, logging and the tasks and skills extensions, and
//! routes each request to the module for its concern, including
//! `subscriptions/listen` streams (protocol 2026-07-28) and `tasks/*`. One
//! [`Fixture`] serves one session; sessions share only [`Shared`] (the watched
//! resource, the key sealing `requestState`, the change fan-out and the tasks).

use std::sync::Arc;

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
        CompleteResult, GetPromptRequestParams, GetPromptResponse, GetSkillRequestParams,
        GetSkillResult, GetTaskParams, GetTaskResult, Implementation, ListPromptsResult,
        ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult,
        PaginatedRequestParams, ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult,
        ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ServerCapabilities,
        ServerConfig, SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams,
        UpdateTaskParams,
    },
    service::{RequestContext, SubscriptionContext},
    task_manager::TaskManager,
};
use serde_json::json;

use crate::{
    changes::Changes, completion, diagnostics, input, logging::LogLevel, prompts, resources,
    skills, state::Sealer, tasks, tools,
};

/// State shared by every session.
pub struct Shared {
    pub watched: resources::Watched,
    pub sealer: Sealer,
    pub changes: Changes,
    pub tasks: TaskManager,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("watched", &self.watched)
            .field("changes", &self.changes)
            .finish_non_exhaustive()
    }
}

impl Shared {
    pub fn new() -> anyhow::Result<Self> {
        Ok(Self {
            watched: resources::Watched::default(),
            sealer: Sealer::new()?,
            changes: Changes::default(),
            tasks: TaskManager::new(),
        })
    }
}

/// State of one session.
#[derive(Debug, Default)]
pub struct Session {
    pub log_level: LogLevel,
    pub subscriptions: resources::Subscriptions,
}

/// One session's handler.
#[derive(Debug, Clone)]
pub struct Fixture {
    name: Arc<str>,
    pub shared: Arc<Shared>,
    pub session: Arc<Session>,
}

impl Fixture {
    /// A handler for a new session.
    pub fn new(name: Arc<str>, shared: Arc<Shared>) -> Self {
        Self {
            name,
            shared,
            session: Arc::default(),
        }
    }
}

/// Every tool, in listing order.
fn all_tools() -> Vec<Tool> {
    let mut all = tools::list();
    all.extend(input::tools());
    all.extend(diagnostics::tools());
    all.extend(tasks::tools());
    all
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        #[allow(deprecated)] // MCP logging (SEP-2577); the 2025-11-25 scenarios use it.
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_tasks()
            .enable_skills_with_directory_read()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                self.name.as_ref(),
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions("The MCP conformance suite's test tools, prompts and resources.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(all_tools()))
    }

    /// rmcp's HTTP transport reads a tool's schema here to check its `Mcp-Param-*` headers.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        all_tools().into_iter().find(|tool| tool.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if input::is_tool(&request.name) {
            return self.call_input_tool(&request, &context);
        }
        if tasks::is_tool(&request.name) {
            return self.call_task_tool(&request, &context).await;
        }
        if diagnostics::is_tool(&request.name) {
            return self.call_diagnostic_tool(&request, &context).await;
        }
        let arguments = request.arguments.clone().unwrap_or_default();
        self.call_tool_named(&request.name, &arguments, &context)
            .await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let mut all = prompts::list();
        all.push(input::prompt());
        Ok(ListPromptsResult::with_all_items(all))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        if request.name == input::PROMPT {
            return self.get_input_prompt(&request);
        }
        prompts::get(&request).map(GetPromptResponse::from)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut all = resources::list();
        all.extend(skills::resources());
        Ok(ListResourcesResult::with_all_items(all))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        if let Some(contents) = skills::read(&request.uri) {
            return Ok(ReadResourceResult::new(vec![contents]).into());
        }
        resources::read(&request.uri, &self.shared.watched).map(ReadResourceResponse::from)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if !resources::exists(&request.uri) && skills::read(&request.uri).is_none() {
            return Err(McpError::resource_not_found(
                format!("no resource {}", request.uri),
                Some(json!({ "uri": request.uri })),
            ));
        }
        self.session.subscriptions.subscribe(&request.uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.session.subscriptions.unsubscribe(&request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        self.shared.changes.listen(context).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.shared
            .tasks
            .get_task(&request.task_id)
            .map(GetTaskResult::new)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.shared
            .tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.shared.tasks.cancel_task(&request.task_id)
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        Ok(ListSkillsResult::with_all_items(vec![skills::skill()]))
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        skills::get(&request.uri).map(GetSkillResult::new)
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, McpError> {
        skills::children(&request.uri).map(ReadResourceDirectoryResult::with_all_items)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        completion::complete(&request)
    }

    #[allow(deprecated)] // MCP logging (SEP-2577); the 2025-11-25 scenarios use it.
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.session.log_level.set(request.level);
        Ok(())
    }
}
