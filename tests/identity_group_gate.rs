//! The caller in the plugins' call context: `mcpproxy serve` with `auth` against a real
//! authorization server (oidc-provider, `tests/oauth/issuer.mjs`) that issues tokens to
//! `alice` (groups sre, dev) and `bob` (group dev). The `group-gate` validator (built from
//! `plugins/group-gate`, loaded from `--plugins DIR`) lets destructive calls to `prod-db`
//! through for group `sre` only: the same call is allowed for alice and rejected, with the
//! plugin's message, for bob, and each record names its caller and its verdict. Beside it
//! runs `test-caller-unaware` (`plugins/fixtures/caller-unaware`), built against the WIT
//! contract as it was before `host.caller`: it loads and judges unchanged.

use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::support::artifact;
use crate::support::issuer::Issuer;
use crate::support::mcp::{
    Client, PLUGIN_TIMEOUT_MS, Proxy, call, config_with, is_error, stdio_fixture, text,
};

/// An MCP session on `url` as the holder of `token`.
pub(crate) async fn session(url: &str, token: &str) -> Client {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token),
    );
    ().serve(transport).await.expect("connect with a token")
}

/// A `--plugins` dir holding the given components of the plugin build.
fn plugins_dir(crates: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("plugins dir");
    for name in crates {
        std::fs::copy(artifact(name), dir.path().join(format!("{name}.wasm")))
            .expect("copy a plugin component");
    }
    dir
}

#[tokio::test(flavor = "multi_thread")]
async fn group_gate_decides_by_the_callers_group_beside_a_plugin_built_before_caller() {
    let Some(node) = crate::support::node::oauth_node() else {
        return;
    };
    let issuer = Issuer::start(&node);
    let log = tempfile::NamedTempFile::new().expect("call log");
    let plugins = plugins_dir(&["group_gate", "caller_unaware"]);
    let mut config = config_with(vec![stdio_fixture("prod-db", log.path())]);
    config["auth"] = json!({"issuer": issuer.url});
    config["plugins"] = json!({
        "limits": {"timeout_ms": PLUGIN_TIMEOUT_MS},
        "validators": ["intent-matrix", "group-gate", "test-caller-unaware"],
        "settings": {"group-gate": {"rules": [
            {"servers": ["prod-db"], "operations": ["destructive"], "groups": ["sre"]}
        ]}},
    });
    let dir = plugins.path().to_str().expect("a UTF-8 path");
    let proxy = Proxy::builder(&config).args(&["--plugins", dir]).start();
    let alice = session(&proxy.url, &issuer.token("alice", &proxy.url).await).await;
    let bob = session(&proxy.url, &issuer.token("bob", &proxy.url).await).await;
    let delete = json!({"name": "prod-db:delete_note", "args": {"id": "n1"},
                        "intent": {"operation_type": "destructive"}});

    // The same destructive call: alice (sre) is let through, bob (dev) is not.
    let allowed = call(&alice, "call_tool_destructive", delete.clone())
        .await
        .expect("alice's call");
    assert!(!is_error(&allowed), "{}", text(&allowed));
    assert_eq!(text(&allowed), "deleted note n1");
    let refused = call(&bob, "call_tool_destructive", delete.clone())
        .await
        .expect("bob's call");
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(
        text(&refused).contains(
            "group-gate: destructive calls to 'prod-db:delete_note' are only for group sre; \
             'bob' is not (groups: dev)"
        ),
        "{}",
        text(&refused)
    );
    // Reads are not gated.
    let read = call(
        &bob,
        "call_tool_read",
        json!({"name": "prod-db:get_status"}),
    )
    .await
    .expect("bob reads");
    assert!(!is_error(&read), "{}", text(&read));

    // The plugin built against the contract before `host.caller` judges beside the gate:
    // it refuses alice's destructive call that carries its marker word.
    let marked = json!({"name": "prod-db:delete_note", "args": {"id": "forbidden"},
                        "intent": {"operation_type": "destructive"}});
    let unaware = call(&alice, "call_tool_destructive", marked)
        .await
        .expect("alice's marked call");
    assert!(is_error(&unaware), "{}", text(&unaware));
    assert!(
        text(&unaware).contains("test-caller-unaware: destructive calls carrying 'forbidden'"),
        "{}",
        text(&unaware)
    );

    // Every record names its caller and its verdict.
    let records = proxy.finished_records("tool_call", 4).await;
    let find = |subject: &str, tool: &str, status: &str| {
        records
            .iter()
            .find(|r| {
                r["identity"]["subject"] == subject
                    && r["tool_name"] == tool
                    && r["status"] == status
            })
            .cloned()
            .unwrap_or_else(|| {
                panic!("no {status} record of {subject} calling {tool}: {records:?}")
            })
    };
    let alice_ok = find("alice", "delete_note", "success");
    assert_eq!(alice_ok["identity"]["groups"], json!(["sre", "dev"]));
    assert_eq!(alice_ok["verdict"]["decision"], "allow", "{alice_ok}");
    let bob_blocked = find("bob", "delete_note", "blocked");
    assert_eq!(bob_blocked["identity"]["groups"], json!(["dev"]));
    assert_eq!(
        bob_blocked["verdict"]["decision"], "reject",
        "{bob_blocked}"
    );
    assert_eq!(
        bob_blocked["verdict"]["plugin"], "group-gate",
        "{bob_blocked}"
    );
    let alice_blocked = find("alice", "delete_note", "blocked");
    assert_eq!(
        alice_blocked["verdict"]["plugin"], "test-caller-unaware",
        "{alice_blocked}"
    );
    // Only alice's allowed call reached the upstream.
    let calls: Vec<Value> = crate::support::mcp::call_log_lines(log.path());
    let deletes = calls.iter().filter(|c| c["tool"] == "delete_note").count();
    assert_eq!(deletes, 1, "{calls:?}");
    let _ = alice.cancel().await;
    let _ = bob.cancel().await;
}

/// `plugins check --cases` runs each case as the caller it names (`"caller"`): the group
/// gate's own cases (`plugins/group-gate/cases.json`) pass, and a case that expects the
/// wrong verdict for its caller fails.
#[test]
fn plugins_check_runs_cases_as_the_caller_they_name() {
    let data = tempfile::tempdir().expect("data dir");
    let cases =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/group-gate/cases.json");
    let out = crate::support::TestCommand::new(data.path())
        .args(["plugins", "check"])
        .args([artifact("group_gate")])
        .args(["--cases".as_ref(), cases.as_os_str()])
        .output();
    out.assert_code(0);
    assert!(
        out.stdout().lines().any(|l| l == "6 passed, 0 failed"),
        "{}",
        out.stdout()
    );

    let wrong = data.path().join("wrong.json");
    std::fs::write(
        &wrong,
        r#"[{"name": "bob expected to pass",
             "variant": "destructive", "tool": {"server": "prod-db", "name": "drop_table"},
             "settings": {"rules": [{"servers": ["prod-db"], "groups": ["sre"]}]},
             "caller": {"subject": "bob", "groups": ["dev"]},
             "expect": "allow"}]"#,
    )
    .expect("write the cases");
    let out = crate::support::TestCommand::new(data.path())
        .args(["plugins", "check"])
        .args([artifact("group_gate")])
        .args(["--cases".as_ref(), wrong.as_os_str()])
        .output();
    assert_ne!(out.code(), Some(0), "{}", out.stdout());
    assert!(
        out.stdout().contains("FAIL  bob expected to pass"),
        "{}",
        out.stdout()
    );
}
