//! End-to-end: the real `mcpproxy serve` in front of the real fixture upstream (stdio and
//! streamable HTTP), driven by an MCP client over streamable HTTP.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::poll::{until, until_value};

use crate::support::mcp::{
    PLUGIN_TIMEOUT_MS, Proxy, call, call_log_lines, config_with, connect, is_error,
    start_http_fixture, stdio_fixture, text,
};

const LEGACY: &str = "Tool 'call_tool' not found. Use call_tool_read, call_tool_write, or call_tool_destructive with matching intent.operation_type. See retrieve_tools for annotations and recommendations.";

#[tokio::test(flavor = "multi_thread")]
async fn tool_list_has_the_three_variants_upstream_servers_and_no_call_tool() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();
    let client = connect(&proxy.url).await;
    let tools = client.peer().list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "retrieve_tools",
            "call_tool_read",
            "call_tool_write",
            "call_tool_destructive",
            "upstream_servers"
        ]
    );
    let read = &tools[1];
    assert!(
        read.description
            .as_deref()
            .unwrap()
            .starts_with("Execute a read-only tool discovered via retrieve_tools.")
    );
    assert_eq!(
        read.annotations.as_ref().unwrap().read_only_hint,
        Some(true)
    );
    assert_eq!(
        tools[3].annotations.as_ref().unwrap().destructive_hint,
        Some(true)
    );

    let err = call(&client, "call_tool", json!({"name": "fx:echo"}))
        .await
        .unwrap_err();
    assert_eq!(err, LEGACY);
    client.cancel().await.unwrap();
}

