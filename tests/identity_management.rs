//! Who manages the servers of a team gateway through MCP (`management.subjects`,
//! `management.groups`). `mcpproxy serve` with `auth` against the real authorization server
//! of `tests/oauth/issuer.mjs` (`alice`: sre, dev; `bob`: dev). Without a grant no
//! logged-in caller gets the `upstream_servers` tool: it is not in their `tools/list`, a call
//! to it (list, remove, a patch that would withdraw an approval) is refused naming the grant,
//! nothing changes, and each refusal is a `blocked` `server_change` record under the
//! caller's name; the static owner token (`http.auth_token`) still manages. With
//! `"groups": ["sre"]` alice manages and her change is recorded under her name; bob does not,
//! nor does a granted caller whom a `scopes` rule names. In a cluster (two replicas on a real
//! PostgreSQL) a member without the grant cannot remove a server the team shares, and the
//! granted group's removal reaches every replica.

use serde_json::{Value, json};

use crate::identity_group_gate::session;
use crate::support::issuer::Issuer;
use crate::support::mcp::{Client, Proxy, call, config_with, is_error, stdio_fixture, text};

/// The static `http.auth_token`: the owner, with no identity.
const OWNER_TOKEN: &str = "owner-token-0123456789abcdef";

/// Whether `tools/list` offers `client` the management tool.
async fn offers_management(client: &Client) -> bool {
    client
        .peer()
        .list_all_tools()
        .await
        .expect("tools/list")
        .iter()
        .any(|t| t.name == "upstream_servers")
}

/// The names of the servers the proxy runs, from `GET /api/v1/upstreams`.
async fn servers_of(proxy: &Proxy) -> Vec<String> {
    let body: Value = reqwest::Client::new()
        .get(format!("{}/api/v1/upstreams", proxy.base()))
        .header("X-API-Key", proxy.api_key())
        .send()
        .await
        .expect("GET /api/v1/upstreams")
        .json()
        .await
        .expect("a JSON answer");
    let mut names: Vec<String> = body["data"]
        .as_array()
        .expect("the servers")
        .iter()
        .map(|s| s["name"].as_str().expect("name").to_owned())
        .collect();
    names.sort();
    names
}

/// The `server_change` records refused to `subject`.
fn refusals_of<'a>(records: &'a [Value], subject: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["identity"]["subject"] == subject && r["status"] == "blocked")
        .collect()
}

