//! What the approval tests share: the fixture's `delete_note` calls (made, waiting, logged),
//! their records, `mcpproxy approvals`, and a 2026-07-28 client's stateless call with its
//! retry.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::TestCommand;
use super::mcp::{Proxy, call, call_log_lines, connect};

/// The `delete_note` calls the fixture ran, by their `id` argument.
pub(crate) fn deleted(log: &Path) -> Vec<String> {
    call_log_lines(log)
        .iter()
        .filter(|l| l["tool"] == "delete_note")
        .filter_map(|l| l["arguments"]["id"].as_str().map(str::to_owned))
        .collect()
}

/// `call_tool_destructive fx:delete_note {"id": id}` through `proxy`'s MCP endpoint, by a
/// client that cannot answer questions, on a task of its own (it may wait for a person).
pub(crate) fn spawn_delete(
    proxy: &Proxy,
    id: &'static str,
) -> tokio::task::JoinHandle<rmcp::model::CallToolResult> {
    let url = proxy.url.clone();
    tokio::spawn(async move {
        let client = connect(&url).await;
        let result = call(
            &client,
            "call_tool_destructive",
            json!({"name": "fx:delete_note", "args": {"id": id}}),
        )
        .await
        .expect("a tool result");
        client.cancel().await.ok();
        result
    })
}

/// The journal's final record of the `delete_note` call with argument `id`.
pub(crate) async fn record_of(proxy: &Proxy, id: &str) -> Value {
    super::poll::until_value("the call's record", Duration::from_secs(30), || async {
        let page = proxy
            .get_json("/api/v1/activity?tool=delete_note&limit=100")
            .await;
        page["data"]["records"]
            .as_array()
            .and_then(|all| {
                all.iter()
                    .find(|r| r["arguments"]["id"] == id && r["status"] != "pending")
                    .cloned()
            })
            .ok_or_else(|| format!("no final record of {id}: {page}"))
    })
    .await
}

/// `mcpproxy approvals ARGS` on `proxy`'s config.
pub(crate) fn approvals(proxy: &Proxy, args: &[&str]) -> super::CmdOutput {
    let config = proxy.data_dir.path().join("mcp_config.json");
    TestCommand::new(proxy.data_dir.path())
        .args(["approvals"])
        .args(args)
        .args(["--config"])
        .arg_path(&config)
        .output()
}

/// The protocol version of the stateless calls below.
const STATELESS: &str = "2026-07-28";

/// One stateless `tools/call` of `call_tool_destructive fx:delete_note {"id": id}` to
/// `proxy`, from a 2026-07-28 client that can answer forms; a retry carries the
/// `requestState` and the `inputResponses`. The JSON-RPC response.
pub(crate) async fn stateless_delete(
    proxy: &Proxy,
    id: &str,
    retry: Option<(&str, Value)>,
) -> Value {
    let mut params = json!({
        "name": "call_tool_destructive",
        "arguments": {"name": "fx:delete_note", "args": {"id": id}},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientInfo": {"name": "stateless-e2e", "version": "1.0.0"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        },
    });
    if let Some((state, responses)) = retry {
        params["requestState"] = json!(state);
        params["inputResponses"] = responses;
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let text = reqwest::Client::new()
        .post(&proxy.url)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", STATELESS)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "call_tool_destructive")
        .json(&body)
        .send()
        .await
        .expect("POST /mcp")
        .text()
        .await
        .expect("the response body");
    super::mcp::rpc_response(&text)
}

/// The answer a retry carries: the approval form accepted, approving or not.
pub(crate) fn approve(yes: bool) -> Value {
    json!({"mcpproxy_approval": {"action": "accept", "content": {"approve": yes}}})
}
