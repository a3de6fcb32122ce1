//! End-to-end: what the proxy shows of itself. `GET /healthz` and `GET /readyz` answer
//! without a key; `GET /metrics` wants the key (unless `http.metrics_public`), is read by
//! the reference OpenMetrics parser (Python `prometheus_client`), and its counters move
//! with the calls made through MCP.

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::mcp::{Proxy, call, config_with, connect, is_error, stdio_fixture};
use crate::support::{run_python, test_python};

fn base(proxy: &Proxy) -> String {
    proxy.base()
}

fn api_key(proxy: &Proxy) -> String {
    proxy.api_key()
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
    let out = run_python(python, script, text.as_bytes())
        .unwrap_or_else(|e| panic!("the OpenMetrics parser refused the text: {e}\n{text}"));
    serde_json::from_slice(&out).unwrap()
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
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();
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
    // Without the key: ready or not, nothing else.
    let ready: Value = ready.json().await.unwrap();
    assert_eq!(ready, json!({"ready": true}));
    // With it: why.
    let ready: Value = http
        .get(format!("{}/readyz", base(&proxy)))
        .header("X-API-Key", api_key(&proxy))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["ready"], true, "{ready}");
    assert_eq!(ready["journal"], "ok", "{ready}");
    assert_eq!(ready["upstreams"]["fx"], "ready", "{ready}");
    let wrong = http
        .get(format!("{}/readyz", base(&proxy)))
        .header("X-API-Key", "not-the-key")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);

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
    // Only calls that reached the upstream are timed there; the refused one is not.
    let upstream_timed = sample(
        &after,
        "mcpproxy_upstream_call_duration_seconds_count",
        json!({"server": "fx"}),
    )
    .unwrap();
    assert!(
        upstream_timed >= 2.0 && upstream_timed < observed,
        "{upstream_timed}"
    );
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
    // Sync mode: each acknowledged record was fsync'd (in the write-ahead log).
    assert!(sample(&after, "mcpproxy_journal_fsyncs_total", json!({})).unwrap() >= 1.0);
    // The journal writes: its failure gauge is 0 and no reason is shown.
    assert_eq!(
        sample(&after, "mcpproxy_journal_failing", json!({})),
        Some(0.0)
    );
    assert!(
        !after
            .iter()
            .any(|s| s["name"] == "mcpproxy_journal_failure"),
        "{after:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_can_be_made_public_and_readiness_waits_for_upstreams() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let slow = json!({
        "name": "fx",
        "command": crate::support::mcp::fixture_bin(),
        "args": ["--call-log", log.path(), "--startup-delay-ms", "3000"],
    });
    let mut config = config_with(vec![slow]);
    config["http"] = json!({"metrics_public": true});
    let proxy = Proxy::builder(&config).listening().start();
    let http = reqwest::Client::new();
    let ready = http
        .get(format!("{}/readyz", base(&proxy)))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503, "not ready while fx connects");
    let ready: Value = ready.json().await.unwrap();
    assert_eq!(ready, json!({"ready": false}), "no details without the key");
    let ready: Value = http
        .get(format!(
            "{}/readyz?apikey={}",
            base(&proxy),
            api_key(&proxy)
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["upstreams"]["fx"], "connecting", "{ready}");

    let metrics = http
        .get(format!("{}/metrics", base(&proxy)))
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);
    assert!(metrics.text().await.unwrap().ends_with("# EOF\n"));
}

fn cli_config(proxy: &Proxy, log: &std::path::Path) -> std::path::PathBuf {
    proxy.cli_config(log)
}

#[tokio::test(flavor = "multi_thread")]
async fn export_and_stats_through_the_server_and_offline() {
    use crate::support::TestCommand;
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();
    let client = connect(&proxy.url).await;
    for text in ["a,b", "x"] {
        let result = call(
            &client,
            "call_tool_read",
            json!({"name": "fx:echo", "args": {"text": text}}),
        )
        .await
        .unwrap();
        assert!(!is_error(&result));
    }
    // Blocked: a destructive tool through the read variant.
    call(
        &client,
        "call_tool_read",
        json!({"name": "fx:delete_note", "args": {"id": "n"}}),
    )
    .await
    .unwrap();
    // Refused: no such tool; its name would be a formula in a spreadsheet.
    call(&client, "call_tool_read", json!({"name": "fx:=1+1"}))
        .await
        .unwrap();
    client.cancel().await.unwrap();
    let config = cli_config(&proxy, log.path());
    let cli = |args: &[&str]| {
        TestCommand::new(proxy.data_dir.path())
            .args(args)
            .args(["--config"])
            .args([&config])
            .output()
    };

    let check = |jsonl: String, csv: String, stats: String| {
        let records: Vec<Value> = jsonl
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON record per line"))
            .collect();
        let calls: Vec<&Value> = records
            .iter()
            .filter(|r| r["type"] == "tool_call")
            .collect();
        assert_eq!(calls.len(), 4, "{jsonl}");
        assert!(
            records
                .windows(2)
                .all(|w| w[0]["id"].as_str() < w[1]["id"].as_str()),
            "oldest first"
        );
        let mut lines = csv.lines();
        assert!(
            lines.next().unwrap().starts_with("id,timestamp,type,"),
            "{csv}"
        );
        assert_eq!(csv.lines().count(), records.len() + 1, "{csv}");
        let stats: Value = serde_json::from_str(&stats).unwrap();
        assert_eq!(stats["calls"], 4, "{stats}");
        assert_eq!(stats["by_server"][0]["key"], "fx");
        let blocked = stats["by_status"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["key"] == "blocked")
            .expect("a blocked group");
        assert_eq!(blocked["calls"], 1);
    };

    // Through the running server (it holds the journal).
    let jsonl = cli(&["activity", "export", "--since", "1h"]);
    jsonl.assert_code(0);
    let csv = cli(&["activity", "export", "--format", "csv"]);
    csv.assert_code(0);
    assert!(
        csv.stdout().contains(",\"'=1+1\""),
        "a formula is defused: {}",
        csv.stdout()
    );
    let stats = cli(&["activity", "stats", "-o", "json"]);
    stats.assert_code(0);
    check(jsonl.stdout(), csv.stdout(), stats.stdout());
    let table = cli(&["activity", "stats"]);
    table.assert_code(0);
    assert!(
        table.stdout().contains("4 calls from"),
        "{}",
        table.stdout()
    );

    let bad = cli(&["activity", "export", "--since", "5x"]);
    assert_eq!(bad.code(), Some(2));
    assert!(
        bad.stderr().contains("--since '5x'") && bad.stderr().contains("7d"),
        "{}",
        bad.stderr()
    );
    let none = cli(&["activity", "export", "--until", "1h"]);
    none.assert_code(0);
    assert_eq!(none.stdout(), "", "nothing is older than an hour");

    // Offline, from the journal file, the same.
    proxy.proc.kill();
    let jsonl = cli(&["activity", "export"]);
    jsonl.assert_code(0);
    let csv = cli(&["activity", "export", "--format", "csv"]);
    let stats = cli(&["activity", "stats", "-o", "json"]);
    check(jsonl.stdout(), csv.stdout(), stats.stdout());
}

