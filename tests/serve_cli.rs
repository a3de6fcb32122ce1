//! `mcpproxy serve` as a user starts it: no config, a broken config, stdio mode, shutdown.

use std::process::{Command, Stdio};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::json;

use crate::support::TestCommand;
use crate::support::mcp::{call, config_with, is_error, stdio_fixture, text};
use crate::support::poll::{until_blocking, until_value};

#[test]
fn serve_with_no_config_file_uses_defaults_and_stops_cleanly_on_sigterm() {
    // HOME has no .mcpproxy: no config file at all.
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpproxy"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("HOME", home.path())
        .env_remove("MCPPROXY_CONFIG")
        .env_remove("MCPPROXY_DATA_DIR")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            mcpproxy_support::lock(&sink).push(line);
        }
    });
    // What it prints is under test: the summary on stderr, not /readyz, is waited for.
    until_blocking("the startup summary", Duration::from_secs(30), || {
        let lines = mcpproxy_support::lock(&lines);
        if lines
            .iter()
            .any(|l| l.starts_with("upstreams: none configured"))
        {
            Ok(())
        } else {
            Err(format!("{lines:?}"))
        }
    });
    assert!(
        mcpproxy_support::lock(&lines)
            .iter()
            .any(|l| l.starts_with("config: none"))
    );
    assert!(
        mcpproxy_support::lock(&lines)
            .iter()
            .any(|l| l.contains("validators: intent-matrix"))
    );
    // The compiled-plugin cache went to ~/.mcpproxy.
    assert!(home.path().join(".mcpproxy/cache/plugins").is_dir());

    let pid = child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let status = child.wait().unwrap();
    reader.join().unwrap();
    assert!(
        status.success(),
        "{status:?}: {:?}",
        mcpproxy_support::lock(&lines)
    );
}

#[test]
fn serve_refuses_a_broken_config_naming_the_file_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp_config.json");
    std::fs::write(
        &path,
        r#"{"mcpServers": [{"name": "a", "command": "x", "url": "http://h/mcp"}]}"#,
    )
    .unwrap();
    let out = TestCommand::new(dir.path())
        .args(["serve", "--config"])
        .args([&path])
        .output();
    out.assert_code(2);
    let stderr = out.stderr();
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert!(stderr.contains("mcpServers[0]"), "{stderr}");

    let missing = dir.path().join("nope.json");
    let out = TestCommand::new(dir.path())
        .args(["serve", "--config"])
        .args([&missing])
        .output();
    out.assert_code(2);
    assert!(
        out.stderr().contains(&missing.display().to_string()),
        "{}",
        out.stderr()
    );
}

#[test]
fn serve_refuses_a_plugin_list_naming_an_unknown_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp_config.json");
    std::fs::write(
        &path,
        r#"{"plugins": {"validators": ["intent-matrix", "no-such-plugin"]}}"#,
    )
    .unwrap();
    let out = TestCommand::new(dir.path())
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .args([&path])
        .output();
    out.assert_code(2);
    assert!(
        out.stderr().contains("plugins.validators names 'no-such-plugin', but no validator plugin of that name is loaded"),
        "{}",
        out.stderr()
    );
}

#[test]
fn serve_refuses_a_sink_with_no_granted_host_and_says_which_setting_to_add() {
    let dir = tempfile::tempdir().unwrap();
    let out = TestCommand::new(dir.path())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--sink",
            "clickhouse-sink",
        ])
        .output();
    out.assert_code(2);
    assert!(
        out.stderr().contains(
            "--sink clickhouse-sink: the sink 'clickhouse-sink' has no `url`, so it may reach no host: set plugins.settings.clickhouse-sink.url"
        ),
        "{}",
        out.stderr()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_over_stdio_for_ides_that_spawn_their_servers() {
    let dir = tempfile::tempdir().unwrap();
    // The call log is granted to the fixture's sandbox: it cannot be in the data dir.
    let log = tempfile::NamedTempFile::new().unwrap();
    let log = log.path();
    let config = dir.path().join("mcp_config.json");
    std::fs::write(
        &config,
        config_with(vec![stdio_fixture("fx", log)]).to_string(),
    )
    .unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpproxy"));
    cmd.arg("serve")
        .arg("--stdio")
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path())
        .env("RUST_LOG", "warn");
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let tools = client.peer().list_all_tools().await.unwrap();
    assert_eq!(
        tools.len(),
        5,
        "the four built-in tools and upstream_servers"
    );
    // The upstream connects in the background; wait for it (over stdio there is no
    // /readyz: a call that works is the sign).
    let answer = until_value("fx answers over stdio", Duration::from_secs(30), || async {
        let result = call(
            &client,
            "call_tool_read",
            json!({"name": "fx:echo", "args": {"text": "over stdio"}}),
        )
        .await
        .unwrap();
        if is_error(&result) {
            Err(text(&result))
        } else {
            Ok(text(&result))
        }
    })
    .await;
    assert_eq!(answer, "over stdio");
    client.cancel().await.unwrap();
}

