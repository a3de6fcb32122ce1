//! The cluster's journal read back: two `mcpproxy serve` replicas, each with its own data dir
//! and `cluster.replica` name, deliver to one real ClickHouse table through the ClickHouse
//! sink; `mcpproxy activity list|show|stats --cluster` on either reads every record of both
//! exactly once, with the local journal's filters and output, through a replica killed
//! (SIGKILL) right after answering and started again, and a batch delivered twice.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::TestCommand;
use crate::support::clickhouse::ClickHouse;
use crate::support::mcp::{PLUGIN_TIMEOUT_MS, Proxy, config_with, stdio_fixture};

pub(crate) const TABLE: &str = "mcpproxy_activity";

/// Which records of the union a filter keeps.
type Keep = Box<dyn Fn(&Value) -> bool>;

/// A replica's config: the fixture `fx`, the ClickHouse sink as the cluster journal.
fn replica_config(log: &std::path::Path, ch: &ClickHouse, replica: &str) -> Value {
    let mut config = config_with(vec![stdio_fixture("fx", log)]);
    config["plugins"] = json!({
        "limits": {"timeout_ms": PLUGIN_TIMEOUT_MS},
        "sinks": ["clickhouse-sink"],
        "settings": {"clickhouse-sink": {"url": ch.url(), "table": TABLE}},
    });
    config["activity"] = json!({"delivery": {"interval_ms": 50, "max_backoff_ms": 300}});
    config["cluster"] = json!({"replica": replica, "journal": "clickhouse-sink"});
    config
}

/// `n` calls through `proxy`: reads that succeed, and every third a delete the policy
/// blocks.
pub(crate) async fn make_calls(proxy: &Proxy, n: usize) {
    crate::support::mcp::reads_and_blocked(proxy, n, 3).await;
}

pub(crate) async fn api(proxy: &Proxy, path: &str) -> Value {
    let body: Value = reqwest::Client::new()
        .get(format!("{}/api/v1{path}", proxy.base()))
        .header("X-API-Key", proxy.api_key())
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
        .json()
        .await
        .expect("a JSON answer");
    assert_eq!(body["success"], true, "{path}: {body}");
    body["data"].clone()
}

