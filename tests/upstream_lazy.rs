//! Lazy servers (`"start": "lazy"`): a server mcpproxy has listed before is not started
//! with it, yet `retrieve_tools` finds its tools at once (from its pins); its first call
//! starts it and is answered; after `idle_stop_secs` without a call its process is gone
//! again, its tools still known, and the next call starts it anew. A server never listed
//! is started once to learn its tools, then left to idle.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mcp::{
    Proxy, call, call_log_lines, config_with, connect, is_error, stdio_fixture, text,
};

/// How the proxy's REST API shows `name`: its state word and tool count.
async fn state_of(proxy: &Proxy, name: &str) -> (String, u64) {
    let body = proxy.get_json("/api/v1/upstreams").await;
    let servers = body["data"].as_array().cloned().unwrap_or_default();
    let server = servers
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {body}"));
    (
        server["state"].as_str().unwrap_or_default().to_owned(),
        server["tools"].as_u64().unwrap_or_default(),
    )
}

/// The fixture processes started with `log` as their call log.
fn fixture_processes(log: &Path) -> usize {
    let log = log.display().to_string();
    crate::support::command_lines()
        .iter()
        .filter(|(_, line)| line.contains("--call-log") && line.contains(&log))
        .count()
}

/// Waits until `name` is idle with its tools known and no process of it runs.
async fn until_idle(proxy: &Proxy, name: &str, log: &Path) {
    crate::support::poll::until(
        &format!("{name} idle, its process gone"),
        Duration::from_secs(60),
        || async {
            let (state, tools) = state_of(proxy, name).await;
            let running = fixture_processes(log);
            if state == "idle" && tools > 0 && running == 0 {
                Ok(())
            } else {
                Err(format!("{state}, {tools} tools, {running} process(es)"))
            }
        },
    )
    .await;
}

async fn found(client: &crate::support::mcp::Client, tool: &str) -> bool {
    let answer = call(client, "retrieve_tools", json!({"query": "echo"}))
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(&text(&answer)).unwrap();
    answer["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|t| t["name"] == tool))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lazy_server_starts_on_its_first_call_and_stops_when_idle() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let mut server = stdio_fixture("fx", &log);
    server["start"] = json!("lazy");
    server["idle_stop_secs"] = json!(1);
    let config = config_with(vec![server]);

    // Never listed: started once to learn its tools, then stopped when idle.
    let mut proxy = Proxy::builder(&config).start();
    until_idle(&proxy, "fx", &log).await;
    let client = connect(&proxy.url).await;
    assert!(
        found(&client, "fx:echo").await,
        "an idle server's tools are found"
    );
    assert_eq!(fixture_processes(&log), 0, "retrieve_tools starts nothing");

    // Its first call starts it and is answered.
    let echoed = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args": {"text": "woken"}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&echoed), "{}", text(&echoed));
    assert_eq!(text(&echoed), "woken");
    assert_eq!(call_log_lines(&log).len(), 1);
    until_idle(&proxy, "fx", &log).await;
    client.cancel().await.unwrap();
    proxy.stop();

    // A restart starts nothing, and knows its tools from the first moment.
    let proxy = Proxy::builder(&config).data_dir(proxy.data_dir).start();
    let (state, tools) = state_of(&proxy, "fx").await;
    assert_eq!(state, "idle", "a lazy server already listed is not started");
    assert!(tools > 0);
    assert_eq!(fixture_processes(&log), 0);
    let client = connect(&proxy.url).await;
    assert!(found(&client, "fx:echo").await);
    let echoed = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args": {"text": "again"}}),
    )
    .await
    .unwrap();
    assert_eq!(text(&echoed), "again", "{echoed:?}");
    assert_eq!(call_log_lines(&log).len(), 2);
    // The CLI shows the state too.
    let config_file = proxy.data_dir.path().join("mcp_config.json");
    until_idle(&proxy, "fx", &log).await;
    let list = crate::support::TestCommand::new(proxy.data_dir.path())
        .args(["upstream", "list", "--config"])
        .args([&config_file])
        .output();
    let row = list
        .stdout()
        .lines()
        .find(|l| l.starts_with("fx "))
        .map(str::to_owned)
        .unwrap_or_default();
    assert!(
        row.split_whitespace().nth(1) == Some("idle"),
        "{}",
        list.stdout()
    );
    client.cancel().await.unwrap();
}

/// A lazy server whose start fails answers the call that woke it with why, and is tried
/// again by the next call, not in a loop meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn a_lazy_start_that_fails_answers_the_call_and_the_next_call_tries_again() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    // A copy of the fixture that the test can take away and put back: the launch stays
    // the approved one, only the program is missing.
    let bin_dir = dir.path().join("bin");
    std::fs::create_dir(&bin_dir).unwrap();
    let program = bin_dir.join("mcp-fixture");
    std::fs::copy(crate::support::mcp::fixture_bin(), &program).unwrap();
    let mut server = stdio_fixture("fx", &log);
    server["command"] = json!(program);
    server["start"] = json!("lazy");
    server["idle_stop_secs"] = json!(1);
    let config = config_with(vec![server]);
    let mut proxy = Proxy::builder(&config).start();
    until_idle(&proxy, "fx", &log).await;
    proxy.stop();

    let hidden = dir.path().join("mcp-fixture.away");
    std::fs::rename(&program, &hidden).unwrap();
    let proxy = Proxy::builder(&config).data_dir(proxy.data_dir).start();
    let client = connect(&proxy.url).await;
    let failed = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args": {"text": "x"}}),
    )
    .await;
    let said = match failed {
        Ok(result) => {
            assert!(is_error(&result), "{result:?}");
            text(&result)
        }
        Err(message) => message,
    };
    eprintln!("the failed call said: {said}");
    assert!(said.contains("upstream server 'fx'"), "{said}");
    assert!(
        said.contains("error"),
        "the start's failure is named: {said}"
    );
    let (state, tools) = state_of(&proxy, "fx").await;
    assert!(state == "error" && tools > 0, "{state}, {tools} tools");

    // Back in place: the next call starts it.
    std::fs::rename(&hidden, &program).unwrap();
    let echoed = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args": {"text": "back"}}),
    )
    .await
    .unwrap();
    assert_eq!(text(&echoed), "back", "{echoed:?}");
    client.cancel().await.unwrap();
}
