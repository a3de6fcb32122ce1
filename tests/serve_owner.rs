//! End-to-end: one owner per data dir, many front-ends. An HTTP `serve` owns the data dir;
//! IDEs (the official MCP Python SDK's stdio client) start `serve --stdio` beside it and are
//! carried to the owner: one upstream process, one journal. The CLI works beside any owner.
//! A front-end whose owner stops fails its requests with a clear error and goes on when an
//! owner runs again; a stdio owner serves the CLI and relays HTTP too.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::mcp::{Proc, Proxy, call, config_with, connect, pipe_lines, stdio_fixture};
use crate::support::{TestCommand, test_python};

/// Processes whose command line mentions `needle` (the fixture's unique call log).
fn processes_mentioning(needle: &Path) -> usize {
    let needle = needle.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .is_ok_and(|c| c.contains(&needle))
        })
        .count()
}

/// `serve --stdio` driven line by line, as an IDE drives it.
struct StdioSession {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl StdioSession {
    fn start(config: &Path, data_dir: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpproxy"))
            .args(["serve", "--stdio", "--config"])
            .arg(config)
            .arg("--data-dir")
            .arg(data_dir)
            .env("HOME", data_dir)
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start serve --stdio");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut session = Self {
            child,
            stdin,
            stdout,
            next_id: 0,
        };
        let init = session.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw-ide", "version": "1"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "mcpproxy", "{init}");
        session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        session
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and returns the answer with its id (any other line is a failure).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(answer["id"], id, "an answer to another request: {answer}");
        answer
    }

    fn echo(&mut self, text: &str) -> Value {
        self.request(
            "tools/call",
            json!({"name": "call_tool_read",
                   "arguments": {"name": "fx:echo", "args_json": json!({"text": text}).to_string()}}),
        )
    }
}

impl Drop for StdioSession {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn echo_text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("not a tool result: {answer}"))
}

