//! `${secret:NAME}` and `${env:NAME}` in a server's config, end to end: a stdio fixture whose
//! `env` names a stored secret, an HTTP fixture that refuses requests without the bearer token
//! an `${env:}` header carries, and a server whose secret is missing (an error naming the fix,
//! the others unaffected, up once the secret is set, with no restart). No value is shown by
//! `upstream list`, the proxy's log, `secret list` or the config file.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mcp::{Proxy, config_with, fixture_bin, pipe_lines, stdio_fixture};
use crate::support::{CmdOutput, TestCommand};

/// The HTTP fixture's token, and the value of the stored secret (the echo repeat count).
const TOKEN: &str = "tok-9f2c7a51e0d84b36";
const REPEAT: &str = "3";

/// `mcpproxy secret set NAME` with `value` on stdin, on the file backend.
pub(crate) fn secret_set(data_dir: &Path, name: &str, value: &str) -> CmdOutput {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpproxy"))
        .args(["secret", "set", name])
        .env("MCPPROXY_DATA_DIR", data_dir)
        .env("HOME", data_dir)
        .env("MCPPROXY_CREDENTIALS", "file")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mcpproxy secret set");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{value}\n").as_bytes())
        .expect("write the value");
    CmdOutput(child.wait_with_output().expect("wait for mcpproxy"))
}

/// The CLI on `data_dir`, with the running proxy's config once there is one.
fn cli(data_dir: &Path, args: &[&str]) -> CmdOutput {
    let config = data_dir.join("mcp_config.json");
    let mut command = TestCommand::new(data_dir)
        .env("MCPPROXY_CREDENTIALS", "file")
        .args(args);
    if config.exists() {
        command = command.args(["--config"]).arg_path(&config);
    }
    command.output()
}

fn statuses(data_dir: &Path) -> Vec<Value> {
    let list = cli(data_dir, &["upstream", "list", "-o", "json"]);
    list.assert_code(0);
    assert!(!list.stdout().contains(TOKEN), "{}", list.stdout());
    serde_json::from_str(&list.stdout()).expect("upstream list -o json")
}

fn status_of(data_dir: &Path, name: &str) -> Value {
    statuses(data_dir)
        .into_iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no server {name}"))
}

/// Polls `upstream list` until `name` is in `state` (the supervisor retries with backoff).
fn wait_for_state(data_dir: &Path, name: &str, state: &str) -> Value {
    let what = format!("{name} reaches {state}");
    crate::support::poll::until_blocking(&what, Duration::from_secs(60), || {
        let status = status_of(data_dir, name);
        if status["state"] == state {
            Ok(status)
        } else {
            Err(status.to_string())
        }
    })
}

#[test]
fn references_resolve_at_start_and_no_value_is_shown() {
    let data_dir = tempfile::tempdir().unwrap();
    let dir = data_dir.path();

    // The stored secret, set as a user would; nothing echoes it.
    let set = secret_set(dir, "ECHO_REPEAT", REPEAT);
    set.assert_code(0);
    assert!(
        set.stdout().contains("stored secret ECHO_REPEAT"),
        "{}",
        set.stdout()
    );
    assert!(set.stdout().contains("file: "), "{}", set.stdout());
    let list = cli(dir, &["secret", "list"]);
    list.assert_code(0);
    assert!(list.stdout().contains("ECHO_REPEAT"), "{}", list.stdout());
    let credentials = dir.join("credentials.json");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&credentials)
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
    }

    // An HTTP fixture that checks a bearer token.
    let mut web = Command::new(fixture_bin())
        .args([
            "--http",
            "127.0.0.1:0",
            "--require-bearer-env",
            "FIXTURE_TOKEN",
        ])
        .env("FIXTURE_TOKEN", TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the HTTP fixture");
    let lines = pipe_lines(web.stdout.take().expect("stdout"));
    let web_url = loop {
        let line = lines
            .recv_timeout(Duration::from_secs(30))
            .expect("the HTTP fixture listens");
        if let Some(url) = line.strip_prefix("MCP_FIXTURE_LISTENING ") {
            break url.to_owned();
        }
    };

    // The fixtures' call logs lie outside the data dir, which no server may reach.
    let logs = tempfile::tempdir().unwrap();
    let mut stdio = stdio_fixture("local", &logs.path().join("local.jsonl"));
    stdio["env"] = json!({"MCP_FIXTURE_ECHO_REPEAT": "${secret:ECHO_REPEAT}"});
    let mut missing = stdio_fixture("later", &logs.path().join("later.jsonl"));
    missing["env"] = json!({"MCP_FIXTURE_ECHO_REPEAT": "${secret:LATER_REPEAT}"});
    let remote = json!({
        "name": "remote",
        "url": web_url,
        "headers": {"Authorization": "Bearer ${env:UPSTREAM_TOKEN}"},
    });
    let mut config = config_with(vec![stdio, remote, missing]);
    config["upstream"] = json!({"reconnect_initial_ms": 100, "reconnect_max_ms": 300});
    let mut proxy = Proxy::builder(&config)
        .data_dir(data_dir)
        .env(&[
            ("MCPPROXY_CREDENTIALS", Path::new("file")),
            ("UPSTREAM_TOKEN", Path::new(TOKEN)),
        ])
        .start();
    let dir = proxy.data_dir.path().to_owned();

    // The secret reached the child's environment; the header reached the HTTP server.
    wait_for_state(&dir, "local", "ready");
    let echoed = cli(
        &dir,
        &[
            "call",
            "tool-read",
            "local:echo",
            "-j",
            r#"{"text": "ab"}"#,
            "-o",
            "json",
        ],
    );
    echoed.assert_code(0);
    assert!(echoed.stdout().contains("ababab"), "{}", echoed.stdout());
    wait_for_state(&dir, "remote", "ready");
    let called = cli(
        &dir,
        &[
            "call",
            "tool-read",
            "remote:echo",
            "-j",
            r#"{"text": "hi"}"#,
            "-o",
            "json",
        ],
    );
    called.assert_code(0);
    assert!(called.stdout().contains("hi"), "{}", called.stdout());

    // The server whose secret is missing is in error, naming the reference and the fix.
    let later = wait_for_state(&dir, "later", "error");
    let detail = later["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("env 'MCP_FIXTURE_ECHO_REPEAT'")
            && detail.contains("no secret named 'LATER_REPEAT' is stored")
            && detail.contains("mcpproxy secret set LATER_REPEAT"),
        "{later}"
    );
    // Set now, it comes up on its next attempt, without a restart.
    secret_set(&dir, "LATER_REPEAT", "2").assert_code(0);
    wait_for_state(&dir, "later", "ready");
    let twice = cli(
        &dir,
        &[
            "call",
            "tool-read",
            "later:echo",
            "-j",
            r#"{"text": "xy"}"#,
            "-o",
            "json",
        ],
    );
    assert!(twice.stdout().contains("xyxy"), "{}", twice.stdout());

    // The config keeps the references; no value is anywhere it could be shown.
    let written = std::fs::read_to_string(dir.join("mcp_config.json")).unwrap();
    assert!(written.contains("${env:UPSTREAM_TOKEN}"), "{written}");
    assert!(!written.contains(TOKEN));
    let secrets = cli(&dir, &["secret", "list"]);
    assert!(
        secrets.stdout().contains("LATER_REPEAT"),
        "{}",
        secrets.stdout()
    );
    assert!(!secrets.stdout().contains(TOKEN));
    let _ = statuses(&dir);
    proxy.stop();
    let _ = web.kill();
    let _ = web.wait();
    let log_lines: Vec<String> = proxy.proc.stderr_lines.try_iter().collect();
    assert!(
        log_lines.iter().all(|l| !l.contains(TOKEN)),
        "the token is in the log: {log_lines:?}"
    );
}