/// What a caller without the grant tries: list, remove, and a patch of the launch that would
/// withdraw the server's approval.
fn attempts() -> [Value; 3] {
    [
        json!({"operation": "list"}),
        json!({"operation": "remove", "name": "prod-db"}),
        json!({"operation": "patch", "name": "prod-db", "args": ["--name", "evil"]}),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_grant_no_logged_in_caller_manages_the_servers() {
    let Some(node) = crate::support::node::oauth_node() else {
        return;
    };
    let issuer = Issuer::start(&node);
    let db_log = tempfile::NamedTempFile::new().expect("call log");
    let mut config = config_with(vec![stdio_fixture("prod-db", db_log.path())]);
    config["auth"] = json!({"issuer": issuer.url});
    config["http"] = json!({"auth_token": OWNER_TOKEN});
    let proxy = Proxy::builder(&config).start();
    let alice = session(&proxy.url, &issuer.token("alice", &proxy.url).await).await;
    let bob = session(&proxy.url, &issuer.token("bob", &proxy.url).await).await;

    for (subject, client) in [("alice", &alice), ("bob", &bob)] {
        assert!(
            !offers_management(client).await,
            "{subject} is not offered the tool"
        );
        for attempt in attempts() {
            let refused = call(client, "upstream_servers", attempt.clone())
                .await
                .expect("an answer");
            assert!(
                is_error(&refused),
                "{subject} {attempt}: {}",
                text(&refused)
            );
            let message = text(&refused);
            assert!(
                message.starts_with(&format!("upstream_servers is not available to '{subject}'")),
                "{message}"
            );
            assert!(message.contains("management.groups"), "{message}");
            assert!(message.contains("management.subjects"), "{message}");
        }
    }

    // Nothing changed: prod-db still runs, approved, as it was written.
    assert_eq!(servers_of(&proxy).await, ["prod-db"]);
    let still = call(
        &bob,
        "call_tool_read",
        json!({"name": "prod-db:get_status"}),
    )
    .await
    .expect("a call");
    assert!(!is_error(&still), "{}", text(&still));
    let written = std::fs::read_to_string(proxy.data_dir.path().join("mcp_config.json"))
        .expect("the config file");
    assert!(!written.contains("evil"), "{written}");

    // Each refusal is on the record under its caller's name.
    let records = proxy.finished_records("server_change", 6).await;
    for subject in ["alice", "bob"] {
        let refused = refusals_of(&records, subject);
        assert_eq!(refused.len(), 3, "{records:?}");
        let mut operations: Vec<&str> = refused
            .iter()
            .map(|r| r["tool_name"].as_str().expect("tool_name"))
            .collect();
        operations.sort_unstable();
        assert_eq!(operations, ["list", "remove", "update"]);
        assert!(refused.iter().all(|r| {
            r["error_message"]
                .as_str()
                .is_some_and(|m| m.contains("management.groups"))
        }));
    }

    // The owner's static token needs no grant.
    let owner = session(&proxy.url, OWNER_TOKEN).await;
    assert!(offers_management(&owner).await);
    let listed = call(&owner, "upstream_servers", json!({"operation": "list"}))
        .await
        .expect("the owner's list");
    assert!(!is_error(&listed), "{}", text(&listed));
    assert!(text(&listed).contains("prod-db"), "{}", text(&listed));
    for client in [alice, bob, owner] {
        let _ = client.cancel().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_management_grant_lets_the_granted_group_manage_and_no_one_else() {
    let Some(node) = crate::support::node::oauth_node() else {
        return;
    };
    let issuer = Issuer::start(&node);
    let db_log = tempfile::NamedTempFile::new().expect("call log");
    let scratch_log = tempfile::NamedTempFile::new().expect("call log");
    let mut config = config_with(vec![
        stdio_fixture("prod-db", db_log.path()),
        stdio_fixture("scratch", scratch_log.path()),
    ]);
    config["auth"] = json!({"issuer": issuer.url});
    // Bob is granted by name, but a scopes rule hides a tool from him: the tool would list
    // and change every server, so he is refused all the same.
    config["management"] = json!({"groups": ["sre"], "subjects": ["bob"]});
    config["scopes"] = json!([{"subjects": ["bob"], "hide_tools": ["prod-db:delete_note"]}]);
    let proxy = Proxy::builder(&config).start();
    let alice = session(&proxy.url, &issuer.token("alice", &proxy.url).await).await;
    let bob = session(&proxy.url, &issuer.token("bob", &proxy.url).await).await;

    assert!(!offers_management(&bob).await);
    let refused = call(
        &bob,
        "upstream_servers",
        json!({"operation": "remove", "name": "scratch"}),
    )
    .await
    .expect("an answer");
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(
        text(&refused).contains("a scopes rule hides servers from you"),
        "{}",
        text(&refused)
    );
    assert_eq!(servers_of(&proxy).await, ["prod-db", "scratch"]);

    // Alice (group sre) manages: she sees the tool and removes scratch.
    assert!(offers_management(&alice).await);
    let removed = call(
        &alice,
        "upstream_servers",
        json!({"operation": "remove", "name": "scratch"}),
    )
    .await
    .expect("alice's change");
    assert!(!is_error(&removed), "{}", text(&removed));
    assert_eq!(servers_of(&proxy).await, ["prod-db"]);

    let records = proxy.finished_records("server_change", 2).await;
    assert_eq!(refusals_of(&records, "bob").len(), 1, "{records:?}");
    let change = records
        .iter()
        .find(|r| r["status"] == "success")
        .expect("alice's change is recorded");
    assert_eq!(change["identity"]["subject"], "alice", "{change}");
    assert_eq!(change["server_name"], "scratch");
    assert_eq!(change["tool_name"], "remove");
    let _ = alice.cancel().await;
    let _ = bob.cancel().await;
}

/// The attack of issue 47 on a cluster: a member with no grant asks one replica to remove a
/// server the whole team shares. Refused there, and every replica keeps the server; the
/// granted group's removal through one replica reaches the other.
#[tokio::test(flavor = "multi_thread")]
async fn in_a_cluster_only_the_granted_group_removes_a_shared_server() {
    let Some(postgres) = crate::support::postgres::Postgres::start() else {
        return;
    };
    let Some(node) = crate::support::node::oauth_node() else {
        return;
    };
    let issuer = Issuer::start(&node);
    let dir = tempfile::tempdir().expect("tempdir");
    let servers = vec![
        stdio_fixture("prod-db", &dir.path().join("db.log")),
        stdio_fixture("scratch", &dir.path().join("scratch.log")),
    ];
    let replica = |name: &str| {
        let mut config = config_with(servers.clone());
        config["auth"] = json!({"issuer": issuer.url});
        config["management"] = json!({"groups": ["sre"]});
        config["cluster"] = json!({"postgres": postgres.url(), "replica": name});
        Proxy::builder(&config).start()
    };
    let a = replica("a");
    let b = replica("b");
    let bob = session(&a.url, &issuer.token("bob", &a.url).await).await;
    let refused = call(
        &bob,
        "upstream_servers",
        json!({"operation": "remove", "name": "prod-db"}),
    )
    .await
    .expect("an answer");
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(
        text(&refused).contains("management.groups"),
        "{}",
        text(&refused)
    );
    for replica in [&a, &b] {
        assert_eq!(servers_of(replica).await, ["prod-db", "scratch"]);
    }

    let alice = session(&a.url, &issuer.token("alice", &a.url).await).await;
    let removed = call(
        &alice,
        "upstream_servers",
        json!({"operation": "remove", "name": "scratch"}),
    )
    .await
    .expect("alice's change");
    assert!(!is_error(&removed), "{}", text(&removed));
    crate::support::poll::until(
        "the removal reaches replica b",
        std::time::Duration::from_secs(30),
        || async {
            let now = servers_of(&b).await;
            (now == ["prod-db"]).then_some(()).ok_or(format!("{now:?}"))
        },
    )
    .await;
    assert_eq!(servers_of(&b).await, ["prod-db"]);
    let _ = bob.cancel().await;
    let _ = alice.cancel().await;
}
