//! End-to-end: the owner hand-off. A stdio owner (an IDE's `serve --stdio`) dies; the
//! front-ends beside it (an HTTP `serve` relaying to it, a second IDE's `serve --stdio`)
//! take the data dir over between them, and their clients keep working: the HTTP client
//! through a `404` for its old session (it initializes again, as MCP clients do), the IDE
//! without noticing (its bridge replays the handshake). Two relays racing for it leave
//! exactly one owner. `serve --stdio --server NAME` attaches to a running owner.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use crate::support::ide::{StdioSession, echo_text};
use crate::support::mcp::{
    Client, Proc, call, config_with, copy_cwasm, grant_fixture_files, pipe_lines,
    shared_compile_cache, stdio_fixture, text,
};
use crate::support::poll::{until_blocking, until_value};

/// The bound on the front-ends serving their clients again after the owner's death: reaching
/// it means the hand-off hangs, not that it is slow (how long it takes is printed, and
/// measured in docs/architecture.md; a test asserts no speed).
const HANDOFF_BOUND: Duration = Duration::from_secs(30);

/// A data dir with a config of one stdio fixture `fx`, and the compiled plugins in its cache.
struct Setup {
    _dir: tempfile::TempDir,
    config: PathBuf,
    data_dir: PathBuf,
    calls: PathBuf,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let calls = dir.path().join("calls.log");
        let config = dir.path().join("mcp_config.json");
        let servers = config_with(vec![stdio_fixture("fx", &calls)]);
        std::fs::write(&config, grant_fixture_files(&servers).to_string()).unwrap();
        let data_dir = dir.path().join("data");
        copy_cwasm(&shared_compile_cache(), &data_dir.join("cache/plugins"));
        Self {
            _dir: dir,
            config,
            data_dir,
            calls,
        }
    }

    /// `mcpproxy serve` on a free loopback port beside the owner: its URL once it listens.
    fn relay(&self) -> (Proc, String) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpproxy"))
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&self.config)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .env("HOME", &self.data_dir)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = pipe_lines(child.stderr.take().unwrap());
        let relay = Proc {
            child,
            stderr_lines: lines,
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
        (relay, url)
    }

    /// Running processes of the fixture upstream (its command line names the call log).
    fn upstream_processes(&self) -> usize {
        let needle = self.calls.to_string_lossy().into_owned();
        crate::support::command_lines()
            .iter()
            .filter(|(_, line)| line.contains(&needle) && !line.contains("mcpproxy serve"))
            .count()
    }
}

/// An MCP client of `url` (rmcp over streamable HTTP) that initializes again when the
/// server says its session is unknown (`404`).
async fn recovering_client(url: &str) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned())
        .reinit_on_expired_session(true);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("connect to mcpproxy")
}

async fn echo(client: &Client, text_in: &str) -> Result<String, String> {
    let args = json!({"text": text_in}).to_string();
    let result = call(
        client,
        "call_tool_read",
        json!({"name": "fx:echo", "args_json": args}),
    )
    .await?;
    Ok(text(&result))
}

/// A raw streamable-HTTP `initialize`: the session id the server gave.
async fn raw_initialize(http: &reqwest::Client, url: &str) -> String {
    let response = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "raw", "version": "1"}}}))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_front_ends_take_over_when_the_stdio_owner_dies() {
    let setup = Setup::new();
    let mut owner = StdioSession::start(&setup.config, &setup.data_dir);
    assert_eq!(echo_text(&owner.echo("owner")), "owner");
    let (mut relay, url) = setup.relay();
    let mut ide = StdioSession::start(&setup.config, &setup.data_dir);
    assert_eq!(echo_text(&ide.echo("ide before")), "ide before");

    // The HTTP client: initialize, tools/list and a call through the relay.
    let client = recovering_client(&url).await;
    let tools = client.peer().list_all_tools().await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "call_tool_read"),
        "{tools:?}"
    );
    assert_eq!(echo(&client, "http before").await.unwrap(), "http before");
    let http = reqwest::Client::new();
    let old_session = raw_initialize(&http, &url).await;
    let health = format!("{}/healthz", url.trim_end_matches("/mcp"));
    assert!(
        http.get(&health)
            .send()
            .await
            .unwrap()
            .status()
            .is_success()
    );

    owner.kill();
    let killed = Instant::now();
    let deadline = killed + HANDOFF_BOUND;

    // The second IDE goes on without a new handshake of its own.
    let left = || deadline.saturating_duration_since(Instant::now());
    // (A session over stdio, which blocks this thread while it waits for an answer.)
    let ide_answer = until_blocking("the second IDE is answered", left(), || {
        let answer = ide.echo("ide after");
        match answer.get("result") {
            Some(_) => Ok(answer),
            None => Err(answer.to_string()),
        }
    });
    assert_eq!(echo_text(&ide_answer), "ide after", "{ide_answer}");
    eprintln!(
        "the second IDE answered {:?} after the kill",
        killed.elapsed()
    );

    // The HTTP client: the page's health check, the same client's tools and calls.
    let (health_ok, listed, called) = until_value("the HTTP client is served", left(), || async {
        let health_ok = http
            .get(&health)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        let listed = client.peer().list_all_tools().await.map(|t| t.len());
        let called = echo(&client, "http after").await;
        if health_ok && listed.is_ok() && called.is_ok() {
            Ok((health_ok, listed, called))
        } else {
            Err(format!(
                "/healthz ok: {health_ok}, tools/list: {listed:?}, call: {called:?}"
            ))
        }
    })
    .await;
    assert!(health_ok, "/healthz does not answer after the hand-off");
    assert!(listed.is_ok_and(|n| n > 0), "tools/list after the hand-off");
    assert_eq!(called, Ok("http after".to_owned()));
    eprintln!(
        "the HTTP client was served {:?} after the kill",
        killed.elapsed()
    );

    // An old session is unknown to the new owner: 404, which makes a client initialize
    // again (the MCP spec's word for an expired session).
    let stale = http
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &old_session)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), reqwest::StatusCode::NOT_FOUND);

    // One owner took over: one upstream process serves both clients.
    assert_eq!(setup.upstream_processes(), 1);
    client.cancel().await.unwrap();
    drop(ide);
    relay.kill();
}

