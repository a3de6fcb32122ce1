//! An upstream's tool list is kept between calls: through mcpproxy, 500 calls to a server of
//! the official Python SDK 2.3 (`tests/python/counting_http_server.py`, MCP 2026-07-28 over
//! streamable HTTP, so sessions begin with `server/discover` and carry no session id) cost
//! the server 500 `tools/call` and at most 1% more requests, `tools/list` included; the
//! listing of the session's start is not read again before each call. The server counts
//! the JSON-RPC requests as they arrive on the wire, before its SDK sees them (a low-level
//! `Server` of the SDK runs its own `tools/list` handler once per `tools/call` with
//! arguments, to check the call's `Mcp-Param-*` headers, unless it is given
//! `get_tool_input_schema`: those runs are no requests, and a count of them is not a count of
//! what mcpproxy sent).
//!
//! Three replicas of the server behind HAProxy, round robin, each request to the next
//! replica (the replicas share nothing), the list results carrying the SDK's default hints
//! (`ttlMs: 0`, `cacheScope: "private"`); and one replica whose lists say they stay fresh
//! (`ttlMs`, `"public"`). And the list is kept only until the server says it changed: a
//! tool added upstream is found through mcpproxy at once.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::support::haproxy::{Backend, HaProxy};
use crate::support::mcp::{Proc, Proxy, call, config_with, connect, is_error, pipe_lines, text};

/// The calls each test makes through mcpproxy.
const CALLS: u64 = 500;
/// How long a replica may take to listen: a bound against a hang.
const START_WITHIN: Duration = Duration::from_secs(60);

/// Requests a replica received, by JSON-RPC method.
type Counts = BTreeMap<String, u64>;

/// One replica of the counting server, killed when dropped.
struct Replica {
    _proc: Proc,
    port: u16,
}

