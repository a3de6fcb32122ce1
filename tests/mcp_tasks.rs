//! Tasks (the `io.modelcontextprotocol/tasks` extension) on the aggregate endpoint `/mcp`,
//! as a 2026-07-28 client sends them (stateless requests with their `_meta` and the
//! `Mcp-Method`/`Mcp-Name` headers): a call the conformance fixture runs as a task answers
//! with a task whose id carries its server, `tasks/get` follows it to its result, ids that
//! lead nowhere are refused, and a client without the extension gets a plain result.
//! (`mcp_conformance` runs the suite's task scenarios through the direct endpoint.)

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mcp::{Proxy, config_with, workspace_bin};

const VERSION: &str = "2026-07-28";

fn proxy() -> Proxy {
    let upstream = json!({
        "name": "conf",
        "command": workspace_bin("mcp-conformance-fixture"),
        "args": ["--name", "conf"],
    });
    Proxy::start(&config_with(vec![upstream]), &[])
}

/// The `_meta` of a stateless request; with `tasks`, the client declares the extension.
fn meta(tasks: bool) -> Value {
    let capabilities = if tasks {
        json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } })
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": { "name": "tasks-e2e", "version": "1.0.0" },
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

/// Sends one stateless request to `/mcp` from a client that declares the tasks extension
/// or not; the JSON-RPC response (`result` or `error`).
async fn rpc(
    proxy: &Proxy,
    tasks: bool,
    method: &str,
    name: Option<&str>,
    mut params: Value,
) -> Value {
    params["_meta"] = meta(tasks);
    let mut request = reqwest::Client::new()
        .post(&proxy.url)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", VERSION)
        .header("Mcp-Method", method);
    if let Some(name) = name {
        request = request.header("Mcp-Name", name);
    }
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let response = request.json(&body).send().await.expect("POST /mcp");
    let text = response.text().await.expect("response body");
    // A JSON body, or an event stream whose last `data:` line is the response.
    let json_text = if text.trim_start().starts_with('{') {
        text.clone()
    } else {
        text.lines()
            .rev()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .find(|l| l.contains("\"id\""))
            .unwrap_or_default()
            .to_owned()
    };
    serde_json::from_str(&json_text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

async fn call_write(proxy: &Proxy, tool: &str, args: Value, tasks: bool) -> Value {
    let params = json!({
        "name": "call_tool_write",
        "arguments": { "name": tool, "args": args },
    });
    rpc(proxy, tasks, "tools/call", Some("call_tool_write"), params).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_on_the_aggregate_endpoint_is_followed_to_its_result() {
    let proxy = proxy();

    let created = call_write(&proxy, "conf:slow_compute", json!({ "seconds": 1 }), true).await;
    let task = &created["result"];
    assert_eq!(task["resultType"], "task", "{created}");
    let id = task["taskId"].as_str().expect("taskId").to_owned();
    assert!(id.starts_with("conf:"), "the id carries its server: {id}");

    let mut last = Value::Null;
    for _ in 0..100 {
        last = rpc(
            &proxy,
            true,
            "tasks/get",
            Some(&id),
            json!({ "taskId": id }),
        )
        .await;
        if last["result"]["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let result = &last["result"];
    assert_eq!(result["status"], "completed", "{last}");
    assert_eq!(result["taskId"], id.as_str(), "shown as the client got it");
    assert!(
        result["result"]["content"][0]["text"].is_string(),
        "the tool's result is inlined: {last}"
    );

    // Cancelling an ended task is an empty acknowledgement.
    let cancelled = rpc(
        &proxy,
        true,
        "tasks/cancel",
        Some(&id),
        json!({ "taskId": id }),
    )
    .await;
    assert!(cancelled["error"].is_null(), "{cancelled}");
}

#[tokio::test(flavor = "multi_thread")]
async fn task_ids_that_lead_nowhere_are_unknown() {
    let proxy = proxy();
    for id in ["conf:no-such-task", "no-server-part", "other:some-task"] {
        let answer = rpc(&proxy, true, "tasks/get", Some(id), json!({ "taskId": id })).await;
        assert_eq!(answer["error"]["code"], -32602, "{id}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("unknown task"), "{id}: {message}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_without_the_extension_gets_a_plain_result() {
    let proxy = proxy();
    let answer = call_write(&proxy, "conf:slow_compute", json!({ "seconds": 0 }), false).await;
    let result = &answer["result"];
    assert_ne!(result["resultType"], "task", "{answer}");
    assert!(result["taskId"].is_null(), "{answer}");
    assert!(result["content"][0]["text"].is_string(), "{answer}");
    // ... and the extension's methods are refused as the spec says: -32021, the capability
    // it lacks.
    let params = json!({ "taskId": "conf:x" });
    let refused = rpc(&proxy, false, "tasks/get", Some("conf:x"), params).await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
}
