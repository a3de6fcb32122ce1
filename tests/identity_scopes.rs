//! `scopes`: servers and tools hidden from logged-in callers. `mcpproxy serve` with `auth`
//! against the real authorization server of `tests/oauth/issuer.mjs` (`alice`: sre, dev;
//! `bob`: dev) and a rule that hides the server `prod-db` and the tool `docs:delete_note`
//! from `bob`. Bob's `retrieve_tools` neither lists nor names them, a call naming them is
//! refused with the same words as a call of a tool that does not exist, the direct endpoint
//! `/mcp/servers/prod-db` answers him as for a server that is not configured, and the one of
//! `docs` lists no `delete_note`. Alice, whom no rule names, sees everything.

use serde_json::{Value, json};

use crate::identity_group_gate::session;
use crate::support::issuer::Issuer;
use crate::support::mcp::{Client, Proxy, call, config_with, is_error, stdio_fixture, text};

/// The names `tools/list` gives `client`.
async fn tool_names(client: &Client) -> Vec<String> {
    client
        .peer()
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

/// `retrieve_tools` for `query`: the whole answer as text, and the tools' names.
async fn retrieve(client: &Client, query: &str) -> (String, Vec<String>) {
    let result = call(
        client,
        "retrieve_tools",
        json!({"query": query, "limit": 50}),
    )
    .await
    .expect("retrieve_tools");
    let body: Value = serde_json::from_str(&text(&result)).expect("a JSON answer");
    let names = body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_owned())
        .collect();
    (text(&result), names)
}

const NOT_AVAILABLE: &str = "is not available to this caller: it does not exist or is not \
                             offered to you. Use retrieve_tools to find the tools you can call.";

#[tokio::test(flavor = "multi_thread")]
async fn scopes_hide_servers_and_tools_from_the_callers_they_name() {
    let Some(node) = crate::support::node::oauth_node() else {
        return;
    };
    let issuer = Issuer::start(&node);
    let db_log = tempfile::NamedTempFile::new().expect("call log");
    let docs_log = tempfile::NamedTempFile::new().expect("call log");
    let mut config = config_with(vec![
        stdio_fixture("prod-db", db_log.path()),
        stdio_fixture("docs", docs_log.path()),
    ]);
    config["auth"] = json!({"issuer": issuer.url});
    config["scopes"] = json!([
        {"subjects": ["bob"], "hide_servers": ["prod-db"], "hide_tools": ["docs:delete_note"]}
    ]);
    let proxy = Proxy::builder(&config).start();
    let alice_token = issuer.token("alice", &proxy.url).await;
    let bob_token = issuer.token("bob", &proxy.url).await;
    let alice = session(&proxy.url, &alice_token).await;
    let bob = session(&proxy.url, &bob_token).await;

    // retrieve_tools: alice finds prod-db's tools and docs:delete_note; bob finds neither,
    // and nothing in his answer names them.
    let (_, seen_by_alice) = retrieve(&alice, "delete note status").await;
    assert!(
        seen_by_alice.iter().any(|n| n.starts_with("prod-db:")),
        "{seen_by_alice:?}"
    );
    assert!(
        seen_by_alice.contains(&"docs:delete_note".to_owned()),
        "{seen_by_alice:?}"
    );
    let (answer, seen_by_bob) = retrieve(&bob, "delete note status").await;
    assert!(
        !seen_by_bob.is_empty(),
        "bob still finds the tools he may use"
    );
    assert!(!answer.contains("prod-db"), "{answer}");
    assert!(!answer.contains("docs:delete_note"), "{answer}");

    // A call naming a hidden server or tool reads as one of a tool that does not exist.
    for (tool, name) in [
        ("call_tool_read", "prod-db:get_status"),
        ("call_tool_destructive", "docs:delete_note"),
        ("call_tool_read", "prod-db:no_such_tool"),
        ("call_tool_read", "no-such-server:get_status"),
    ] {
        let refused = call(&bob, tool, json!({"name": name, "args": {"id": "n1"}}))
            .await
            .expect("an answer");
        assert!(is_error(&refused), "{name}: {}", text(&refused));
        assert_eq!(
            text(&refused),
            format!("Tool '{name}' {NOT_AVAILABLE}"),
            "{name}"
        );
    }
    let allowed = call(
        &alice,
        "call_tool_read",
        json!({"name": "prod-db:get_status"}),
    )
    .await
    .expect("alice's call");
    assert!(!is_error(&allowed), "{}", text(&allowed));
    assert!(
        crate::support::mcp::call_log_lines(db_log.path()).len() == 1,
        "only alice's call reached prod-db"
    );

    // The direct endpoints: prod-db answers bob as a server that is not configured (and
    // the list of configured servers leaves it out); docs lists no delete_note for him.
    let db_direct = format!("{}/mcp/servers/prod-db", proxy.base());
    let answer = reqwest::Client::new()
        .post(&db_direct)
        .bearer_auth(&bob_token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "scopes-test", "version": "1"}}})
            .to_string(),
        )
        .send()
        .await
        .expect("reach the direct endpoint");
    assert_eq!(answer.status().as_u16(), 404);
    let body: Value = answer.json().await.expect("a JSON-RPC error");
    assert_eq!(
        body["error"]["message"],
        "there is no upstream server 'prod-db' behind /mcp/servers/; configured servers: docs",
        "{body}"
    );
    let alice_db = session(&db_direct, &alice_token).await;
    assert!(
        !alice_db
            .peer()
            .list_all_tools()
            .await
            .expect("tools/list")
            .is_empty(),
        "alice reaches prod-db's direct endpoint"
    );
    let docs_direct = format!("{}/mcp/servers/docs", proxy.base());
    let bob_docs = session(&docs_direct, &bob_token).await;
    let names = tool_names(&bob_docs).await;
    assert!(names.contains(&"get_status".to_owned()), "{names:?}");
    assert!(!names.contains(&"delete_note".to_owned()), "{names:?}");
    let hidden = call(&bob_docs, "delete_note", json!({"id": "n1"})).await;
    let missing = call(&bob_docs, "no_such_tool", json!({})).await;
    let hidden = hidden.expect_err("a hidden tool is not found");
    assert_eq!(
        hidden.replace("delete_note", "X"),
        missing
            .expect_err("a missing tool is not found")
            .replace("no_such_tool", "X"),
        "a hidden tool reads as one the server does not have"
    );
    let alice_docs = session(&docs_direct, &alice_token).await;
    let names = tool_names(&alice_docs).await;
    assert!(names.contains(&"delete_note".to_owned()), "{names:?}");

    // The refusals are on the record, under bob's name.
    let records = proxy.finished_records("tool_call", 5).await;
    let refused = records
        .iter()
        .filter(|r| {
            r["identity"]["subject"] == "bob"
                && r["error_message"]
                    .as_str()
                    .is_some_and(|m| m.contains("is not available to this caller"))
        })
        .count();
    assert_eq!(refused, 4, "{records:?}");
    for client in [alice, bob, alice_db, bob_docs, alice_docs] {
        let _ = client.cancel().await;
    }
}

