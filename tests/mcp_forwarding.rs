//! What the proxy passes on about a call besides its arguments, seen from the fixture
//! upstream: the client's request `_meta` (without its progress token) and its
//! `notifications/cancelled`, on the aggregate and the direct endpoint.

use std::path::Path;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientRequest, Request, RequestMetaObject, ServerResult};
use rmcp::service::PeerRequestOptions;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

use crate::support::mcp::{Client, Proxy, call_log_lines, config_with, connect, stdio_fixture};
use crate::support::poll::{until, until_value};

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
    let what = format!("{count} matching lines in the call log");
    until_value(&what, Duration::from_secs(30), || async {
        let lines = call_log_lines(log);
        if lines.iter().filter(|l| pred(l)).count() >= count {
            Ok(lines)
        } else {
            Err(format!("{lines:?}"))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn request_meta_and_cancellation_reach_the_upstream() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();

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
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();
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
    let error = crate::support::mcp::call(&direct, "no_such_tool", json!({}))
        .await
        .unwrap_err();
    assert!(error.contains("Tool 'no_such_tool' not found"), "{error}");
    // The built-in tools are not on the direct endpoint.
    let error = crate::support::mcp::call(&direct, "retrieve_tools", json!({"query": "x"}))
        .await
        .unwrap_err();
    assert!(error.contains("not found"), "{error}");
}

/// Counts the progress notifications a client gets, by token.
#[derive(Clone, Default)]
struct ProgressSeen(std::sync::Arc<std::sync::Mutex<Vec<(rmcp::model::ProgressToken, f64)>>>);

impl rmcp::ClientHandler for ProgressSeen {
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        mcpproxy_support::lock(&self.0).push((params.progress_token, params.progress));
    }
}

impl ProgressSeen {
    fn for_token(&self, token: &rmcp::model::ProgressToken) -> Vec<f64> {
        let mut seen: Vec<f64> = mcpproxy_support::lock(&self.0)
            .iter()
            .filter(|(t, _)| t == token)
            .map(|(_, p)| *p)
            .collect();
        seen.sort_by(f64::total_cmp);
        seen
    }
}

/// Every progress notification a stdio server sends about a call reaches the client, even
/// when the last one comes right before the answer: the answer takes the call lane, the
/// notifications rmcp's session, and the answer waits for them to be relayed.
#[tokio::test(flavor = "multi_thread")]
async fn every_progress_notification_sent_before_the_answer_reaches_the_client() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut fixture = stdio_fixture("fx", log.path());
    fixture["env"] = json!({"MCP_FIXTURE_ECHO_PROGRESS": "5"});
    let proxy = Proxy::builder(&config_with(vec![fixture])).start();
    let seen = ProgressSeen::default();
    let client = seen
        .clone()
        .serve(StreamableHttpClientTransport::from_uri(proxy.url.clone()))
        .await
        .unwrap();
    for round in 0..20 {
        let Value::Object(arguments) = json!({"name": "fx:echo", "args": {"text": "hi"}}) else {
            unreachable!()
        };
        let params = CallToolRequestParams::new("call_tool_read").with_arguments(arguments);
        let handle = client
            .peer()
            .send_request_with_option(
                ClientRequest::CallToolRequest(Request::new(params)),
                PeerRequestOptions::no_options(),
            )
            .await
            .unwrap();
        let token = handle.progress_token.clone();
        let answer = handle.await_response().await.unwrap();
        let ServerResult::CallToolResult(result) = answer else {
            panic!("round {round}: {answer:?}");
        };
        assert_ne!(result.is_error, Some(true), "round {round}: {result:?}");
        // The client's handler runs each notification as a task of its own: give the last
        // ones a moment, then every one must be there (none lost after the answer).
        until(
            "five progress notifications",
            Duration::from_secs(10),
            || async {
                match seen.for_token(&token) {
                    got if got.len() < 5 => Err(format!("{got:?}")),
                    _ => Ok(()),
                }
            },
        )
        .await;
        assert_eq!(
            seen.for_token(&token),
            [1.0, 2.0, 3.0, 4.0, 5.0],
            "round {round}"
        );
    }
}