#[tokio::test(flavor = "multi_thread")]
async fn two_relays_racing_for_the_data_dir_leave_exactly_one_owner() {
    let setup = Setup::new();
    let mut owner = StdioSession::start(&setup.config, &setup.data_dir);
    assert_eq!(echo_text(&owner.echo("owner")), "owner");
    let (a, url_a) = setup.relay();
    let (b, url_b) = setup.relay();
    let (client_a, client_b) = (
        recovering_client(&url_a).await,
        recovering_client(&url_b).await,
    );
    assert_eq!(echo(&client_a, "a").await.unwrap(), "a");
    assert_eq!(echo(&client_b, "b").await.unwrap(), "b");

    owner.kill();
    let deadline = Instant::now() + Duration::from_secs(30);
    for (client, name) in [(&client_a, "a again"), (&client_b, "b again")] {
        let left = deadline.saturating_duration_since(Instant::now());
        let answer = until_value(&format!("{name} is answered"), left, || async {
            echo(client, name).await
        })
        .await;
        assert_eq!(answer, name);
    }
    // Exactly one of them says it took over, and one upstream process runs.
    let took_over = |relay: &Proc| {
        relay
            .stderr_lines
            .try_iter()
            .any(|l| l.contains("took the data dir over"))
    };
    let owners = [took_over(&a), took_over(&b)];
    assert_eq!(owners.iter().filter(|o| **o).count(), 1, "{owners:?}");
    assert_eq!(setup.upstream_processes(), 1);
    client_a.cancel().await.unwrap();
    client_b.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_stdio_server_attaches_to_a_running_owner() {
    let setup = Setup::new();
    let mut owner = StdioSession::start(&setup.config, &setup.data_dir);
    assert_eq!(echo_text(&owner.echo("owner")), "owner");

    // The direct endpoint: the upstream's own tool names, no proxy tools.
    let mut direct = StdioSession::start_with(&setup.config, &setup.data_dir, &["--server", "fx"]);
    let listed = direct.request("tools/list", json!({}));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"echo"), "{names:?}");
    assert!(!names.contains(&"call_tool_read"), "{names:?}");
    let answer = direct.request(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "direct"}}),
    );
    assert_eq!(echo_text(&answer), "direct");
    assert_eq!(setup.upstream_processes(), 1);

    // An unknown server is refused, naming the ones there are.
    let out = Command::new(env!("CARGO_BIN_EXE_mcpproxy"))
        .args(["serve", "--stdio", "--server", "nope", "--config"])
        .arg(&setup.config)
        .arg("--data-dir")
        .arg(&setup.data_dir)
        .env("HOME", &setup.data_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("no upstream server of that name") && stderr.contains("fx"),
        "{stderr}"
    );

    // The owner dies: the direct session goes on through the process that takes over.
    owner.kill();
    let answer = until_blocking(
        "the direct session is answered after the take-over",
        Duration::from_secs(30),
        || {
            let answer = direct.request(
                "tools/call",
                json!({"name": "echo", "arguments": {"text": "direct after"}}),
            );
            match answer.get("result") {
                Some(_) => Ok(answer),
                None => Err(format!("{answer}\n{}", direct.stderr())),
            }
        },
    );
    assert_eq!(echo_text(&answer), "direct after");
}
