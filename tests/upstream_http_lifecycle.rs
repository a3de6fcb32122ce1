//! An HTTP upstream of MCP 2026-07-28 (the fixture, an rmcp server, answers
//! `server/discover`, so its session begins without `initialize`): a tool it adds still
//! reaches the proxy's clients at once (its `notifications/tools/list_changed` comes on the
//! stream of the call that changed it), not at the next periodic sweep
//! (`tools_refresh_secs`, here a day).

use std::time::Duration;

use serde_json::json;

use crate::support::mcp::{Proxy, call, config_with, connect, is_error, start_http_fixture, text};

#[tokio::test(flavor = "multi_thread")]
async fn tools_added_on_a_2026_07_28_http_upstream_appear_at_once() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let (mut web, url) = start_http_fixture("127.0.0.1:0", log.path());
    let mut config = config_with(vec![json!({
        "name": "web", "url": url, "auto_approve_tool_changes": true,
    })]);
    config["upstream"] = json!({"tools_refresh_secs": 86400});
    let proxy = Proxy::builder(&config).start();
    let client = connect(&proxy.url).await;
    let added = call(
        &client,
        "call_tool_write",
        json!({"name": "web:add_tool", "args": {"name": "zebra_stripes"}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&added), "{}", text(&added));
    crate::support::poll::until("the new tool shows up", Duration::from_secs(30), || async {
        let result = call(
            &client,
            "retrieve_tools",
            json!({"query": "zebra_stripes", "limit": 1}),
        )
        .await
        .unwrap();
        let found = text(&result);
        if found.contains("web:zebra_stripes") {
            Ok(())
        } else {
            Err(found)
        }
    })
    .await;
    client.cancel().await.unwrap();
    web.kill();
}