impl Replica {
    /// Starts the counting server with `args`, and waits until it listens.
    fn start(python: &Path, args: &[&str]) -> Self {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/counting_http_server.py");
        let mut child = Command::new(python)
            .arg(script)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start counting_http_server.py");
        let stdout = child.stdout.take().expect("stdout");
        let proc = Proc {
            child,
            stderr_lines: pipe_lines(stdout),
        };
        let line = proc.wait_for_line(START_WITHIN, |l| l.starts_with("listening "));
        let port = line
            .trim_start_matches("listening ")
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("the replica's port in {line:?}: {e}"));
        Self { _proc: proc, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The requests it received so far.
    async fn counts(&self) -> Counts {
        reqwest::Client::new()
            .get(format!("http://127.0.0.1:{}/counts", self.port))
            .send()
            .await
            .expect("GET /counts")
            .json()
            .await
            .expect("the counts as JSON")
    }
}

/// The requests every replica received so far, by method, summed.
async fn total(replicas: &[Replica]) -> Counts {
    let mut total = Counts::new();
    for replica in replicas {
        for (method, n) in replica.counts().await {
            *total.entry(method).or_default() += n;
        }
    }
    total
}

/// What `after` holds beyond `before`.
fn since(before: &Counts, after: &Counts) -> Counts {
    after
        .iter()
        .map(|(method, n)| {
            let earlier = before.get(method).copied().unwrap_or_default();
            (method.clone(), n.saturating_sub(earlier))
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Makes [`CALLS`] calls of `py:echo` through mcpproxy (the server `py` at `url`) and
/// returns the requests `replicas` received during them, checking that every call was
/// answered by the server with its own text.
async fn calls_through_mcpproxy(url: &str, replicas: &[Replica]) -> Counts {
    let config = config_with(vec![json!({"name": "py", "url": url})]);
    let mut proxy = Proxy::builder(&config).start();
    let client = connect(&proxy.url).await;
    let before = total(replicas).await;
    assert!(
        before.get("tools/list").copied().unwrap_or_default() >= 1,
        "mcpproxy is ready, so it has listed the server's tools: {before:?}"
    );
    for i in 0..CALLS {
        let sent = format!("call {i}");
        let result = call(
            &client,
            "call_tool_read",
            json!({"name": "py:echo", "args": {"text": sent}}),
        )
        .await
        .unwrap_or_else(|e| panic!("call {i}: {e}"));
        assert!(!is_error(&result), "call {i}: {}", text(&result));
        assert!(text(&result).contains(&sent), "call {i}: {}", text(&result));
    }
    let during = since(&before, &total(replicas).await);
    client.cancel().await.expect("close the client session");
    proxy.stop();
    during
}

/// Checks what the server received during [`CALLS`] calls: each call once, and at most 1%
/// more requests in all (a `tools/list` before each call would double them).
fn assert_lists_kept(during: &Counts) {
    eprintln!("requests during {CALLS} calls: {during:?}");
    let calls = during.get("tools/call").copied().unwrap_or_default();
    let lists = during.get("tools/list").copied().unwrap_or_default();
    let requests: u64 = during.values().sum();
    assert_eq!(
        calls, CALLS,
        "each call reaches the server once: {during:?}"
    );
    assert!(
        lists * 100 <= CALLS,
        "{lists} tools/list for {CALLS} calls (at most 1 per 100 calls): {during:?}"
    );
    assert!(
        requests * 100 <= CALLS * 101,
        "{requests} requests for {CALLS} calls (at most 1.01 per call): {during:?}"
    );
}

/// The deployment: three replicas behind a balancer that sends each request to
/// the next one, lists marked immediately stale (the SDK's default).
#[tokio::test(flavor = "multi_thread")]
async fn three_replicas_behind_haproxy_get_no_list_per_call() {
    let Some(python) = crate::support::test_python() else {
        return;
    };
    let replicas: Vec<Replica> = (0..3).map(|_| Replica::start(&python, &[])).collect();
    let backends: Vec<Backend> = replicas
        .iter()
        .enumerate()
        .map(|(i, r)| Backend {
            name: format!("py{i}"),
            addr: ([127, 0, 0, 1], r.port).into(),
        })
        .collect();
    let Some(balancer) = HaProxy::start(&backends) else {
        return;
    };
    let before: Vec<Counts> = each_replica_counts(&replicas).await;
    let during = calls_through_mcpproxy(&balancer.mcp_url(), &replicas).await;
    assert_lists_kept(&during);
    // The balancer spread the calls: every replica answered some.
    let after = each_replica_counts(&replicas).await;
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        let calls = since(b, a).get("tools/call").copied().unwrap_or_default();
        assert!(calls > 0, "replica {i} answered no call: {after:?}");
    }
}

/// One replica whose lists say they stay fresh for five minutes, for everyone.
#[tokio::test(flavor = "multi_thread")]
async fn a_list_marked_fresh_is_not_read_again_before_each_call() {
    let Some(python) = crate::support::test_python() else {
        return;
    };
    let replica = Replica::start(&python, &["300000"]);
    let url = replica.url();
    let replicas = [replica];
    let during = calls_through_mcpproxy(&url, &replicas).await;
    assert_lists_kept(&during);
}

/// Each replica's counts so far, in order.
async fn each_replica_counts(replicas: &[Replica]) -> Vec<Counts> {
    let mut all = Vec::with_capacity(replicas.len());
    for replica in replicas {
        all.push(replica.counts().await);
    }
    all
}

/// Whether `retrieve_tools` through `client` finds `tool`.
async fn found(client: &crate::support::mcp::Client, tool: &str) -> Result<(), String> {
    let answer = call(client, "retrieve_tools", json!({"query": tool, "limit": 5}))
        .await
        .map_err(|e| format!("retrieve_tools: {e}"))?;
    let listed = text(&answer);
    if listed.contains(&format!("py:{tool}")) {
        Ok(())
    } else {
        Err(listed)
    }
}

/// The list is kept only until the server says it changed: a tool added on a 2026-07-28
/// server, which announces the change only on the `subscriptions/listen` streams open to it,
/// is searchable through mcpproxy at once, not at the next sweep (here a day away).
#[tokio::test(flavor = "multi_thread")]
async fn a_tool_added_upstream_is_found_at_once() {
    let Some(python) = crate::support::test_python() else {
        return;
    };
    let replica = Replica::start(&python, &[]);
    let mut config = config_with(vec![json!({
        "name": "py", "url": replica.url(), "auto_approve_tool_changes": true,
    })]);
    config["upstream"] = json!({"tools_refresh_secs": 86400});
    let mut proxy = Proxy::builder(&config).start();
    let client = connect(&proxy.url).await;
    assert!(found(&client, "zebra_stripes").await.is_err());
    let added = call(
        &client,
        "call_tool_write",
        json!({"name": "py:add_tool", "args": {"name": "zebra_stripes"}}),
    )
    .await
    .expect("add_tool");
    assert!(!is_error(&added), "{}", text(&added));
    crate::support::poll::until(
        "the added tool found through mcpproxy",
        Duration::from_secs(30),
        || found(&client, "zebra_stripes"),
    )
    .await;
    client.cancel().await.expect("close the client session");
    proxy.stop();
}
