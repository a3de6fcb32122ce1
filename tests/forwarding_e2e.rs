//! What the proxy passes on about a call besides its arguments, seen from the fixture
//! upstream: the client's request `_meta` (without its progress token) and its
//! `notifications/cancelled`, on the aggregate and the direct endpoint.

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientRequest, Request, RequestMetaObject, ServerResult};
use rmcp::service::PeerRequestOptions;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

use crate::mcp_util::{Client, Proxy, call_log_lines, config_with, connect, stdio_fixture};

/// Sends `tools/call name arguments` with `_meta` `{"trace": trace}` and returns its handle.
async fn send(
    client: &Client,
    name: &str,
    arguments: Value,
    trace: &str,
) -> rmcp::service::RequestHandle<rmcp::RoleClient> {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
    let mut meta = RequestMetaObject::default();
    meta.0.insert("trace".into(), json!(trace));
    client
        .peer()
        .send_request_with_option(
            ClientRequest::CallToolRequest(Request::new(params)),
            PeerRequestOptions::no_options().with_meta(meta),
        )
        .await
        .unwrap()
}

/// Waits until the call log has a line that satisfies `pred`.
async fn wait_for_line(log: &Path, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
    wait_for_lines(log, 1, pred).await
}

/// Waits until the call log has `count` lines that satisfy `pred`.
async fn wait_for_lines(log: &Path, count: usize, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let lines = call_log_lines(log);
        if lines.iter().filter(|l| pred(l)).count() >= count || Instant::now() > deadline {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn request_meta_and_cancellation_reach_the_upstream() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::start(&config_with(vec![stdio_fixture("fx", log.path())]), &[]);

    // Aggregate endpoint: the _meta rides along; the progress token rmcp adds does not.
    let client = connect(&proxy.url).await;
    let handle = send(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args": {"text": "hi"}}),
        "aggregate-1",
    )
    .await;
    let answer = handle.await_response().await.unwrap();
    assert!(
        matches!(answer, ServerResult::CallToolResult(_)),
        "{answer:?}"
    );
    let lines = call_log_lines(log.path());
    let echo = lines.iter().find(|l| l["tool"] == "echo").unwrap();
    assert_eq!(echo["meta"], json!({"trace": "aggregate-1"}), "{lines:?}");

    // A cancelled call is cancelled upstream too.
    let handle = send(
        &client,
        "call_tool_read",
        json!({"name": "fx:slow", "args": {"ms": 30000}}),
        "aggregate-2",
    )
    .await;
    wait_for_line(log.path(), |l| l["tool"] == "slow").await;
    handle.cancel(Some("changed my mind".into())).await.unwrap();
    let lines = wait_for_line(log.path(), |l| {
        l["tool"] == "slow" && l["cancelled"] == true
    })
    .await;
    assert!(
        lines
            .iter()
            .any(|l| l["tool"] == "slow" && l["cancelled"] == true),
        "the upstream never saw the cancellation: {lines:?}"
    );

    // The direct endpoint does the same under the tool's own name.
    let direct = connect(&format!("{}/mcp/servers/fx", proxy.base())).await;
    let tools = direct.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"), "{tools:?}");
    let handle = send(&direct, "slow", json!({"ms": 30000}), "direct-1").await;
    let seen = wait_for_line(log.path(), |l| l["meta"]["trace"] == "direct-1").await;
    assert!(
        seen.iter()
            .any(|l| l["tool"] == "slow" && l["meta"]["trace"] == "direct-1"),
        "{seen:?}"
    );
    handle.cancel(None).await.unwrap();
    let lines = wait_for_lines(log.path(), 2, |l| {
        l["tool"] == "slow" && l["cancelled"] == true
    })
    .await;
    assert_eq!(
        lines
            .iter()
            .filter(|l| l["tool"] == "slow" && l["cancelled"] == true)
            .count(),
        2,
        "{lines:?}"
    );
}

/// An unknown server on the direct endpoint, and an unknown tool there, are clear errors.
#[tokio::test(flavor = "multi_thread")]
async fn the_direct_endpoint_names_what_is_missing() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::start(&config_with(vec![stdio_fixture("fx", log.path())]), &[]);
    let nobody = ()
        .serve(StreamableHttpClientTransport::from_uri(format!(
            "{}/mcp/servers/nobody",
            proxy.base()
        )))
        .await;
    let error = match nobody {
        Ok(_) => panic!("a session with an unknown server opened"),
        Err(e) => format!("{e:?}"),
    };
    assert!(error.contains("no upstream server 'nobody'"), "{error}");
    assert!(
        error.contains("fx"),
        "names the configured servers: {error}"
    );

    let direct = connect(&format!("{}/mcp/servers/fx", proxy.base())).await;
    let error = crate::mcp_util::call(&direct, "no_such_tool", json!({}))
        .await
        .unwrap_err();
    assert!(error.contains("Tool 'no_such_tool' not found"), "{error}");
    // The built-in tools are not on the direct endpoint.
    let error = crate::mcp_util::call(&direct, "retrieve_tools", json!({"query": "x"}))
        .await
        .unwrap_err();
    assert!(error.contains("not found"), "{error}");
}