fn cli(config: &Path, data_dir: &Path, args: &[&str]) -> crate::support::CmdOutput {
    TestCommand::new(data_dir)
        .args(args)
        .args(["--config"])
        .args([config])
        .output()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_ides_share_the_http_owner_its_upstream_and_its_journal() {
    let Some(python) = test_python() else { return };
    let calls = tempfile::NamedTempFile::new().unwrap();
    let mut proxy = Proxy::start(&config_with(vec![stdio_fixture("fx", calls.path())]), &[]);
    let config = proxy.data_dir.path().join("mcp_config.json");
    let data_dir = proxy.data_dir.path().to_owned();

    // Two IDEs, each the official Python SDK's stdio client, calling at the same time.
    let ide = |name: &str| {
        Command::new(&python)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/stdio_calls.py"))
            .arg(env!("CARGO_BIN_EXE_mcpproxy"))
            .arg(&config)
            .arg(&data_dir)
            .args([name, "15"])
            .env("HOME", &data_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the Python client")
    };
    let (a, b) = (ide("ide-a"), ide("ide-b"));
    for (name, child) in [("ide-a", a), ("ide-b", b)] {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let result: Value = serde_json::from_slice(&out.stdout).unwrap();
        let expected: Vec<String> = (0..15).map(|i| format!("{name}-{i}")).collect();
        assert_eq!(result["texts"], json!(expected), "{name}");
        assert_eq!(result["errors"], json!([]), "{name}");
    }
    // One upstream process served both, and the owner's journal has every call.
    assert_eq!(processes_mentioning(calls.path()), 1);
    let client = connect(&proxy.url).await;
    call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args_json": r#"{"text": "http"}"#}),
    )
    .await
    .unwrap();
    client.cancel().await.unwrap();
    let out = cli(
        &config,
        &data_dir,
        &["activity", "list", "-o", "json", "-n", "100"],
    );
    out.assert_code(0);
    let records: Vec<Value> = serde_json::from_str(&out.stdout()).unwrap();
    assert_eq!(
        records.iter().filter(|r| r["tool_name"] == "echo").count(),
        31
    );
    let out = cli(
        &config,
        &data_dir,
        &["call", "tool-read", "fx:echo", "-j", r#"{"text": "cli"}"#],
    );
    out.assert_code(0);
    assert!(out.stdout().contains("cli"), "{}", out.stdout());
    assert_eq!(processes_mentioning(calls.path()), 1);
    proxy.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_front_end_fails_clearly_while_no_owner_runs_and_goes_on_when_one_does() {
    let calls = tempfile::NamedTempFile::new().unwrap();
    let config = config_with(vec![stdio_fixture("fx", calls.path())]);
    let mut proxy = Proxy::start(&config, &[]);
    let config_path = proxy.data_dir.path().join("mcp_config.json");
    let data_dir = proxy.data_dir.path().to_owned();
    let mut ide = StdioSession::start(&config_path, &data_dir);
    assert_eq!(echo_text(&ide.echo("before")), "before");

    proxy.stop();
    let answer = ide.echo("while stopped");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("mcpproxy is not running for") && message.contains("reconnects"),
        "{answer}"
    );

    // A new owner on the same data dir: the session goes on without a new handshake.
    let dir = std::mem::replace(&mut proxy.data_dir, tempfile::tempdir().unwrap());
    let mut again = Proxy::start_in(&config, &[], dir);
    let deadline = Instant::now() + Duration::from_secs(30);
    let recovered = loop {
        let answer = ide.echo("after");
        if answer.get("result").is_some() {
            break answer;
        }
        assert!(Instant::now() < deadline, "never recovered: {answer}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(echo_text(&recovered), "after");
    again.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stdio_owner_serves_the_cli_another_ide_and_http_beside_it() {
    let calls = tempfile::NamedTempFile::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config_with(vec![stdio_fixture("fx", calls.path())]);
    let config_path = dir.path().join("mcp_config.json");
    std::fs::write(
        &config_path,
        crate::support::mcp::grant_fixture_files(&config).to_string(),
    )
    .unwrap();
    let data_dir = dir.path().join("data");

    let mut owner = StdioSession::start(&config_path, &data_dir);
    assert_eq!(
        echo_text(&owner.echo("from the owner's IDE")),
        "from the owner's IDE"
    );
    let socket = data_dir.join("mcpproxy.sock");
    {
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        let meta = std::fs::metadata(&socket).expect("the control socket exists");
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    }

    // The CLI goes through the owner (the journal is the owner's to hold).
    let out = cli(
        &config_path,
        &data_dir,
        &["call", "tool-read", "fx:echo", "-j", r#"{"text": "cli"}"#],
    );
    out.assert_code(0);
    let out = cli(&config_path, &data_dir, &["activity", "list", "-o", "json"]);
    out.assert_code(0);
    let records: Vec<Value> = serde_json::from_str(&out.stdout()).unwrap();
    assert_eq!(records.len(), 2, "{records:#?}");

    // A second IDE is a front-end; an HTTP serve relays to the owner.
    let mut second = StdioSession::start(&config_path, &data_dir);
    assert_eq!(echo_text(&second.echo("second")), "second");
    let mut relay = Command::new(env!("CARGO_BIN_EXE_mcpproxy"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config_path)
        .arg("--data-dir")
        .arg(&data_dir)
        .env("HOME", &data_dir)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let relay_log = pipe_lines(relay.stderr.take().unwrap());
    let relay = Proc {
        child: relay,
        stderr_lines: relay_log,
    };
    let line = relay.wait_for_line(Duration::from_secs(60), |l| {
        l.contains(" listening on http://")
    });
    let url = line
        .split("listening on ")
        .nth(1)
        .unwrap()
        .trim()
        .to_owned();
    let client = connect(&url).await;
    let via_http = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args_json": r#"{"text": "relayed"}"#}),
    )
    .await
    .unwrap();
    assert!(format!("{:?}", via_http.content).contains("relayed"));
    client.cancel().await.unwrap();
    assert_eq!(processes_mentioning(calls.path()), 1);
    drop(relay);
    drop(second);
    drop(owner);
}

#[test]
fn a_data_dir_held_by_another_process_is_refused_naming_it() {
    let calls = tempfile::NamedTempFile::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("mcp_config.json");
    std::fs::write(
        &config_path,
        config_with(vec![stdio_fixture("fx", calls.path())]).to_string(),
    )
    .unwrap();
    let data_dir = dir.path().join("data");
    // Make the journal, then hold its lock from another process (as redb does).
    cli(
        &config_path,
        &data_dir,
        &["call", "tool-read", "fx:echo", "-j", r#"{"text": "x"}"#],
    )
    .assert_code(0);
    let journal = data_dir.join("activity.redb");
    let mut holder = Command::new("python3")
        .args([
            "-c",
            "import fcntl, sys, time; f = open(sys.argv[1], 'r+b'); fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
        ])
        .arg(&journal)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "held");
    let out = cli(
        &config_path,
        &data_dir,
        &["call", "tool-read", "fx:echo", "-j", r#"{"text": "x"}"#],
    );
    let _ = holder.kill();
    let _ = holder.wait();
    out.assert_code(2);
    let stderr = out.stderr();
    assert!(
        stderr.contains(&format!("is in use by pid {}", holder.id()))
            && stderr.contains("python3 -c")
            && stderr.contains("mcpproxy.sock"),
        "{stderr}"
    );
}
