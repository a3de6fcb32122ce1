//! The shared state against a real PostgreSQL (started by the tests' launcher; skipped
//! with a note when it is not installed, unless `MCPPROXY_REQUIRE_POSTGRES` is set).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::connect::Database;
use super::{Cluster, migrate, trust_sync};
use mcpproxy_auth::credentials::CredentialStore;
use mcpproxy_config::ClusterConfig;
use mcpproxy_policy::Tool;
use mcpproxy_trust::{ServerTrust, TrustWrite};

#[path = "../../../tests/support/postgres.rs"]
mod postgres;

fn credentials() -> CredentialStore {
    CredentialStore::open_file(std::path::Path::new("/nonexistent"))
}

async fn join(pg: &postgres::Postgres, replica: &str) -> Arc<Cluster> {
    Cluster::join(
        &ClusterConfig {
            postgres: Some(pg.url()),
            replica: Some(replica.to_owned()),
            journal: None,
        },
        &credentials(),
        CancellationToken::new(),
    )
    .await
    .expect("join the cluster")
}

#[tokio::test(flavor = "multi_thread")]
async fn migrations_apply_once_and_a_newer_schema_is_refused() {
    let Some(pg) = postgres::Postgres::start() else {
        return;
    };
    let db = Database::from_url(&pg.url(), &credentials()).unwrap();
    let mut client = db.connect().await.unwrap();
    assert_eq!(
        migrate::migrate(&db, &mut client, "t").await.unwrap(),
        [1, 2]
    );
    assert!(
        migrate::migrate(&db, &mut client, "t")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        migrate::version(&db, &client).await.unwrap(),
        migrate::latest()
    );
    client
        .execute(
            "INSERT INTO mcpproxy_schema_versions (version, applied_by) VALUES (77, 'later')",
            &[],
        )
        .await
        .unwrap();
    let err = migrate::migrate(&db, &mut client, "t")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("schema version 77, newer than this mcpproxy knows (2)"),
        "{err}"
    );
    assert!(err.contains(&format!("127.0.0.1:{}", pg.port())), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shared_bucket_takes_whole_tokens_atomically_and_refills_by_the_database_clock() {
    let Some(pg) = postgres::Postgres::start() else {
        return;
    };
    let cluster = join(&pg, "a").await;
    // Three tokens, refilled at one every thousand seconds: three takes, then a refusal
    // that says to wait most of those thousand seconds.
    for _ in 0..3 {
        let take = cluster.take("alice", 3.0, 0.001).await.unwrap();
        assert!(take.allowed);
        assert_eq!(take.retry_after, Duration::ZERO);
    }
    let refused = cluster.take("alice", 3.0, 0.001).await.unwrap();
    assert!(!refused.allowed);
    assert!(
        refused.retry_after > Duration::from_secs(900),
        "{refused:?}"
    );
    assert!(
        cluster.take("bob", 3.0, 0.001).await.unwrap().allowed,
        "keys are apart"
    );

    // Ten seconds later by the database's clock, at one token a second: full again (3).
    cluster
        .client()
        .await
        .unwrap()
        .execute(
            "UPDATE mcpproxy_buckets SET updated_at = now() - interval '10 seconds' WHERE key = 'alice'",
            &[],
        )
        .await
        .unwrap();
    let mut allowed = 0;
    for _ in 0..5 {
        allowed += usize::from(cluster.take("alice", 3.0, 1.0).await.unwrap().allowed);
    }
    assert_eq!(allowed, 3, "refilled up to the capacity, never past it");

    // Forty takes at once from two replicas on a bucket of ten: exactly ten go.
    let other = join(&pg, "b").await;
    let takes = (0..40).map(|i| {
        let cluster = if i % 2 == 0 {
            cluster.clone()
        } else {
            other.clone()
        };
        tokio::spawn(async move { cluster.take("team", 10.0, 0.0001).await.unwrap().allowed })
    });
    let mut allowed = 0;
    for take in takes {
        allowed += usize::from(take.await.unwrap());
    }
    assert_eq!(allowed, 10);

    for (key, capacity, refill) in [
        ("", 1.0, 1.0),
        ("k", 0.0, 1.0),
        ("k", f64::NAN, 1.0),
        ("k", 1.0, -1.0),
    ] {
        let err = cluster
            .take(key, capacity, refill)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("shared rate limit: "), "{err}");
    }
    let long = "k".repeat(super::bucket::MAX_KEY_BYTES + 1);
    assert!(cluster.take(&long, 1.0, 1.0).await.is_err());

    // What a take costs on loopback (printed for docs/benchmarks.md, not asserted).
    let start = std::time::Instant::now();
    for _ in 0..500 {
        cluster.take("timed", 1e9, 1e9).await.unwrap();
    }
    eprintln!("500 sequential takes: {:?} each", start.elapsed() / 500);
    let start = std::time::Instant::now();
    let takes: Vec<_> = (0..2000)
        .map(|i| {
            let cluster = cluster.clone();
            tokio::spawn(async move {
                cluster
                    .take(&format!("k{}", i % 50), 1e9, 1e9)
                    .await
                    .unwrap()
            })
        })
        .collect();
    for take in takes {
        take.await.unwrap();
    }
    eprintln!(
        "2000 concurrent takes on one connection, 50 keys: {:?}",
        start.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_changing_different_parts_of_a_server_keep_both_changes() {
    let Some(pg) = postgres::Postgres::start() else {
        return;
    };
    let db = Database::from_url(&pg.url(), &credentials()).unwrap();
    let mut client = db.connect().await.unwrap();
    migrate::migrate(&db, &mut client, "t").await.unwrap();
    let tool = |name: &str| Tool {
        name: name.into(),
        description: "d".into(),
        ..Default::default()
    };
    // Both replicas start from the same state: a server with tool `a` pinned.
    let mut base = ServerTrust::default();
    base.pin(&tool("a"), "t0");
    let write = |before: Option<ServerTrust>, after: ServerTrust| TrustWrite::Server {
        name: "fx".into(),
        before: before.map(Box::new),
        after: Some(Box::new(after)),
    };
    trust_sync::write(&db, &mut client, &write(None, base.clone()), "a")
        .await
        .unwrap();
    // Replica A approves the server; replica B, not knowing, pins tool `b`.
    let mut approved = base.clone();
    approved.approved_at = Some("t1".into());
    approved.approved_by = Some("alice".into());
    trust_sync::write(&db, &mut client, &write(Some(base.clone()), approved), "a")
        .await
        .unwrap();
    let mut pinned = base.clone();
    pinned.pin(&tool("b"), "t2");
    trust_sync::write(&db, &mut client, &write(Some(base), pinned), "b")
        .await
        .unwrap();
    let state = trust_sync::load(&db, &mut client).await.unwrap();
    let fx = &state.servers["fx"];
    assert_eq!(
        fx.approved_by.as_deref(),
        Some("alice"),
        "B's pin kept A's approval"
    );
    assert_eq!(fx.tools.keys().collect::<Vec<_>>(), ["a", "b"]);
    // Forgetting the server removes its pins and held tools with it.
    trust_sync::write(
        &db,
        &mut client,
        &TrustWrite::Server {
            name: "fx".into(),
            before: None,
            after: None,
        },
        "a",
    )
    .await
    .unwrap();
    assert!(
        trust_sync::load(&db, &mut client)
            .await
            .unwrap()
            .servers
            .is_empty()
    );
    assert_eq!(pg.psql("SELECT count(*) FROM mcpproxy_trust_pins"), "0");
}

/// A pending approval shared by replica A: listed through B, answered once through B (a
/// second answer finds it answered), the answer announced to A and readable there; expired
/// rows are not listed, and a withdrawn row is gone.
#[tokio::test(flavor = "multi_thread")]
async fn a_shared_approval_is_listed_everywhere_and_answered_once() {
    let Some(pg) = postgres::Postgres::start() else {
        return;
    };
    let a = join(&pg, "a").await;
    let b = join(&pg, "b").await;
    let mut heard = a.approval_answers();
    let shown = serde_json::json!({"id": "ap-1", "tool": "drop_table", "asked_at": "1"});
    a.share_approval("ap-1", &shown, Duration::from_secs(60))
        .await
        .unwrap();
    let expired = serde_json::json!({"id": "ap-old", "asked_at": "0"});
    a.share_approval("ap-old", &expired, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(b.pending_approvals().await.unwrap(), [shown]);
    assert_eq!(a.approval_answer("ap-1").await.unwrap(), None);

    let answer = super::SharedAnswer {
        approve: false,
        by: "cli".to_owned(),
        reason: Some("not now".to_owned()),
    };
    assert!(b.answer_approval("ap-1", &answer).await.unwrap());
    let again = super::SharedAnswer {
        approve: true,
        ..answer.clone()
    };
    assert!(
        !a.answer_approval("ap-1", &again).await.unwrap(),
        "the first answer is the one kept"
    );
    assert!(!b.answer_approval("ap-old", &again).await.unwrap());
    assert!(!b.answer_approval("no-such", &again).await.unwrap());
    let id = tokio::time::timeout(Duration::from_secs(30), heard.recv())
        .await
        .expect("the answer is announced")
        .unwrap();
    assert_eq!(id, "ap-1");
    assert_eq!(
        a.approval_answer("ap-1").await.unwrap(),
        Some(super::SharedAnswer {
            approve: false,
            by: "cli@b".to_owned(),
            reason: Some("not now".to_owned()),
        })
    );
    assert!(b.pending_approvals().await.unwrap().is_empty());

    a.withdraw_approval("ap-1").await.unwrap();
    assert_eq!(a.approval_answer("ap-1").await.unwrap(), None);

    // A question asked by A is taken through B, once; an expired one is not taken.
    let question = serde_json::json!({"tool": "drop_table", "arguments_hash": "ab12"});
    a.share_question("q-1", &question, Duration::from_secs(60))
        .await
        .unwrap();
    a.share_question("q-old", &question, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(b.take_question("q-1").await.unwrap(), Some(question));
    assert_eq!(a.take_question("q-1").await.unwrap(), None, "taken once");
    assert_eq!(b.take_question("q-old").await.unwrap(), None, "expired");
    assert_eq!(b.take_question("").await.unwrap(), None);
}