/// Not a test: the number behind docs/benchmarks.md's export line. Loads 1,000,000 records
/// into a journal, exports them as JSON Lines and as CSV, and prints each run's peak RSS
/// (`getrusage` of the child). Run with
/// `cargo test --release --test integration -- --ignored measure_export_memory --nocapture`.
#[test]
#[ignore]
fn measure_export_memory() {
    use mcpproxy_activity::{ActivityRecord, Journal, JournalOptions, RecordType, Source, Status};
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    // MCPPROXY_EXPORT_RECORDS measures another size (a multiple of 50,000).
    let records: usize = std::env::var("MCPPROXY_EXPORT_RECORDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    {
        let journal =
            Journal::open(&dir.path().join("activity.redb"), JournalOptions::default()).unwrap();
        for start in (0..records).step_by(50_000) {
            let batch: Vec<ActivityRecord> = (start..start + 50_000)
                .map(|i| {
                    let mut rec =
                        ActivityRecord::new(RecordType::ToolCall, Source::Mcp, "fx", "echo");
                    rec.status = Status::Success;
                    rec.duration_ms = (i % 97) as u64;
                    rec.arguments = Some(json!({"i": i, "text": "x".repeat(200)}));
                    rec
                })
                .collect();
            journal.bulk_load(&batch).unwrap();
        }
    }
    let file = std::fs::metadata(dir.path().join("activity.redb"))
        .unwrap()
        .len();
    eprintln!("journal: {records} records, {} MiB", file >> 20);
    for format in ["jsonl", "csv"] {
        let started = std::time::Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpproxy"))
            .args(["activity", "export", "--format", format, "--data-dir"])
            .arg(dir.path())
            .env("HOME", dir.path())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = 0usize;
        let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while std::io::BufRead::read_line(&mut reader, &mut line).unwrap() > 0 {
            lines += 1;
            line.clear();
        }
        assert!(child.wait().unwrap().success());
        // SAFETY: a zeroed rusage is a valid value; getrusage fills the struct we own.
        let mut usage = unsafe { std::mem::zeroed::<libc::rusage>() };
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
        eprintln!(
            "export --format {format}: {lines} lines in {:.1} s; peak RSS of the children so far {} MiB",
            started.elapsed().as_secs_f64(),
            usage.ru_maxrss >> 10
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_follows_new_calls_and_the_stream_resumes_after_last_event_id() {
    use std::io::BufRead;
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();
    let config = cli_config(&proxy, log.path());
    let mut watch = Command::new(env!("CARGO_BIN_EXE_mcpproxy"))
        .args([
            "activity", "watch", "-o", "jsonl", "--server", "fx", "--config",
        ])
        .arg(&config)
        .env("MCPPROXY_DATA_DIR", proxy.data_dir.path())
        .env("HOME", proxy.data_dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(watch.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.contains("following new activity"), "{line}");

    let client = connect(&proxy.url).await;
    for text in ["first", "second"] {
        call(
            &client,
            "call_tool_read",
            json!({"name": "fx:echo", "args": {"text": text}}),
        )
        .await
        .unwrap();
    }
    client.cancel().await.unwrap();
    let stdout = watch.stdout.take().unwrap();
    let lines = std::thread::spawn(move || {
        std::io::BufReader::new(stdout)
            .lines()
            .take(2)
            .map(|l| l.unwrap())
            .collect::<Vec<_>>()
    });
    let lines = tokio::task::spawn_blocking(move || lines.join().unwrap())
        .await
        .unwrap();
    let _ = watch.kill();
    let _ = watch.wait();
    let records: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records[0]["arguments"]["text"], "first");
    assert_eq!(records[1]["arguments"]["text"], "second");
    assert_eq!(records[1]["status"], "success", "shown once finished");

    // A client that reconnects with Last-Event-ID gets what came after it.
    let mut response = reqwest::Client::new()
        .get(format!("{}/api/v1/activity/stream", base(&proxy)))
        .header("x-api-key", api_key(&proxy))
        .header("last-event-id", records[0]["id"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = response.chunk().await.unwrap().expect("an event");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(text.contains("event: record"), "{text}");
    assert!(
        text.contains(&format!("id: {}", records[1]["id"].as_str().unwrap())),
        "{text}"
    );
}