/// The aggregate endpoint's prompts and resources of a hidden server (server-everything,
/// from `tests/npm`): absent from bob's lists, and a prompt named on it reads as one that
/// does not exist; alice, whom no rule names, lists and gets them.
#[tokio::test(flavor = "multi_thread")]
async fn scopes_hide_a_servers_prompts_and_resources() {
    use rmcp::model::GetPromptRequestParams;
    if !crate::support::mcp::npm_bin_installed("mcp-server-everything") {
        return;
    }
    let Some(node) = crate::support::node::oauth_node() else {
        return;
    };
    let issuer = Issuer::start(&node);
    let mut config = config_with(vec![json!({
        "name": "everything",
        "command": "npx",
        "args": ["--prefix", crate::support::mcp::npm_dir(), "--no-install",
                 "mcp-server-everything", "stdio"],
    })]);
    config["auth"] = json!({"issuer": issuer.url});
    config["scopes"] = json!([{"subjects": ["bob"], "hide_servers": ["everything"]}]);
    let proxy = Proxy::builder(&config).start();
    let alice = session(&proxy.url, &issuer.token("alice", &proxy.url).await).await;
    let bob = session(&proxy.url, &issuer.token("bob", &proxy.url).await).await;

    let prompts = alice
        .peer()
        .list_all_prompts()
        .await
        .expect("alice's prompts");
    let simple = prompts
        .iter()
        .find(|p| p.arguments.as_ref().is_none_or(Vec::is_empty))
        .expect("a prompt without arguments")
        .name
        .clone();
    assert!(simple.starts_with("everything:"), "{simple}");
    alice
        .peer()
        .get_prompt(GetPromptRequestParams::new(simple.clone()))
        .await
        .expect("alice gets the prompt");
    assert!(
        !alice
            .peer()
            .list_all_resources()
            .await
            .expect("resources")
            .is_empty()
    );

    assert_eq!(
        bob.peer().list_all_prompts().await.expect("bob's prompts"),
        []
    );
    assert_eq!(
        bob.peer()
            .list_all_resources()
            .await
            .expect("bob's resources"),
        []
    );
    assert_eq!(
        bob.peer()
            .list_all_resource_templates()
            .await
            .expect("bob's templates"),
        []
    );
    let hidden = bob
        .peer()
        .get_prompt(GetPromptRequestParams::new(simple.clone()))
        .await
        .expect_err("a hidden server's prompt")
        .to_string();
    let missing = bob
        .peer()
        .get_prompt(GetPromptRequestParams::new("nobody:greet"))
        .await
        .expect_err("a prompt of no server")
        .to_string();
    assert!(
        hidden.contains(&format!(
            "prompt '{simple}' is not available to this caller"
        )),
        "{hidden}"
    );
    assert_eq!(
        hidden.replace(&simple, "X"),
        missing.replace("nobody:greet", "X"),
        "a hidden server's prompt reads as one that does not exist"
    );
    assert!(!missing.contains("everything"), "{missing}");
    let _ = alice.cancel().await;
    let _ = bob.cancel().await;
}
