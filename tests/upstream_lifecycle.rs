//! End-to-end: an upstream's life with the proxy. A call made just after start, while its
//! stdio upstream is still connecting, waits for it within the call's timeout instead of
//! being refused; a stdio upstream that ignores the end of its stdin still dies when the
//! proxy is killed with `kill -9`.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::mcp_util::{Proxy, call, config_with, connect, fixture_bin, is_error, text};

#[tokio::test(flavor = "multi_thread")]
async fn a_call_right_after_start_waits_for_its_connecting_upstream() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let slow = json!({
        "name": "fx",
        "command": fixture_bin(),
        "args": ["--call-log", log.path(), "--startup-delay-ms", "3000"],
    });
    let proxy = Proxy::start_listening(&config_with(vec![slow]), &[], tempfile::tempdir().unwrap());
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
    let mut proxy = Proxy::start(&config_with(vec![stubborn]), &[]);
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!is_dead(pid));
    proxy.proc.kill(); // SIGKILL: no cleanup code runs in the proxy.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !is_dead(pid) {
        assert!(
            Instant::now() < deadline,
            "the upstream (pid {pid}) outlived the killed proxy"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
