//! Everything that runs server code is on the record: `prompts/get`, `completion/complete`,
//! `resources/subscribe` and `resources/unsubscribe` through a running `mcpproxy serve` in
//! front of the conformance fixture (an rmcp server with prompts, completions and
//! subscribable resources), each found by its record type through the REST API, `mcpproxy
//! activity list --type` and the HTTP sink; a quarantined server's refusals are recorded as
//! blocked.

use std::time::Duration;

use rmcp::model::{
    GetPromptRequestParams, ReadResourceRequestParams, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use serde_json::{Map, Value, json};

use crate::sink_e2e::Receiver;
use crate::support::TestCommand;
use crate::support::mcp::{PLUGIN_TIMEOUT_MS, Proxy, config_with, connect, workspace_bin};

/// The conformance fixture as the stdio upstream `cf`.
fn fixture(quarantined: bool) -> Value {
    json!({
        "name": "cf",
        "command": workspace_bin("mcp-conformance-fixture"),
        "args": ["--name", "cf"],
        "quarantined": quarantined,
    })
}

/// A proxy in front of the fixture whose records also go to the HTTP sink at `sink_url`.
fn start(quarantined: bool, sink_url: &str) -> Proxy {
    let mut config = config_with(vec![fixture(quarantined)]);
    config["plugins"] = json!({
        "limits": {"timeout_ms": PLUGIN_TIMEOUT_MS},
        "sinks": ["http-sink"],
        "settings": {"http-sink": {"url": sink_url}},
    });
    config["activity"] = json!({"delivery": {"interval_ms": 50, "max_backoff_ms": 300}});
    Proxy::builder(&config).start()
}

/// `mcpproxy activity list --type T` against the running server: the table with icons, and
/// the records as JSON.
fn cli_records(proxy: &Proxy, record_type: &str) -> (String, Vec<Value>) {
    let log = proxy.data_dir.path().join("cli-fixture.log");
    let config = proxy.cli_config(&log);
    let list = |extra: &[&str]| {
        let out = TestCommand::new(proxy.data_dir.path())
            .args(["activity", "list", "--type", record_type, "--config"])
            .args([&config])
            .args(extra)
            .output();
        out.assert_code(0);
        out.stdout()
    };
    let table = list(&[]);
    let json: Value = serde_json::from_str(&list(&["-o", "json"])).expect("JSON from -o json");
    (table, json.as_array().cloned().unwrap_or_default())
}

/// The lines of `record_type` the sink's receiver has stored, once there are `want`.
async fn delivered(receiver: &Receiver, record_type: &str, want: usize) -> Vec<Value> {
    let what = format!("the HTTP sink delivers {want} {record_type} records");
    crate::support::poll::until_value(&what, Duration::from_secs(30), || async {
        let lines: Vec<Value> = mcpproxy_support::lock(&receiver.lines)
            .iter()
            .filter(|l| l["type"] == record_type)
            .cloned()
            .collect();
        if lines.len() >= want {
            Ok(lines)
        } else {
            Err(format!("{} delivered", lines.len()))
        }
    })
    .await
}

/// The session, client and timing fields every record of an MCP request carries.
fn assert_attributed(record: &Value) {
    assert_eq!(record["source"], "mcp", "{record}");
    assert!(record["session_id"].is_string(), "no session: {record}");
    assert!(record["request_id"].is_string(), "no request id: {record}");
    assert!(record["client"]["name"].is_string(), "no client: {record}");
    assert!(record["duration_ms"].is_u64(), "{record}");
    assert!(record["tool_variant"].is_null(), "{record}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_prompt_fetched_is_a_prompt_get_record_in_the_api_the_cli_and_the_sink() {
    let receiver = Receiver::default();
    let proxy = start(false, &receiver.start().await);
    let client = connect(&proxy.url).await;

    let mut arguments = Map::new();
    arguments.insert("arg1".into(), json!("hello"));
    arguments.insert("arg2".into(), json!("world"));
    let got = client
        .get_prompt(
            GetPromptRequestParams::new("cf:test_prompt_with_arguments").with_arguments(arguments),
        )
        .await
        .expect("the prompt");
    assert!(!got.messages.is_empty());
    // A prompt the server does not have: the server's error, recorded as an error.
    let missing = client
        .get_prompt(GetPromptRequestParams::new("cf:no_such_prompt"))
        .await
        .expect_err("an unknown prompt is an error");
    // A name that leads to no server asks no server: refused, not recorded.
    client
        .get_prompt(GetPromptRequestParams::new("nobody:greet"))
        .await
        .expect_err("an unknown server is an error");
    // The resource read keeps its own record beside the new types.
    client
        .read_resource(ReadResourceRequestParams::new("test://static-text"))
        .await
        .expect("the resource");

    let records = proxy.finished_records("prompt_get", 2).await;
    assert_eq!(records.len(), 2, "{records:?}");
    let ok = &records[1];
    assert_eq!(ok["type"], "prompt_get");
    assert_eq!(ok["server_name"], "cf");
    assert_eq!(ok["tool_name"], "test_prompt_with_arguments");
    assert_eq!(ok["status"], "success", "{ok}");
    assert_eq!(ok["arguments"], json!({"arg1": "hello", "arg2": "world"}));
    assert_eq!(ok["details"]["method"], "prompts/get");
    assert!(ok["response_bytes"].as_u64().unwrap() > 0, "{ok}");
    assert_attributed(ok);
    let failed = &records[0];
    assert_eq!(failed["tool_name"], "no_such_prompt");
    assert_eq!(failed["status"], "error", "{failed}");
    assert!(
        failed["error_message"].is_string(),
        "the error is kept: {failed} (the client got {missing})"
    );
    let reads = proxy.finished_records("resource_read", 1).await;
    assert_eq!(reads[0]["arguments"]["uri"], "test://static-text");
    assert_eq!(reads[0]["status"], "success");

    let (table, listed) = cli_records(&proxy, "prompt_get");
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed.iter().all(|r| r["type"] == "prompt_get"));
    assert!(table.contains("💬 prompt"), "{table}");
    assert!(table.contains("test_prompt_with_arguments"), "{table}");

    let sent = delivered(&receiver, "prompt_get", 2).await;
    assert!(
        sent.iter()
            .any(|l| l["tool_name"] == "test_prompt_with_arguments" && l["status"] == "success"),
        "{sent:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_completion_is_a_completion_record_with_its_argument_redacted_by_name() {
    let receiver = Receiver::default();
    let proxy = start(false, &receiver.start().await);
    let client = connect(&proxy.url).await;

    let prompt = client
        .complete_prompt_argument("cf:test_prompt_with_arguments", "arg1", "pa", None)
        .await
        .expect("a prompt argument completion");
    assert!(!prompt.values.is_empty(), "{prompt:?}");
    client
        .complete_resource_argument("test://template/{id}/data", "id", "1", None)
        .await
        .expect("a template completion");
    // An argument named like a secret is redacted in the record, whatever the server says.
    let _ = client
        .complete_prompt_argument("cf:test_prompt_with_arguments", "password", "hunter2", None)
        .await;

    let records = proxy.finished_records("completion", 3).await;
    assert_eq!(records.len(), 3, "{records:?}");
    let (secret, template, prompt) = (&records[0], &records[1], &records[2]);
    assert_eq!(prompt["server_name"], "cf");
    assert_eq!(prompt["tool_name"], "test_prompt_with_arguments");
    assert_eq!(prompt["status"], "success", "{prompt}");
    assert_eq!(prompt["arguments"]["argument"], json!({"arg1": "pa"}));
    assert_eq!(prompt["arguments"]["ref"]["type"], "ref/prompt");
    assert_eq!(
        prompt["arguments"]["ref"]["name"],
        "test_prompt_with_arguments"
    );
    assert_eq!(prompt["details"]["method"], "completion/complete");
    assert_attributed(prompt);
    assert_eq!(template["tool_name"], "test://template/{id}/data");
    assert_eq!(template["arguments"]["argument"], json!({"id": "1"}));
    assert_eq!(
        secret["arguments"]["argument"],
        json!({"password": "[REDACTED]"})
    );
    assert!(!secret.to_string().contains("hunter2"), "{secret}");

    let (table, listed) = cli_records(&proxy, "completion");
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert!(table.contains("🔤 completion"), "{table}");
    assert!(table.contains("test://template/{id}/data"), "{table}");

    delivered(&receiver, "completion", 3).await;
}

#[allow(
    deprecated,
    reason = "resources/subscribe is legacy-only in rmcp; pre-2026 clients send it"
)]
#[tokio::test(flavor = "multi_thread")]
async fn subscribing_and_unsubscribing_are_subscription_records() {
    let receiver = Receiver::default();
    let proxy = start(false, &receiver.start().await);
    let client = connect(&proxy.url).await;

    client
        .subscribe(SubscribeRequestParams::new("test://watched-resource"))
        .await
        .expect("subscribe");
    client
        .unsubscribe(UnsubscribeRequestParams::new("test://watched-resource"))
        .await
        .expect("unsubscribe");

    let records = proxy.finished_records("subscription", 2).await;
    assert_eq!(records.len(), 2, "{records:?}");
    let (unsubscribed, subscribed) = (&records[0], &records[1]);
    for (record, method) in [
        (subscribed, "resources/subscribe"),
        (unsubscribed, "resources/unsubscribe"),
    ] {
        assert_eq!(record["server_name"], "cf", "{record}");
        assert_eq!(record["tool_name"], "test://watched-resource");
        assert_eq!(
            record["arguments"],
            json!({"uri": "test://watched-resource"})
        );
        assert_eq!(record["status"], "success", "{record}");
        assert_eq!(record["details"]["method"], method);
        assert_eq!(record["details"]["sent_upstream"], true, "{record}");
        assert_attributed(record);
    }

    let (table, listed) = cli_records(&proxy, "subscription");
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(table.contains("🔔 subscribe"), "{table}");
    assert!(table.contains("🔕 unsubscribe"), "{table}");

    delivered(&receiver, "subscription", 2).await;
}