/// Every record of a replica's own journal, once none is pending and its sink has
/// delivered them all.
pub(crate) async fn delivered_records(proxy: &Proxy) -> Vec<Value> {
    crate::support::poll::until_value(
        "the replica's sink delivers its backlog",
        Duration::from_secs(60),
        || async {
            let records = api(proxy, "/activity?limit=1000").await["records"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let sinks = api(proxy, "/activity/sinks").await;
            let pending = records.iter().filter(|r| r["status"] == "pending").count();
            if pending == 0 && sinks[0]["backlog"].as_u64() == Some(0) {
                Ok(records)
            } else {
                Err(format!("{pending} records pending; sinks: {sinks}"))
            }
        },
    )
    .await
}

/// `mcpproxy activity ARGS --config <replica's config>`.
pub(crate) fn activity(proxy: &Proxy, args: &[&str]) -> crate::support::CmdOutput {
    let config = proxy.data_dir.path().join("mcp_config.json");
    TestCommand::new(proxy.data_dir.path())
        .args(["activity"])
        .args(args)
        .args(["--config"])
        .arg_path(&config)
        .output()
}

/// `activity list --cluster ARGS -o json`, its records.
fn cluster_list(proxy: &Proxy, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["list", "--cluster", "-o", "json"];
    all.extend_from_slice(args);
    let out = activity(proxy, &all);
    out.assert_code(0);
    serde_json::from_str(&out.stdout()).unwrap_or_else(|e| panic!("{e}: {}", out.stdout()))
}

fn ids(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .map(|r| r["id"].as_str().expect("an id").to_owned())
        .collect()
}

/// The local journal's answer over the union: newest first, filtered.
fn expected(union: &[Value], keep: impl Fn(&Value) -> bool) -> Vec<String> {
    let mut ids: Vec<String> = union
        .iter()
        .filter(|r| keep(r))
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids.reverse();
    ids
}

async fn ch_count(ch: &ClickHouse) -> (u64, u64) {
    let text = ch
        .query(&format!(
            "SELECT count(), uniqExact(id) FROM default.{TABLE} FORMAT TabSeparated"
        ))
        .await;
    let mut parts = text.split_whitespace().map(|p| p.parse::<u64>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap())
}

/// Two replicas, `replica-a` and `replica-b`, delivering to one ClickHouse table; their
/// call logs live as long as this does.
pub(crate) struct Replicas {
    pub(crate) a: Proxy,
    pub(crate) b: Proxy,
    config_b: Value,
    pub(crate) _logs: (tempfile::NamedTempFile, tempfile::NamedTempFile),
}

impl Replicas {
    pub(crate) fn start(ch: &ClickHouse) -> Self {
        let logs = (
            tempfile::NamedTempFile::new().expect("call log"),
            tempfile::NamedTempFile::new().expect("call log"),
        );
        let config_a = replica_config(logs.0.path(), ch, "replica-a");
        let config_b = replica_config(logs.1.path(), ch, "replica-b");
        Self {
            a: Proxy::builder(&config_a).start(),
            b: Proxy::builder(&config_b).start(),
            config_b,
            _logs: logs,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_read_one_cluster_trail_every_record_once() {
    let Some(ch) = ClickHouse::start().await else {
        return;
    };
    let Replicas { a, b, _logs, .. } = Replicas::start(&ch);
    make_calls(&a, 6).await;
    make_calls(&b, 5).await;
    let mut union = delivered_records(&a).await;
    union.extend(delivered_records(&b).await);
    assert!(
        union
            .iter()
            .all(|r| r["replica"] == "replica-a" || r["replica"] == "replica-b")
    );
    let calls = union.iter().filter(|r| r["type"] == "tool_call").count();
    assert_eq!(calls, 11, "every call recorded");

    // Either replica reads the whole trail: every record of both, once, as the journal has it.
    for proxy in [&a, &b] {
        let shown = cluster_list(proxy, &["-n", "1000"]);
        assert_eq!(ids(&shown), expected(&union, |_| true));
        let by_id: BTreeMap<&str, &Value> = union
            .iter()
            .map(|r| (r["id"].as_str().unwrap(), r))
            .collect();
        for record in &shown {
            assert_eq!(Some(&record), by_id.get(record["id"].as_str().unwrap()));
        }
    }

    // The local filters, on the cluster.
    let cases: Vec<(Vec<&str>, Keep)> = vec![
        (
            vec!["--server", "fx"],
            Box::new(|r| r["server_name"] == "fx"),
        ),
        (
            vec!["--status", "blocked"],
            Box::new(|r| r["status"] == "blocked"),
        ),
        (
            vec!["--replica", "replica-b"],
            Box::new(|r| r["replica"] == "replica-b"),
        ),
        (
            vec!["--replica", "replica-a", "--tool", "delete_note"],
            Box::new(|r| r["replica"] == "replica-a" && r["tool_name"] == "delete_note"),
        ),
        (
            vec!["--type", "tool_call"],
            Box::new(|r| r["type"] == "tool_call"),
        ),
        (vec!["--replica", "replica-c"], Box::new(|_| false)),
    ];
    for (args, keep) in &cases {
        let mut with_limit = args.clone();
        with_limit.extend(["-n", "1000"]);
        assert_eq!(
            ids(&cluster_list(&a, &with_limit)),
            expected(&union, keep),
            "{args:?}"
        );
    }
    // Paging: limit and offset over the merged trail.
    let all = expected(&union, |r| r["type"] == "tool_call");
    let page = cluster_list(&b, &["--type", "tool_call", "-n", "4", "--offset", "3"]);
    assert_eq!(ids(&page), all[3..7].to_vec());

    // The table output and `show` of a record of the other replica.
    let out = activity(&a, &["list", "--cluster", "--replica", "replica-b"]);
    out.assert_code(0);
    assert!(out.stdout().contains("get_status"), "{}", out.stdout());
    let theirs = expected(&union, |r| {
        r["replica"] == "replica-b" && r["type"] == "tool_call"
    });
    let out = activity(&a, &["show", "--cluster", &theirs[0]]);
    out.assert_code(0);
    assert!(
        out.stdout().contains("Replica:     replica-b"),
        "{}",
        out.stdout()
    );
    let out = activity(&a, &["show", "--cluster", "-o", "json", &theirs[0]]);
    out.assert_code(0);
    let shown: Value = serde_json::from_str(&out.stdout()).unwrap();
    assert_eq!(
        Some(&shown),
        union.iter().find(|r| r["id"] == theirs[0].as_str())
    );
    // Without --cluster, the other replica's record is not in this one's journal.
    activity(&a, &["show", &theirs[0]]).assert_code(2);

    // The REST API: `cluster=true` on the activity endpoints answers the same.
    let page = api(&b, "/activity?cluster=true&limit=1000").await;
    assert_eq!(
        ids(page["records"].as_array().unwrap()),
        expected(&union, |_| true)
    );
    assert_eq!(page["has_more"], false);
    let page = api(
        &b,
        "/activity?cluster=true&replica=replica-a&status=blocked&limit=1",
    )
    .await;
    let blocked_a = expected(&union, |r| {
        r["replica"] == "replica-a" && r["status"] == "blocked"
    });
    assert_eq!(
        ids(page["records"].as_array().unwrap()),
        blocked_a[..1].to_vec()
    );
    assert_eq!(page["has_more"], true);
    let record = api(&b, &format!("/activity/{}?cluster=true", theirs[0])).await;
    assert_eq!(record["replica"], "replica-b");
    let mine_only = api(&b, "/activity?replica=replica-a").await;
    assert_eq!(
        mine_only["records"],
        json!([]),
        "this replica's journal has none of A's"
    );

    // The page's feed, switched to the whole cluster, lists both replicas' records; a record
    // of the other replica opens from it.
    if crate::web_e2e::browser_installed() {
        let profile = tempfile::tempdir().unwrap();
        let driver = crate::web_e2e::Driver::start(profile.path()).await;
        let url = format!("{}/#key={}", a.base(), a.api_key());
        driver.post("/url", json!({ "url": url })).await;
        let rows = "return [...document.querySelectorAll('#feed tbody tr')].map(r => r.dataset.id)";
        driver
            .wait_for(rows, |ids| {
                ids.as_array().is_some_and(|ids| !ids.is_empty())
            })
            .await;
        driver
            .script(
                "const s = document.getElementById('f-scope'); s.value = 'cluster'; \
                 s.dispatchEvent(new Event('change')); return true",
            )
            .await;
        let everything = expected(&union, |_| true);
        let want = json!(everything[..everything.len().min(50)]);
        driver.wait_for(rows, |ids| *ids == want).await;
        driver
            .script(&format!(
                "document.querySelector('#feed tbody tr[data-id=\"{}\"]').click(); return true",
                theirs[0]
            ))
            .await;
        driver
            .wait_for(
                "return document.getElementById('detail-json').textContent",
                |t| {
                    t.as_str()
                        .is_some_and(|t| t.contains("\"replica\": \"replica-b\""))
                },
            )
            .await;
    }

    // Statistics over the cluster are the sum of the replicas'.
    let cluster_stats = |args: &[&str]| {
        let mut all = vec!["stats", "--cluster", "-o", "json"];
        all.extend_from_slice(args);
        let out = activity(&a, &all);
        out.assert_code(0);
        serde_json::from_str::<Value>(&out.stdout()).unwrap()
    };
    let stats = cluster_stats(&[]);
    let (sa, sb) = (
        api(&a, "/activity/stats").await,
        api(&b, "/activity/stats").await,
    );
    assert_eq!(stats["calls"], 11);
    assert_eq!(
        stats["calls"].as_u64(),
        Some(sa["calls"].as_u64().unwrap() + sb["calls"].as_u64().unwrap())
    );
    let blocked = |s: &Value| {
        s["by_status"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["key"] == "blocked")
            .map_or(0, |g| g["calls"].as_u64().unwrap())
    };
    assert_eq!(blocked(&stats), blocked(&sa) + blocked(&sb));
    assert_eq!(blocked(&stats), 3);
    assert_eq!(
        cluster_stats(&["--replica", "replica-a"])["calls"],
        sa["calls"]
    );

    // A batch delivered twice (a replica that died before it could note the delivery sends
    // it again): the trail still shows each record once.
    ch.query(&format!(
        "INSERT INTO default.{TABLE} SELECT * FROM default.{TABLE} WHERE type = 'tool_call'"
    ))
    .await;
    let (rows, distinct) = ch_count(&ch).await;
    assert!(
        rows > distinct,
        "the duplicates are in the table: {rows} rows"
    );
    assert_eq!(
        ids(&cluster_list(&a, &["-n", "1000"])),
        expected(&union, |_| true)
    );
    assert_eq!(cluster_stats(&[])["calls"], 11);

    // Hostile filter values are values, never SQL.
    for hostile in ["x' OR 1=1 --", "\\", "a\\'b", "line\nbreak", "nul\u{1}x"] {
        for flag in ["--server", "--tool", "--session", "--replica"] {
            let out = activity(&a, &["list", "--cluster", flag, hostile]);
            out.assert_code(0);
            assert!(
                out.stderr().contains("no matching activity"),
                "{flag} {hostile:?}: {}",
                out.stderr()
            );
        }
    }
    // ... and find exactly the record that holds them: a row whose server, tool, session and
    // replica are hostile text, inserted as the sink would insert it.
    let hostile = "fs'x\\y\n\u{0}z\\'";
    let (id, ms) = mcpproxy_activity::new_id();
    let record = json!({
        "id": id, "type": "tool_call", "source": "mcp", "server_name": hostile,
        "tool_name": hostile, "status": "success", "session_id": hostile,
        "timestamp": mcpproxy_activity::format_timestamp(ms), "replica": hostile,
    });
    let row = json!({
        "id": id, "timestamp_ms": ms, "type": "tool_call", "server_name": hostile,
        "tool_name": hostile, "status": "success", "session_id": hostile,
        "record": record.to_string(),
    });
    ch.query(&format!(
        "INSERT INTO default.{TABLE} FORMAT JSONEachRow\n{row}\n"
    ))
    .await;
    for param in ["server", "tool", "session", "replica"] {
        let answer: Value = reqwest::Client::new()
            .get(format!("{}/api/v1/activity", a.base()))
            .query(&[("cluster", "true"), (param, hostile)])
            .header("X-API-Key", a.api_key())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let records = answer["data"]["records"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(ids(&records), vec![id.clone()], "{param}: {answer}");
        assert_eq!(records[0]["server_name"], hostile);
    }
    // Rows whose columns disagree with their records (written by hand, newest of all): the
    // columns let them through `--server fx`, their records do not, so a small page reads
    // past them in a second chunk and shows what the local journals would.
    let mut forged = Vec::new();
    for _ in 0..5 {
        let (id, ms) = mcpproxy_activity::new_id();
        let record = json!({"id": id, "type": "tool_call", "server_name": "elsewhere",
                            "status": "success", "timestamp": mcpproxy_activity::format_timestamp(ms)});
        forged.push(
            json!({"id": id, "timestamp_ms": ms, "type": "tool_call", "server_name": "fx",
                   "status": "success", "record": record.to_string()})
            .to_string(),
        );
    }
    ch.query(&format!(
        "INSERT INTO default.{TABLE} FORMAT JSONEachRow\n{}\n",
        forged.join("\n")
    ))
    .await;
    let fx = expected(&union, |r| r["server_name"] == "fx");
    assert_eq!(
        ids(&cluster_list(&a, &["--server", "fx", "-n", "2"])),
        fx[..2].to_vec()
    );

    // `server:tool`, the concatenation in SQL.
    let qualified = format!("{hostile}:{hostile}");
    let answer = reqwest::Client::new()
        .get(format!("{}/api/v1/activity", a.base()))
        .query(&[("cluster", "true"), ("tool", qualified.as_str())])
        .header("X-API-Key", a.api_key())
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(
        ids(answer["data"]["records"].as_array().unwrap()),
        vec![id.clone()]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_killed_after_answering_delivers_its_backlog_once() {
    let Some(mut ch) = ClickHouse::start().await else {
        return;
    };
    let Replicas {
        a,
        b,
        config_b,
        _logs,
    } = Replicas::start(&ch);
    make_calls(&a, 4).await;
    // B answers its calls and is killed at once (SIGKILL: no shutdown, no last delivery),
    // then started again with the same data dir.
    make_calls(&b, 9).await;
    let Proxy {
        mut proc, data_dir, ..
    } = b;
    proc.kill();
    let b = Proxy::builder(&config_b).data_dir(data_dir).start();
    // Again while ClickHouse is down, so the killed replica surely holds a backlog.
    delivered_records(&b).await;
    ch.stop();
    make_calls(&b, 5).await;
    let Proxy {
        mut proc, data_dir, ..
    } = b;
    proc.kill();
    ch.start_again().await;
    let before_restart = cluster_list(&a, &["-n", "1000", "--replica", "replica-b"]);
    let b = Proxy::builder(&config_b).data_dir(data_dir).start();
    make_calls(&b, 2).await;

    let mut union = delivered_records(&a).await;
    union.extend(delivered_records(&b).await);
    let answered = union.iter().filter(|r| r["type"] == "tool_call").count();
    assert_eq!(
        answered,
        4 + 9 + 5 + 2,
        "every answered call has its record"
    );
    let theirs = expected(&union, |r| {
        r["replica"] == "replica-b" && r["type"] == "tool_call"
    });
    let delivered_before: BTreeSet<&str> = before_restart
        .iter()
        .filter(|r| r["type"] == "tool_call")
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        delivered_before.len(),
        9,
        "the calls made while ClickHouse was down were only in the killed replica's journal"
    );
    assert_eq!(theirs.len(), 9 + 5 + 2);

    let shown = cluster_list(&a, &["-n", "1000"]);
    let distinct: BTreeSet<String> = ids(&shown).into_iter().collect();
    assert_eq!(distinct.len(), shown.len(), "each record once");
    assert_eq!(ids(&shown), expected(&union, |_| true));
    let stats = activity(&a, &["stats", "--cluster", "-o", "json"]);
    stats.assert_code(0);
    let stats: Value = serde_json::from_str(&stats.stdout()).unwrap();
    assert_eq!(stats["calls"], 20);
    // The table may hold a batch twice; ClickHouse's own distinct count is what was shown.
    assert_eq!(ch_count(&ch).await.1, shown.len() as u64);
}

#[tokio::test]
async fn without_a_readable_cluster_journal_the_error_says_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp_config.json");
    let run = |value: Value, args: &[&str]| {
        std::fs::write(&config, value.to_string()).unwrap();
        TestCommand::new(dir.path())
            .args(["activity"])
            .args(args)
            .args(["--config"])
            .arg_path(&config)
            .output()
    };
    // The REST API of a proxy without one says the same.
    let proxy = Proxy::builder(&config_with(vec![])).start();
    let answer = reqwest::Client::new()
        .get(format!("{}/api/v1/activity?cluster=true", proxy.base()))
        .header("X-API-Key", proxy.api_key())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);
    let body: Value = answer.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("no cluster journal is configured"),
        "{body}"
    );
    let answer = reqwest::Client::new()
        .get(format!("{}/api/v1/activity?cluster=yes", proxy.base()))
        .header("X-API-Key", proxy.api_key())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);

    let out = run(json!({}), &["list", "--cluster"]);
    out.assert_code(2);
    assert!(
        out.stderr().contains("no cluster journal is configured"),
        "{}",
        out.stderr()
    );
    assert!(
        out.stderr().contains("\"journal\": \"clickhouse-sink\""),
        "{}",
        out.stderr()
    );

    // A ClickHouse URL where nothing listens: the error names it (masked) and what to check,
    // and never the password.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let config_value = json!({
        "plugins": {
            "sinks": ["clickhouse-sink"],
            "settings": {"clickhouse-sink": {
                "url": format!("http://127.0.0.1:{port}"), "user": "u", "password": "hunter2-secret"
            }},
        },
        "cluster": {"journal": "clickhouse-sink"},
    });
    for args in [
        &["list", "--cluster"][..],
        &["stats", "--cluster"],
        &["show", "--cluster", "01KAMXH0VBSJ2QX6F6R4VZ7P3M"],
    ] {
        let out = run(config_value.clone(), args);
        out.assert_code(2);
        let err = out.stderr();
        assert!(
            err.contains(&format!(
                "the cluster journal at http://127.0.0.1:{port}/ did not answer"
            )),
            "{args:?}: {err}"
        );
        assert!(err.contains("check that ClickHouse runs"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }
}

#[tokio::test]
async fn clickhouse_errors_become_clear_errors() {
    let Some(ch) = ClickHouse::start().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp_config.json");
    let run = |settings: Value| {
        let value = json!({
            "plugins": {"sinks": ["clickhouse-sink"], "settings": {"clickhouse-sink": settings}},
            "cluster": {"journal": "clickhouse-sink"},
        });
        std::fs::write(&config, value.to_string()).unwrap();
        TestCommand::new(dir.path())
            .args(["activity", "list", "--cluster", "--config"])
            .arg_path(&config)
            .output()
    };
    // No replica delivered yet: the table does not exist.
    let out = run(json!({"url": ch.url(), "table": "nothing_yet"}));
    out.assert_code(2);
    let err = out.stderr();
    assert!(
        err.contains(&format!(
            "the cluster journal at {}/ answered 404",
            ch.url()
        )),
        "{err}"
    );
    assert!(
        err.contains("the table default.nothing_yet does not exist yet"),
        "{err}"
    );
    // A user ClickHouse does not know.
    let out = run(json!({"url": ch.url(), "user": "nobody", "password": "hunter2-secret"}));
    out.assert_code(2);
    let err = out.stderr();
    assert!(
        err.contains("check plugins.settings.clickhouse-sink.user and .password"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");

    // A query past what one query may read: ClickHouse stops the stream part-way, and the
    // error says to narrow it.
    ch.query(
        "CREATE TABLE default.big (id String, timestamp_ms UInt64, timestamp DateTime \
         MATERIALIZED toDateTime(intDiv(timestamp_ms, 1000)), type String, record String) \
         ENGINE = MergeTree() PARTITION BY toYYYYMM(timestamp) ORDER BY (timestamp, id)",
    )
    .await;
    ch.query(
        "INSERT INTO default.big (id, timestamp_ms, type, record) SELECT toString(number), \
         number, 'tool_call', concat('{\"id\":\"', toString(number), '\"}') \
         FROM numbers(1000001)",
    )
    .await;
    // (A deadline the read cannot miss on a loaded machine: reading a million rows took
    // over the default 30 s under load, which is the next check's case.)
    let big = |timeout_ms: u64| {
        json!({
            "plugins": {"sinks": ["clickhouse-sink"],
                        "settings": {"clickhouse-sink": {"url": ch.url(), "table": "big",
                                                         "timeout_ms": timeout_ms}}},
            "cluster": {"journal": "clickhouse-sink"},
        })
    };
    std::fs::write(&config, big(600_000).to_string()).unwrap();
    let stats = || {
        TestCommand::new(dir.path())
            .args(["activity", "stats", "--cluster", "--config"])
            .arg_path(&config)
            .output()
    };
    let out = stats();
    out.assert_code(2);
    assert!(
        out.stderr()
            .contains("the cluster journal holds more than 1000000 matching records"),
        "{}",
        out.stderr()
    );
    // A read past the sink's deadline says so and what to change, not that ClickHouse is
    // down (it said "did not answer ... check that ClickHouse runs").
    std::fs::write(&config, big(1).to_string()).unwrap();
    let out = stats();
    out.assert_code(2);
    assert!(
        out.stderr().contains(
            "did not finish answering within 1 ms (plugins.settings.clickhouse-sink.timeout_ms)"
        ) && !out.stderr().contains("check that ClickHouse runs"),
        "{}",
        out.stderr()
    );
}