#[test]
fn unreachable_http_upstreams_are_explained_in_plain_words() {
    use std::io::{Read, Write};
    // A port nothing listens on (bound, then closed).
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    // A plain HTTP server that is not an MCP server: 200, no content type, for anything.
    let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let plain_addr = plain.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut conn in plain.incoming().flatten() {
            let mut buf = [0u8; 8192];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("mcp_config.json");
    std::fs::write(
        &config,
        json!({"mcpServers": [
            {"name": "down", "url": format!("http://{closed}/mcp")},
            {"name": "notmcp", "url": format!("http://{plain_addr}/mcp")},
            {"name": "nottls", "url": format!("https://{plain_addr}/mcp")},
        ]})
        .to_string(),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpproxy"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(data.path())
        .env("HOME", data.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let proc = crate::support::mcp::Proc {
        child,
        stderr_lines: crate::support::mcp::pipe_lines(stderr),
    };
    let mut summary = Vec::new();
    for _ in 0..3 {
        summary.push(proc.wait_for_line(Duration::from_secs(60), |l| l.starts_with("upstream ")));
    }
    let line = |name: &str| {
        summary
            .iter()
            .find(|l| l.starts_with(&format!("upstream {name} ")))
            .cloned()
            .unwrap_or_default()
    };
    assert!(
        line("down").contains(&format!(
            "http://{closed}/mcp refused the connection; is the server running"
        )),
        "{summary:#?}"
    );
    assert!(
        line("notmcp").contains("answered, but not as an MCP server"),
        "{summary:#?}"
    );
    assert!(
        line("nottls").contains(&format!(
            "the TLS handshake with https://{plain_addr}/mcp failed"
        )),
        "{summary:#?}"
    );
    for l in &summary {
        assert!(!l.contains("rmcp::transport"), "no Rust type names: {l}");
    }
}

/// On a glibc that loads them (2.36+), the binary's relative relocations are packed
/// (`DT_RELR`, host/build.rs): ~25 KB the loader reads at start instead of ~1.9 MB. Where
/// this cannot be checked (no glibc, an older one, no readelf) the test says so and passes,
/// unless `MCPPROXY_REQUIRE_RELR` is set (as in CI): then that is a failure.
#[test]
fn the_binary_packs_its_relocations_where_glibc_loads_them() {
    let not_checked = |why: &str| {
        assert!(
            std::env::var_os("MCPPROXY_REQUIRE_RELR").is_none(),
            "MCPPROXY_REQUIRE_RELR is set, but the binary's relocations cannot be checked: {why}"
        );
        eprintln!("not checked: {why}");
    };
    let glibc = Command::new("getconf").arg("GNU_LIBC_VERSION").output();
    let Some(version) = glibc.ok().and_then(|o| String::from_utf8(o.stdout).ok()) else {
        return not_checked("not glibc (`getconf GNU_LIBC_VERSION` answers nothing)");
    };
    let Some((major, minor)) = version
        .trim()
        .strip_prefix("glibc ")
        .and_then(|v| v.split_once('.'))
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
    else {
        return not_checked(&format!("not a glibc version: {}", version.trim()));
    };
    if (major, minor) < (2, 36) {
        return not_checked(&format!("glibc {major}.{minor} does not load DT_RELR"));
    }
    let Ok(dynamic) = Command::new("readelf")
        .arg("--dynamic")
        .arg(env!("CARGO_BIN_EXE_mcpproxy"))
        .output()
    else {
        return not_checked("readelf is not installed");
    };
    let dynamic = String::from_utf8_lossy(&dynamic.stdout);
    assert!(
        dynamic.lines().any(|l| l.contains("(RELR)")),
        "no DT_RELR in the dynamic section:\n{dynamic}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn worker_threads_can_be_chosen_and_zero_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = TestCommand::new(dir.path())
        .args(["serve", "--listen", "127.0.0.1:0", "--worker-threads", "0"])
        .output();
    out.assert_code(2);
    assert!(
        out.stderr().contains("--worker-threads"),
        "{}",
        out.stderr()
    );

    let log = tempfile::NamedTempFile::new().unwrap();
    let config = config_with(vec![stdio_fixture("fx", log.path())]);
    let proxy = crate::support::mcp::Proxy::builder(&config)
        .args(&["--worker-threads", "3"])
        .start();
    let client = crate::support::mcp::connect(&proxy.url).await;
    let result = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args_json": r#"{"text":"three threads"}"#}),
    )
    .await
    .unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    assert!(text(&result).contains("three threads"), "{}", text(&result));
    client.cancel().await.unwrap();
}

/// The start-up reads in order: the banner, then the summary whole, then the log lines that
/// came meanwhile (here the first start's approval and the upstream becoming ready), which
/// used to come before the banner and between the summary's lines.
#[test]
fn the_start_up_prints_its_summary_whole_before_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let proxy =
        crate::support::mcp::Proxy::builder(&config_with(vec![stdio_fixture("fx", &log)])).start();
    let lines = until_blocking(
        "the summary and the held log lines",
        Duration::from_secs(60),
        || {
            let lines = proxy.stderr();
            let done = lines
                .iter()
                .any(|l| l.contains("first start on this data dir"))
                && lines.iter().any(|l| l.starts_with("upstream fx "));
            if done {
                Ok(lines)
            } else {
                Err(lines.join("\n"))
            }
        },
    );
    let position = |what: &str| {
        lines
            .iter()
            .position(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no line with {what:?}:\n{}", lines.join("\n")))
    };
    let banner = position("listening on http://");
    let summary_end = position("upstream fx ");
    let is_log = |l: &String| l.contains(" INFO ") && l.starts_with("20");
    assert!(
        !lines[..=summary_end].iter().any(is_log),
        "a log line before the summary's end:\n{}",
        lines.join("\n")
    );
    assert!(banner < summary_end && position("first start on this data dir") > summary_end);
}
