//! End-to-end: what the proxy shows of itself. `GET /healthz` and `GET /readyz` answer
//! without a key; `GET /metrics` wants the key (unless `http.metrics_public`), is read by
//! the reference OpenMetrics parser (Python `prometheus_client`), and its counters move
//! with the calls made through MCP.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::mcp_util::{Proxy, call, config_with, connect, is_error, stdio_fixture};
use crate::util::test_python;

fn base(proxy: &Proxy) -> String {
    proxy.url.trim_end_matches("/mcp").to_owned()
}

fn api_key(proxy: &Proxy) -> String {
    std::fs::read_to_string(proxy.data_dir.path().join("api_key"))
        .unwrap()
        .trim()
        .to_owned()
}

/// Every sample of an OpenMetrics text, as the reference parser reads it:
/// `[{"name", "labels", "value"}]`. Panics with the parser's message if it refuses the text.
fn parse_openmetrics(python: &std::path::Path, text: &str) -> Vec<Value> {
    let script = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
samples = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        samples.append({"name": s.name, "labels": s.labels, "value": s.value})
print(json.dumps(samples))
"#;
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the parser");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the OpenMetrics parser refused the text: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn sample(samples: &[Value], name: &str, labels: Value) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s["name"] == name
                && labels
                    .as_object()
                    .unwrap()
                    .iter()
                    .all(|(k, v)| &s["labels"][k] == v)
        })
        .and_then(|s| s["value"].as_f64())
}

#[tokio::test(flavor = "multi_thread")]
async fn health_readiness_and_metrics_that_move_with_calls() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::start(&config_with(vec![stdio_fixture("fx", log.path())]), &[]);
    let http = reqwest::Client::new();

    let health = http
        .get(format!("{}/healthz", base(&proxy)))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let ready = http
        .get(format!("{}/readyz", base(&proxy)))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    let ready: Value = ready.json().await.unwrap();
    assert_eq!(ready["ready"], true, "{ready}");
    assert_eq!(ready["upstreams"]["fx"], "ready", "{ready}");

    // The metrics want the key.
    let refused = http
        .get(format!("{}/metrics", base(&proxy)))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);

    let Some(python) = test_python() else { return };
    let scrape = || async {
        let response = http
            .get(format!("{}/metrics", base(&proxy)))
            .header("x-api-key", api_key(&proxy))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/openmetrics-text"),
        );
        parse_openmetrics(&python, &response.text().await.unwrap())
    };
    let calls = json!({"server": "fx", "variant": "call_tool_read", "status": "success", "decision": "allow"});
    let before = scrape().await;
    let before_calls = sample(&before, "mcpproxy_calls_total", calls.clone()).unwrap_or(0.0);
    assert_eq!(
        sample(
            &before,
            "mcpproxy_upstream_state",
            json!({"server": "fx", "state": "ready"})
        ),
        Some(1.0)
    );

    let client = connect(&proxy.url).await;
    for _ in 0..2 {
        let result = call(
            &client,
            "call_tool_read",
            json!({"name": "fx:echo", "args": {"text": "m"}}),
        )
        .await
        .unwrap();
        assert!(!is_error(&result));
    }
    // A call to a server nobody configured is counted, without its name as a label.
    call(&client, "call_tool_read", json!({"name": "nosuch:tool"}))
        .await
        .unwrap();
    client.cancel().await.unwrap();

    let after = scrape().await;
    assert_eq!(
        sample(&after, "mcpproxy_calls_total", calls),
        Some(before_calls + 2.0)
    );
    assert_eq!(
        sample(
            &after,
            "mcpproxy_calls_total",
            json!({"server": "(unknown)", "status": "refused", "decision": "none"})
        ),
        Some(1.0)
    );
    assert!(
        !after.iter().any(|s| s["labels"]["server"] == "nosuch"),
        "a caller's server name is not a label"
    );
    let observed = sample(
        &after,
        "mcpproxy_call_duration_seconds_count",
        json!({"variant": "call_tool_read"}),
    )
    .unwrap();
    assert!(observed >= 3.0, "{observed}");
    assert!(sample(&after, "mcpproxy_policy_duration_seconds_count", json!({})).unwrap() >= 2.0);
    assert!(
        sample(
            &after,
            "mcpproxy_journal_commit_duration_seconds_count",
            json!({})
        )
        .unwrap()
            >= 1.0
    );
    assert!(sample(&after, "mcpproxy_journal_records", json!({})).unwrap() >= 3.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_can_be_made_public_and_readiness_waits_for_upstreams() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let slow = json!({
        "name": "fx",
        "command": crate::mcp_util::fixture_bin(),
        "args": ["--call-log", log.path(), "--startup-delay-ms", "3000"],
    });
    let mut config = config_with(vec![slow]);
    config["http"] = json!({"metrics_public": true});
    let proxy = Proxy::start_listening(&config, &[], tempfile::tempdir().unwrap());
    let http = reqwest::Client::new();
    let ready = http
        .get(format!("{}/readyz", base(&proxy)))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503, "not ready while fx connects");
    let ready: Value = ready.json().await.unwrap();
    assert_eq!(ready["upstreams"]["fx"], "connecting", "{ready}");

    let metrics = http
        .get(format!("{}/metrics", base(&proxy)))
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);
    assert!(metrics.text().await.unwrap().ends_with("# EOF\n"));
}
