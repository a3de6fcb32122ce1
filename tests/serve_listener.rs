//! End-to-end: the HTTP listener as an attacker who can reach it finds it. A non-loopback
//! listen needs a bearer token; `/mcp` checks it; sessions are bounded per client address
//! (idle ones closed to make room) and memory stays bounded under a session flood; 1,100
//! idle sockets do not take the listener away; malformed requests get JSON-RPC errors,
//! oversized ones 413.

use std::net::TcpStream;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::support::TestCommand;
use crate::support::mcp::{Proxy, call, connect, is_error};

const TOKEN: &str = "a-test-token-0123456789abcdef";

fn initialize_body() -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "flood", "version": "1"}
        }
    })
}

fn post(
    client: &reqwest::Client,
    url: &str,
    body: impl Into<reqwest::Body>,
) -> reqwest::RequestBuilder {
    client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body)
}

/// The proxy's resident memory in KiB, from /proc.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

#[test]
fn a_non_loopback_listen_is_refused_without_a_bearer_token() {
    let dir = tempfile::tempdir().unwrap();
    let out = TestCommand::new(dir.path())
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output();
    assert_eq!(out.code(), Some(2), "{}", out.stderr());
    let stderr = out.stderr();
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0"),
        "{stderr}"
    );
    assert!(stderr.contains("http.auth_token"), "{stderr}");
    assert!(stderr.contains("MCPPROXY_AUTH_TOKEN"), "{stderr}");

    let out = TestCommand::new(dir.path())
        .env("MCPPROXY_AUTH_TOKEN", "short")
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output();
    assert_eq!(out.code(), Some(2));
    assert!(
        out.stderr().contains("at least 16 characters"),
        "{}",
        out.stderr()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_wants_the_bearer_token_when_one_is_set() {
    let proxy = Proxy::builder(&json!({"http": {"auth_token": TOKEN}})).start();
    let http = reqwest::Client::new();

    let response = post(&http, &proxy.url, initialize_body().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert!(response.headers().contains_key("www-authenticate"));
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("Authorization: Bearer")
    );

    let response = post(&http, &proxy.url, initialize_body().to_string())
        .bearer_auth("a-wrong-token-0123456789abcdef")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert!(response.text().await.unwrap().contains("wrong"));

    // A client that sends it works as before.
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(proxy.url.clone()).auth_header(TOKEN),
    );
    let client = ().serve(transport).await.expect("connect with the token");
    let result = call(&client, "retrieve_tools", json!({"query": "anything"}))
        .await
        .unwrap();
    assert!(!is_error(&result));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_flood_keeps_the_bound_by_closing_idle_sessions_and_memory_stays_bounded() {
    let proxy =
        Proxy::builder(&json!({"http": {"max_sessions": 200, "max_sessions_per_client": 100}}))
            .start();
    let pid = proxy.proc.child.id();
    let http = reqwest::Client::new();
    let body = initialize_body().to_string();
    let before = rss_kib(pid);

    // Every initialize is served: past the bound, the client's idle session unused the
    // longest is closed to make room.
    let mut opened = Vec::new();
    for _ in 0..5000 {
        let response = post(&http, &proxy.url, body.clone()).send().await.unwrap();
        assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
        opened.push(
            response.headers()["mcp-session-id"]
                .to_str()
                .unwrap()
                .to_owned(),
        );
        response.bytes().await.unwrap();
    }
    let after = rss_kib(pid);
    // 5,000 open sessions took ~300 MB before the bound; 100 take a few.
    assert!(
        after < before + 100 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string();
    let status = |id: String| {
        let request = post(&http, &proxy.url, ping.clone()).header("mcp-session-id", id);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    // The oldest were closed; the newest 100 are open.
    assert_eq!(status(opened[0].clone()).await, 404);
    assert_eq!(status(opened[4899].clone()).await, 404);
    assert_eq!(status(opened[4900].clone()).await, 200);
    assert_eq!(status(opened[4999].clone()).await, 200);

    // Closing a session frees its slot as before.
    let response = http
        .delete(&proxy.url)
        .header("mcp-session-id", &opened[4999])
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let client = connect(&proxy.url).await;
    let result = call(&client, "retrieve_tools", json!({"query": "x"}))
        .await
        .unwrap();
    assert!(!is_error(&result));
    client.cancel().await.unwrap();
}

/// Lets this process hold more sockets than the usual soft limit of 1,024.
fn raise_own_fd_limit(wanted: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain libc calls on a struct we own.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        if limit.rlim_cur < wanted && limit.rlim_max >= wanted {
            limit.rlim_cur = wanted;
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_listener_answers_while_1100_idle_sockets_are_open() {
    raise_own_fd_limit(4096);
    // Idle sockets are given two minutes to send their headers, so none is closed for
    // idling while the test runs, however slowly a loaded machine opens them.
    let proxy = Proxy::builder(&json!({"http": {"header_timeout_ms": 120_000}})).start();
    let addr = proxy
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let pid = proxy.proc.child.id();
    let port: u16 = addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("the proxy's port");
    let opening = std::time::Instant::now();
    let idle: Vec<TcpStream> = (0..1100)
        .map(|_| TcpStream::connect(&addr).expect("open an idle socket"))
        .collect();
    let opened_in = opening.elapsed();
    // They are accepted (the proxy holds them) but send nothing. Counted exactly: the
    // proxy's sockets that are connections to its listening port (a count of all its open
    // files would also count a file it happens to have open for a moment).
    crate::support::poll::until(
        "the proxy accepts the idle sockets",
        Duration::from_secs(60),
        || async {
            let accepted = accepted_connections(pid, port);
            if accepted >= 1100 {
                Ok(())
            } else {
                Err(format!(
                    "{accepted} connections accepted; the 1,100 sockets opened in {opened_in:?}"
                ))
            }
        },
    )
    .await;

    let client = connect(&proxy.url).await;
    let result = call(&client, "retrieve_tools", json!({"query": "x"}))
        .await
        .unwrap();
    assert!(!is_error(&result));
    client.cancel().await.unwrap();
    drop(idle);
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_and_oversized_requests_get_errors_that_say_what_is_wrong() {
    let proxy = Proxy::builder(&json!({})).start();
    let http = reqwest::Client::new();

    let response = post(&http, &proxy.url, "{oops").send().await.unwrap();
    assert_eq!(response.status(), 400);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    assert_eq!(answer["id"], Value::Null);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );

    let response = post(&http, &proxy.url, r#"{"id": 7, "hello": "world"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(answer["id"], 7);

    let response = post(&http, &proxy.url, "[1, 2]").send().await.unwrap();
    let answer: Value = response.json().await.unwrap();
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("batches"),
        "{answer}"
    );

    let huge = format!("{{\"pad\": \"{}\"}}", "x".repeat(5 << 20));
    let response = post(&http, &proxy.url, huge).send().await.unwrap();
    assert_eq!(response.status(), 413);
    let answer: Value = response.json().await.unwrap();
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("4 MiB"),
        "{answer}"
    );

    // The REST API says 413 too for a body over its limit.
    let key = std::fs::read_to_string(proxy.data_dir.path().join("api_key")).unwrap();
    let api = proxy.url.trim_end_matches("/mcp").to_owned() + "/api/v1/tools/call";
    let body = json!({"name": "x:y", "variant": "read", "args": {"pad": "y".repeat(3 << 20)}});
    let response = http
        .post(&api)
        .header("x-api-key", key.trim())
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    let answer: Value = response.json().await.unwrap();
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("larger than 2 MiB"),
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn four_hundred_concurrent_calls_all_complete_or_get_the_overload_result() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut config = crate::support::mcp::config_with(vec![crate::support::mcp::stdio_fixture(
        "fx",
        log.path(),
    )]);
    // This test is about waiting for instance slots, not deadlines: 400 calls on 2 cores
    // can keep one instance off the CPU for longer than the default 50 ms.
    config["plugins"] = json!({"limits": {"timeout_ms": 10000}});
    let proxy = Proxy::builder(&config).start();
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(std::sync::Arc::new(connect(&proxy.url).await));
    }
    let mut calls = Vec::new();
    for i in 0..400 {
        let client = clients[i % clients.len()].clone();
        calls.push(tokio::spawn(async move {
            call(
                &client,
                "call_tool_read",
                json!({"name": "fx:echo", "args": {"text": format!("c{i}")}}),
            )
            .await
        }));
    }
    let mut completed = 0;
    for (i, handle) in calls.into_iter().enumerate() {
        let result = handle.await.unwrap().expect("every call is answered");
        let text = crate::support::mcp::text(&result);
        if is_error(&result) {
            assert!(text.contains("mcpproxy is overloaded"), "call {i}: {text}");
        } else {
            assert!(text.contains(&format!("c{i}")), "call {i}: {text}");
            completed += 1;
        }
    }
    // On any machine this test runs on, the 256 instance slots are enough once calls queue.
    assert_eq!(completed, 400);
    for client in clients {
        if let Ok(client) = std::sync::Arc::try_unwrap(client) {
            client.cancel().await.unwrap();
        }
    }
}

/// How many connections to `port` process `pid` has accepted: its sockets (`/proc/PID/fd`)
/// that are established TCP connections whose local port is `port` (`/proc/PID/net/tcp`).
fn accepted_connections(pid: u32, port: u16) -> usize {
    let inodes: std::collections::HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            let inode = target.strip_prefix("socket:[")?.strip_suffix(']')?;
            Some(inode.to_owned())
        })
        .collect();
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap_or_default();
    let local_port = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() > 9
                && fields[1].ends_with(&local_port)
                && fields[3] == "01"
                && inodes.contains(fields[9])
        })
        .count()
}