/// `retrieve_tools` answers what an agent needs for one call, not every tool that shares a
/// word with the query: hits far less relevant than the best are left out, and only the
/// three best carry their `inputSchema` unless `"schemas": "all"` asks (the others say how
/// to get it). A filesystem server's 14 tools came back 13 at once, schemas and all (14 KB).
#[tokio::test(flavor = "multi_thread")]
async fn retrieve_tools_answers_with_the_relevant_hits_and_the_top_schemas() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();
    let client = connect(&proxy.url).await;
    let search = |arguments: Value| {
        let client = &client;
        async move {
            let result = call(client, "retrieve_tools", arguments).await.unwrap();
            assert!(!is_error(&result), "{}", text(&result));
            serde_json::from_str::<Value>(&text(&result)).unwrap()
        }
    };
    let by_default = search(json!({"query": "delete item note", "limit": 50})).await;
    let hits = by_default["tools"].as_array().unwrap();
    assert!(
        hits.len() > 3,
        "{}",
        hits.iter()
            .map(|h| format!("{} {}", h["name"], h["score"]))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let best = hits[0]["score"].as_f64().unwrap();
    for (rank, hit) in hits.iter().enumerate() {
        assert!(hit["score"].as_f64().unwrap() >= best * 0.4 - 1e-6, "{hit}");
        assert_eq!(hit.get("inputSchema").is_some(), rank < 3, "{rank}: {hit}");
        if rank >= 3 {
            assert!(
                hit["schema"]
                    .as_str()
                    .unwrap()
                    .contains("\"schemas\": \"all\""),
                "{hit}"
            );
        }
    }
    let all =
        search(json!({"query": "note item status echo tool", "limit": 50, "schemas": "all"})).await;
    assert!(
        all["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["inputSchema"].is_object()),
        "{all}"
    );
    let none = search(json!({"query": "note", "schemas": "none"})).await;
    assert!(
        none["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.get("inputSchema").is_none()),
        "{none}"
    );
    let wrong = call(
        &client,
        "retrieve_tools",
        json!({"query": "note", "schemas": "some"}),
    )
    .await
    .unwrap();
    assert!(is_error(&wrong));
    assert!(
        text(&wrong).contains("Parameter 'schemas' of retrieve_tools must be \"top\""),
        "{}",
        text(&wrong)
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn retrieve_tools_gives_annotations_sources_and_call_with() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();
    let client = connect(&proxy.url).await;

    let find = |result: &Value, name: &str| -> Value {
        result["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in {result}"))
            .clone()
    };
    let search = |query: &'static str, limit: u64| {
        let client = &client;
        async move {
            let result = call(
                client,
                "retrieve_tools",
                json!({"query": query, "limit": limit}),
            )
            .await
            .unwrap();
            assert!(!is_error(&result), "{}", text(&result));
            let body: Value = serde_json::from_str(&text(&result)).unwrap();
            assert_eq!(result.structured_content.as_ref(), Some(&body));
            body
        }
    };

    let notes = search("note", 5).await;
    assert!(
        notes["usage_instructions"]
            .as_str()
            .unwrap()
            .contains("call_tool_read")
    );
    assert_eq!(notes["total"], notes["tools"].as_array().unwrap().len());
    let delete_note = find(&notes, "fx:delete_note");
    // The server sent {destructiveHint: true}; the hints it left out take the MCP defaults.
    assert_eq!(
        delete_note["annotations"],
        json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true})
    );
    assert_eq!(delete_note["annotation_source"], "server");
    assert_eq!(delete_note["call_with"], "call_tool_destructive");
    assert_eq!(delete_note["server"], "fx");
    assert!(delete_note["inputSchema"]["properties"]["id"].is_object());
    assert!(delete_note["score"].as_f64().unwrap() > 0.0);
    let update_note = find(&notes, "fx:update_note");
    assert_eq!(update_note["call_with"], "call_tool_write");

    // Unannotated tools get the prefix annotator's inference, _meta beats the name.
    let items = search("delete item", 3).await;
    let delete_item = find(&items, "fx:delete_item");
    assert_eq!(delete_item["annotation_source"], "prefix-annotator");
    assert_eq!(delete_item["safety_class"], "dangerous");
    assert_eq!(delete_item["call_with"], "call_tool_destructive");
    let frob = find(&search("frobnicate", 3).await, "fx:frobnicate");
    assert_eq!(frob["annotation_source"], "meta");
    assert_eq!(frob["call_with"], "call_tool_read");
    let mystery = find(&search("mystery", 3).await, "fx:mystery_tool");
    assert_eq!(mystery["safety_class"], "unknown");
    assert_eq!(mystery["annotations"], Value::Null);
    assert_eq!(mystery["call_with"], "call_tool_write");
    let listed = find(&search("list items", 3).await, "fx:list_items");
    assert_eq!(listed["call_with"], "call_tool_read");

    // Limits are checked, and the exact name ranks first.
    assert_eq!(search("fx:echo", 1).await["tools"][0]["name"], "fx:echo");
    let bad = call(
        &client,
        "retrieve_tools",
        json!({"query": "x", "limit": 1000}),
    )
    .await
    .unwrap();
    assert!(
        is_error(&bad) && text(&bad).contains("from 1 to 100"),
        "{}",
        text(&bad)
    );
    let bad = call(&client, "retrieve_tools", json!({})).await.unwrap();
    assert!(is_error(&bad) && text(&bad).contains("'query' is required"));
    client.cancel().await.unwrap();
}

/// One matrix row through real MCP: variant, tool, extra arguments, expected outcome.
struct Row {
    variant: &'static str,
    tool: &'static str,
    extra: Value,
    /// `None`: allowed (the upstream is called). `Some(text)`: rejected with exactly this text.
    rejected: Option<String>,
}

fn row(variant: &'static str, tool: &'static str, extra: Value, rejected: Option<&str>) -> Row {
    Row {
        variant,
        tool,
        extra,
        rejected: rejected.map(str::to_owned),
    }
}

