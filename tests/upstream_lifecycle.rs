//! End-to-end: an upstream's life with the proxy. A call made just after start, while its
//! stdio upstream is still connecting, waits for it within the call's timeout instead of
//! being refused; a stdio upstream that ignores the end of its stdin still dies when the
//! proxy is killed with `kill -9`, and so does a daemon it started in a session of its own.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::mcp::{Proxy, call, config_with, connect, fixture_bin, is_error, text};
use crate::support::poll::until_blocking;
use crate::support::{command_lines, runs_mcpproxy, sandbox_supported};

#[tokio::test(flavor = "multi_thread")]
async fn a_call_right_after_start_waits_for_its_connecting_upstream() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let slow = json!({
        "name": "fx",
        "command": fixture_bin(),
        "args": ["--call-log", log.path(), "--startup-delay-ms", "3000"],
    });
    let proxy = Proxy::builder(&config_with(vec![slow])).listening().start();
    let client = connect(&proxy.url).await;
    let result = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args": {"text": "early"}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    assert!(text(&result).contains("early"), "{}", text(&result));
    client.cancel().await.unwrap();
}

/// Whether a process is gone (or a zombie nobody reaped yet).
fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/status")) {
        Err(_) => true,
        Ok(status) => status
            .lines()
            .any(|l| l.starts_with("State:") && l.contains('Z')),
    }
}

#[test]
fn a_stdio_upstream_that_ignores_eof_dies_with_a_killed_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("fixture.pid");
    let stubborn = json!({
        "name": "fx",
        "command": fixture_bin(),
        "args": ["--ignore-eof", "--pid-file", pid_file],
        // Silent: a log line to the dead proxy's stderr pipe would end it by itself.
        "env": {"RUST_LOG": "off"},
    });
    let mut proxy = Proxy::builder(&config_with(vec![stubborn])).start();
    assert!(pid_file.exists(), "the fixture did not start");
    // The pid the fixture writes is its own in its sandbox's PID namespace (1): found here by
    // its command line instead, which names the pid file.
    let marker = pid_file.display().to_string();
    let pid = *pids_with(&marker).first().expect("the fixture's process");
    assert!(!is_dead(pid));
    proxy.proc.kill(); // SIGKILL: no cleanup code runs in the proxy.
    until_blocking(
        &format!("the upstream (pid {pid}) dies with the killed proxy"),
        Duration::from_secs(20),
        || is_dead(pid).then_some(()).ok_or("alive".to_owned()),
    );
}

/// The pids of the host's processes whose command line contains `marker` (and is not a
/// proxy's).
fn pids_with(marker: &str) -> Vec<u32> {
    command_lines()
        .into_iter()
        .filter(|(_, line)| line.contains(marker) && !runs_mcpproxy(line))
        .map(|(pid, _)| pid)
        .collect()
}

/// Kills what a failed test would leave behind.
struct KillOnDrop(String);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for pid in pids_with(&self.0) {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
    }
}

/// A server that starts a daemon (a fork into a session of its own, as a language server or
/// a file watcher may) leaves nothing behind when the proxy is killed with `kill -9`: not
/// after the kill, and not after the next start.
#[test]
fn a_daemon_a_sandboxed_server_started_dies_with_a_killed_proxy() {
    if !sandbox_supported() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("fixture.pid");
    let marker = format!("server-daemon-{}", std::process::id());
    let _cleanup = KillOnDrop(marker.clone());
    // `sh -c 'sleep 1000; true' MARKER`: the daemon's shell waits on sleep, with the marker
    // as its $0 so this test can find it from outside the server's PID namespace.
    let script = format!(
        "setsid sh -c 'sleep 1000; true' {marker} </dev/null >/dev/null 2>&1 & \
         exec \"$0\" --ignore-eof --pid-file \"$1\""
    );
    let server = json!({
        "name": "fx",
        "command": "/bin/sh",
        "args": ["-c", script, fixture_bin(), pid_file],
        "env": {"RUST_LOG": "off"},
    });
    let mut proxy = Proxy::builder(&config_with(vec![server])).start();
    assert!(pid_file.exists(), "the fixture did not start");
    let daemon = until_blocking("the daemon starts", Duration::from_secs(20), || {
        pids_with(&marker)
            .first()
            .copied()
            .ok_or("none yet".to_owned())
    });
    proxy.proc.kill(); // SIGKILL: no cleanup code runs in the proxy.
    // The next start of a proxy (its sweep of what dead proxies left) in a new data dir.
    let _next = Proxy::builder(&config_with(vec![])).start();
    until_blocking(
        &format!(
            "the server's daemon (pid {daemon}) dies with the killed proxy and the next start"
        ),
        Duration::from_secs(20),
        || is_dead(daemon).then_some(()).ok_or("alive".to_owned()),
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_over_16_mib_fails_its_call_at_once_saying_why() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let huge = json!({
        "name": "fx",
        "command": fixture_bin(),
        "args": ["--call-log", log.path()],
        // "ab" nine million times: an 18 MB reply.
        "env": {"MCP_FIXTURE_ECHO_REPEAT": "9000000"},
        "tool_call_timeout_ms": 60000,
    });
    let proxy = Proxy::builder(&config_with(vec![huge])).start();
    let client = connect(&proxy.url).await;
    let started = Instant::now();
    let result = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args": {"text": "ab"}}),
    )
    .await
    .unwrap();
    let message = text(&result);
    assert!(
        is_error(&result),
        "{} bytes: {}",
        message.len(),
        &message[..message.len().min(200)]
    );
    assert!(message.contains("larger than 16 MiB"), "{message}");
    eprintln!("refused after {:?}", started.elapsed());
    // The session is still good: a small reply goes through.
    let result = call(&client, "call_tool_read", json!({"name": "fx:get_status"}))
        .await
        .unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    client.cancel().await.unwrap();
}

#[test]
fn a_stdio_request_over_16_mib_is_answered_with_an_error() {
    use std::io::{BufRead, Write};
    let dir = tempfile::tempdir().unwrap();
    let mut proxy = std::process::Command::new(env!("CARGO_BIN_EXE_mcpproxy"))
        .args(["serve", "--stdio", "--data-dir"])
        .arg(dir.path())
        .env("HOME", dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = proxy.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(proxy.stdout.take().unwrap());
    let mut send = |message: &str| {
        stdin.write_all(message.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    send(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("\"id\":1"), "{line}");
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let padding = "p".repeat(17 << 20);
    send(&format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"retrieve_tools","arguments":{{"query":"{padding}"}}}}}}"#
    ));
    line.clear();
    stdout.read_line(&mut line).unwrap();
    let answer: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["id"], 2, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("larger than 16 MiB"), "{answer}");
    // The next request is read as usual.
    send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#);
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(
        line.contains("\"id\":3") && line.contains("retrieve_tools"),
        "{line}"
    );
    let _ = proxy.kill();
    let _ = proxy.wait();
}
