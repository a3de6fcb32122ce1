//! End-to-end: the audit trail delivered to sinks by a running `mcpproxy serve` — the HTTP
//! sink into a real NDJSON receiver, the ClickHouse sink into a real ClickHouse, through
//! outages, restarts, a sink that reaches for a host it was not granted, and sinks that
//! trap or hang.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};

use crate::support::clickhouse::ClickHouse;
use crate::support::mcp::{
    PLUGIN_TIMEOUT_MS, Proxy, call, config_with, connect, is_error, stdio_fixture,
};
use crate::support::time::let_pass;
use crate::support::{TestCommand, artifact};

/// A real NDJSON endpoint: stores every line it is sent; answers 503 while `down`. Also
/// used by `journal_records`.
#[derive(Clone, Default)]
pub(crate) struct Receiver {
    pub(crate) lines: Arc<Mutex<Vec<Value>>>,
    requests: Arc<AtomicUsize>,
    down: Arc<AtomicBool>,
    headers: Arc<Mutex<Vec<HeaderMap>>>,
    /// The number of records in each batch stored.
    batches: Arc<Mutex<Vec<usize>>>,
}

impl Receiver {
    /// Serves on a free loopback port; returns the URL to post to.
    pub(crate) async fn start(&self) -> String {
        async fn ingest(
            State(r): State<Receiver>,
            headers: HeaderMap,
            body: Bytes,
        ) -> (StatusCode, &'static str) {
            r.requests.fetch_add(1, Ordering::SeqCst);
            if r.down.load(Ordering::SeqCst) {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "receiver is down for the test",
                );
            }
            let text = String::from_utf8_lossy(&body);
            let mut batch = Vec::new();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                match serde_json::from_str(line) {
                    Ok(v) => batch.push(v),
                    Err(_) => return (StatusCode::BAD_REQUEST, "not NDJSON"),
                }
            }
            mcpproxy_support::lock(&r.batches).push(batch.len());
            mcpproxy_support::lock(&r.lines).extend(batch);
            mcpproxy_support::lock(&r.headers).push(headers);
            (StatusCode::OK, "ok")
        }
        let app = Router::new()
            .route("/ingest", post(ingest))
            .with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}/ingest")
    }

    fn ids(&self) -> Vec<String> {
        mcpproxy_support::lock(&self.lines)
            .iter()
            .map(|l| l["id"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

fn api_base(proxy: &Proxy) -> String {
    proxy.url.trim_end_matches("/mcp").to_owned() + "/api/v1"
}

async fn sinks_status(proxy: &Proxy) -> Vec<Value> {
    let key = std::fs::read_to_string(proxy.data_dir.path().join("api_key")).unwrap();
    let body: Value = reqwest::Client::new()
        .get(format!("{}/activity/sinks", api_base(proxy)))
        .header("X-API-Key", key.trim())
        .send()
        .await
        .expect("GET /activity/sinks")
        .json()
        .await
        .expect("JSON");
    assert_eq!(body["success"], true, "{body}");
    body["data"].as_array().cloned().unwrap_or_default()
}

/// Polls `check` until it holds; panics with `what` after `limit`.
async fn eventually<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    crate::support::poll::until(what, limit, || {
        let holds = check();
        async { holds.await.then_some(()).ok_or("not yet".to_owned()) }
    })
    .await;
}

/// Makes `n` calls through the proxy (reads that succeed, and every fourth a write that
/// the matrix rejects: blocked calls are audited too); returns how many.
async fn make_calls(proxy: &Proxy, n: usize) -> usize {
    crate::support::mcp::reads_and_blocked(proxy, n, 4).await;
    n
}

/// The ids the journal holds, via the REST API.
async fn journal_ids(proxy: &Proxy) -> Vec<String> {
    let key = std::fs::read_to_string(proxy.data_dir.path().join("api_key")).unwrap();
    let body: Value = reqwest::Client::new()
        .get(format!("{}/activity?limit=1000", api_base(proxy)))
        .header("X-API-Key", key.trim())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut ids: Vec<String> = body["data"]["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

fn base_config(log: &std::path::Path, sink: &str, settings: Value) -> Value {
    let mut config = config_with(vec![stdio_fixture("fx", log)]);
    config["plugins"] = json!({
        "limits": {"timeout_ms": PLUGIN_TIMEOUT_MS},
        "sinks": [sink],
        "settings": { sink: settings },
    });
    config["activity"] = json!({"delivery": {"interval_ms": 50, "max_backoff_ms": 300}});
    config
}

/// A data dir with the test sink fixture in its `plugins/`.
fn data_dir_with_fixture() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(
        artifact("sink_misbehave"),
        plugins.join("sink_misbehave.wasm"),
    )
    .unwrap();
    let plugins = plugins.display().to_string();
    (dir, plugins)
}

#[tokio::test(flavor = "multi_thread")]
async fn http_sink_delivers_every_call_once_in_order_through_an_outage() {
    let receiver = Receiver::default();
    let url = receiver.start().await;
    let log = tempfile::NamedTempFile::new().unwrap();
    let config = base_config(
        log.path(),
        "http-sink",
        json!({"url": url, "headers": {"Authorization": "Splunk test-token"}}),
    );
    let proxy = Proxy::builder(&config).start();
    let granted = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(
        sinks_status(&proxy).await[0]["granted_hosts"],
        json!([granted])
    );

    let first = make_calls(&proxy, 12).await;
    eventually(
        Duration::from_secs(60),
        "12 records at the receiver",
        || async { receiver.ids().len() >= first },
    )
    .await;
    let lines = mcpproxy_support::lock(&receiver.lines).clone();
    assert_eq!(lines.len(), first);
    // In journal order (ids are time-ordered; calls were sequential), each with every field.
    let ids = receiver.ids();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted);
    let blocked = lines.iter().filter(|l| l["status"] == "blocked").count();
    assert_eq!(blocked, 3);
    for line in &lines {
        for key in [
            "id",
            "timestamp",
            "server_name",
            "tool_name",
            "tool_variant",
            "verdict",
            "status",
            "safety_class",
            "duration_ms",
        ] {
            assert!(line.get(key).is_some(), "{key} missing in {line}");
        }
        assert_eq!(line["server_name"], "fx");
    }
    let headers = mcpproxy_support::lock(&receiver.headers)[0].clone();
    assert_eq!(headers["authorization"], "Splunk test-token");
    assert!(headers["content-type"].to_str().unwrap().contains("ndjson"));

    // The receiver goes down: calls go on, the sink reports the failure and keeps a backlog.
    receiver.down.store(true, Ordering::SeqCst);
    let during = make_calls(&proxy, 8).await;
    eventually(
        Duration::from_secs(30),
        "the sink reports the outage",
        || async {
            let s = sinks_status(&proxy).await;
            s[0]["failures"].as_u64().unwrap_or(0) >= 2
                && s[0]["backlog"].as_u64() == Some(during as u64)
        },
    )
    .await;
    let s = &sinks_status(&proxy).await[0];
    assert!(s["last_error"].as_str().unwrap().contains("503"), "{s}");
    assert!(s["lag_ms"].as_u64().is_some(), "{s}");

    // Back up: everything arrives, exactly once.
    receiver.down.store(false, Ordering::SeqCst);
    eventually(Duration::from_secs(60), "the backlog drains", || async {
        receiver.ids().len() >= first + during
    })
    .await;
    let_pass(
        Duration::from_millis(300),
        "a duplicate delivery, if the sink made one, would arrive meanwhile",
    )
    .await;
    let mut got = receiver.ids();
    got.sort();
    let mut unique = got.clone();
    unique.dedup();
    assert_eq!(got.len(), first + during, "no duplicates");
    assert_eq!(
        unique,
        journal_ids(&proxy).await,
        "every journal record, once"
    );
    let s = &sinks_status(&proxy).await[0];
    assert_eq!(s["backlog"], 0);
    assert_eq!(s["delivered"], (first + during) as u64);
    assert_eq!(s["last_error"], Value::Null);

    // The CLI shows the same, from the server.
    let addr = proxy
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp");
    let mut cli = config.clone();
    cli["listen"] = json!(addr);
    let cli_path = proxy.data_dir.path().join("cli.json");
    std::fs::write(&cli_path, cli.to_string()).unwrap();
    let out = TestCommand::new(proxy.data_dir.path())
        .args(["activity", "sinks", "--config"])
        .args([&cli_path])
        .output();
    out.assert_code(0);
    let stdout = out.stdout();
    assert!(
        stdout.contains("SINK") && stdout.contains("http-sink"),
        "{stdout}"
    );
    assert!(stdout.contains(&(first + during).to_string()), "{stdout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sink_reaching_for_an_ungranted_host_is_refused_and_loses_nothing() {
    let granted = Receiver::default();
    let granted_url = granted.start().await;
    let stray = Receiver::default();
    let stray_url = stray.start().await;
    let log = tempfile::NamedTempFile::new().unwrap();
    let (dir, plugins) = data_dir_with_fixture();
    let config = base_config(
        log.path(),
        "test-sink-misbehave",
        json!({"mode": "stray", "url": granted_url, "stray_url": stray_url}),
    );
    let proxy = Proxy::builder(&config)
        .data_dir(dir)
        .args(&["--plugins", &plugins])
        .start();
    let n = make_calls(&proxy, 5).await;
    proxy.proc.wait_for_line(Duration::from_secs(30), |l| {
        l.contains("refused an outbound request") && l.contains("test-sink-misbehave")
    });
    eventually(
        Duration::from_secs(30),
        "the refusal is reported",
        || async {
            sinks_status(&proxy).await[0]["failures"]
                .as_u64()
                .unwrap_or(0)
                >= 1
        },
    )
    .await;
    let s = &sinks_status(&proxy).await[0];
    let error = s["last_error"].as_str().unwrap().to_lowercase();
    assert!(error.contains("refused") || error.contains("denied"), "{s}");
    assert_eq!(
        s["backlog"], n as u64,
        "nothing delivered, nothing lost: {s}"
    );
    assert_eq!(
        stray.requests.load(Ordering::SeqCst),
        0,
        "no connection reached the stray host"
    );

    // Fixed (the sink now posts where it may): the same records arrive, once each.
    let Proxy {
        mut proc, data_dir, ..
    } = proxy;
    proc.kill();
    let mut fixed = config.clone();
    fixed["plugins"]["settings"]["test-sink-misbehave"]["mode"] = json!("ok");
    let proxy = Proxy::builder(&fixed)
        .data_dir(data_dir)
        .args(&["--plugins", &plugins])
        .start();
    eventually(
        Duration::from_secs(60),
        "the kept records arrive",
        || async { granted.ids().len() >= n },
    )
    .await;
    let mut got = granted.ids();
    got.sort();
    assert_eq!(got, journal_ids(&proxy).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn trapping_and_hanging_sinks_are_retried_and_reported_while_calls_go_on() {
    let receiver = Receiver::default();
    let url = receiver.start().await;
    for (mode, expect) in [("trap", "trapped"), ("spin", "deadline")] {
        let log = tempfile::NamedTempFile::new().unwrap();
        let (dir, plugins) = data_dir_with_fixture();
        let mut config = base_config(
            log.path(),
            "test-sink-misbehave",
            json!({"mode": mode, "url": url}),
        );
        config["plugins"]["plugin_limits"] = json!({"test-sink-misbehave": {"timeout_ms": 300}});
        let proxy = Proxy::builder(&config)
            .data_dir(dir)
            .args(&["--plugins", &plugins])
            .start();
        let n = make_calls(&proxy, 4).await;
        eventually(Duration::from_secs(60), "two failed attempts", || async {
            sinks_status(&proxy).await[0]["failures"]
                .as_u64()
                .unwrap_or(0)
                >= 2
        })
        .await;
        // Calls still go through while the sink keeps failing.
        let more = make_calls(&proxy, 4).await;
        let s = &sinks_status(&proxy).await[0];
        assert!(
            s["last_error"].as_str().unwrap().contains(expect),
            "{mode}: {s}"
        );
        eventually(
            Duration::from_secs(10),
            "the backlog holds every call",
            || async {
                sinks_status(&proxy).await[0]["backlog"].as_u64() == Some((n + more) as u64)
            },
        )
        .await;
    }
    assert!(receiver.ids().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn records_too_big_for_a_sinks_memory_together_are_delivered_in_smaller_batches() {
    let receiver = Receiver::default();
    let url = receiver.start().await;
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut config = base_config(log.path(), "http-sink", json!({"url": url}));
    // Records of ~600 KiB (the arguments are kept whole), made while the receiver is down,
    // so they wait in the journal.
    config["activity"]["max_argument_bytes"] = json!(1 << 20);
    receiver.down.store(true, Ordering::SeqCst);
    let proxy = Proxy::builder(&config).start();
    let text = "x".repeat(600 << 10);
    let client = connect(&proxy.url).await;
    let n = 10;
    for i in 0..n {
        let r = call(
            &client,
            "call_tool_read",
            json!({"name": "fx:echo", "args": {"text": format!("{i}{text}")}}),
        )
        .await
        .expect("call");
        assert!(!is_error(&r), "echo {i} failed: {r:?}");
    }
    client.cancel().await.ok();
    let Proxy {
        mut proc, data_dir, ..
    } = proxy;
    proc.kill();

    // Restarted with the receiver up and the sink allowed 4 MiB: its first batch (about
    // `batch_bytes`, 4 MiB of records: 7 of them) cannot fit; a single record can. (The
    // warning that says so may come before the proxy reports its upstream ready, so the
    // batches the receiver got are the evidence.)
    receiver.down.store(false, Ordering::SeqCst);
    config["plugins"]["plugin_limits"] = json!({"http-sink": {"memory_mib": 4}});
    let proxy = Proxy::builder(&config).data_dir(data_dir).start();
    eventually(Duration::from_secs(60), "every record arrives", || async {
        receiver.ids().len() >= n
    })
    .await;
    let_pass(
        Duration::from_millis(300),
        "a duplicate delivery, if the sink made one, would arrive meanwhile",
    )
    .await;
    let lines = mcpproxy_support::lock(&receiver.lines).clone();
    assert_eq!(lines.len(), n, "each once");
    let batches = mcpproxy_support::lock(&receiver.batches).clone();
    assert_eq!(
        batches.iter().max(),
        Some(&3),
        "the batch of 7 that ran out of memory went as batches of 3: {batches:?}"
    );
    let mut ids = receiver.ids();
    ids.sort();
    assert_eq!(ids, receiver.ids(), "in order");
    assert_eq!(ids, journal_ids(&proxy).await);
    for (i, line) in lines.iter().enumerate() {
        assert!(
            line.to_string().contains(&format!("\"{i}{text}\"")),
            "record {i} arrives whole"
        );
    }
    let s = &sinks_status(&proxy).await[0];
    assert_eq!(s["backlog"], 0, "{s}");
    assert_eq!(s["last_error"], Value::Null, "{s}");
}

/// Runs `mcpproxy plugins check` with `args` without blocking the async runtime (the
/// receivers run on it); one still running after 60 s is killed and fails the test, so a
/// hang shows as a failure rather than a stuck run.
async fn plugins_check(args: Vec<String>) -> crate::support::CmdOutput {
    let limit = Duration::from_secs(60);
    let data = tempfile::tempdir().unwrap();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpproxy"))
        .env("MCPPROXY_DATA_DIR", data.path())
        .env("HOME", data.path())
        .env_remove("RUST_LOG")
        .args(["plugins", "check"])
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let output = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("plugins check {args:?} still ran after {limit:?}"))
        .unwrap();
    crate::support::CmdOutput(output)
}

#[tokio::test(flavor = "multi_thread")]
async fn plugins_check_deliver_sends_two_sample_records_through_a_real_sink() {
    let receiver = Receiver::default();
    let url = receiver.start().await;
    let sink = artifact("http_sink").display().to_string();
    let settings = json!({"url": url}).to_string();

    // Without --deliver: loaded, and it says where it may go and how to try it.
    let out = plugins_check(vec![sink.clone(), "--settings".into(), settings.clone()]).await;
    out.assert_code(0);
    let host = url.trim_start_matches("http://").split('/').next().unwrap();
    assert!(
        out.stdout().contains(&format!("it may reach {host}")),
        "{}",
        out.stdout()
    );
    assert!(out.stdout().contains("--deliver"), "{}", out.stdout());
    assert!(
        mcpproxy_support::lock(&receiver.lines).is_empty(),
        "nothing sent"
    );

    let out = plugins_check(vec![
        sink.clone(),
        "--settings".into(),
        settings.clone(),
        "--deliver".into(),
    ])
    .await;
    out.assert_code(0);
    assert!(
        out.stdout().contains("delivered 2 sample records"),
        "{}",
        out.stdout()
    );
    assert!(
        out.stdout().contains("30000 ms deadline"),
        "a sink's default deadline"
    );
    let lines = mcpproxy_support::lock(&receiver.lines).clone();
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|l| l["server_name"] == "mcpproxy-check"));
    assert_eq!(lines[0]["status"], "success");
    assert_eq!(lines[1]["status"], "blocked");
    for id in receiver.ids() {
        assert!(out.stdout().contains(&id), "the ids are printed");
    }

    // The remote refuses: the check fails and says why, in the sink's words.
    receiver.down.store(true, Ordering::SeqCst);
    let out = plugins_check(vec![
        sink.clone(),
        "--settings".into(),
        settings,
        "--deliver".into(),
    ])
    .await;
    out.assert_code(1);
    assert!(
        out.stdout()
            .contains("call: FAILED: the sink did not store the batch")
            && out.stdout().contains("503"),
        "{}",
        out.stdout()
    );

    // --deliver on a validator is a usage error.
    let out = plugins_check(vec![
        artifact("intent_matrix").display().to_string(),
        "--deliver".into(),
    ])
    .await;
    out.assert_code(2);
    assert!(
        out.stderr().contains("--deliver is for sink plugins"),
        "{}",
        out.stderr()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn https_remotes_are_reached_with_tls_and_a_silent_one_fails_at_the_deadline() {
    let sink = artifact("http_sink").display().to_string();
    let check = |url: String| {
        vec![
            sink.clone(),
            "--settings".into(),
            json!({ "url": url }).to_string(),
            "--deliver".into(),
            "--timeout-ms".into(),
            "1500".into(),
        ]
    };

    // A plain-HTTP server behind an https URL: the TLS handshake runs and fails cleanly.
    let plain = Receiver::default();
    let url = plain.start().await.replace("http://", "https://");
    let out = plugins_check(check(url)).await;
    out.assert_code(1);
    assert!(
        out.stdout().contains("the TLS handshake with https://"),
        "{}",
        out.stdout()
    );

    // A remote that accepts and never answers: the handshake cannot hold the sink past its
    // deadline (wasi-http itself has no TLS timeout).
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((conn, _)) = silent.accept().await {
            open.push(conn);
        }
    });
    let started = std::time::Instant::now();
    let out = plugins_check(check(format!("https://{addr}/ingest"))).await;
    out.assert_code(1);
    assert!(
        out.stdout()
            .contains(&format!("connecting to https://{addr} timed out")),
        "{}",
        out.stdout()
    );
    println!("silent https remote: failed after {:?}", started.elapsed());
    held.abort();
}

/// The ClickHouse columns checked against the journal, per record.
const CH_COLUMNS: &str = "id, timestamp_ms, toString(timestamp) AS ts, type, source, server_name, \
    tool_name, tool_variant, annotation_source, safety_class, decision, status, duration_ms, \
    replica, seq, prev, hash, record";

async fn ch_rows(ch: &ClickHouse, table: &str) -> Vec<Value> {
    ch.query(&format!(
        "SELECT {CH_COLUMNS} FROM default.{table} ORDER BY id FORMAT JSONEachRow"
    ))
    .await
    .lines()
    .map(|l| serde_json::from_str(l).expect("JSONEachRow"))
    .collect()
}

async fn ch_counts(ch: &ClickHouse, table: &str) -> (u64, u64) {
    let sql = format!("SELECT count(), uniqExact(id) FROM default.{table} FORMAT TabSeparated");
    let text = match ch.try_query(&sql).await {
        Ok(text) => text,
        // The sink creates its table with its first insert: before that, no rows (code 60,
        // unknown table: `Code: 60, ...` from ClickHouse 18, `Code: 60. ...` from later ones).
        Err(e) if e.contains("Code: 60,") || e.contains("Code: 60.") => return (0, 0),
        Err(e) => panic!("{e}"),
    };
    let mut parts = text
        .split_whitespace()
        .map(|p| p.parse::<u64>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// Whether the sink has delivered every record (its backlog is empty, its cursor committed).
async fn nothing_undelivered(proxy: &Proxy) -> bool {
    sinks_status(proxy).await[0]["backlog"].as_u64() == Some(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn clickhouse_gets_every_record_exactly_once_through_outages_and_restarts() {
    let Some(mut ch) = ClickHouse::start().await else {
        return;
    };
    let table = "mcpproxy_activity";
    let log = tempfile::NamedTempFile::new().unwrap();
    let config = base_config(
        log.path(),
        "clickhouse-sink",
        json!({"url": ch.url(), "table": table}),
    );
    let proxy = Proxy::builder(&config)
        .args(&["--sink", "clickhouse-sink"])
        .start();

    // N calls arrive with every field.
    let n = make_calls(&proxy, 10).await;
    // Rows in the table and the sink's cursor past them: ClickHouse is stopped below, and a
    // stop that cuts the answer to an insert makes the sink send that batch again (delivery
    // is at least once, docs/sinks.md).
    eventually(
        Duration::from_secs(60),
        "N rows in ClickHouse, acknowledged",
        || async { ch_counts(&ch, table).await.0 >= n as u64 && nothing_undelivered(&proxy).await },
    )
    .await;
    let rows = ch_rows(&ch, table).await;
    assert_eq!(rows.len(), n);
    let key = std::fs::read_to_string(proxy.data_dir.path().join("api_key")).unwrap();
    for row in &rows {
        let id = row["id"].as_str().unwrap();
        let rec: Value = reqwest::Client::new()
            .get(format!("{}/activity/{id}", api_base(&proxy)))
            .header("X-API-Key", key.trim())
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()["data"]
            .clone();
        for (column, field) in [
            ("type", "type"),
            ("source", "source"),
            ("server_name", "server_name"),
            ("tool_name", "tool_name"),
            ("tool_variant", "tool_variant"),
            ("annotation_source", "annotation_source"),
            ("safety_class", "safety_class"),
            ("status", "status"),
        ] {
            assert_eq!(row[column], rec[field], "{column} of {id}");
        }
        assert_eq!(row["decision"], rec["verdict"]["decision"]);
        assert_eq!(
            row["duration_ms"].to_string().trim_matches('"'),
            rec["duration_ms"].to_string()
        );
        // The full record is kept as the journal stores it: with its place in the replica's
        // hash chain, also in columns of their own.
        let mut stored: Value = serde_json::from_str(row["record"].as_str().unwrap()).unwrap();
        assert!(
            stored["seq"].as_u64().is_some_and(|seq| seq > 0),
            "{stored}"
        );
        assert_eq!(
            row["seq"].to_string().trim_matches('"'),
            stored["seq"].to_string()
        );
        assert_eq!(row["prev"], stored["prev"]);
        assert_eq!(row["hash"], stored["hash"]);
        assert_eq!(row["hash"].as_str().map(str::len), Some(64));
        assert_eq!(row["replica"], "", "no cluster, no replica name");
        for chain_field in ["seq", "prev", "hash"] {
            stored.as_object_mut().unwrap().remove(chain_field);
        }
        assert_eq!(stored, rec, "the full record is kept");
        // Second precision in `timestamp`, milliseconds in `timestamp_ms`.
        let ts = rec["timestamp"].as_str().unwrap();
        assert_eq!(row["ts"].as_str().unwrap(), &ts[..19].replace('T', " "));
    }

    // ClickHouse goes away: calls do not wait for it.
    ch.stop();
    let m = make_calls(&proxy, 8).await;
    eventually(
        Duration::from_secs(30),
        "the sink reports ClickHouse down",
        || async {
            let s = sinks_status(&proxy).await;
            s[0]["failures"].as_u64().unwrap_or(0) >= 1
                && s[0]["backlog"].as_u64() == Some(m as u64)
        },
    )
    .await;
    ch.start_again().await;
    eventually(
        Duration::from_secs(90),
        "N+M rows, acknowledged",
        || async {
            ch_counts(&ch, table).await.0 >= (n + m) as u64 && nothing_undelivered(&proxy).await
        },
    )
    .await;

    // Down again, and the proxy restarts while it is down: nothing is lost.
    ch.stop();
    let k = make_calls(&proxy, 6).await;
    let Proxy {
        mut proc, data_dir, ..
    } = proxy;
    // A graceful stop (SIGTERM), as an operator would.
    let _ = proc.terminate();
    let proxy = Proxy::builder(&config)
        .data_dir(data_dir)
        .args(&["--sink", "clickhouse-sink"])
        .start();
    let s = &sinks_status(&proxy).await[0];
    assert_eq!(
        s["backlog"], k as u64,
        "the backlog survived the restart: {s}"
    );
    ch.start_again().await;
    let total = (n + m + k) as u64;
    eventually(Duration::from_secs(90), "every record", || async {
        ch_counts(&ch, table).await.0 >= total
    })
    .await;
    let_pass(
        Duration::from_millis(500),
        "a duplicate insert, if the sink made one, would land meanwhile",
    )
    .await;
    assert_eq!(
        ch_counts(&ch, table).await,
        (total, total),
        "rows = distinct ids = calls"
    );
    let ids: Vec<String> = ch_rows(&ch, table)
        .await
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, journal_ids(&proxy).await);

    // A sink author's check against the same server: two sample records, every column filled.
    let out = plugins_check(vec![
        artifact("clickhouse_sink").display().to_string(),
        "--settings".into(),
        json!({"url": ch.url(), "table": table}).to_string(),
        "--deliver".into(),
    ])
    .await;
    out.assert_code(0);
    assert!(
        out.stdout().contains("delivered 2 sample records"),
        "{}",
        out.stdout()
    );
    let samples = ch
        .query(&format!(
            "SELECT status, decision FROM default.{table} WHERE server_name = 'mcpproxy-check' \
             ORDER BY id FORMAT TSV"
        ))
        .await;
    assert_eq!(samples.trim(), "success\tallow\nblocked\treject");
}

/// The table clickhouse-sink created before the chain columns (`replica`, `seq`, `prev`,
/// `hash`) were added.
fn table_before_the_chain_columns(table: &str) -> String {
    format!(
        "CREATE TABLE default.{table} (`id` String, `timestamp_ms` UInt64, `timestamp` \
         DateTime('UTC') MATERIALIZED toDateTime(intDiv(timestamp_ms, 1000)), `type` String, \
         `source` String, `server_name` String, `tool_name` String, `tool_variant` String, \
         `intent_operation_type` String, `intent_data_sensitivity` String, `intent_reason` \
         String, `annotations` String, `annotation_source` String, `safety_class` String, \
         `decision` String, `verdict_plugin` String, `verdict_message` String, `warnings` \
         String, `arguments` String, `arguments_truncated` UInt8, `response_bytes` UInt64, \
         `status` String, `error_message` String, `duration_ms` UInt64, `session_id` String, \
         `request_id` String, `client_name` String, `client_version` String, `dry_run` UInt8, \
         `record` String) ENGINE = MergeTree() PARTITION BY toYYYYMM(timestamp) ORDER BY \
         (timestamp, id)"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_table_made_by_an_older_sink_gets_the_chain_columns_or_the_error_says_how() {
    let Some(ch) = ClickHouse::start().await else {
        return;
    };
    for (table, create_table) in [("by_hand", false), ("by_the_sink", true)] {
        ch.query(&table_before_the_chain_columns(table)).await;
        ch.query(&format!(
            "INSERT INTO default.{table} (id, timestamp_ms, record) VALUES \
             ('01KAMXH0VBSJ2QX6F6R4VZ7P3M', 1, '{{}}')"
        ))
        .await;
        let log = tempfile::NamedTempFile::new().unwrap();
        let config = base_config(
            log.path(),
            "clickhouse-sink",
            json!({"url": ch.url(), "table": table, "create_table": create_table}),
        );
        let proxy = Proxy::builder(&config)
            .args(&["--sink", "clickhouse-sink"])
            .start();
        let n = make_calls(&proxy, 4).await as u64;
        if !create_table {
            // The sink may not change the table: it says which statements would.
            let error = crate::support::poll::until_value(
                "the sink reports the old table",
                Duration::from_secs(60),
                || async {
                    let s = &sinks_status(&proxy).await[0];
                    let error = s["last_error"].as_str().unwrap_or_default().to_owned();
                    if error.contains("older clickhouse-sink") {
                        Ok(error)
                    } else {
                        Err(error)
                    }
                },
            )
            .await;
            let statements = error
                .split("add them (")
                .nth(1)
                .and_then(|rest| rest.split(") or set create_table").next())
                .unwrap_or_else(|| panic!("no statements in: {error}"));
            for statement in statements.split("; ") {
                assert!(statement.starts_with("ALTER TABLE `default`.`by_hand` ADD COLUMN"));
                ch.query(statement).await;
            }
        }
        eventually(
            Duration::from_secs(60),
            "every record in ClickHouse",
            || async { ch_counts(&ch, table).await.0 > n && nothing_undelivered(&proxy).await },
        )
        .await;
        let rows = ch
            .query(&format!(
                "SELECT id, replica, seq, hash, record FROM default.{table} ORDER BY id FORMAT \
                 JSONEachRow"
            ))
            .await;
        let rows: Vec<Value> = rows
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows.len() as u64, n + 1, "{rows:?}");
        // The row from before keeps its record, with '' and 0 in the new columns; every new
        // one has its place in the chain.
        assert_eq!(
            (&rows[0]["seq"], &rows[0]["hash"], &rows[0]["record"]),
            (&json!("0"), &json!(""), &json!("{}"))
        );
        for row in &rows[1..] {
            let record: Value = serde_json::from_str(row["record"].as_str().unwrap()).unwrap();
            assert_eq!(
                row["seq"].as_str(),
                Some(record["seq"].to_string().as_str())
            );
            assert_eq!(row["hash"], record["hash"], "{table}");
        }
        assert_eq!(sinks_status(&proxy).await[0]["last_error"], Value::Null);
    }
}