fn matrix_rows() -> Vec<Row> {
    let marked = |tool: &str| {
        format!("Tool 'fx:{tool}' is marked destructive by server, use call_tool_destructive")
    };
    let long = "x".repeat(1001);
    vec![
        // read: readOnlyHint / destructiveHint / none, operation_type absent and declared.
        row("call_tool_read", "get_status", json!({}), None),
        row(
            "call_tool_read",
            "get_status",
            json!({"intent": {"operation_type": "read"}}),
            None,
        ),
        row(
            "call_tool_read",
            "delete_note",
            json!({}),
            Some(&marked("delete_note")),
        ),
        row(
            "call_tool_read",
            "delete_note",
            json!({"intent": {"operation_type": "read"}}),
            Some(&marked("delete_note")),
        ),
        row("call_tool_read", "mystery_tool", json!({}), None),
        // write: readOnlyHint warns but allows; destructiveHint rejects; none allows.
        row("call_tool_write", "get_status", json!({}), None),
        row(
            "call_tool_write",
            "delete_note",
            json!({"intent": {"operation_type": "write"}}),
            Some(&marked("delete_note")),
        ),
        row(
            "call_tool_write",
            "update_note",
            json!({"args": {"id": "n1", "text": "t"}}),
            None,
        ),
        row("call_tool_write", "mystery_tool", json!({}), None),
        // destructive: anything goes.
        row(
            "call_tool_destructive",
            "delete_note",
            json!({"args": {"id": "n1"}}),
            None,
        ),
        row(
            "call_tool_destructive",
            "get_status",
            json!({"intent": {"operation_type": "destructive"}}),
            None,
        ),
        row("call_tool_destructive", "mystery_tool", json!({}), None),
        // both hints true counts as destructive.
        row(
            "call_tool_write",
            "both_hints",
            json!({}),
            Some(&marked("both_hints")),
        ),
        row("call_tool_destructive", "both_hints", json!({}), None),
        // Another declared type is an intent mismatch.
        row(
            "call_tool_read",
            "get_status",
            json!({"intent": {"operation_type": "write"}}),
            Some("Intent mismatch: tool is call_tool_read but intent declares write"),
        ),
        row(
            "call_tool_destructive",
            "delete_note",
            json!({"intent": {"operation_type": "read"}}),
            Some("Intent mismatch: tool is call_tool_destructive but intent declares read"),
        ),
        row(
            "call_tool_read",
            "get_status",
            json!({"intent": {"operation_type": "x"}}),
            Some("Invalid intent.operation_type 'x': must be read, write, or destructive"),
        ),
        // Inference for unannotated tools, and _meta.
        row(
            "call_tool_read",
            "delete_item",
            json!({"args": {"id": "1"}}),
            Some(
                "Tool 'fx:delete_item' is inferred destructive by prefix-annotator (name prefix 'delete_'), use call_tool_destructive",
            ),
        ),
        row(
            "call_tool_destructive",
            "delete_item",
            json!({"args": {"id": "1"}}),
            None,
        ),
        row("call_tool_read", "list_items", json!({}), None),
        row(
            "call_tool_read",
            "wipe_cache",
            json!({}),
            Some(
                "Tool 'fx:wipe_cache' is marked destructive by its _meta.safety_class, use call_tool_destructive",
            ),
        ),
        row("call_tool_read", "frobnicate", json!({}), None),
        // Sensitivity and reason, flat and nested.
        row(
            "call_tool_read",
            "get_status",
            json!({"intent_data_sensitivity": "private", "intent_reason": "audit"}),
            None,
        ),
        row(
            "call_tool_destructive",
            "delete_note",
            json!({"args": {"id": "n"}, "intent_data_sensitivity": "secret"}),
            Some(
                "Invalid intent.data_sensitivity 'secret': must be public, internal, private, or unknown",
            ),
        ),
        row(
            "call_tool_write",
            "update_note",
            json!({"args": {"id": "n", "text": "t"}, "intent": {"reason": long}}),
            Some("intent.reason exceeds maximum length of 1000 characters"),
        ),
    ]
}

