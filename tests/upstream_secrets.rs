//! Secrets stay hidden everywhere: an upstream's URL with user info and a `?token=` query,
//! and a stdio server started with tokens among its arguments, never show their secrets in
//! `mcpproxy upstream list`, `GET /api/v1/upstreams`, `GET /api/v1/status`, the
//! `upstream_servers list` tool or the serve log. Files mcpproxy creates in its data dir are
//! 0600, and the directories it creates 0700, under umask 0 and in a 0755 directory.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::TestCommand;
use crate::support::mcp::{
    Proc, Proxy, call, config_with, connect, copy_cwasm, fixture_bin, is_error,
    shared_compile_cache, start_http_fixture, stdio_fixture, text,
};

/// A GitHub token (36 characters after the prefix) and an OpenAI-style key.
const GITHUB_TOKEN: &str = "ghp_Q7w2E9r4T1y6U3i8O5p0A2s7D4f9G1h6J3k8";
const LIVE_KEY: &str = "sk-live-9f8E7d6C5b4A3f2E1d0C9b8A7f6E5d4C";
/// What the HTTP upstreams' URLs hide.
const LIVE_USER: &str = "aliceuser7";
const LIVE_PASSWORD: &str = "livepass-8c1f";
const LIVE_QUERY: &str = "QUERYSECRET42";
const DEAD_USER: &str = "bobuser9";
const DEAD_PASSWORD: &str = "deadpass-3e7a";
const DEAD_QUERY: &str = "DEADSECRET99";

const SECRETS: [&str; 8] = [
    GITHUB_TOKEN,
    LIVE_KEY,
    LIVE_USER,
    LIVE_PASSWORD,
    LIVE_QUERY,
    DEAD_USER,
    DEAD_PASSWORD,
    DEAD_QUERY,
];

