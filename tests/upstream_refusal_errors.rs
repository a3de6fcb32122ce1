//! A sandbox refusal says so where the person looks: a server built with the official
//! Python SDK (`tests/python/refusing_server.py`) runs in the default sandbox and its tools
//! trip over it: a connection with `network none`, a URL outside its egress allow-list, a
//! file it was not granted. The SDK answers each with `Error executing tool NAME` and logs
//! the traceback; the agent (the official Python SDK's client) and `mcpproxy call` get one
//! line more saying what the sandbox refused and which `isolation` key would allow it, and
//! `mcpproxy upstream logs` keeps the head and tail of every traceback, so five deep ones
//! still fit in its 500 lines.

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::TestCommand;
use crate::support::mcp::{Proxy, config_with};

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/python")
        .join(name)
}

/// The server of `tests/python/refusing_server.py` as `name`, with `network`.
fn refusing_server(python: &Path, name: &str, network: Value) -> Value {
    json!({
        "name": name,
        "command": python,
        "args": [script("refusing_server.py")],
        // Its own script; the venv is the launcher's install tree.
        "isolation": {"read": [script("")], "network": network},
    })
}

/// Each call's `is_error` and texts, as the official Python SDK's client got them.
async fn calls_through_the_python_sdk(python: &Path, url: &str, calls: Value) -> Vec<Value> {
    let out = tokio::process::Command::new(python)
        .arg(script("call_tools.py"))
        .args([url, &calls.to_string()])
        .output()
        .await
        .expect("run call_tools.py");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "call_tools.py failed: {stderr}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("call_tools.py printed no JSON ({e}): {stderr}"))
}

