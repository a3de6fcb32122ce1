//! End-to-end: what upstreams send back to clients stays bounded, and sessions do not lock
//! clients out. An upstream flooding `notifications/message` once took the proxy from 35 MB
//! to 1.95 GB for a client that never asked for logs, and 228 `initialize` from one local
//! client locked every other one out with 503 for 30 minutes. Here:
//!
//! - the fixture floods log messages at a client that set no log level and never reads: the
//!   proxy's memory stays flat (nothing is relayed);
//! - the same flood at a client that set a level but reads only afterwards: at most the cap
//!   waits for it, the rest is dropped, and one "N messages dropped" note says how many;
//! - a flood of progress for one call at a client that reads only afterwards: only a few
//!   notifications wait, the newest replaced by the latest, so few arrive and the last is
//!   the latest;
//! - 300 `initialize` from one client address: all are served (idle sessions unused the
//!   longest make room), a session with a request in flight stays, and another address
//!   still gets a session.

use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::mcp::{Proxy, config_with, copy_cwasm, shared_compile_cache, stdio_fixture};
use crate::support::poll::{until, until_blocking};
use crate::support::time::let_pass_blocking;

/// Log messages and progress notifications the fixture sends in one flood, and the filler
/// bytes in each: 50 MB of log data, which the proxy without bounds held in memory.
const FLOOD: u64 = 50_000;
const FLOOD_BYTES: u64 = 1024;

/// How much the proxy's resident memory may grow during a flood. Without bounds it grew by
/// hundreds of MB for this flood (every message held while waiting for the client).
const MAX_GROWTH_KIB: u64 = 64 * 1024;

/// The log messages mcpproxy keeps waiting for one session (`back_channel::MAX_QUEUED_LOGS`).
const MAX_QUEUED_LOGS: usize = 256;

/// What may be on the way to a client that stopped reading besides the queue: the pipe to
/// it (64 KiB, about 60 of these messages) and the message rmcp is writing.
const PIPE_ALLOWANCE: usize = 128;

/// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Samples the resident memory of `pid` until dropped; the most seen.
struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(status_kib(pid, "VmRSS")));
        let thread = std::thread::spawn({
            let (stop, peak) = (stop.clone(), peak.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
                        return;
                    };
                    if let Some(kib) = status
                        .lines()
                        .find_map(|l| l.strip_prefix("VmRSS:"))
                        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                    {
                        peak.fetch_max(kib, Ordering::Relaxed);
                    }
                    let_pass_blocking(Duration::from_millis(10), "a sample every 10 ms");
                }
            }
        });
        Self {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    /// The most resident memory seen so far, in KiB (the process's own high-water mark
    /// too, when it grew since the sampler started).
    fn peak(&self, pid: u32) -> u64 {
        self.peak
            .load(Ordering::Relaxed)
            .max(status_kib(pid, "VmRSS"))
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Waits until `path` exists (the fixture wrote it when its flood was sent).
fn wait_for_file(path: &Path) {
    let what = format!("the fixture finishes its flood ({})", path.display());
    until_blocking(&what, Duration::from_secs(300), || {
        path.exists().then_some(()).ok_or("missing".to_owned())
    });
    // The proxy may not have read the fixture's last pipe-full yet (64 KiB), and nothing
    // outside it tells when it has.
    let_pass_blocking(
        Duration::from_millis(500),
        "the proxy reads the fixture's last pipe-full (64 KiB) far faster than this",
    );
}

/// Kills a process that outlives its test's deadline, so a proxy that hangs fails the test
/// (its pipe closes) instead of hanging it.
struct Watchdog(Arc<AtomicBool>);

impl Watchdog {
    fn start(pid: u32, limit: Duration) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let watching = done.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + limit;
            while Instant::now() < deadline {
                if watching.load(Ordering::Relaxed) {
                    return;
                }
                let_pass_blocking(
                    Duration::from_millis(100),
                    "a watchdog: its limit passes unless the test is done first",
                );
            }
            if !watching.load(Ordering::Relaxed) {
                // SAFETY: kill(2) on the test's own child, which has not been reaped (the
                // test holds it until `done` is set).
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        });
        Self(done)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// `serve --stdio` driven line by line by the test, which reads only when it wants to.
struct StdioProxy {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    _watchdog: Watchdog,
    _data_dir: tempfile::TempDir,
}

impl StdioProxy {
    /// Starts the proxy with the fixture as `fx`, initializes, and waits until `fx` answers.
    fn start(calls: &Path) -> Self {
        let data_dir = tempfile::tempdir().unwrap();
        let config = data_dir.path().join("mcp_config.json");
        std::fs::write(
            &config,
            config_with(vec![flooding_fixture(calls)]).to_string(),
        )
        .unwrap();
        copy_cwasm(
            &shared_compile_cache(),
            &data_dir.path().join("cache/plugins"),
        );
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpproxy"))
            .args(["serve", "--stdio", "--config"])
            .arg(&config)
            .arg("--data-dir")
            .arg(data_dir.path())
            .env("HOME", data_dir.path())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start serve --stdio");
        let watchdog = Watchdog::start(child.id(), Duration::from_secs(300));
        let mut proxy = Self {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            next_id: 0,
            _watchdog: watchdog,
            _data_dir: data_dir,
        };
        let init = proxy.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "slow-reader", "version": "1"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "mcpproxy", "{init}");
        proxy.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        // The upstream connects in the background. (No /readyz: this proxy has no HTTP
        // listener, so a call that works is what says it is ready.)
        until_blocking(
            "the fixture upstream becomes ready",
            Duration::from_secs(60),
            || {
                let answer = proxy.request("tools/call", read_call("get_status", json!({})));
                if answer["result"]["isError"] == true {
                    Err(answer.to_string())
                } else {
                    Ok(())
                }
            },
        );
        proxy
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next message the proxy wrote.
    fn read(&mut self) -> Value {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).unwrap();
        assert!(
            n > 0,
            "the proxy closed its stdout (killed by the watchdog?)"
        );
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// Sends a request without reading; its id.
    fn start_request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a request and returns its answer (notifications before it are skipped).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.start_request(method, params);
        loop {
            let message = self.read();
            if message["id"] == id {
                return message;
            }
        }
    }
}

impl Drop for StdioProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tools/call` params of `call_tool_read` for the fixture's `tool`.
fn read_call(tool: &str, args: Value) -> Value {
    json!({"name": "call_tool_read", "arguments": {"name": format!("fx:{tool}"), "args": args}})
}

/// The fixture as `fx`, its sandbox granted the call log's directory, where it writes the
/// file that says a flood was sent.
fn flooding_fixture(calls: &Path) -> Value {
    let mut fixture = stdio_fixture("fx", calls);
    fixture["isolation"] = json!({"write": [calls.parent().unwrap()]});
    // A flood of tens of thousands of messages at a debug build on a busy two-core machine
    // can take longer than the default minute; these tests are about bounds, not speed.
    fixture["tool_call_timeout_ms"] = json!(300_000);
    fixture
}

fn flood_args(kind: &str, count: u64, bytes: u64, done: &Path) -> Value {
    json!({"count": count, "bytes": bytes, "kind": kind, "done_file": done})
}

fn temp_path(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: &Value,
) -> reqwest::RequestBuilder {
    let request = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    match session {
        Some(id) => request.header("mcp-session-id", id),
        None => request,
    }
}

fn initialize_body(name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
           "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": name, "version": "1"}}})
}

/// Opens a session over HTTP (`initialize`, `notifications/initialized`); its id.
async fn open_session(http: &reqwest::Client, url: &str, name: &str) -> String {
    let response = post(http, url, None, &initialize_body(name))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let id = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    response.bytes().await.unwrap();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = post(http, url, Some(&id), &initialized)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    id
}

/// The HTTP status of a `tools/list` on session `id` (200 while it is open, 404 once closed).
async fn list_tools_status(http: &reqwest::Client, url: &str, id: &str) -> u16 {
    let request = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let response = post(http, url, Some(id), &request).send().await.unwrap();
    let status = response.status().as_u16();
    let body = response.text().await.unwrap();
    if status == 200 {
        assert!(body.contains("retrieve_tools"), "{body}");
    }
    status
}

#[tokio::test(flavor = "multi_thread")]
async fn a_log_flood_at_a_client_that_set_no_level_and_never_reads_leaves_memory_flat() {
    let dir = tempfile::tempdir().unwrap();
    let calls = temp_path(&dir, "calls.log");
    let done = temp_path(&dir, "flood.done");
    let proxy = Proxy::builder(&config_with(vec![flooding_fixture(&calls)])).start();
    let pid = proxy.proc.child.id();
    let http = reqwest::Client::new();
    let session = open_session(&http, &proxy.url, "never-reads").await;
    // The session's event stream is open (as the official SDKs open it) and never read.
    let stream = http
        .get(&proxy.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);

    let before = status_kib(pid, "VmRSS");
    let sampler = RssSampler::start(pid);
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                      "params": read_call("flood", flood_args("log", FLOOD, FLOOD_BYTES, &done))});
    // Sent, never read.
    let flood = tokio::spawn(post(&http, &proxy.url, Some(&session), &call).send());
    tokio::task::spawn_blocking(move || wait_for_file(&done))
        .await
        .unwrap();
    let peak = sampler.peak(pid);
    drop(sampler);
    eprintln!("proxy RSS {before} KiB before the flood, {peak} KiB at most during it");
    assert!(
        peak < before + MAX_GROWTH_KIB,
        "the proxy's memory grew from {before} KiB to {peak} KiB under a flood of {FLOOD} log \
         messages nobody asked for"
    );
    flood.abort();
    drop(stream);
}

#[test]
fn a_log_flood_at_a_slow_reader_keeps_the_cap_and_says_once_how_many_were_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let done = temp_path(&dir, "flood.done");
    let mut proxy = StdioProxy::start(&temp_path(&dir, "calls.log"));
    let level = proxy.request("logging/setLevel", json!({"level": "debug"}));
    assert!(level.get("result").is_some(), "{level}");
    let pid = proxy.pid();
    let before = status_kib(pid, "VmRSS");
    let sampler = RssSampler::start(pid);

    let id = proxy.start_request(
        "tools/call",
        read_call("flood", flood_args("log", FLOOD, FLOOD_BYTES, &done)),
    );
    // Nothing is read until the fixture has sent the whole flood.
    wait_for_file(&done);
    let peak = sampler.peak(pid);
    drop(sampler);

    let (mut relayed, mut notes, mut dropped, mut answered) = (0usize, 0, 0u64, false);
    while !answered || notes == 0 {
        let message = proxy.read();
        if message["id"] == id {
            assert_eq!(message["result"]["isError"], false, "{message}");
            answered = true;
            continue;
        }
        assert_eq!(message["method"], "notifications/message", "{message}");
        let params = &message["params"];
        if params["logger"] == "mcpproxy" {
            notes += 1;
            assert_eq!(params["level"], "warning", "{message}");
            let text = params["data"].as_str().unwrap();
            let (count, rest) = text.split_once(' ').unwrap();
            assert!(rest.starts_with("messages dropped"), "{text}");
            assert!(text.contains("'fx'"), "{text}");
            dropped += count.parse::<u64>().unwrap();
        } else {
            assert_eq!(params["logger"], "fx:flood", "{message}");
            relayed += 1;
            assert!(
                relayed <= MAX_QUEUED_LOGS + PIPE_ALLOWANCE,
                "{relayed} log messages relayed to a client that read none while they came: \
                 more than the cap ({MAX_QUEUED_LOGS}) and what its pipe holds ({PIPE_ALLOWANCE})"
            );
        }
    }
    // Nothing more comes: a request now is answered next.
    let status = proxy.start_request("tools/call", read_call("get_status", json!({})));
    let answer = proxy.read();
    assert_eq!(
        answer["id"], status,
        "after the note, only the answer: {answer}"
    );
    eprintln!(
        "{relayed} relayed, {dropped} dropped in {notes} note(s); proxy RSS {before} KiB \
         before, {peak} KiB at most"
    );
    assert_eq!(notes, 1, "one note for the whole flood");
    assert_eq!(
        relayed as u64 + dropped,
        FLOOD,
        "every message relayed or counted"
    );
    assert!(
        peak < before + MAX_GROWTH_KIB,
        "the proxy's memory grew from {before} KiB to {peak} KiB"
    );
}

#[test]
fn a_progress_flood_at_a_slow_reader_is_coalesced_to_the_latest() {
    let dir = tempfile::tempdir().unwrap();
    let done = temp_path(&dir, "flood.done");
    let mut proxy = StdioProxy::start(&temp_path(&dir, "calls.log"));
    let mut params = read_call("flood", flood_args("progress", FLOOD, 64, &done));
    params["_meta"] = json!({"progressToken": "mine"});
    let id = proxy.start_request("tools/call", params);
    wait_for_file(&done);

    let mut seen: Vec<f64> = Vec::new();
    let mut answered = false;
    while !answered || seen.last() != Some(&(FLOOD as f64)) {
        let message = proxy.read();
        if message["id"] == id {
            assert_eq!(message["result"]["isError"], false, "{message}");
            answered = true;
            continue;
        }
        assert_eq!(message["method"], "notifications/progress", "{message}");
        assert_eq!(message["params"]["progressToken"], "mine", "{message}");
        assert_eq!(
            message["params"]["total"].as_f64(),
            Some(FLOOD as f64),
            "{message}"
        );
        seen.push(message["params"]["progress"].as_f64().unwrap());
        assert!(
            seen.len() < (FLOOD / 10) as usize,
            "{} progress notifications relayed to a client that read none while they came: \
             waiting ones were not replaced by the latest",
            seen.len()
        );
    }
    eprintln!("{} of {FLOOD} progress notifications relayed", seen.len());
    // The latest came last (the loop waits for it), after the first few and what the pipe
    // held.
    assert_eq!(seen.iter().copied().fold(0.0, f64::max), FLOOD as f64);
}

/// A client bound to `address` (any of 127.0.0.0/8 reaches the loopback listener), which
/// the proxy counts as another client.
fn client_from(address: &str) -> reqwest::Client {
    let address: IpAddr = address.parse().unwrap();
    reqwest::Client::builder()
        .local_address(address)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn three_hundred_sessions_from_one_client_lock_no_one_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config_with(vec![stdio_fixture("fx", &temp_path(&dir, "calls.log"))]);
    config["http"] = json!({"max_sessions": 16, "max_sessions_per_client": 16});
    let proxy = Proxy::builder(&config).start();
    let flooder = client_from("127.0.0.1");

    // The flooder's first session has a call in flight the whole time.
    let busy = open_session(&flooder, &proxy.url, "flood").await;
    let slow = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                      "params": read_call("slow", json!({"ms": 600_000}))});
    let in_flight = tokio::spawn(post(&flooder, &proxy.url, Some(&busy), &slow).send());
    // Its request reached the upstream.
    let calls = temp_path(&dir, "calls.log");
    until(
        "the slow call reaches the fixture",
        Duration::from_secs(60),
        || async {
            let log = std::fs::read_to_string(&calls).unwrap_or_default();
            log.contains("\"slow\"").then_some(()).ok_or(log)
        },
    )
    .await;

    let mut opened = Vec::new();
    for n in 0..300 {
        let response = post(&flooder, &proxy.url, None, &initialize_body("flood"))
            .send()
            .await
            .unwrap();
        let status = response.status();
        assert_eq!(
            status,
            200,
            "initialize {n} of one client refused: {}",
            response.text().await.unwrap()
        );
        opened.push(
            response.headers()["mcp-session-id"]
                .to_str()
                .unwrap()
                .to_owned(),
        );
        response.bytes().await.unwrap();
    }

    // Another client address still gets a session, which works.
    let other = client_from("127.0.0.2");
    let theirs = open_session(&other, &proxy.url, "other").await;
    assert_eq!(list_tools_status(&other, &proxy.url, &theirs).await, 200);

    // The flooder's newest sessions work, its oldest idle ones were closed to make room,
    // and the one with a call in flight stayed.
    for id in &opened[300 - 14..] {
        assert_eq!(list_tools_status(&flooder, &proxy.url, id).await, 200);
    }
    for id in &opened[..300 - 14] {
        assert_eq!(list_tools_status(&flooder, &proxy.url, id).await, 404);
    }
    assert_eq!(list_tools_status(&flooder, &proxy.url, &busy).await, 200);
    assert!(!in_flight.is_finished(), "the slow call is still running");
    in_flight.abort();
}