/// Each place that shows `secret`: `(place, secret)` for every secret each shown text holds.
fn leaks(shown: &[(String, String)]) -> Vec<(String, &'static str)> {
    let mut found = Vec::new();
    for (place, text) in shown {
        for secret in SECRETS {
            if text.contains(secret) {
                found.push((place.clone(), secret));
            }
        }
    }
    found
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

async fn get(url: &str, key: &str) -> String {
    reqwest::Client::new()
        .get(url)
        .header("X-API-Key", key)
        .send()
        .await
        .expect("GET")
        .text()
        .await
        .expect("body")
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_in_urls_and_arguments_stay_out_of_the_cli_rest_mcp_and_log() {
    let call_log = tempfile::NamedTempFile::new().unwrap();
    let (_live, fixture_url) = start_http_fixture("127.0.0.1:0", call_log.path());
    let live_url = fixture_url.replacen(
        "http://",
        &format!("http://{LIVE_USER}:{LIVE_PASSWORD}@"),
        1,
    ) + &format!("?token={LIVE_QUERY}");
    let dead_port = closed_port();
    let dead_url =
        format!("http://{DEAD_USER}:{DEAD_PASSWORD}@127.0.0.1:{dead_port}/mcp?token={DEAD_QUERY}");
    // The fixture started through `sh`, so the tokens are real arguments of a real server.
    let stdio = json!({
        "name": "tokens",
        "command": "sh",
        "args": ["-c", "exec \"$0\"", fixture_bin(), "--token", GITHUB_TOKEN, LIVE_KEY],
    });
    let mut config = config_with(vec![
        json!({"name": "live", "url": live_url}),
        json!({"name": "dead", "url": dead_url}),
        stdio,
    ]);
    // The dead server stays in its error (which names the masked URL) for the whole test:
    // read while a retry runs, its state would be "connecting", with no URL.
    config["upstream"] = json!({"reconnect_initial_ms": 30_000});
    let proxy = Proxy::builder(&config).start();
    let config_path = proxy.data_dir.path().join("mcp_config.json");

    // Everything each place shows, checked together at the end (a failure names every leak).
    let mut shown: Vec<(String, String)> = Vec::new();

    // The CLI, as a table and as JSON.
    for format in ["table", "json"] {
        let out = TestCommand::new(proxy.data_dir.path())
            .args(["upstream", "list", "-o", format, "--config"])
            .args([&config_path])
            .output();
        out.assert_code(0);
        shown.push((
            format!("`upstream list -o {format}`"),
            out.stdout() + &out.stderr(),
        ));
    }

    // REST.
    let key = proxy.api_key();
    for path in ["/api/v1/upstreams", "/api/v1/status"] {
        let body = get(&format!("{}{path}", proxy.base()), &key).await;
        shown.push((format!("GET {path}"), body));
    }

    // The upstream_servers tool.
    let client = connect(&proxy.url).await;
    let result = call(&client, "upstream_servers", json!({"operation": "list"}))
        .await
        .unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    let servers = text(&result);
    shown.push(("the upstream_servers list tool".into(), servers.clone()));
    client.cancel().await.unwrap();

    // The serve log, from its first line.
    let log = proxy.stderr().join("\n");
    assert!(log.contains("cannot connect to upstream"), "{log}");
    shown.push(("the serve log".into(), log));

    let found = leaks(&shown);
    assert!(
        found.is_empty(),
        "secrets shown: {found:?}\n\n{}",
        shown
            .iter()
            .map(|(place, text)| format!("--- {place}\n{text}"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // What is shown instead: the masked forms.
    let dead = format!("127.0.0.1:{dead_port}/mcp?token=***");
    for (place, text) in &shown[1..4] {
        assert!(
            text.contains(&dead),
            "{place} names the dead server's URL, masked: {text}"
        );
    }
    let servers: Value = serde_json::from_str(&servers).unwrap();
    let by_name = |name: &str| {
        servers["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name} listed: {servers}"))
            .clone()
    };
    assert_eq!(
        by_name("tokens")["args"],
        json!(["-c", "exec \"$0\"", fixture_bin(), "--token", "***", "***"])
    );
    assert_eq!(
        by_name("live")["url"],
        json!(fixture_url.replacen("http://", "http://***@", 1) + "?token=***")
    );
    assert_eq!(by_name("dead")["url"], json!(format!("http://***@{dead}")));
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// `mcpproxy ARGS` under umask 0 (so a mode left to the default shows as 0666 or 0777).
fn under_umask_zero(data_dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpproxy"));
    cmd.env("MCPPROXY_DATA_DIR", data_dir)
        .env("HOME", data_dir)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1");
    // SAFETY: umask(2) is async-signal-safe; it only sets the child's creation mask.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    }
    cmd
}

#[tokio::test(flavor = "multi_thread")]
async fn data_dir_files_are_private_whatever_the_umask_or_the_parent() {
    // A data dir mcpproxy makes: 0700, like the directories in it; the files in it 0600.
    let parent = tempfile::tempdir().unwrap();
    std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let fresh = parent.path().join("new/data");
    // Compiling a plugin makes the data dir, its cache directories and a compiled file.
    let out = under_umask_zero(&fresh)
        .args(["plugins", "check"])
        .arg(crate::support::artifact("allow_all"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = under_umask_zero(&fresh).arg("api-key").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    for made in [
        "new",
        "new/data",
        "new/data/cache",
        "new/data/cache/plugins",
    ] {
        assert_eq!(mode(&parent.path().join(made)), 0o700, "{made}");
    }
    let compiled: Vec<_> = std::fs::read_dir(fresh.join("cache/plugins"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(!compiled.is_empty(), "a compiled plugin in the cache");
    for file in compiled.iter().chain([&fresh.join("api_key")]) {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }

    // A data dir the user made 0755, with files an older release left open to others.
    let data_dir = tempfile::tempdir().unwrap();
    let dir = data_dir.path();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    copy_cwasm(&shared_compile_cache(), &dir.join("cache/plugins"));
    std::fs::write(dir.join("activity.redb"), b"").unwrap();
    std::fs::write(dir.join("api_key"), format!("{}\n", "a".repeat(64))).unwrap();
    std::fs::write(dir.join("trust.json.tmp"), b"stale").unwrap();
    for wide in ["activity.redb", "api_key", "trust.json.tmp"] {
        std::fs::set_permissions(dir.join(wide), std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    let call_log = tempfile::NamedTempFile::new().unwrap();
    let config = dir.join("mcp_config.json");
    std::fs::write(
        &config,
        config_with(vec![stdio_fixture("fx", call_log.path())]).to_string(),
    )
    .unwrap();
    let mut child = under_umask_zero(dir)
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .env("RUST_LOG", "info,rmcp=warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let log = std::sync::Arc::<std::sync::Mutex<Vec<String>>>::default();
    let mut proc = Proc {
        child,
        stderr_lines: crate::support::mcp::pipe_lines_kept(stderr, std::sync::Arc::clone(&log)),
    };
    let url = crate::support::mcp::listening_url(&proc);
    crate::support::mcp::until_answering(&mut proc, &url, true, &log);
    // Approving writes trust.json (in the server, under its umask 0).
    let approved = TestCommand::new(dir)
        .args(["upstream", "approve", "fx", "--config"])
        .args([&config])
        .output();
    approved.assert_code(0);
    for file in [
        "activity.redb",
        "activity.redb-wal",
        "api_key",
        "trust.json",
        "mcpproxy.sock",
    ] {
        assert_eq!(mode(&dir.join(file)), 0o600, "{file}");
    }
    assert_eq!(mode(dir), 0o755, "an existing data dir is left as it is");
    drop(proc);
}
