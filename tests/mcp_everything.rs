//! Everything MCP carries, through mcpproxy, against the official
//! `@modelcontextprotocol/server-everything` (from `tests/npm`): progress, elicitation
//! answered by the official Python SDK, prompts, resources and templates, on the direct
//! endpoint (`/mcp/servers/NAME`) and the aggregate one (`/mcp`, names `server:name`).

use std::path::Path;
use std::time::Duration;

use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use serde_json::{Value, json};

use crate::support::mcp::{
    Proxy, call, config_with, connect, is_error, npm_bin_installed, npm_dir, text,
};

fn everything() -> Value {
    json!({
        "name": "everything",
        "command": "npx",
        "args": ["--prefix", npm_dir(), "--no-install", "mcp-server-everything", "stdio"],
    })
}

/// The records of one type, newest first, from the REST API.
async fn records(proxy: &Proxy, record_type: &str) -> Vec<Value> {
    let url = format!("{}/api/v1/activity?type={record_type}", proxy.base());
    // The journal's writer commits in the background: a record may land a moment later.
    let what = format!("{record_type} records");
    crate::support::poll::until_value(&what, Duration::from_secs(30), || async {
        let body: Value = reqwest::Client::new()
            .get(&url)
            .header("X-API-Key", proxy.api_key())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let list = body["data"]["records"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if list.is_empty() {
            Err(format!("the last answer: {body}"))
        } else {
            Ok(list)
        }
    })
    .await
}

/// The official Python SDK on the direct endpoint sees server-everything as it is: all its
/// tools (the elicitation ones too, since mcpproxy declares elicitation upstream), progress
/// updates for its call, an elicitation it answers (and the answer reaches the server),
/// and its prompts, resources and templates, readable.
#[tokio::test(flavor = "multi_thread")]
async fn the_python_sdk_gets_progress_elicitation_prompts_and_resources_directly() {
    if !npm_bin_installed("mcp-server-everything") {
        return;
    }
    let Some(python) = crate::support::test_python() else {
        return;
    };
    let proxy = Proxy::builder(&config_with(vec![everything()])).start();
    let direct = format!("{}/mcp/servers/everything", proxy.base());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/everything_client.py");
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(&python)
            .arg(script)
            .args([direct.as_str(), "Ada Lovelace"])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python client finished within 120 s")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();

    let tools: Vec<&str> = seen["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for tool in [
        "echo",
        "trigger-long-running-operation",
        "trigger-elicitation-request",
        "trigger-sampling-request",
    ] {
        assert!(tools.contains(&tool), "{tool} missing from {tools:?}");
    }
    assert_eq!(
        seen["annotations"]["trigger-long-running-operation"]["readOnlyHint"],
        json!(true)
    );
    for capability in ["tools", "prompts", "resources", "logging", "completions"] {
        assert!(
            seen["capabilities"].get(capability).is_some(),
            "{capability} not declared: {}",
            seen["capabilities"]
        );
    }

    // The elicitation reached the client, and its answer reached the server.
    assert_eq!(seen["elicitations"].as_array().unwrap().len(), 1, "{seen}");
    let elicited = &seen["elicitation_result"];
    assert_eq!(elicited["is_error"], json!(false), "{elicited}");
    let elicited_text = elicited["text"].as_str().unwrap();
    assert!(elicited_text.contains("Ada Lovelace"), "{elicited_text}");
    assert!(elicited_text.contains("\"accept\""), "{elicited_text}");

    // Four steps, four progress updates, in order.
    assert_eq!(
        seen["progress"],
        json!([[1.0, 4.0], [2.0, 4.0], [3.0, 4.0], [4.0, 4.0]]),
        "{seen}"
    );
    assert_eq!(seen["long_running"]["is_error"], json!(false));

    // Log messages reached the session that asked for them, tagged with their server.
    let logs = seen["logs"].as_array().unwrap();
    assert!(!logs.is_empty(), "no log message relayed: {seen}");
    assert!(
        logs.iter().all(|l| l["logger"]
            .as_str()
            .is_some_and(|n| n.starts_with("everything"))),
        "{logs:?}"
    );

    // Prompts and resources under their own names, readable.
    assert!(!seen["prompts"].as_array().unwrap().is_empty(), "{seen}");
    assert!(seen["prompt"]["messages"].as_u64().unwrap() >= 1, "{seen}");
    assert!(!seen["resources"].as_array().unwrap().is_empty(), "{seen}");
    assert!(seen["read"]["contents"].as_u64().unwrap() >= 1, "{seen}");
    assert!(!seen["templates"].as_array().unwrap().is_empty(), "{seen}");
    assert!(
        seen["prompts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| !p.as_str().unwrap().contains(':')),
        "direct names carry no server: {seen}"
    );

    // The forwarded elicitation and the resource read are on the audit trail.
    let forwarded = records(&proxy, "server_request").await;
    let elicitation = forwarded
        .iter()
        .find(|r| r["tool_name"] == "elicitation/create")
        .unwrap_or_else(|| panic!("no elicitation record in {forwarded:?}"));
    assert_eq!(elicitation["status"], "success", "{elicitation}");
    assert_eq!(elicitation["server_name"], "everything");
    assert_eq!(elicitation["details"]["answer"], "accept", "{elicitation}");
    let reads = records(&proxy, "resource_read").await;
    assert!(
        reads
            .iter()
            .any(|r| r["arguments"]["uri"] == seen["read"]["uri"] && r["status"] == "success"),
        "{reads:?}"
    );
    let calls = records(&proxy, "tool_call").await;
    assert!(
        calls
            .iter()
            .any(|r| r["tool_name"] == "trigger-long-running-operation"
                && r["tool_variant"] == "call_tool_read"),
        "a direct call is judged as the variant its annotations call for: {calls:?}"
    );
    assert!(!stderr.contains("Session termination failed"), "{stderr}");
}

/// On the aggregate endpoint prompts and resources carry their server, are routed back to
/// it, and `retrieve_tools` hits carry `outputSchema`. A client that cannot answer an
/// elicitation gets a clear error from the tool, never a hang.
#[tokio::test(flavor = "multi_thread")]
async fn the_aggregate_endpoint_routes_prompts_resources_and_refuses_elicitation_clearly() {
    if !npm_bin_installed("mcp-server-everything") {
        return;
    }
    let proxy = Proxy::builder(&config_with(vec![everything()])).start();
    let client = connect(&proxy.url).await;

    let prompts = client.list_all_prompts().await.unwrap();
    assert!(!prompts.is_empty());
    assert!(
        prompts.iter().all(|p| p.name.starts_with("everything:")),
        "{prompts:?}"
    );
    let simple = prompts
        .iter()
        .find(|p| p.arguments.as_ref().is_none_or(Vec::is_empty))
        .expect("a prompt without arguments");
    let got = client
        .get_prompt(GetPromptRequestParams::new(simple.name.clone()))
        .await
        .unwrap();
    assert!(!got.messages.is_empty());
    let unknown = client
        .get_prompt(GetPromptRequestParams::new("nobody:greet"))
        .await
        .unwrap_err()
        .to_string();
    assert!(unknown.contains("no upstream server 'nobody'"), "{unknown}");

    let resources = client.list_all_resources().await.unwrap();
    let first = resources
        .first()
        .expect("server-everything lists resources");
    assert!(first.name.starts_with("everything:"), "{first:?}");
    let read = client
        .read_resource(ReadResourceRequestParams::new(first.uri.clone()))
        .await
        .unwrap();
    assert!(!read.contents.is_empty());
    let templates = client.list_all_resource_templates().await.unwrap();
    assert!(!templates.is_empty());

    let hits = call(
        &client,
        "retrieve_tools",
        json!({"query": "structured content", "limit": 20}),
    )
    .await
    .unwrap();
    let body: Value = serde_json::from_str(&text(&hits)).unwrap();
    let structured = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "everything:get-structured-content")
        .unwrap_or_else(|| panic!("no get-structured-content hit: {body}"));
    assert!(
        structured["outputSchema"].is_object(),
        "retrieve_tools hits carry outputSchema: {structured}"
    );

    // rmcp's default client declares no elicitation: the server is told so at once.
    let refused = tokio::time::timeout(
        Duration::from_secs(60),
        call(
            &client,
            "call_tool_write",
            json!({"name": "everything:trigger-elicitation-request", "args": {}}),
        ),
    )
    .await
    .expect("no hang: the elicitation is refused at once");
    let message = match refused {
        Ok(result) => {
            assert!(is_error(&result), "{}", text(&result));
            text(&result)
        }
        Err(e) => e,
    };
    assert!(
        message.contains("does not support elicitation/create"),
        "{message}"
    );
    let forwarded = records(&proxy, "server_request").await;
    assert!(
        forwarded
            .iter()
            .any(|r| r["tool_name"] == "elicitation/create" && r["status"] == "error"),
        "{forwarded:?}"
    );
}
