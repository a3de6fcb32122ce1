//! Approvals in a cluster: a destructive call that waits for a person on replica A is
//! listed by replica B and answered through it (`mcpproxy approvals approve` on B, the REST
//! API of B), and the call waiting on A goes on or is refused; a question A asked a
//! 2026-07-28 client through `input_required` is answered by the client's retry through B,
//! once. Real `mcpproxy serve` replicas on one real PostgreSQL; the fixture upstream keeps
//! a call log.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::approvals::{
    approvals, approve, deleted, record_of, spawn_delete, stateless_delete,
};
use crate::support::mcp::{Proxy, config_with, is_error, text};
use crate::support::postgres::Postgres;

/// Replicas `a` and `b` on `postgres`, their fixtures logging to one call log in `dir`
/// (returned first).
fn two_replicas(dir: &Path, postgres: &Postgres) -> (PathBuf, Proxy, Proxy) {
    let log = dir.join("calls.log");
    std::fs::write(&log, b"").unwrap();
    let a = Proxy::builder(&replica_config(&log, postgres, "a")).start();
    let b = Proxy::builder(&replica_config(&log, postgres, "b")).start();
    (log, a, b)
}

/// A replica's config: the fixture, destructive calls asked of a person, the cluster.
fn replica_config(log: &Path, postgres: &Postgres, replica: &str) -> Value {
    let mut config = config_with(vec![crate::support::mcp::stdio_fixture("fx", log)]);
    config["approvals"] = json!({"ask": ["destructive"], "timeout_secs": 120});
    config["cluster"] = json!({"postgres": postgres.url(), "replica": replica});
    config
}

/// The call of `delete_note` with `id` among those `proxy` lists as waiting, once it is.
async fn listed(proxy: &Proxy, id: &str) -> Value {
    crate::support::poll::until_value(
        &format!("the call deleting {id} is listed"),
        Duration::from_secs(60),
        || async {
            let all = proxy.get_json("/api/v1/approvals").await;
            all["data"]
                .as_array()
                .and_then(|all| all.iter().find(|p| p["arguments"]["id"] == id).cloned())
                .ok_or_else(|| all.to_string())
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_waiting_on_one_replica_is_approved_or_denied_through_the_other() {
    let Some(postgres) = Postgres::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (log, a, b) = two_replicas(dir.path(), &postgres);

    // Asked on A, listed on both, approved through B's command line: A sends the call.
    let waiting = spawn_delete(&a, "via-b");
    let shown = listed(&b, "via-b").await;
    assert_eq!(shown["server"], "fx");
    assert_eq!(shown["tool"], "delete_note");
    assert_eq!(listed(&a, "via-b").await["id"], shown["id"]);
    assert!(
        deleted(&log).is_empty(),
        "nothing is sent before the answer"
    );
    let id = shown["id"].as_str().unwrap().to_owned();
    approvals(&b, &["approve", &id]).assert_code(0);
    let result = tokio::time::timeout(Duration::from_secs(60), waiting)
        .await
        .expect("the call ends once approved")
        .unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(deleted(&log), ["via-b"]);
    let record = record_of(&a, "via-b").await;
    assert_eq!(record["status"], "success", "{record}");
    assert_eq!(record["approval"]["decision"], "approved", "{record}");
    assert_eq!(record["approval"]["decided_by"], "cli@b", "{record}");
    assert_eq!(record["approval"]["id"], id.as_str(), "{record}");

    // The same answer again, through either replica: no call waits on it.
    let again = approvals(&b, &["approve", &id]);
    assert_ne!(again.code(), Some(0));
    assert!(
        again.stderr().contains("no call waits"),
        "{}",
        again.stderr()
    );
    let again = approvals(&a, &["deny", &id]);
    assert_ne!(again.code(), Some(0));

    // Denied through B's REST API: A refuses the call, saying who denied it.
    let waiting = spawn_delete(&a, "denied-via-b");
    let shown = listed(&b, "denied-via-b").await;
    let id = shown["id"].as_str().unwrap().to_owned();
    let answer = b
        .post_json(
            &format!("/api/v1/approvals/{id}/deny"),
            &json!({"reason": "not today"}),
        )
        .await;
    assert_eq!(answer["success"], true, "{answer}");
    let result = tokio::time::timeout(Duration::from_secs(60), waiting)
        .await
        .expect("the call ends once denied")
        .unwrap();
    assert!(is_error(&result));
    assert_eq!(
        text(&result),
        "The call to 'fx:delete_note' was denied by a person (rest)"
    );
    assert_eq!(deleted(&log), ["via-b"]);
    let record = record_of(&a, "denied-via-b").await;
    assert_eq!(record["status"], "blocked", "{record}");
    assert_eq!(record["approval"]["decided_by"], "rest@b", "{record}");
    assert_eq!(record["approval"]["reason"], "not today", "{record}");

    // Nothing waits any more, on either replica, and the shared rows are gone.
    for replica in [&a, &b] {
        crate::support::poll::until("no call waits", Duration::from_secs(30), || async {
            let all = replica.get_json("/api/v1/approvals").await;
            (all["data"].as_array().map_or(0, Vec::len) == 0)
                .then_some(())
                .ok_or_else(|| all.to_string())
        })
        .await;
    }
    crate::support::poll::until(
        "the shared rows are gone",
        Duration::from_secs(30),
        || async {
            let rows = postgres.psql("SELECT count(*) FROM mcpproxy_approvals");
            (rows == "0").then_some(()).ok_or(rows)
        },
    )
    .await;
}

/// A 2026-07-28 client behind a load balancer without stickiness: asked through
/// `input_required` by replica A, its retry reaches replica B, which takes the question
/// from PostgreSQL and sends the call; the same retry replayed to A (or B) finds the
/// question taken and releases nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_question_asked_by_one_replica_is_answered_through_the_other_once() {
    let Some(postgres) = Postgres::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (log, a, b) = two_replicas(dir.path(), &postgres);

    let asked = stateless_delete(&a, "balanced", None).await;
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"].as_str().unwrap().to_owned();
    assert!(deleted(&log).is_empty());
    let done = stateless_delete(&b, "balanced", Some((&state, approve(true)))).await;
    assert_ne!(done["result"]["isError"], true, "{done}");
    assert_eq!(deleted(&log), ["balanced"]);
    for replica in [&a, &b] {
        let replayed = stateless_delete(replica, "balanced", Some((&state, approve(true)))).await;
        assert_eq!(replayed["result"]["isError"], true, "{replayed}");
        let said = replayed["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(said.contains("answered already"), "{said}");
    }
    assert_eq!(deleted(&log), ["balanced"]);
    let page = b
        .get_json("/api/v1/activity?tool=delete_note&limit=100")
        .await;
    let approved: Vec<&Value> = page["data"]["records"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter(|r| r["approval"]["decision"] == "approved")
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(approved.len(), 1, "{page}");
    assert_eq!(approved[0]["status"], "success", "{page}");
    assert_eq!(approved[0]["approval"]["asked_via"], "client", "{page}");
}