#[test]
fn a_malformed_reference_is_refused_naming_the_key_and_the_fix() {
    for (value, expected) in [
        ("${secret:}", "names nothing"),
        ("Bearer ${vault:TOKEN}", "unknown scheme 'vault'"),
        ("${TOKEN}", "write ${env:TOKEN}"),
        ("${secret:a/b}", "not a valid secret name"),
    ] {
        let text = json!({"mcpServers": [{
            "name": "remote", "url": "http://127.0.0.1:9/mcp",
            "headers": {"Authorization": value},
        }]})
        .to_string();
        let error = mcpproxy_config::Config::from_json(&text, "c.json")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("mcpServers[0].headers.Authorization"),
            "{error}"
        );
        assert!(error.contains(expected), "{value}: {error}");
    }
    let text = json!({"mcpServers": [{
        "name": "remote", "url": "http://${env:HOST}/mcp",
    }]})
    .to_string();
    let error = mcpproxy_config::Config::from_json(&text, "c.json")
        .unwrap_err()
        .to_string();
    assert!(error.contains("outside its query"), "{error}");
}

#[cfg(target_os = "linux")]
#[test]
fn a_forced_keyring_that_does_not_answer_is_an_error_saying_how_to_fix_it() {
    let data_dir = tempfile::tempdir().unwrap();
    // No session bus: no D-Bus address, and a runtime dir without a bus socket.
    let runtime = tempfile::tempdir().unwrap();
    let forced = TestCommand::new(data_dir.path())
        .env("MCPPROXY_CREDENTIALS", "keyring")
        .env("DBUS_SESSION_BUS_ADDRESS", "")
        .env("XDG_RUNTIME_DIR", &runtime.path().display().to_string())
        .args(["secret", "list"])
        .output();
    forced.assert_code(2);
    assert!(
        forced.stderr().contains("no OS keyring answers")
            && forced.stderr().contains("MCPPROXY_CREDENTIALS=file"),
        "{}",
        forced.stderr()
    );
    let unknown = TestCommand::new(data_dir.path())
        .env("MCPPROXY_CREDENTIALS", "vault")
        .args(["secret", "list"])
        .output();
    unknown.assert_code(2);
    assert!(unknown.stderr().contains("set it to `file` or `keyring`"));
    // Unset, the file is used quietly.
    let quiet = TestCommand::new(data_dir.path())
        .env("DBUS_SESSION_BUS_ADDRESS", "")
        .env("XDG_RUNTIME_DIR", &runtime.path().display().to_string())
        .args(["secret", "list"])
        .output();
    quiet.assert_code(0);
    assert!(
        quiet.stdout().contains("backend: file: "),
        "{}",
        quiet.stdout()
    );
}
