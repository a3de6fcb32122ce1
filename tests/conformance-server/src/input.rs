//! Tools answered with an `InputRequiredResult` (SEP-2322, protocol 2026-07-28).

use rmcp::{
    ErrorData as McpError, RoleServer,
    model::{CallToolResponse, JsonObject},
    service::RequestContext,
};
use serde_json::json;

use crate::server::Fixture;

impl Fixture {
    /// The tools not handled in [`crate::tools`]: unknown tools are invalid params.
    pub async fn call_input_tool(
        &self,
        name: &str,
        _arguments: &JsonObject,
        _context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        Err(McpError::invalid_params(
            format!("unknown tool: {name}"),
            Some(json!({ "name": name })),
        ))
    }
}
