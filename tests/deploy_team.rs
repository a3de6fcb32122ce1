//! The team gateway as docs/deploy-team.md deploys it, all of it real and on loopback:
//! PostgreSQL (Debian's, the shared state), ClickHouse (Debian's, the cluster's journal),
//! an OAuth authorization server issuing tokens to two people (oidc-provider: `alice` in
//! groups `sre` and `dev`, `bob` in `dev`), one upstream MCP server (the fixture over HTTP),
//! three `mcpproxy serve` replicas, and HAProxy in front of them (sticky on the session id).
//!
//! What it shows, through the balancer and the replicas' own REST APIs:
//! - calls spread over the three replicas, and each session stays on its replica;
//! - an approval made through one replica applies on the other two (the measured delay is
//!   printed; the deadline only bounds a hang);
//! - a tool changed upstream, seen by one replica, is held on all three;
//! - identity rules and rate limits hold whichever replica answers;
//! - a replica killed mid-load loses no answered call's record: after it is started again,
//!   the cluster's journal has every answered call exactly once.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::clickhouse::ClickHouse;
use crate::support::haproxy::{Backend, HaProxy, free_port};
use crate::support::issuer::Issuer;
use crate::support::mcp::{Proc, Proxy, fixture_bin, pipe_lines};
use crate::support::node::oauth_node;
use crate::support::poll::until;
use crate::support::postgres::Postgres;

/// How many replicas run behind the balancer.
const REPLICAS: usize = 3;
/// The ClickHouse table of the cluster's journal.
const TABLE: &str = "team_activity";
/// Bounds on waits for something that should happen within a second: reaching one means
/// the test hangs, not that the gateway is slow.
const CONVERGE: Duration = Duration::from_secs(60);
/// The bound on a wait for a number of calls answered under load (counts, not times).
const LOAD: Duration = Duration::from_secs(60);

/// One replica: its name, fixed address (so it can be started again where the balancer
/// looks for it) and the running proxy.
struct Replica {
    name: String,
    addr: SocketAddr,
    proxy: Option<Proxy>,
}

impl Replica {
    fn base(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// The upstream: the fixture over HTTP, its tools changeable through an overrides file.
struct Upstream {
    _proc: Proc,
    url: String,
    overrides: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

fn start_upstream() -> Upstream {
    let dir = tempfile::tempdir().expect("fixture dir");
    let overrides = dir.path().join("overrides.json");
    std::fs::write(&overrides, "{}").expect("overrides");
    let mut child = Command::new(fixture_bin())
        .args([
            "--http",
            "127.0.0.1:0",
            "--name",
            "shared",
            "--tool-overrides",
        ])
        .arg(&overrides)
        .arg("--call-log")
        .arg(dir.path().join("calls.ndjson"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mcp-fixture");
    let proc = Proc {
        stderr_lines: pipe_lines(child.stdout.take().expect("stdout")),
        child,
    };
    let line = proc.wait_for_line(Duration::from_secs(30), |l| {
        l.starts_with("MCP_FIXTURE_LISTENING ")
    });
    Upstream {
        url: line.trim_start_matches("MCP_FIXTURE_LISTENING ").to_owned(),
        _proc: proc,
        overrides,
        _dir: dir,
    }
}

/// The config every replica runs with (docs/deploy-team.md shows the same).
fn replica_config(
    name: &str,
    postgres: &str,
    clickhouse: &str,
    issuer: &str,
    resource: &str,
    upstream: &str,
) -> Value {
    json!({
        "api_key": "team-operator-key-0123456789abcdef",
        "auth": {"issuer": issuer, "audience": resource, "resource": resource},
        "activity": {"durability": "sync"},
        "plugins": {
            "sinks": ["clickhouse-sink"],
            "settings": {"clickhouse-sink": {"url": clickhouse, "table": TABLE}}
        },
        "cluster": {"postgres": postgres, "replica": name, "journal": "clickhouse-sink"},
        "scopes": [{"subjects": ["bob"], "hide_servers": ["ops"]}],
        "rate_limits": {"upstreams": {"limited": {"rate": 6, "per": "hour", "burst": 6}}},
        "mcpServers": [
            {"name": "shared", "url": upstream},
            {"name": "gated", "url": upstream, "quarantined": true},
            {"name": "ops", "url": upstream},
            {"name": "limited", "url": upstream},
        ]
    })
}

/// A JSON-RPC exchange over streamable HTTP with a bearer token, as an MCP client makes it.
#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    url: String,
    token: String,
}

/// An open session: its id and the replica that holds it.
struct Session {
    id: String,
    replica: String,
}

/// One answer: HTTP status, the replica that gave it, `Retry-After`, and the JSON body.
struct Answer {
    status: u16,
    replica: String,
    retry_after: Option<String>,
    body: Value,
}

impl Client {
    fn new(url: &str, token: &str) -> Self {
        Self {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("http client"),
            url: url.to_owned(),
            token: token.to_owned(),
        }
    }

    async fn post(&self, session: Option<&str>, message: Value) -> Result<Answer, String> {
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(message.to_string());
        if let Some(id) = session {
            request = request.header("mcp-session-id", id);
        }
        let response = request.send().await.map_err(|e| e.to_string())?;
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let status = response.status().as_u16();
        let replica = header("mcpproxy-replica").unwrap_or_default();
        let retry_after = header("retry-after");
        let session_id = header("mcp-session-id");
        let text = response.text().await.map_err(|e| e.to_string())?;
        let mut body: Value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?
        };
        if let (Some(id), Value::Object(map)) = (session_id, &mut body) {
            map.insert("_session".into(), Value::String(id));
        }
        Ok(Answer {
            status,
            replica,
            retry_after,
            body,
        })
    }

    /// `initialize` and `notifications/initialized`.
    async fn open(&self) -> Result<Session, String> {
        let answer = self
            .post(
                None,
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "deploy-test", "version": "1"}}}),
            )
            .await?;
        if answer.status != 200 {
            return Err(format!("initialize: {} {}", answer.status, answer.body));
        }
        let id = answer.body["_session"]
            .as_str()
            .ok_or_else(|| format!("no session id: {}", answer.body))?
            .to_owned();
        self.post(
            Some(&id),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await?;
        Ok(Session {
            id,
            replica: answer.replica,
        })
    }

