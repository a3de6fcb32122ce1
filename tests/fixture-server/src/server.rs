//! The fixture's hand-written [`ServerHandler`]: advertises the tools
//! capability (with `listChanged`), lists the current tool set, and routes
//! `tools/call` to [`Tools`] after recording the call in the call log.

use std::{path::PathBuf, sync::Arc};

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
        GetPromptRequestParams, GetPromptResponse, Implementation, JsonObject, ListPromptsResult,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    },
    service::RequestContext,
};

use crate::{call_log::CallLog, leaks::Leaks, raw_tools::RawTools, tools::Tools};

/// One handler per session; clones share the tool state and the call log.
#[derive(Debug, Clone)]
pub struct Fixture {
    name: Arc<str>,
    tools: Arc<Tools>,
    call_log: Option<Arc<CallLog>>,
    /// Listed raw entries (see [`crate::raw_tools`]): a call of one answers `raw NAME`.
    raw_tools: Option<RawTools>,
    /// `--leak SECRET`: the `leak` tool, the `leaky` prompt and its completions.
    leaks: Option<Leaks>,
}

impl Fixture {
    /// A fixture reporting `name` in `initialize`, optionally logging calls
    /// and applying the tool overrides in the file `tool_overrides`; calls of
    /// the entries of `raw_tools` answer `raw NAME`.
    pub fn new(
        name: String,
        call_log: Option<CallLog>,
        tool_overrides: Option<PathBuf>,
        raw_tools: Option<RawTools>,
    ) -> Self {
        Self {
            name: Arc::from(name.as_str()),
            tools: Tools::new(name, tool_overrides),
            call_log: call_log.map(Arc::new),
            raw_tools,
            leaks: None,
        }
    }

    /// The fixture that also leaks `secret` through every channel (see [`crate::leaks`]).
    pub fn with_leaks(mut self, secret: Option<String>) -> Self {
        self.leaks = secret.map(Leaks::new);
        self
    }
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        if self.leaks.is_some() {
            #[allow(
                deprecated,
                reason = "logging is deprecated by SEP-2577; servers of earlier versions use it"
            )]
            let leaky = ServerCapabilities::builder()
                .enable_prompts()
                .enable_completions()
                .enable_logging()
                .build();
            capabilities.prompts = leaky.prompts;
            capabilities.completions = leaky.completions;
            capabilities.logging = leaky.logging;
        }
        ServerConfig::new(capabilities).with_server_info(Implementation::new(
            self.name.as_ref(),
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut tools = self.tools.list();
        if self.leaks.is_some() {
            tools.push(Leaks::tool());
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        match &self.leaks {
            Some(_) if name == "leak" => Some(Leaks::tool()),
            _ => self.tools.get(name),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let prompts = match &self.leaks {
            Some(_) => Leaks::prompts(),
            None => Vec::new(),
        };
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        match &self.leaks {
            Some(leaks) => leaks.prompt(&request).map(GetPromptResponse::Complete),
            None => Err(McpError::method_not_found::<
                rmcp::model::GetPromptRequestMethod,
            >()),
        }
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        match &self.leaks {
            Some(leaks) => leaks.complete(&request),
            None => Err(McpError::method_not_found::<
                rmcp::model::CompleteRequestMethod,
            >()),
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = request.arguments.unwrap_or_default();
        let meta: JsonObject = context
            .meta
            .0
            .iter()
            .filter(|(key, _)| key.as_str() != "progressToken")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(log) = &self.call_log {
            log.record(
                &request.name,
                &arguments,
                (!meta.is_empty()).then_some(&meta),
            )
            .map_err(|error| {
                McpError::internal_error(format!("cannot write the call log: {error}"), None)
            })?;
        }
        if self
            .raw_tools
            .as_ref()
            .is_some_and(|raw| raw.has(&request.name))
        {
            let answer = rmcp::model::ContentBlock::text(format!("raw {}", request.name));
            return Ok(CallToolResponse::from(
                rmcp::model::CallToolResult::success(vec![answer]),
            ));
        }
        let result = match &self.leaks {
            Some(leaks) if request.name == "leak" => leaks.call(&arguments, &context).await,
            _ => self.tools.call(&request.name, &arguments, &context).await,
        };
        if context.ct.is_cancelled()
            && let Some(log) = &self.call_log
        {
            log.record_cancelled(&request.name, &arguments)
                .map_err(|error| {
                    McpError::internal_error(format!("cannot write the call log: {error}"), None)
                })?;
        }
        result.map(CallToolResponse::from)
    }
}
