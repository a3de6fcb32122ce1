//! Server-to-client requests through the proxy, with two clients on one upstream session
//! (docs/security.md: "An upstream asking one client's user for data during another
//! client's call"): the sampling and elicitation requests the conformance fixture sends
//! while it serves a call reach the client of that call only (a stdio upstream: the newest
//! call in flight is the one that asked), while the other client's own question waits
//! unanswered (over HTTP the fixture speaks 2026-07-28, which has no such requests);
//! and a request from an upstream with no call in flight is refused, reaching no client.

#![allow(
    deprecated,
    reason = "sampling is deprecated by SEP-2577 but still carried, and tested, through the proxy"
)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction, Implementation, SamplingMessage,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::support::mcp::{Proxy, config_with, text, workspace_bin};
use crate::support::poll::{until, until_value};

/// A client that answers sampling and elicitation in its own name and notes each question
/// it gets; with a closed `gate`, its sampling answers wait until the gate opens.
#[derive(Clone)]
struct Asked {
    name: &'static str,
    seen: Arc<Mutex<Vec<String>>>,
    gate: Arc<Semaphore>,
}

impl Asked {
    fn new(name: &'static str, open: bool) -> Self {
        Self {
            name,
            seen: Arc::default(),
            gate: Arc::new(Semaphore::new(if open {
                Semaphore::MAX_PERMITS
            } else {
                0
            })),
        }
    }

    fn seen(&self) -> Vec<String> {
        mcpproxy_support::lock(&self.seen).clone()
    }
}

impl ClientHandler for Asked {
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let asked = serde_json::to_string(&params).unwrap_or_default();
        mcpproxy_support::lock(&self.seen).push(format!("sampling {asked}"));
        let _permit = self.gate.acquire().await;
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text(format!("from {}", self.name)),
            "test-model".to_owned(),
        ))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let asked = serde_json::to_string(&request).unwrap_or_default();
        mcpproxy_support::lock(&self.seen).push(format!("elicitation {asked}"));
        Ok(
            ElicitResult::new(ElicitationAction::Accept).with_content(json!({
                "username": self.name,
                "email": format!("{}@example.com", self.name),
            })),
        )
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder()
                .enable_sampling()
                .enable_elicitation()
                .build(),
            Implementation::new(self.name, "1.0.0"),
        )
    }
}

async fn connect(proxy: &Proxy, handler: &Asked) -> RunningService<RoleClient, Asked> {
    handler
        .clone()
        .serve(StreamableHttpClientTransport::from_uri(proxy.url.clone()))
        .await
        .expect("connect to /mcp")
}

