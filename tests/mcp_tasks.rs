//! Tasks (the `io.modelcontextprotocol/tasks` extension) on the aggregate endpoint `/mcp`,
//! as a 2026-07-28 client sends them (stateless requests with their `_meta` and the
//! `Mcp-Method`/`Mcp-Name` headers): a call the conformance fixture runs as a task answers
//! with a task whose id carries its server, `tasks/get` follows it to its result, ids that
//! lead nowhere are refused, a client without the extension gets a plain result, and a
//! task made through one client session (protocol 2025-11-25) is unknown to every other
//! session and to stateless requests.
//! (`mcp_conformance` runs the suite's task scenarios through the direct endpoint.)

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mcp::{Proxy, config_with, workspace_bin};
use crate::support::poll::until_value;

const VERSION: &str = "2026-07-28";

fn proxy() -> Proxy {
    let upstream = json!({
        "name": "conf",
        "command": workspace_bin("mcp-conformance-fixture"),
        "args": ["--name", "conf"],
    });
    Proxy::builder(&config_with(vec![upstream])).start()
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
    crate::support::mcp::rpc_response(&text)
}

/// A client session on `/mcp` (protocol 2025-11-25: `initialize` first, then requests
/// with its `Mcp-Session-Id`) that declared the tasks extension.
struct Session {
    url: String,
    id: String,
    http: reqwest::Client,
    next: std::sync::atomic::AtomicU64,
}

impl Session {
    const VERSION: &str = "2025-11-25";

    async fn open(proxy: &Proxy, client: &str) -> Self {
        let http = reqwest::Client::new();
        let body = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": Self::VERSION,
                "capabilities": { "extensions": { "io.modelcontextprotocol/tasks": {} } },
                "clientInfo": { "name": client, "version": "1.0.0" },
            },
        });
        let response = http
            .post(&proxy.url)
            .header("Accept", "application/json, text/event-stream")
            .json(&body)
            .send()
            .await
            .expect("initialize");
        let id = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .expect("a session id")
            .to_owned();
        let answer =
            crate::support::mcp::rpc_response(&response.text().await.expect("initialize's answer"));
        assert!(answer["result"].is_object(), "{answer}");
        let session = Self {
            url: proxy.url.clone(),
            id,
            http,
            next: std::sync::atomic::AtomicU64::new(1),
        };
        session
            .post(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .await;
        session
    }

    async fn post(&self, body: &Value) -> String {
        self.http
            .post(&self.url)
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Session-Id", &self.id)
            .header("MCP-Protocol-Version", Self::VERSION)
            .json(body)
            .send()
            .await
            .expect("POST /mcp")
            .text()
            .await
            .expect("response body")
    }

    /// One request on this session; the JSON-RPC response.
    async fn rpc(&self, method: &str, params: Value) -> Value {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        crate::support::mcp::rpc_response(&self.post(&body).await)
    }

    /// `tasks/get` until `done` holds for the task's status.
    async fn status_until(&self, id: &str, done: impl Fn(&str) -> bool) -> Value {
        until_value("the task's status", Duration::from_secs(30), || async {
            let last = self.rpc("tasks/get", json!({ "taskId": id })).await;
            if last["result"]["status"].as_str().is_some_and(&done) {
                Ok(last)
            } else {
                Err(last.to_string())
            }
        })
        .await
    }
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

    let last = until_value("the task completes", Duration::from_secs(30), || async {
        let last = rpc(
            &proxy,
            true,
            "tasks/get",
            Some(&id),
            json!({ "taskId": id }),
        )
        .await;
        if last["result"]["status"] == "completed" {
            Ok(last)
        } else {
            Err(last.to_string())
        }
    })
    .await;
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

/// Every upstream session is shared, so mcpproxy decides who may follow a task: a task made
/// through one client session is "unknown" to another session and to a stateless request,
/// for `tasks/get` and `tasks/cancel` alike, and the other session's cancel leaves it
/// running; its own session follows and cancels it.
#[tokio::test(flavor = "multi_thread")]
async fn one_session_cannot_follow_or_cancel_another_sessions_task() {
    let proxy = proxy();
    let alice = Session::open(&proxy, "alice").await;
    let bob = Session::open(&proxy, "bob").await;

    let params = json!({
        "name": "call_tool_write",
        "arguments": { "name": "conf:slow_compute", "args": { "seconds": 60 } },
    });
    let created = alice.rpc("tools/call", params).await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned();
    let working = alice.status_until(&id, |s| s == "working").await;
    assert_eq!(working["result"]["status"], "working", "{working}");

    for method in ["tasks/get", "tasks/cancel"] {
        let answer = bob.rpc(method, json!({ "taskId": id })).await;
        assert_eq!(answer["error"]["code"], -32602, "bob's {method}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("unknown task"),
            "bob's {method}: {message}"
        );
        assert!(answer["result"].is_null(), "bob's {method}: {answer}");
        // Whoever has the id but no session is not its session either.
        let answer = rpc(&proxy, true, method, Some(&id), json!({ "taskId": id })).await;
        assert_eq!(
            answer["error"]["code"], -32602,
            "stateless {method}: {answer}"
        );
    }

    // Bob's cancel never reached the upstream: alice's task still runs.
    let still = alice.rpc("tasks/get", json!({ "taskId": id })).await;
    assert_eq!(still["result"]["status"], "working", "{still}");

    // Its own session cancels it.
    let cancelled = alice.rpc("tasks/cancel", json!({ "taskId": id })).await;
    assert!(cancelled["error"].is_null(), "{cancelled}");
    let ended = alice.status_until(&id, |s| s != "working").await;
    assert_eq!(ended["result"]["status"], "cancelled", "{ended}");
}