async fn run_matrix(url: &str, log: &std::path::Path) {
    let client = connect(url).await;
    for (i, row) in matrix_rows().into_iter().enumerate() {
        let before = call_log_lines(log).len();
        let mut arguments = json!({"name": format!("fx:{}", row.tool)});
        for (k, v) in row.extra.as_object().unwrap() {
            arguments[k] = v.clone();
        }
        let result = call(&client, row.variant, arguments.clone()).await.unwrap();
        let after = call_log_lines(log);
        let what = format!("row {i}: {} {}", row.variant, arguments);
        match &row.rejected {
            Some(expected) => {
                assert!(
                    is_error(&result),
                    "{what}: expected a rejection, got {}",
                    text(&result)
                );
                assert_eq!(&text(&result), expected, "{what}");
                assert_eq!(after.len(), before, "{what}: the upstream was called");
            }
            None => {
                assert!(!is_error(&result), "{what}: {}", text(&result));
                assert_eq!(
                    after.len(),
                    before + 1,
                    "{what}: the upstream was not called once"
                );
                assert_eq!(after[before]["tool"], row.tool, "{what}");
            }
        }
    }
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn every_matrix_row_through_mcp_with_a_stdio_upstream() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();
    run_matrix(&proxy.url, log.path()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_matrix_row_through_mcp_with_a_streamable_http_upstream() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let (_fixture, fixture_url) = start_http_fixture("127.0.0.1:0", log.path());
    let proxy = Proxy::builder(&config_with(vec![
        json!({"name": "fx", "url": fixture_url}),
    ]))
    .start();
    run_matrix(&proxy.url, log.path()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_results_pass_through_unchanged() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();
    let client = connect(&proxy.url).await;
    let status = call(&client, "call_tool_read", json!({"name": "fx:get_status"}))
        .await
        .unwrap();
    assert_eq!(text(&status), "ok");
    assert_eq!(
        status.structured_content,
        Some(json!({"status": "ok", "server": "fx"}))
    );
    let failed = call(&client, "call_tool_read", json!({"name": "fx:fail"}))
        .await
        .unwrap();
    assert!(is_error(&failed));
    assert_eq!(text(&failed), "fixture failure");
    let echoed = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args_json": "{\"text\": \"héllo ✓\"}"}),
    )
    .await
    .unwrap();
    assert_eq!(text(&echoed), "héllo ✓");

    // Bad requests are told what is wrong, and nothing reaches the upstream.
    let before = call_log_lines(log.path()).len();
    for (arguments, expected) in [
        (json!({"name": "echo"}), "must be \"server:tool\""),
        (json!({"name": "nope:echo"}), "Unknown server 'nope'"),
        (json!({"name": "fx:nope"}), "Tool 'fx:nope' not found"),
        (
            json!({"name": "fx:echo", "args_json": "{bad"}),
            "not valid JSON",
        ),
        (
            json!({"name": "fx:echo", "args": {}, "args_json": "{}"}),
            "not both",
        ),
        (
            json!({"name": "fx:echo", "intent": {"reason": "a"}, "intent_reason": "b"}),
            "given twice",
        ),
    ] {
        let result = call(&client, "call_tool_read", arguments.clone())
            .await
            .unwrap();
        assert!(is_error(&result), "{arguments}");
        assert!(
            text(&result).contains(expected),
            "{arguments}: {}",
            text(&result)
        );
    }
    assert_eq!(call_log_lines(log.path()).len(), before);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_upstream_fails_clearly_others_keep_working_and_it_comes_back() {
    let http_log = tempfile::NamedTempFile::new().unwrap();
    let stdio_log = tempfile::NamedTempFile::new().unwrap();
    // A fixed port, so the restarted upstream is at the same address.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let (mut fixture, fixture_url) = start_http_fixture(&addr, http_log.path());
    let config = json!({
        "mcpServers": [
            {"name": "fh", "url": fixture_url},
            stdio_fixture("fs", stdio_log.path()),
        ],
        "upstream": {"reconnect_initial_ms": 100, "reconnect_max_ms": 400},
        "plugins": {"limits": {"timeout_ms": PLUGIN_TIMEOUT_MS}},
    });
    let proxy = Proxy::builder(&config).start();
    let client = connect(&proxy.url).await;
    let echo = |server: &str| json!({"name": format!("{server}:echo"), "args": {"text": "hi"}});
    assert_eq!(
        text(&call(&client, "call_tool_read", echo("fh")).await.unwrap()),
        "hi"
    );

    fixture.kill();
    // Until the proxy notices, a call may fail on the dead connection; after, it is refused.
    let message = until_value(
        "the proxy notices fh is gone",
        Duration::from_secs(30),
        || async {
            let result = call(&client, "call_tool_read", echo("fh")).await.unwrap();
            assert!(
                is_error(&result),
                "a dead upstream answered: {}",
                text(&result)
            );
            let message = text(&result);
            if message.contains("is not available") || message.contains("not connected") {
                Ok(message)
            } else {
                Err(message)
            }
        },
    )
    .await;
    assert!(message.contains("upstream server 'fh'"), "{message}");
    assert!(message.contains("reconnects by itself"), "{message}");
    // The other upstream is unaffected.
    assert_eq!(
        text(&call(&client, "call_tool_read", echo("fs")).await.unwrap()),
        "hi"
    );

    let (_fixture, _) = start_http_fixture(&addr, http_log.path());
    until(
        "the upstream comes back",
        Duration::from_secs(30),
        || async {
            let result = call(&client, "call_tool_read", echo("fh")).await.unwrap();
            if is_error(&result) {
                return Err(text(&result));
            }
            assert_eq!(text(&result), "hi");
            Ok(())
        },
    )
    .await;
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_added_upstream_appear_after_list_changed() {
    // New tools are held until approved unless the server accepts changes at once.
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut fixture = stdio_fixture("fx", log.path());
    fixture["auto_approve_tool_changes"] = json!(true);
    let proxy = Proxy::builder(&config_with(vec![fixture])).start();
    let client = connect(&proxy.url).await;
    let added = call(
        &client,
        "call_tool_write",
        json!({"name": "fx:add_tool", "args": {"name": "zebra_stripes"}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&added), "{}", text(&added));
    until("the new tool shows up", Duration::from_secs(30), || async {
        let result = call(
            &client,
            "retrieve_tools",
            json!({"query": "zebra_stripes", "limit": 1}),
        )
        .await
        .unwrap();
        // A hit, not a held tool named in the answer's note.
        let body: Value = serde_json::from_str(&text(&result)).unwrap_or_default();
        if body["tools"][0]["name"] == "fx:zebra_stripes" {
            Ok(())
        } else {
            Err(body.to_string())
        }
    })
    .await;
    let called = call(
        &client,
        "call_tool_write",
        json!({"name": "fx:zebra_stripes"}),
    )
    .await
    .unwrap();
    assert_eq!(text(&called), "dynamic zebra_stripes");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_from_foreign_origins_and_hosts_are_refused() {
    let proxy = Proxy::builder(&config_with(vec![])).start();
    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let post = |origin: Option<&str>, host: Option<&str>| {
        let mut req = http
            .post(&proxy.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(init.to_string());
        if let Some(origin) = origin {
            req = req.header("Origin", origin);
        }
        if let Some(host) = host {
            req = req.header("Host", host);
        }
        req.send()
    };
    assert_eq!(post(None, None).await.unwrap().status(), 200);
    assert_eq!(
        post(Some("http://localhost:3000"), None)
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        post(Some("http://evil.example"), None)
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(
        post(None, Some("evil.example")).await.unwrap().status(),
        403
    );
}

/// The official MCP Python SDK over streamable HTTP: its calls work, and the DELETE that
/// ends its session gets an answer it accepts (it logs `Session termination failed: 202`
/// for rmcp's own 202).
#[tokio::test(flavor = "multi_thread")]
async fn the_official_python_sdk_calls_and_ends_its_session_cleanly() {
    let Some(python) = crate::support::test_python() else {
        return;
    };
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/http_calls.py");
    let out = tokio::process::Command::new(&python)
        .arg(script)
        .args([proxy.url.as_str(), "3"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["texts"], json!(["http-0", "http-1", "http-2"]));
    assert!(!stderr.contains("Session termination failed"), "{stderr}");
}

/// One HTTP/1.1 exchange on an open socket: the status, the headers (names lower-cased) and
/// the body, which must come with a `Content-Length` (a reply a client can read to its end
/// and then reuse the connection for the next request).
fn exchange(
    socket: &mut std::net::TcpStream,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, std::collections::HashMap<String, String>, String) {
    use std::io::{BufRead, BufReader, Read, Write};
    let body = body.to_string();
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    socket.write_all(request.as_bytes()).unwrap();
    let mut reader = BufReader::new(socket);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line (the connection was closed?): {line:?}"));
    let mut found = std::collections::HashMap::new();
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        let Some((name, value)) = line.trim_end().split_once(':') else {
            break;
        };
        found.insert(name.to_ascii_lowercase(), value.trim().to_owned());
    }
    let length: usize = found
        .get("content-length")
        .unwrap_or_else(|| panic!("the answer has no Content-Length: {found:?}"))
        .parse()
        .unwrap();
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    (status, found, String::from_utf8(body).unwrap())
}

/// A request whose answer is its reply alone gets it as a JSON body (not an event stream),
/// so one connection carries a whole session: `initialize`, the notification and two calls.
#[test]
fn replies_come_as_json_bodies_and_one_connection_carries_a_session() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();
    let address = proxy.url.trim_start_matches("http://");
    let address = &address[..address.find('/').unwrap()];
    let mut socket = std::net::TcpStream::connect(address).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();

    let (status, headers, body) = exchange(
        &mut socket,
        "/mcp",
        &[],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "keep-alive", "version": "1"}}}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["content-type"], "application/json");
    let init: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(init["result"]["serverInfo"]["name"], "mcpproxy", "{body}");
    let session = headers["mcp-session-id"].clone();
    let session_headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];

    let (status, _, _) = exchange(
        &mut socket,
        "/mcp",
        &session_headers,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(status, 202);

    for (id, text) in [(2, "first"), (3, "second")] {
        let (status, headers, body) = exchange(
            &mut socket,
            "/mcp",
            &session_headers,
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "call_tool_read",
                "arguments": {"name": "fx:echo", "args": {"text": text}}}}),
        );
        assert_eq!(status, 200, "{body}");
        assert_eq!(headers["content-type"], "application/json", "{body}");
        let reply: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(reply["id"], id, "{body}");
        assert_eq!(reply["result"]["content"][0]["text"], text, "{body}");
    }
}

