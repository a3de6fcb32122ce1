//! The MCP face of `code_execution`: the arguments checked against the config, the script
//! run through the proxy, and its report as the tool's result (`isError` unless it returned).
//! Offered only when the config enables it; a call while it is off is refused and says how
//! to turn it on.

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock as Content};
use serde_json::{Map, Value};

use crate::proxy::{CallContext, Proxy, parse_code_request};

pub(super) async fn code_execution(
    proxy: &Arc<Proxy>,
    arguments: &Map<String, Value>,
    context: CallContext,
) -> Result<CallToolResponse, ErrorData> {
    let Some(executor) = proxy.code_execution() else {
        return Err(ErrorData::invalid_params(
            "Tool 'code_execution' is disabled on this proxy: an operator turns it on with \
             \"code_execution\": {\"enabled\": true} in mcp_config.json. Use call_tool_read, \
             call_tool_write or call_tool_destructive instead.",
            None,
        ));
    };
    let request = match parse_code_request(arguments, &executor.config) {
        Ok(request) => request,
        Err(message) => {
            return Ok(CallToolResult::error(vec![Content::text(message)]).into());
        }
    };
    let report = proxy.execute_code(request, context).await;
    let body = serde_json::to_value(&report).unwrap_or(Value::Null);
    let mut result = if report.ok {
        CallToolResult::success(vec![Content::text(body.to_string())])
    } else {
        CallToolResult::error(vec![Content::text(body.to_string())])
    };
    result.structured_content = Some(body);
    Ok(result.into())
}
