//! End-to-end: trace export. `mcpproxy serve` with `telemetry.otlp_endpoint` sends one trace
//! per call to an OTLP/HTTP receiver on loopback; the reference OTLP protobuf messages
//! (Python `opentelemetry-proto`) decode what arrived. Each call is a `call` span with
//! `policy` (one `plugin` span per plugin run), `journal` and `upstream` children; no
//! argument reaches the collector. A collector that is down costs one log line, not calls.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mcp::{Proxy, call, config_with, connect, stdio_fixture};
use crate::support::time::let_pass;
use crate::support::{run_python, test_python};

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Export {
    path: String,
    content_type: String,
    api_key: String,
    body: Vec<u8>,
}

/// An OTLP/HTTP receiver on a free loopback port that keeps every request and answers 200.
async fn receiver() -> (String, Arc<Mutex<Vec<Export>>>) {
    let seen: Arc<Mutex<Vec<Export>>> = Arc::default();
    let kept = seen.clone();
    let app = axum::Router::new().fallback(
        move |uri: http::Uri, headers: http::HeaderMap, body: axum::body::Bytes| {
            let kept = kept.clone();
            async move {
                let header = |name: &str| {
                    headers
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned()
                };
                mcpproxy_support::lock(&kept).push(Export {
                    path: uri.path().to_owned(),
                    content_type: header("content-type"),
                    api_key: header("x-test-key"),
                    body: body.to_vec(),
                });
                (
                    [("content-type", "application/x-protobuf")],
                    Vec::<u8>::new(),
                )
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), seen)
}

/// Every span in the export bodies, decoded by the reference protobuf messages:
/// `[{"trace", "id", "parent", "name", "kind", "status", "attributes", "service"}]`.
fn decode(python: &std::path::Path, bodies: &[Vec<u8>]) -> Vec<Value> {
    let script = r#"
import json, sys
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
spans = []
for line in sys.stdin:
    request = ExportTraceServiceRequest()
    request.ParseFromString(bytes.fromhex(line.strip()))
    for rs in request.resource_spans:
        resource = {a.key: a.value.string_value for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                attributes = {}
                for a in s.attributes:
                    v = a.value
                    kind = v.WhichOneof("value")
                    attributes[a.key] = getattr(v, kind) if kind else None
                spans.append({
                    "trace": s.trace_id.hex(), "id": s.span_id.hex(),
                    "parent": s.parent_span_id.hex(), "name": s.name, "kind": s.kind,
                    "status": s.status.code, "attributes": attributes,
                    "service": resource.get("service.name"),
                })
print(json.dumps(spans))
"#;
    // One export body per line, in hex.
    let mut input = String::new();
    for body in bodies {
        for byte in body {
            input.push_str(&format!("{byte:02x}"));
        }
        input.push('\n');
    }
    let out = run_python(python, script, input.as_bytes())
        .unwrap_or_else(|e| panic!("the OTLP messages refused the export: {e}"));
    serde_json::from_slice(&out).unwrap()
}

const OTLP_KIND_SERVER: u64 = 2;
const OTLP_KIND_CLIENT: u64 = 3;
const OTLP_STATUS_ERROR: u64 = 2;

#[tokio::test(flavor = "multi_thread")]
async fn each_call_is_one_trace_with_policy_plugin_journal_and_upstream_spans() {
    let Some(python) = test_python() else { return };
    let (collector, exports) = receiver().await;
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut config = config_with(vec![stdio_fixture("fx", log.path())]);
    config["telemetry"] = json!({
        "otlp_endpoint": collector,
        "otlp_headers": {"x-test-key": "k-123"},
        "service_name": "mcpproxy-test",
        "export_interval_ms": 100,
    });
    let mut proxy = Proxy::builder(&config).start();
    let client = connect(&proxy.url).await;
    let secret = "SECRET-ARGUMENT-4242";
    call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args_json": json!({"text": secret}).to_string()}),
    )
    .await
    .unwrap();
    let rejected = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:delete_note", "args_json": r#"{"id": "n1"}"#}),
    )
    .await
    .unwrap();
    assert_eq!(rejected.is_error, Some(true));
    client.cancel().await.unwrap();
    let page: Value = reqwest::Client::new()
        .get(format!("{}/api/v1/activity", proxy.base()))
        .header("x-api-key", proxy.api_key())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let records = page["data"]["records"]
        .as_array()
        .expect("a page of records")
        .clone();
    proxy.stop();

    let exports = mcpproxy_support::lock(&exports).clone();
    assert!(!exports.is_empty(), "nothing reached the collector");
    for export in &exports {
        assert_eq!(export.path, "/v1/traces");
        assert_eq!(export.content_type, "application/x-protobuf");
        assert_eq!(export.api_key, "k-123", "the configured header is sent");
        assert!(
            !export
                .body
                .windows(secret.len())
                .any(|w| w == secret.as_bytes()),
            "an argument reached the collector"
        );
    }
    let spans = decode(
        &python,
        &exports.iter().map(|e| e.body.clone()).collect::<Vec<_>>(),
    );
    assert!(spans.iter().all(|s| s["service"] == "mcpproxy-test"));
    let root = |name: &str| -> &Value {
        spans
            .iter()
            .find(|s| s["name"] == name && s["parent"] == "")
            .unwrap_or_else(|| panic!("no root span '{name}' in {spans:#?}"))
    };
    let children = |parent: &Value| -> Vec<&Value> {
        spans
            .iter()
            .filter(|s| s["parent"] == parent["id"])
            .inspect(|s| assert_eq!(s["trace"], parent["trace"]))
            .collect()
    };
    let named = |list: &[&Value], name: &str| -> Value {
        list.iter()
            .find(|s| s["name"] == name)
            .map(|s| (*s).clone())
            .unwrap_or_else(|| panic!("no span '{name}' among {list:#?}"))
    };

    // The allowed read: the call, its policy with the validator's verdict, the journal,
    // the upstream call; the record's id links the trace to `activity show`.
    let allowed = root("call_tool_read fx:echo");
    assert_eq!(allowed["kind"], OTLP_KIND_SERVER);
    assert_ne!(allowed["status"], OTLP_STATUS_ERROR);
    let attributes = &allowed["attributes"];
    assert_eq!(attributes["mcpproxy.server"], "fx");
    assert_eq!(attributes["mcpproxy.tool"], "echo");
    assert_eq!(attributes["mcpproxy.status"], "success");
    assert_eq!(attributes["mcpproxy.decision"], "allow");
    assert_eq!(attributes["mcp.method.name"], "tools/call");
    let echo_record = records
        .iter()
        .find(|r| r["tool_name"] == "echo")
        .expect("the echo record");
    assert_eq!(attributes["mcpproxy.activity_id"], echo_record["id"]);
    let under_call = children(allowed);
    let policy = named(&under_call, "policy");
    assert_eq!(policy["attributes"]["mcpproxy.decision"], "allow");
    let upstream = named(&under_call, "tools/call echo");
    assert_eq!(upstream["kind"], OTLP_KIND_CLIENT);
    assert_eq!(upstream["attributes"]["mcpproxy.outcome"], "success");
    named(&under_call, "journal append");
    let plugins = children(&policy);
    let validator = named(&plugins, "validate intent-matrix");
    assert_eq!(validator["attributes"]["mcpproxy.verdict"], "allow");
    assert_eq!(validator["attributes"]["mcpproxy.plugin"], "intent-matrix");

    // The rejected call: an error trace, the validator that rejected it, no upstream span.
    let blocked = root("call_tool_read fx:delete_note");
    assert_eq!(blocked["status"], OTLP_STATUS_ERROR);
    assert_eq!(blocked["attributes"]["mcpproxy.status"], "blocked");
    assert_eq!(blocked["attributes"]["mcpproxy.decision"], "reject");
    let under_blocked = children(blocked);
    assert!(
        under_blocked
            .iter()
            .all(|s| !s["name"].as_str().unwrap().starts_with("tools/call")),
        "a blocked call has no upstream span: {under_blocked:#?}"
    );
    let policy = named(&under_blocked, "policy");
    let validator = named(&children(&policy), "validate intent-matrix");
    assert_eq!(validator["attributes"]["mcpproxy.verdict"], "reject");
    assert_ne!(allowed["trace"], blocked["trace"], "one trace per call");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_collector_that_is_down_costs_one_log_line_and_no_call() {
    // A port with nothing listening on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut config = config_with(vec![stdio_fixture("fx", log.path())]);
    config["telemetry"] = json!({
        "otlp_endpoint": format!("http://127.0.0.1:{port}"),
        "export_interval_ms": 50,
    });
    let mut proxy = Proxy::builder(&config).start();
    let client = connect(&proxy.url).await;
    let read = |text: &'static str| json!({"name": "fx:echo", "args_json": json!({"text": text}).to_string()});
    call(&client, "call_tool_read", read("one")).await.unwrap();
    let line = proxy.proc.wait_for_line(Duration::from_secs(30), |l| {
        l.contains("cannot send traces")
    });
    assert!(
        line.contains(&format!("127.0.0.1:{port}/v1/traces")),
        "{line}"
    );
    // More calls and more failed exports: the calls work, the log stays quiet.
    for text in ["two", "three", "four"] {
        let result = call(&client, "call_tool_read", read(text)).await.unwrap();
        assert_ne!(result.is_error, Some(true));
        let_pass(
            Duration::from_millis(150),
            "exports (every 50 ms) fail meanwhile, which must not each be logged",
        )
        .await;
    }
    client.cancel().await.unwrap();
    proxy.stop();
    let rest: Vec<String> = proxy.proc.stderr_lines.try_iter().collect();
    let repeated = rest
        .iter()
        .filter(|l| l.contains("cannot send traces"))
        .count();
    assert_eq!(repeated, 0, "the failure was logged again: {rest:#?}");
}
