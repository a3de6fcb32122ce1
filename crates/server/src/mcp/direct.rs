//! The direct view's tools: one upstream's trusted tools under their own names (less those
//! `scopes` hide from the caller). A call is
//! judged as the variant the tool's effective annotations call for (`call_tool_read` for a
//! read-only tool, and so on), with no declared intent, and recorded like any call.

use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, CallToolResponse, ListToolsResult};
use rmcp::service::{RequestContext, RoleServer};

use crate::proxy::{CallInput, CallOutcome};

use super::{ProxyServer, call_result, catalog_error};
use crate::scoping::View;

impl ProxyServer {
    pub(super) async fn direct_list_tools(
        &self,
        server: &str,
        view: Option<&View>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .proxy
            .direct_tools(server)
            .await
            .map_err(catalog_error)?;
        Ok(ListToolsResult::with_all_items(
            tools
                .into_iter()
                .map(|t| t.tool)
                .filter(|t| view.is_none_or(|v| v.sees_tool(server, &t.name)))
                .collect(),
        ))
    }

    pub(super) async fn direct_call_tool(
        &self,
        server: &str,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let hidden = self
            .view(context)
            .is_some_and(|view| !view.sees_tool(server, &request.name));
        let found = match hidden {
            true => None,
            false => self
                .proxy
                .direct_tool(server, &request.name)
                .await
                .map_err(catalog_error)?,
        };
        let variant = match found {
            Some(tool) => tool.variant,
            // A hidden tool reads as one the server does not have.
            None => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "Tool '{}' not found: server '{server}' has no tool of that name (tools/list shows its tools)",
                        mcpproxy_support::quote(&request.name)
                    ),
                    None,
                ));
            }
        };
        let input = CallInput {
            variant,
            server: server.to_owned(),
            tool: request.name.to_string(),
            args: request.arguments.clone().unwrap_or_default(),
            intent: None,
        };
        let mut call = self.call_context(context);
        if let Some(origin) = &mut call.origin {
            origin.input_responses = request.input_responses;
            origin.request_state = request.request_state;
        }
        match self.proxy.call(input, call).await {
            // A transparent hop: the server's JSON-RPC error reaches the client as it is.
            CallOutcome::Called {
                result: Err(mcpproxy_upstream::Error::Rejected { error, .. }),
                ..
            } => Err(error),
            CallOutcome::Limited(limited) => {
                Err(super::rate_limited::rate_limited(&limited, context))
            }
            outcome => Ok(call_result(outcome, self.scope())),
        }
    }
}
