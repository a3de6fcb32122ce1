//! The MCP server clients talk to: the built-in tools (`retrieve_tools`, the three call
//! variants and, when offered, `upstream_servers`) over streamable HTTP at `/mcp` and over
//! stdio.
//!
//! Tool-level failures (a policy rejection, an upstream error, bad arguments) come back as a
//! `CallToolResult` with `isError: true` and a message an agent can act on; the upstream's
//! own results pass through unchanged. Protocol misuse (an unknown tool) is a JSON-RPC error.

pub mod http;
mod manage_tool;
pub mod sessions;
mod tools;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock as Content,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Map, Value, json};

use crate::activity::{ClientRecord, Source};
use crate::manage::Manager;
use crate::policy::OperationType;
use crate::proxy::{CallContext, CallOutcome, Proxy, parse_call};

pub use tools::{LEGACY_CALL_TOOL_MESSAGE, builtin_tools, builtin_tools_with};

/// One MCP session's handler; all sessions share the proxy.
#[derive(Clone)]
pub struct ProxyServer {
    proxy: Arc<Proxy>,
    /// Offers `upstream_servers` when set (and `management.upstream_servers_tool` is on).
    manager: Option<Arc<Manager>>,
}

impl ProxyServer {
    pub fn new(proxy: Arc<Proxy>) -> Self {
        Self {
            proxy,
            manager: None,
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

    async fn upstream_servers(&self, arguments: &Map<String, Value>) -> CallToolResult {
        let Some(manager) = &self.manager else {
            return tool_error("upstream_servers is turned off (management.upstream_servers_tool)");
        };
        match manage_tool::run(manager, arguments).await {
            Ok(body) => {
                let mut result = CallToolResult::success(vec![Content::text(body.to_string())]);
                result.structured_content = Some(body);
                result
            }
            Err(message) => tool_error(&message),
        }
    }

    async fn retrieve_tools(&self, arguments: &Map<String, Value>) -> CallToolResult {
        let query = match arguments.get("query") {
            Some(Value::String(q)) => q.clone(),
            Some(_) => return tool_error("Parameter 'query' of retrieve_tools must be a string"),
            None => {
                return tool_error(
                    "Parameter 'query' is required for retrieve_tools: describe what you want to do, e.g. \"list repositories\"",
                );
            }
        };
        let limit = match arguments.get("limit") {
            None | Some(Value::Null) => tools::DEFAULT_LIMIT,
            Some(v) => match v.as_u64() {
                Some(n) if (1..=tools::MAX_LIMIT as u64).contains(&n) => n as usize,
                _ => {
                    return tool_error(&format!(
                        "Parameter 'limit' of retrieve_tools must be a whole number from 1 to {}, got {v}",
                        tools::MAX_LIMIT
                    ));
                }
            },
        };
        match self.proxy.retrieve(query, limit).await {
            Ok(hits) => {
                let body = json!({
                    "tools": hits,
                    "total": hits.len(),
                    "usage_instructions": tools::USAGE_INSTRUCTIONS,
                });
                let mut result = CallToolResult::success(vec![Content::text(body.to_string())]);
                result.structured_content = Some(body);
                result
            }
            Err(e) => tool_error(&e),
        }
    }

    async fn call_variant(
        &self,
        variant: OperationType,
        arguments: &Map<String, Value>,
        context: CallContext,
    ) -> CallToolResult {
        let input = match parse_call(variant, arguments) {
            Ok(input) => input,
            Err(message) => return tool_error(&message),
        };
        match self.proxy.call(input, context).await {
            CallOutcome::Refused(message) => tool_error(&message),
            CallOutcome::Held { detail, .. } => tool_error(&detail),
            CallOutcome::Blocked(evaluation) => tool_error(
                evaluation
                    .outcome
                    .message
                    .as_deref()
                    .unwrap_or("Call blocked by policy"),
            ),
            CallOutcome::DryRun(_) => tool_error("dry runs are for the CLI; nothing was called"),
            CallOutcome::Called { result, .. } => match result {
                Ok(result) => result,
                Err(e) => tool_error(&e.to_string()),
            },
        }
    }
}

/// Who is calling, from the MCP request: session, request id, client name and version.
fn call_context(context: &RequestContext<RoleServer>) -> CallContext {
    let session_id = context
        .extensions
        .get::<::http::request::Parts>()
        .and_then(|parts| parts.headers.get("mcp-session-id"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let client = context.peer.peer_info().map(|info| ClientRecord {
        name: info.client_info.name.clone(),
        version: info.client_info.version.clone(),
    });
    CallContext {
        source: Source::Mcp,
        dry_run: false,
        timeout: None,
        session_id,
        request_id: Some(context.id.to_string()),
        client,
    }
}

fn tool_error(message: &str) -> CallToolResult {
    CallToolResult::error(vec![Content::text(message.to_owned())])
}

impl ServerHandler for ProxyServer {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::default();
        capabilities.tools = Some(Default::default());
        capabilities.logging = Some(Default::default());
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("mcpproxy", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "mcpproxy aggregates many MCP servers. Find tools with retrieve_tools, then call them \
                 with call_tool_read, call_tool_write or call_tool_destructive as each result's \
                 call_with says.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(builtin_tools_with(
            self.manager.is_some(),
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let variant = match request.name.as_ref() {
            "call_tool_read" => Some(OperationType::Read),
            "call_tool_write" => Some(OperationType::Write),
            "call_tool_destructive" => Some(OperationType::Destructive),
            _ => None,
        };
        if let Some(variant) = variant {
            let result = self
                .call_variant(variant, &arguments, call_context(&context))
                .await;
            return Ok(result.into());
        }
        match request.name.as_ref() {
            tools::RETRIEVE_TOOLS => Ok(self.retrieve_tools(&arguments).await.into()),
            tools::UPSTREAM_SERVERS if self.manager.is_some() => {
                Ok(self.upstream_servers(&arguments).await.into())
            }
            crate::line_guard::OVERSIZED_REQUEST_TOOL => Err(ErrorData::invalid_request(
                format!(
                    "the request was larger than {} MiB, the most mcpproxy reads on stdio; send \
                     smaller arguments",
                    (crate::line_guard::MAX_LINE_BYTES >> 20) + 1
                ),
                None,
            )),
            tools::LEGACY_CALL_TOOL => {
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

    // `logging/setLevel` is deprecated by SEP-2577 but still sent by clients: answer it.
    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tracing::debug!(level = ?request.level, "client set the logging level");
        Ok(())
    }
}
