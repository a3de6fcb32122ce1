//! `rate_limits`: token buckets per caller, per tool and per upstream. Over HTTP (`mcpproxy
//! serve` with `auth` against the real authorization server of `tests/oauth/issuer.mjs`), a
//! call over a limit is answered `429 Too Many Requests` with `Retry-After` and a JSON-RPC
//! error whose `data` names the limit and its bucket; each caller has a bucket of their own;
//! the refusal is on the record under the caller's name. Over stdio the same refusal is the
//! JSON-RPC error.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use crate::support::issuer::Issuer;
use crate::support::mcp::{Proxy, call, call_until_ok, config_with, stdio_fixture, text};

/// `http.auth_token`: a caller without an identity.
const STATIC_TOKEN: &str = "a-static-token-0123456789abcdef";

/// An MCP session spoken in plain HTTP, to see the status and headers of each answer.
struct RawSession {
    url: String,
    token: String,
    id: String,
    next: u64,
}

impl RawSession {
    async fn open(url: &str, token: &str) -> Self {
        let answer = post(
            url,
            token,
            None,
            &json!({
                "jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "limits-test", "version": "1"}}
            }),
        )
        .await;
        assert_eq!(answer.status().as_u16(), 200);
        let id = answer
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .expect("a session id")
            .to_owned();
        let session = Self {
            url: url.to_owned(),
            token: token.to_owned(),
            id,
            next: 1,
        };
        let initialized = post(
            url,
            token,
            Some(&session.id),
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
        assert!(
            initialized.status().is_success(),
            "{}",
            initialized.status()
        );
        session
    }

    /// Calls `name` through `call_tool_read`: the status, `Retry-After` and the JSON body.
    async fn call(&mut self, name: &str, args: Value) -> (u16, Option<String>, Value) {
        self.next += 1;
        let answer = post(
            &self.url,
            &self.token,
            Some(&self.id),
            &json!({"jsonrpc": "2.0", "id": self.next, "method": "tools/call",
                    "params": {"name": "call_tool_read", "arguments": {"name": name, "args": args}}}),
        )
        .await;
        let status = answer.status().as_u16();
        let retry_after = answer
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = answer.text().await.expect("a body");
        let body = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("not a JSON answer ({e}): {body}"));
        (status, retry_after, body)
    }
}

async fn post(url: &str, token: &str, session: Option<&str>, body: &Value) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body(body.to_string());
    if let Some(id) = session {
        request = request.header("mcp-session-id", id);
    }
    request.send().await.expect("reach /mcp")
}