/// Every refused call is on the record, including one refused before it could be read: a
/// tool name without its `server:` prefix, through MCP and through REST.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_refused_before_it_is_read_is_on_the_record() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();
    let client = connect(&proxy.url).await;
    let result = call(
        &client,
        "call_tool_write",
        json!({"name": "echo", "args": {"text": "no prefix"}}),
    )
    .await
    .unwrap();
    assert!(is_error(&result));
    assert!(
        text(&result).contains("must be \"server:tool\""),
        "{}",
        text(&result)
    );
    client.cancel().await.unwrap();

    let http = reqwest::Client::new();
    let refused = http
        .post(format!("{}/api/v1/tools/call", proxy.base()))
        .header("X-API-Key", proxy.api_key())
        .json(&json!({"variant": "read", "name": ":lonely", "args": {"n": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);

    let records = proxy.finished_records("tool_call", 2).await;
    let mcp = records
        .iter()
        .find(|r| r["tool_name"] == "echo")
        .unwrap_or_else(|| panic!("no record of the MCP call: {records:#?}"));
    assert_eq!(mcp["server_name"], "");
    assert_eq!(mcp["status"], "error", "{mcp:#}");
    assert_eq!(mcp["source"], "mcp");
    assert_eq!(mcp["tool_variant"], "call_tool_write");
    assert_eq!(mcp["arguments"]["text"], "no prefix");
    assert!(
        mcp["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("must be \"server:tool\"")),
        "{mcp:#}"
    );
    let rest = records
        .iter()
        .find(|r| r["tool_name"] == "lonely")
        .unwrap_or_else(|| panic!("no record of the REST call: {records:#?}"));
    assert_eq!(rest["source"], "api");
    assert_eq!(rest["status"], "error", "{rest:#}");
    assert!(
        call_log_lines(log.path()).is_empty(),
        "nothing reached the upstream"
    );
}
