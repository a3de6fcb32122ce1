//! End-to-end: one owner per data dir, many front-ends. An HTTP `serve` owns the data dir;
//! IDEs (the official MCP Python SDK's stdio client) start `serve --stdio` beside it and are
//! carried to the owner: one upstream process, one journal. The CLI works beside any owner.
//! A front-end whose owner stops takes the data dir over (tests/serve_handoff.rs has the
//! race and the deadlines); a stdio owner serves the CLI and relays HTTP too.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::ide::{StdioSession, echo_text};
use crate::support::mcp::{Proc, Proxy, call, config_with, connect, pipe_lines, stdio_fixture};
use crate::support::{TestCommand, command_lines, test_python};

/// Processes whose command line mentions `needle` (the fixture's unique call log).
fn processes_mentioning(needle: &Path) -> usize {
    let needle = needle.to_string_lossy().into_owned();
    command_lines()
        .iter()
        .filter(|(_, line)| line.contains(&needle))
        .count()
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
    let mut proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", calls.path())])).start();
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
async fn an_ide_takes_over_when_the_http_owner_stops_and_its_session_goes_on() {
    let calls = tempfile::NamedTempFile::new().unwrap();
    let config = config_with(vec![stdio_fixture("fx", calls.path())]);
    let mut proxy = Proxy::builder(&config).start();
    let config_path = proxy.data_dir.path().join("mcp_config.json");
    let data_dir = proxy.data_dir.path().to_owned();
    let mut ide = StdioSession::start(&config_path, &data_dir);
    assert_eq!(echo_text(&ide.echo("before")), "before");

    // The owner stops as an operator stops it; the IDE's process becomes the owner, and
    // the session goes on without a new handshake.
    proxy.stop();
    let recovered = crate::support::poll::until_blocking(
        "the IDE's session goes on",
        Duration::from_secs(30),
        || {
            let answer = ide.echo("after");
            match answer.get("result") {
                Some(_) => Ok(answer),
                None => Err(answer.to_string()),
            }
        },
    );
    assert_eq!(echo_text(&recovered), "after", "{recovered}");
    assert!(
        std::os::unix::fs::FileTypeExt::is_socket(
            &std::fs::metadata(data_dir.join("mcpproxy.sock"))
                .unwrap()
                .file_type()
        ),
        "the IDE's process serves the control socket now"
    );
    // The CLI goes through the new owner.
    let out = cli(&config_path, &data_dir, &["activity", "list", "-o", "json"]);
    out.assert_code(0);
    let records: Vec<Value> = serde_json::from_str(&out.stdout()).unwrap();
    assert!(records.len() >= 2, "{records:#?}");
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

/// A second `serve` over HTTP beside an owner that serves HTTP itself does not start a
/// relay (and does not call that owner a stdio one): it stops, naming the address the
/// owner serves, where clients connect instead.
#[test]
fn a_second_http_serve_points_at_the_owner_that_serves_http() {
    let calls = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", calls.path())])).start();
    let config = proxy.data_dir.path().join("mcp_config.json");
    let out = TestCommand::new(proxy.data_dir.path())
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .args([&config])
        .output();
    assert_ne!(out.code(), Some(0), "{}", out.stderr());
    let stderr = out.stderr();
    assert!(
        stderr.contains(&format!("already serves MCP at {}", proxy.url))
            && stderr.contains("--data-dir")
            && !stderr.contains("serving stdio")
            && !stderr.contains("relays"),
        "{stderr}"
    );
}

/// Whether some process has `file` open (its `/proc/PID/fd` links to it).
fn is_open_anywhere(file: &Path) -> bool {
    let Ok(target) = std::fs::canonicalize(file) else {
        return false;
    };
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .any(|entry| {
            std::fs::read_dir(entry.path().join("fd"))
                .into_iter()
                .flatten()
                .flatten()
                .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|link| link == target))
        })
}

/// Waits (60 s at most) until some process has `file` open.
fn until_open(file: &Path, what: &str) {
    crate::support::poll::until_blocking(what, Duration::from_secs(60), || {
        if is_open_anywhere(file) {
            Ok(())
        } else {
            Err(format!("{} is open nowhere", file.display()))
        }
    });
}

/// A one-shot command that opened the data dir itself (no owner answered: a script's
/// `mcpproxy call` or `upstream list`) does not stop a `serve` started meanwhile, which
/// waits for it and then owns the data dir; and an `upstream add` made while that `serve`
/// is still starting waits for it and goes through it, a person's approved add, instead of
/// editing the file behind its back (which it took as a hand edit: `unapproved`).
#[test]
fn a_starting_serve_waits_for_a_one_shot_command_and_takes_the_changes_made_meanwhile() {
    let calls = tempfile::NamedTempFile::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_owned();
    let config = config_with(vec![stdio_fixture("fx", calls.path())]);
    let config_path = data_dir.join("mcp_config.json");
    std::fs::write(
        &config_path,
        crate::support::mcp::grant_fixture_files(&config).to_string(),
    )
    .unwrap();
    crate::support::mcp::copy_cwasm(
        &crate::support::mcp::shared_compile_cache(),
        &data_dir.join("cache/plugins"),
    );
    // The one-shot command: an in-process call that takes a few seconds.
    let one_shot = std::thread::spawn({
        let (config_path, data_dir) = (config_path.clone(), data_dir.clone());
        move || {
            cli(
                &config_path,
                &data_dir,
                &["call", "tool-read", "fx:slow", "-j", r#"{"ms": 4000}"#],
            )
        }
    });
    until_open(
        &data_dir.join("activity.redb"),
        "the one-shot command holds the journal",
    );
    // `serve` starts now; it holds its marker at once and waits for the journal.
    let serve = std::thread::spawn(move || Proxy::builder(&config).data_dir(dir).start());
    until_open(&data_dir.join("serve.marker"), "serve marks the data dir");
    // (`--config` before `--`: everything after it is the server's command line.)
    let added = TestCommand::new(&data_dir)
        .args(["upstream", "add", "late", "--config"])
        .args([&config_path])
        .args([
            "--",
            crate::support::mcp::fixture_bin().to_str().unwrap(),
            "--name",
            "late",
        ])
        .output();
    let one_shot = one_shot.join().unwrap();
    one_shot.assert_code(0);
    let proxy = serve
        .join()
        .expect("serve started after the one-shot command ended");
    added.assert_code(0);
    assert!(
        !added.stdout().contains("no mcpproxy is running")
            && !added.stderr().contains("no mcpproxy is running"),
        "the add edited the file beside a starting serve: {}{}",
        added.stdout(),
        added.stderr()
    );
    let statuses = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(proxy.get_json("/api/v1/upstreams"));
    let late = statuses["data"]
        .as_array()
        .and_then(|servers| servers.iter().find(|s| s["name"] == "late"))
        .cloned()
        .unwrap_or_else(|| panic!("late is not listed: {statuses}"));
    assert_ne!(late["state"], "unapproved", "{late}");
}