/// Asserts a 429 whose body is the JSON-RPC error of `limit` on bucket `key`; returns the
/// error's message.
fn assert_limited(answer: &(u16, Option<String>, Value), limit: &str, key: &str) -> String {
    let (status, retry_after, body) = answer;
    assert_eq!(*status, 429, "{body}");
    let error = &body["error"];
    assert_eq!(error["code"], -32029, "{body}");
    assert_eq!(error["data"]["limit"], limit, "{body}");
    assert_eq!(error["data"]["key"], key, "{body}");
    let seconds = error["data"]["retry_after"].as_u64().expect("retry_after");
    assert_eq!(retry_after.as_deref(), Some(seconds.to_string().as_str()));
    // One token an hour: the wait is most of an hour, never zero.
    assert!((1..=3600).contains(&seconds), "{body}");
    let message = error["message"].as_str().expect("message").to_owned();
    assert!(
        message.starts_with(&format!("Rate limit {limit} (")),
        "{message}"
    );
    message
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_over_a_limit_get_429_with_retry_after_and_the_limit_named() {
    let Some(node) = crate::support::node::oauth_node() else {
        return;
    };
    let issuer = Issuer::start(&node);
    let fx_log = tempfile::NamedTempFile::new().expect("call log");
    let db_log = tempfile::NamedTempFile::new().expect("call log");
    let mut config = config_with(vec![
        stdio_fixture("fx", fx_log.path()),
        stdio_fixture("db", db_log.path()),
    ]);
    config["auth"] = json!({"issuer": issuer.url});
    config["http"] = json!({"auth_token": STATIC_TOKEN});
    config["rate_limits"] = json!({
        "identity": {"rate": 1, "per": "hour", "burst": 3},
        "tools": {"fx:echo": {"rate": 1, "per": "hour", "burst": 1}},
        "upstreams": {"db": {"rate": 1, "per": "hour", "burst": 1}},
    });
    let proxy = Proxy::builder(&config).start();
    let mut alice = RawSession::open(&proxy.url, &issuer.token("alice", &proxy.url).await).await;
    let mut bob = RawSession::open(&proxy.url, &issuer.token("bob", &proxy.url).await).await;
    let mut anonymous = RawSession::open(&proxy.url, STATIC_TOKEN).await;

    // alice's own bucket: three calls, then the fourth is refused.
    for _ in 0..3 {
        let (status, _, body) = alice.call("fx:get_status", json!({})).await;
        assert_eq!(status, 200, "{body}");
        assert!(body["result"]["isError"] != true, "{body}");
    }
    let refused = alice.call("fx:get_status", json!({})).await;
    let alice_message = assert_limited(&refused, "rate_limits.identity", "identity:alice");

    // bob has a bucket of his own; fx:echo's is shared and holds one call.
    let (status, _, body) = bob.call("fx:echo", json!({"text": "hi"})).await;
    assert_eq!(status, 200, "{body}");
    let refused = bob.call("fx:echo", json!({"text": "again"})).await;
    assert_limited(&refused, "rate_limits.tools.fx:echo", "tool:fx:echo");

    // The upstream db's bucket is shared by everyone, callers without a login too.
    let (status, _, body) = bob.call("db:get_status", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let refused = anonymous.call("db:get_status", json!({})).await;
    assert_limited(&refused, "rate_limits.upstreams.db", "upstream:db");
    // The static token draws from no identity bucket.
    let (status, _, body) = anonymous.call("fx:get_status", json!({})).await;
    assert_eq!(status, 200, "{body}");

    // Nothing refused reached an upstream; the refusals are on the record.
    let echoes = crate::support::mcp::call_log_lines(fx_log.path())
        .iter()
        .filter(|c| c["tool"] == "echo")
        .count();
    assert_eq!(echoes, 1);
    assert_eq!(crate::support::mcp::call_log_lines(db_log.path()).len(), 1);
    let records = proxy.finished_records("tool_call", 9).await;
    let refusal = records
        .iter()
        .find(|r| {
            r["identity"]["subject"] == "alice" && r["error_message"] == alice_message.as_str()
        })
        .unwrap_or_else(|| panic!("no record of alice's refused call: {records:?}"));
    assert_eq!(refusal["status"], "error", "{refusal}");
    assert_eq!(refusal["verdict"]["decision"], "reject", "{refusal}");
    let limited = records
        .iter()
        .filter(|r| {
            r["error_message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Rate limit "))
        })
        .count();
    assert_eq!(limited, 3, "{records:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn over_stdio_a_call_over_a_limit_is_a_json_rpc_error() {
    let dir = tempfile::tempdir().expect("data dir");
    let log = tempfile::NamedTempFile::new().expect("call log");
    let mut config = config_with(vec![stdio_fixture("fx", log.path())]);
    config["rate_limits"] = json!({"tools": {"fx:echo": {"rate": 1, "per": "hour"}}});
    let path = dir.path().join("mcp_config.json");
    std::fs::write(&path, config.to_string()).expect("write the config");
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpproxy"));
    cmd.args(["serve", "--stdio", "--config"])
        .arg(&path)
        .arg("--data-dir")
        .arg(dir.path())
        .env("RUST_LOG", "warn");
    let client =
        ().serve(TokioChildProcess::new(cmd).expect("start mcpproxy"))
            .await
            .expect("an MCP session over stdio");
    // The upstream connects in the background: wait with a tool no limit covers.
    call_until_ok(
        &client,
        "fx connected",
        "call_tool_read",
        json!({"name": "fx:get_status"}),
        Duration::from_secs(60),
    )
    .await;
    let first = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args": {"text": "a"}}),
    )
    .await
    .expect("the first call");
    assert_eq!(text(&first), "a");
    let refused = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args": {"text": "b"}}),
    )
    .await
    .expect_err("the second call is a JSON-RPC error");
    assert!(
        refused.starts_with("Rate limit rate_limits.tools.fx:echo (1 per hour, burst 1) reached"),
        "{refused}"
    );
    let _ = client.cancel().await;
}