/// `call_tool_destructive` of `tool` (`server:name`) with `args`, within a minute.
async fn call(
    client: &RunningService<RoleClient, Asked>,
    tool: &str,
    args: Value,
) -> CallToolResult {
    let Value::Object(arguments) = json!({ "name": tool, "args": args }) else {
        unreachable!()
    };
    let params = CallToolRequestParams::new("call_tool_destructive").with_arguments(arguments);
    tokio::time::timeout(Duration::from_secs(60), client.peer().call_tool(params))
        .await
        .unwrap_or_else(|_| panic!("{tool}: no answer within a minute (asked the wrong client?)"))
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// Bob's call asks Bob (who does not answer yet); meanwhile Alice's calls on the same
/// server ask Alice, and only her; then Bob answers his own question.
async fn questions_reach_the_caller_only(proxy: &Proxy, server: &str) {
    let alice = Asked::new("alice", true);
    let bob = Asked::new("bob", false);
    let alice_client = connect(proxy, &alice).await;
    let bob_client = Arc::new(connect(proxy, &bob).await);

    let bob_call = {
        let bob_client = bob_client.clone();
        let tool = format!("{server}:test_sampling");
        tokio::spawn(
            async move { call(&bob_client, &tool, json!({ "prompt": "bob-prompt" })).await },
        )
    };
    let what = format!("{server}: bob is asked, or his call ends");
    until(&what, Duration::from_secs(30), || async {
        if bob.seen().is_empty() && !bob_call.is_finished() {
            Err("bob was never asked".to_owned())
        } else {
            Ok(())
        }
    })
    .await;
    if bob.seen().is_empty() {
        let answer = bob_call.await.expect("bob's call");
        panic!("{server}: bob's call ended without asking him: {answer:?}");
    }

    let sampled = call(
        &alice_client,
        &format!("{server}:test_sampling"),
        json!({ "prompt": "alice-prompt" }),
    )
    .await;
    assert_eq!(text(&sampled), "LLM response: from alice", "{server}");
    let elicited = call(
        &alice_client,
        &format!("{server}:test_elicitation"),
        json!({ "message": "alice-question" }),
    )
    .await;
    assert!(
        text(&elicited).contains("alice@example.com"),
        "{server}: {}",
        text(&elicited)
    );

    let alice_seen = alice.seen();
    assert_eq!(alice_seen.len(), 2, "{server}: {alice_seen:?}");
    assert!(
        alice_seen[0].contains("alice-prompt"),
        "{server}: {alice_seen:?}"
    );
    assert!(
        alice_seen[1].contains("alice-question"),
        "{server}: {alice_seen:?}"
    );
    let bob_seen = bob.seen();
    assert_eq!(bob_seen.len(), 1, "{server}: bob was asked {bob_seen:?}");
    assert!(bob_seen[0].contains("bob-prompt"), "{server}: {bob_seen:?}");

    bob.gate.add_permits(Semaphore::MAX_PERMITS);
    let bob_result = bob_call.await.expect("bob's call");
    assert_eq!(text(&bob_result), "LLM response: from bob", "{server}");
    assert_eq!(alice.seen().len(), 2, "{server}: {:?}", alice.seen());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_from_an_upstream_reaches_only_the_client_whose_call_asked() {
    let proxy = Proxy::builder(&config_with(vec![json!({
        "name": "conf",
        "command": workspace_bin("mcp-conformance-fixture"),
        "args": ["--name", "conf"],
    })]))
    .start();
    questions_reach_the_caller_only(&proxy, "conf").await;
}

/// A stdio MCP server (plain Node, no SDK) with one tool, `noop`; once the file `go` next
/// to its log exists it sends `sampling/createMessage` and `elicitation/create` on its own,
/// with no call in flight, and appends the answers it gets to its log (argument 1).
const LATE_ASKER: &str = r#"
const fs = require('fs');
const log = process.argv[2];
const go = log + '.go';
const send = (m) => process.stdout.write(JSON.stringify(m) + '\n');
let buffer = '';
process.stdin.on('data', (chunk) => {
  buffer += chunk;
  let at;
  while ((at = buffer.indexOf('\n')) >= 0) {
    const line = buffer.slice(0, at);
    buffer = buffer.slice(at + 1);
    if (!line.trim()) continue;
    const m = JSON.parse(line);
    if (m.method === 'initialize') {
      send({ jsonrpc: '2.0', id: m.id, result: {
        protocolVersion: m.params.protocolVersion, capabilities: { tools: {} },
        serverInfo: { name: 'late-asker', version: '1.0.0' } } });
    } else if (m.method === 'tools/list') {
      send({ jsonrpc: '2.0', id: m.id, result: { tools: [{ name: 'noop',
        description: 'Does nothing', inputSchema: { type: 'object', properties: {} },
        annotations: { readOnlyHint: true } }] } });
    } else if (m.method === 'tools/call') {
      send({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: 'done' }] } });
    } else if (m.method === 'ping') {
      send({ jsonrpc: '2.0', id: m.id, result: {} });
    } else if (m.method !== undefined && m.id !== undefined) {
      send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'not supported' } });
    } else if (m.method === undefined) {
      fs.appendFileSync(log, JSON.stringify(m) + '\n');
    }
  }
});
const timer = setInterval(() => {
  if (!fs.existsSync(go)) return;
  clearInterval(timer);
  send({ jsonrpc: '2.0', id: 'late-sampling', method: 'sampling/createMessage', params: {
    messages: [{ role: 'user', content: { type: 'text', text: 'late-prompt' } }], maxTokens: 10 } });
  send({ jsonrpc: '2.0', id: 'late-elicitation', method: 'elicitation/create', params: {
    message: 'late-question', requestedSchema: { type: 'object', properties: {} } } });
}, 20);
"#;

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_with_no_call_in_flight_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("late_asker.js");
    std::fs::write(&script, LATE_ASKER).expect("write the server");
    let log = dir.path().join("answers.jsonl");
    std::fs::write(&log, "").expect("log");
    let proxy = Proxy::builder(&config_with(vec![json!({
        "name": "late",
        "command": "node",
        "args": [script, log],
        "isolation": { "enabled": false },
    })]))
    .start();
    // Two clients that would answer, one of which just called the server.
    let alice = Asked::new("alice", true);
    let bob = Asked::new("bob", true);
    let alice_client = connect(&proxy, &alice).await;
    let _bob_client = connect(&proxy, &bob).await;
    let done = call(&alice_client, "late:noop", json!({})).await;
    assert_eq!(text(&done), "done");

    std::fs::write(dir.path().join("answers.jsonl.go"), "").expect("go");
    let answers: Vec<Value> = until_value("two answers", Duration::from_secs(30), || async {
        let answers: Vec<Value> = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if answers.len() >= 2 {
            Ok(answers)
        } else {
            Err(format!("no answers: {answers:?}"))
        }
    })
    .await;
    for id in ["late-sampling", "late-elicitation"] {
        let answer = answers
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("no answer to {id}: {answers:?}"));
        assert!(answer["result"].is_null(), "{id} was answered: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        // Refused by mcpproxy ("no client call to server 'late' is in flight") or, before
        // it, by its MCP library (SEP-2260: "... must be associated with an in-flight
        // client request").
        assert!(
            message.contains("in flight") || message.contains("in-flight"),
            "{id}: {answer}"
        );
    }
    assert!(
        alice.seen().is_empty(),
        "alice was asked {:?}",
        alice.seen()
    );
    assert!(bob.seen().is_empty(), "bob was asked {:?}", bob.seen());
}
