//! One upstream as it is, for the direct endpoint (`/mcp/servers/NAME`, `serve --stdio
//! --server NAME`): its trusted tools under their own names, each with its effective
//! annotations (the server's own, else the annotators'), and the call variant those
//! annotations call for. Calls still go through [`Proxy::call`]: judged, recorded.

use rmcp::model::{Tool as WireTool, ToolAnnotations};

use mcpproxy_policy::{EffectiveAnnotations, OperationType, call_with};

use super::{CatalogError, Proxy};

/// A tool of the direct endpoint.
#[derive(Debug, Clone)]
pub struct DirectTool {
    /// As the server sent it, with the effective annotations when it sent none.
    pub tool: WireTool,
    /// The variant a call is judged as.
    pub variant: OperationType,
}

impl Proxy {
    /// The trusted tools of `server`, as its direct endpoint lists them, in the server's
    /// order. A quarantined server lists none.
    pub async fn direct_tools(&self, server: &str) -> Result<Vec<DirectTool>, CatalogError> {
        let upstream = self.direct_server(server)?;
        if upstream.is_quarantined() {
            return Ok(Vec::new());
        }
        let pipeline = self.pipeline();
        tokio::task::spawn_blocking(move || {
            upstream
                .wire_tools()
                .iter()
                .filter(|wire| upstream.is_trusted(&wire.name))
                .filter_map(|wire| {
                    let tool = upstream.tool(&wire.name)?;
                    let effective = pipeline.annotate(&tool).unwrap_or_else(|fault| {
                        tracing::warn!(
                            "annotator fault while listing {}: {fault}",
                            tool.qualified_name()
                        );
                        EffectiveAnnotations::unknown()
                    });
                    Some(direct_tool(wire, &effective))
                })
                .collect()
        })
        .await
        .map_err(|e| CatalogError::Refused(format!("listing tools failed: {e}")))
    }

    /// The direct endpoint's view of one tool of `server`; `None` when the server has no
    /// such tool.
    pub async fn direct_tool(
        &self,
        server: &str,
        name: &str,
    ) -> Result<Option<DirectTool>, CatalogError> {
        let upstream = self.direct_server(server)?;
        let (Some(tool), Some(wire)) = (upstream.tool(name), upstream.wire_tool(name)) else {
            return Ok(None);
        };
        let pipeline = self.pipeline();
        tokio::task::spawn_blocking(move || {
            let effective = pipeline
                .annotate(&tool)
                .unwrap_or_else(|_| EffectiveAnnotations::unknown());
            Some(direct_tool(wire, &effective))
        })
        .await
        .map_err(|e| CatalogError::Refused(format!("annotating the tool failed: {e}")))
    }
}

fn direct_tool(mut wire: WireTool, effective: &EffectiveAnnotations) -> DirectTool {
    let variant = call_with(effective.annotations.as_ref());
    if wire.annotations.is_none()
        && let Some(a) = &effective.annotations
    {
        let mut annotations = ToolAnnotations::default();
        annotations.read_only_hint = a.read_only_hint;
        annotations.destructive_hint = a.destructive_hint;
        annotations.idempotent_hint = a.idempotent_hint;
        annotations.open_world_hint = a.open_world_hint;
        wire.annotations = Some(annotations);
    }
    DirectTool {
        tool: wire,
        variant,
    }
}