#[allow(
    deprecated,
    reason = "resources/subscribe is legacy-only in rmcp; pre-2026 clients send it"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_quarantined_servers_refusals_are_recorded_as_blocked() {
    let receiver = Receiver::default();
    let proxy = start(true, &receiver.start().await);
    // The aggregate endpoint routes a prompt name to its server; the direct endpoint of a
    // quarantined server routes everything to it.
    let aggregate = connect(&proxy.url).await;
    let refused = aggregate
        .get_prompt(GetPromptRequestParams::new("cf:test_simple_prompt"))
        .await
        .expect_err("a quarantined server's prompt is refused")
        .to_string();
    assert!(refused.contains("quarantined"), "{refused}");
    let direct = connect(&format!("{}/servers/cf", proxy.url)).await;
    direct
        .complete_prompt_argument("test_prompt_with_arguments", "arg1", "pa", None)
        .await
        .expect_err("a quarantined server's completion is refused");
    direct
        .subscribe(SubscribeRequestParams::new("test://watched-resource"))
        .await
        .expect_err("a quarantined server's resource cannot be watched");
    direct
        .read_resource(ReadResourceRequestParams::new("test://static-text"))
        .await
        .expect_err("a quarantined server's resource cannot be read");

    for record_type in ["prompt_get", "completion", "subscription", "resource_read"] {
        let records = proxy.finished_records(record_type, 1).await;
        assert_eq!(records.len(), 1, "{records:?}");
        let record = &records[0];
        assert_eq!(record["server_name"], "cf", "{record}");
        assert_eq!(record["status"], "blocked", "{record}");
        assert_eq!(record["verdict"]["decision"], "reject", "{record}");
        assert!(
            record["error_message"]
                .as_str()
                .is_some_and(|m| m.contains("quarantined")),
            "{record}"
        );
    }
    let (table, _) = cli_records(&proxy, "prompt_get");
    assert!(table.contains("blocked"), "{table}");
}
