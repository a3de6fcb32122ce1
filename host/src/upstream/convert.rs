//! Conversions from rmcp's wire types to the proxy's policy types.

use rmcp::model as mcp;

use crate::policy::{Annotations, Tool};

/// An upstream tool as the policy sees it. Hints are read one by one: rmcp's helpers apply
/// the MCP defaults (an unset destructiveHint counts as destructive), the matrix must not.
pub fn tool_from_mcp(server: &str, tool: &mcp::Tool) -> Tool {
    Tool {
        server: server.to_owned(),
        name: tool.name.to_string(),
        description: tool.description.as_deref().unwrap_or_default().to_owned(),
        input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
        annotations: tool.annotations.as_ref().map(|a| Annotations {
            read_only_hint: a.read_only_hint,
            destructive_hint: a.destructive_hint,
            idempotent_hint: a.idempotent_hint,
            open_world_hint: a.open_world_hint,
        }),
        meta: tool
            .meta
            .as_ref()
            .and_then(|m| serde_json::to_value(m).ok())
            .filter(|v| v.as_object().is_some_and(|o| !o.is_empty())),
    }
}