fn texts(answer: &Value) -> String {
    answer["texts"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_the_sandbox_refused_says_what_it_refused_and_how_to_allow_it() {
    if !crate::support::sandbox_supported() {
        return;
    }
    let Some(python) = crate::support::test_python() else {
        return;
    };
    // Listening on the host's loopback: reachable from here, not from a server's own
    // network namespace.
    let host_service = TcpListener::bind("127.0.0.1:0").unwrap();
    let host_port = host_service.local_addr().unwrap().port();
    let allowed = TcpListener::bind("127.0.0.1:0").unwrap();
    let allowed_port = allowed.local_addr().unwrap().port();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("notes.txt");
    std::fs::write(&secret, "not granted").unwrap();
    let config = config_with(vec![
        refusing_server(&python, "py", json!("none")),
        refusing_server(
            &python,
            "pyweb",
            json!({"allow": [format!("127.0.0.1:{allowed_port}")]}),
        ),
    ]);
    let proxy = Proxy::builder(&config).start();
    let calls = json!([
        ["call_tool_read", "py:connect_to", {"host": "127.0.0.1", "port": host_port}],
        ["call_tool_read", "pyweb:fetch_url", {"url": format!("http://127.0.0.1:{host_port}/")}],
        ["call_tool_read", "py:read_file", {"path": secret}],
        ["call_tool_read", "py:read_file", {"path": script("refusing_server.py")}],
    ]);
    let answers = calls_through_the_python_sdk(&python, &proxy.url, calls).await;
    let [connect, fetch, read, granted] = &answers[..] else {
        panic!("four answers expected: {answers:?}");
    };

    // network none: what it tried, and the key that would allow it.
    assert_eq!(connect["is_error"], true, "{connect}");
    let connect = texts(connect);
    assert!(
        connect.contains("Error executing tool connect_to"),
        "{connect}"
    );
    let said = format!(
        "mcpproxy: the server runs with network none; it tried 127.0.0.1:{host_port} (connection refused)"
    );
    assert!(connect.contains(&said), "{connect}");
    assert!(
        connect.contains(&format!(
            "{{\"network\": {{\"allow\": [\"127.0.0.1:{host_port}\"]}}}}"
        )),
        "{connect}"
    );
    assert_eq!(connect.lines().count(), 2, "one line more: {connect}");

    // An allow-list: the egress proxy's refusal, named.
    assert_eq!(fetch["is_error"], true, "{fetch}");
    let fetch = texts(fetch);
    assert!(
        fetch.contains(&format!(
            "the server may reach only 127.0.0.1:{allowed_port} (isolation.network.allow); mcpproxy's egress proxy refused 127.0.0.1:{host_port}"
        )),
        "{fetch}"
    );

    // A path outside its grants: the path and the grant.
    assert_eq!(read["is_error"], true, "{read}");
    let read = texts(read);
    let path = secret.display().to_string();
    assert!(
        read.contains(&format!("mcpproxy: its sandbox refused reading {path}")),
        "{read}"
    );
    assert!(
        read.contains(&format!("{{\"read\":[\"{path}\"]}}")),
        "{read}"
    );
    // A call that works says nothing more.
    assert_eq!(granted["is_error"], false, "{granted}");
    assert!(!texts(granted).contains("mcpproxy:"), "{granted}");

    // The CLI's call says it too, on its error line.
    let config_file = proxy.data_dir.path().join("mcp_config.json");
    let cli = TestCommand::new(proxy.data_dir.path())
        .args(["call", "tool-read", "py:read_file", "--args"])
        .args([json!({"path": secret}).to_string()])
        .args(["--config".as_ref(), config_file.as_os_str()])
        .output();
    let both = format!("{}{}", cli.stdout(), cli.stderr());
    assert!(
        both.contains(&format!("its sandbox refused reading {path}")),
        "{both}"
    );
    drop((host_service, allowed));
}

/// Five failures 60 calls deep each write a ~250-line traceback: 1,250 lines, more than the
/// 500 `upstream logs` keeps. Each traceback keeps its head and its tail, so all five
/// exceptions are still there, each with where it entered.
#[tokio::test(flavor = "multi_thread")]
async fn upstream_logs_keep_the_head_and_tail_of_every_traceback() {
    if !crate::support::sandbox_supported() {
        return;
    }
    let Some(python) = crate::support::test_python() else {
        return;
    };
    // In the directory it may read: the error is the server's own, not the sandbox's.
    let missing = script("no-such-file.txt");
    let config = config_with(vec![refusing_server(&python, "py", json!("none"))]);
    let proxy = Proxy::builder(&config).start();
    let call = json!(["call_tool_read", "py:read_file", {"path": missing, "depth": 60}]);
    let calls = Value::Array(vec![call; 5]);
    let answers = calls_through_the_python_sdk(&python, &proxy.url, calls).await;
    assert!(answers.iter().all(|a| a["is_error"] == true), "{answers:?}");

    let config_file = proxy.data_dir.path().join("mcp_config.json");
    let logs = crate::support::poll::until_value(
        "five tracebacks in the log",
        std::time::Duration::from_secs(30),
        || async {
            let out = TestCommand::new(proxy.data_dir.path())
                .args(["upstream", "logs", "py", "--lines", "500", "--config"])
                .args([&config_file])
                .output();
            let stdout = out.stdout();
            let errors = stdout
                .lines()
                .filter(|l| l.starts_with("FileNotFoundError: [Errno 2]"))
                .count();
            if errors == 5 {
                Ok(stdout)
            } else {
                Err(format!("{errors} of 5 exceptions in the log:\n{stdout}"))
            }
        },
    )
    .await;
    let headers = logs
        .lines()
        .filter(|l| *l == "Traceback (most recent call last):")
        .count();
    // Each failure is two chained tracebacks.
    assert_eq!(headers, 10, "{logs}");
    let left_out = logs.lines().filter(|l| l.contains("left out")).count();
    assert_eq!(left_out, 5, "only the deep tracebacks are cut: {logs}");
    assert!(logs.lines().count() < 500, "{logs}");
    // The head: where the call entered the server's code.
    assert!(
        logs.contains("in _handle_call_tool") || logs.contains("in run"),
        "{logs}"
    );
}