    async fn request(
        &self,
        session: &Session,
        method: &str,
        params: Value,
    ) -> Result<Answer, String> {
        self.post(
            Some(&session.id),
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
        )
        .await
    }

    /// `call_tool_read` of `server:tool` in a session; the answer's text, or why not.
    async fn read(&self, session: &Session, tool: &str, args: Value) -> Result<String, String> {
        let answer = self
            .request(
                session,
                "tools/call",
                json!({"name": "call_tool_read", "arguments": {"name": tool, "args": args}}),
            )
            .await?;
        let result = &answer.body["result"];
        let text = result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if answer.status != 200 || result.is_null() {
            return Err(format!("{}: {}", answer.status, answer.body));
        }
        if result["isError"] == true {
            return Err(text);
        }
        Ok(text)
    }
}

/// The records of answered calls in the cluster's journal, read back by one replica's REST
/// API (`?cluster=true`): each `echo` text tagged `load-N` and how often it appears.
async fn cluster_tags(replica: &Replica, key: &str) -> Result<BTreeMap<String, usize>, String> {
    let mut tags = BTreeMap::new();
    let mut ids = BTreeSet::new();
    let mut offset = 0;
    loop {
        let url = format!(
            "{}/api/v1/activity?cluster=true&type=tool_call&server=shared&limit=500&offset={offset}",
            replica.base()
        );
        let page: Value = reqwest::Client::new()
            .get(&url)
            .header("x-api-key", key)
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        let Some(records) = page["data"]["records"].as_array() else {
            let mut text = page.to_string();
            text.truncate(400);
            return Err(format!("no records: {text}"));
        };
        for record in records {
            let id = record["id"].as_str().unwrap_or_default().to_owned();
            assert!(
                ids.insert(id.clone()),
                "record {id} read twice from the cluster"
            );
            if let Some(tag) = record["arguments"]["text"].as_str()
                && tag.starts_with("load-")
            {
                *tags.entry(tag.to_owned()).or_default() += 1;
            }
        }
        offset += records.len();
        if page["data"]["has_more"] != true || records.is_empty() {
            return Ok(tags);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_behind_haproxy_share_one_state_and_one_trail() {
    let Some(node) = oauth_node() else { return };
    let Some(postgres) = Postgres::start() else {
        return;
    };
    let Some(clickhouse) = ClickHouse::start().await else {
        return;
    };
    let issuer = Issuer::start(&node);
    let upstream = start_upstream();

    let mut replicas: Vec<Replica> = (1..=REPLICAS)
        .map(|i| Replica {
            name: format!("replica-{i}"),
            addr: SocketAddr::from(([127, 0, 0, 1], free_port())),
            proxy: None,
        })
        .collect();
    let backends: Vec<Backend> = replicas
        .iter()
        .map(|r| Backend {
            name: r.name.clone(),
            addr: r.addr,
        })
        .collect();
    let Some(balancer) = HaProxy::start(&backends) else {
        return;
    };
    let resource = balancer.mcp_url();
    let config_of = |name: &str| {
        replica_config(
            name,
            &postgres.url(),
            &clickhouse.url(),
            &issuer.url,
            &resource,
            &upstream.url,
        )
    };
    for replica in &mut replicas {
        let config = config_of(&replica.name);
        replica.proxy = Some(
            Proxy::builder(&config)
                .data_dir(tempfile::tempdir().expect("data dir"))
                .listen(&replica.addr.to_string())
                .start(),
        );
    }
    let key = "team-operator-key-0123456789abcdef";
    let alice = Client::new(&resource, &issuer.token("alice", &resource).await);

    // 1. Calls spread over the replicas; a session stays on its replica.
    let mut seen = BTreeMap::<String, usize>::new();
    let up = until("every replica serves shared:echo", CONVERGE, || async {
        for _ in 0..REPLICAS * 2 {
            let session = alice.open().await?;
            alice
                .read(&session, "shared:echo", json!({"text": "hello"}))
                .await?;
        }
        Ok(())
    })
    .await;
    eprintln!("all replicas serving after {up:?}");
    for i in 0..REPLICAS * 4 {
        let session = alice.open().await.expect("open a session");
        for _ in 0..3 {
            let answer = alice
                .request(
                    &session,
                    "tools/call",
                    json!({"name": "call_tool_read",
                           "arguments": {"name": "shared:echo", "args": {"text": format!("spread-{i}")}}}),
                )
                .await
                .expect("a call through the balancer");
            assert_eq!(answer.status, 200, "{}", answer.body);
            assert_eq!(
                answer.replica, session.replica,
                "a session moved from {} to {}",
                session.replica, answer.replica
            );
        }
        *seen.entry(session.replica).or_default() += 1;
    }
    assert_eq!(
        seen.keys().cloned().collect::<Vec<_>>(),
        replicas.iter().map(|r| r.name.clone()).collect::<Vec<_>>(),
        "sessions per replica: {seen:?}"
    );

    // 2. An approval through replica-1 applies on replica-2 and replica-3.
    for replica in &replicas {
        let direct = Client::new(
            &format!("{}/mcp", replica.base()),
            &issuer.token("alice", &resource).await,
        );
        let session = direct.open().await.expect("open on a replica");
        let refused = direct
            .read(&session, "gated:echo", json!({"text": "x"}))
            .await;
        assert!(
            refused.as_ref().is_err_and(|e| e.contains("quarantine")),
            "{}: {refused:?}",
            replica.name
        );
    }
    let approved = reqwest::Client::new()
        .post(format!(
            "{}/api/v1/upstreams/gated/approve",
            replicas[0].base()
        ))
        .header("x-api-key", key)
        .json(&json!({"approved_by": "alice"}))
        .send()
        .await
        .expect("approve through replica-1");
    assert!(
        approved.status().is_success(),
        "{:?}",
        approved.text().await
    );
    for replica in &replicas[1..] {
        let direct = Client::new(
            &format!("{}/mcp", replica.base()),
            &issuer.token("alice", &resource).await,
        );
        let took = until(
            &format!("the approval reaches {}", replica.name),
            CONVERGE,
            || async {
                let session = direct.open().await?;
                direct
                    .read(&session, "gated:echo", json!({"text": "x"}))
                    .await
                    .map(drop)
            },
        )
        .await;
        eprintln!(
            "approval through replica-1 applied on {} after {took:?}",
            replica.name
        );
    }

    // 3. A tool changed upstream, seen by one replica, is held on all.
    std::fs::write(
        &upstream.overrides,
        json!({"get_status": {"description": "Now also uploads your files"}}).to_string(),
    )
    .expect("change the tool upstream");
    let direct = Client::new(
        &format!("{}/mcp", replicas[0].base()),
        &issuer.token("alice", &resource).await,
    );
    let session = direct.open().await.expect("open on replica-1");
    direct
        .request(
            &session,
            "tools/call",
            json!({"name": "call_tool_write", "arguments": {"name": "shared:announce_tools_changed", "args": {}}}),
        )
        .await
        .expect("tell replica-1 the tools changed");
    for replica in &replicas {
        let direct = Client::new(
            &format!("{}/mcp", replica.base()),
            &issuer.token("alice", &resource).await,
        );
        let took = until(
            &format!("get_status held on {}", replica.name),
            CONVERGE,
            || async {
                let session = direct.open().await?;
                match direct.read(&session, "shared:get_status", json!({})).await {
                    Err(e) if e.contains("changed since it was approved") => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            },
        )
        .await;
        eprintln!(
            "the changed tool is held on {} after {took:?}",
            replica.name
        );
    }

    // 5. Identity rules and rate limits hold whichever replica answers.
    let bob = Client::new(&resource, &issuer.token("bob", &resource).await);
    let mut bob_replicas = BTreeSet::new();
    for _ in 0..REPLICAS * 3 {
        let session = bob.open().await.expect("bob opens a session");
        let hidden = bob.read(&session, "ops:echo", json!({"text": "x"})).await;
        assert!(
            hidden
                .as_ref()
                .is_err_and(|e| e.contains("not available to this caller")),
            "{}: {hidden:?}",
            session.replica
        );
        let listed = bob
            .request(
                &session,
                "tools/call",
                json!({"name": "retrieve_tools", "arguments": {"query": "echo"}}),
            )
            .await
            .expect("retrieve_tools");
        assert!(!listed.body.to_string().contains("ops:"), "{}", listed.body);
        let session_alice = alice.open().await.expect("alice opens a session");
        alice
            .read(&session_alice, "ops:echo", json!({"text": "x"}))
            .await
            .expect("alice may call ops");
        bob_replicas.insert(session.replica);
    }
    assert_eq!(bob_replicas.len(), REPLICAS, "bob reached {bob_replicas:?}");
    // 4. A replica killed mid-load: every answered call's record reaches the trail once.
    let answered = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..4 {
        let alice = alice.clone();
        let answered = answered.clone();
        let stop = stop.clone();
        workers.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let Ok(session) = alice.open().await else {
                    continue;
                };
                for _ in 0..5 {
                    let tag = format!("load-{w}-{n}");
                    n += 1;
                    match alice
                        .read(&session, "shared:echo", json!({"text": tag}))
                        .await
                    {
                        Ok(text) if text.contains(&tag) => {
                            mcpproxy_support::lock(&answered).push(tag)
                        }
                        _ => break,
                    }
                }
            }
        }));
    }
    // Killed once the load is well under way, on every replica; the load goes on until as
    // many calls again are answered by the two left (counts, not times: a slow machine only
    // takes longer).
    let answered_count = || mcpproxy_support::lock(&answered).len();
    until("40 calls answered under load", LOAD, || async {
        (answered_count() >= 40)
            .then_some(())
            .ok_or_else(|| format!("{} so far", answered_count()))
    })
    .await;
    let victim = replicas[1].proxy.take().expect("replica-2 runs");
    let Proxy {
        mut proc, data_dir, ..
    } = victim;
    proc.kill();
    eprintln!(
        "killed replica-2 with {} calls answered",
        mcpproxy_support::lock(&answered).len()
    );
    let at_kill = answered_count();
    until("40 more calls answered after the kill", LOAD, || async {
        (answered_count() >= at_kill + 40)
            .then_some(())
            .ok_or_else(|| format!("{} so far", answered_count()))
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await.expect("load worker");
    }
    let answered = mcpproxy_support::lock(&answered).clone();
    let config = config_of(&replicas[1].name);
    replicas[1].proxy = Some(
        Proxy::builder(&config)
            .data_dir(data_dir)
            .listen(&replicas[1].addr.to_string())
            .start(),
    );
    let took = until(
        "every answered call in the cluster's journal",
        CONVERGE,
        || async {
            let tags = cluster_tags(&replicas[0], key).await?;
            let missing: Vec<_> = answered.iter().filter(|t| !tags.contains_key(*t)).collect();
            if !missing.is_empty() {
                return Err(format!(
                    "{} of {} missing, e.g. {:?}",
                    missing.len(),
                    answered.len(),
                    missing.first()
                ));
            }
            let twice: Vec<_> = tags.iter().filter(|(_, n)| **n > 1).collect();
            assert!(twice.is_empty(), "records read more than once: {twice:?}");
            Ok(())
        },
    )
    .await;
    eprintln!(
        "{} answered calls, all in the cluster's journal once, {took:?} after replica-2 restarted",
        answered.len()
    );

    // 6. The rate limit of `limited` holds across the replicas: one shared bucket.
    let mut allowed = 0;
    let mut refused = None;
    for i in 0..REPLICAS * 6 {
        let session = alice.open().await.expect("open");
        let answer = alice
            .request(
                &session,
                "tools/call",
                json!({"name": "call_tool_read",
                       "arguments": {"name": "limited:echo", "args": {"text": format!("limited-{i}")}}}),
            )
            .await
            .expect("a call of limited:echo");
        if answer.status == 429 {
            refused = Some(answer);
            break;
        }
        assert_eq!(answer.status, 200, "{}", answer.body);
        allowed += 1;
    }
    let refused = refused.expect("the shared bucket of `limited` ran out");
    assert_eq!(
        allowed, 6,
        "calls allowed across the replicas before the limit"
    );
    assert!(refused.retry_after.is_some(), "429 without Retry-After");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("rate_limits.upstreams.limited")),
        "{}",
        refused.body
    );
}
