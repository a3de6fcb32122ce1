//! End-to-end: the audit trail of real calls, through the REST API and `mcpproxy activity`,
//! with the server up and down, and after a crash.

use std::time::Duration;

use serde_json::{Value, json};

use rmcp::ServiceExt;

use crate::support::TestCommand;
use crate::support::mcp::{Proxy, call, config_with, connect, is_error, stdio_fixture, text};
use crate::support::poll::{until, until_value};

fn api_key(proxy: &Proxy) -> String {
    proxy.api_key()
}

fn api_base(proxy: &Proxy) -> String {
    proxy.base() + "/api/v1"
}

async fn get(url: &str, key: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new().get(url);
    if let Some(key) = key {
        req = req.header("X-API-Key", key);
    }
    let response = req.send().await.expect("GET");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON body"))
}

fn cli_config(proxy: &Proxy, log: &std::path::Path) -> std::path::PathBuf {
    proxy.cli_config(log)
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_of_every_variant_land_in_the_api_and_the_cli() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();
    let client = connect(&proxy.url).await;
    let reason = "user asked: \"clean up\" — ünïcode ✓";
    let calls = [
        ("call_tool_read", json!({"name": "fx:get_status"}), false),
        (
            "call_tool_read",
            json!({"name": "fx:delete_note", "args": {"id": "a"}}),
            true,
        ),
        (
            "call_tool_write",
            json!({"name": "fx:update_note", "args": {"id": "a", "text": "t"}}),
            false,
        ),
        (
            "call_tool_write",
            json!({"name": "fx:delete_note", "args": {"id": "a"}}),
            true,
        ),
        (
            "call_tool_destructive",
            json!({"name": "fx:delete_note", "args": {"id": "a", "token": "s3cret"},
                   "intent_data_sensitivity": "private", "intent_reason": reason}),
            false,
        ),
        (
            "call_tool_destructive",
            json!({"name": "fx:delete_note", "intent_data_sensitivity": "secret"}),
            true,
        ),
    ];
    for (variant, arguments, rejected) in &calls {
        let result = call(&client, variant, arguments.clone()).await.unwrap();
        assert_eq!(is_error(&result), *rejected, "{variant} {arguments}");
    }
    client.cancel().await.unwrap();

    let key = api_key(&proxy);
    let base = api_base(&proxy);
    // Completion records are written right after the response; wait for them.
    let records = until_value("every call's record", Duration::from_secs(30), || async {
        let (status, body) = get(&format!("{base}/activity?limit=100"), Some(&key)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["success"], true);
        let records = body["data"]["records"].as_array().unwrap().clone();
        if records.len() >= calls.len() && records.iter().all(|r| r["status"] != "pending") {
            Ok(records)
        } else {
            Err(format!("{records:#?}"))
        }
    })
    .await;
    assert_eq!(records.len(), calls.len(), "{records:#?}");
    // Newest first.
    let variants: Vec<&str> = records
        .iter()
        .rev()
        .map(|r| r["tool_variant"].as_str().unwrap())
        .collect();
    assert_eq!(variants, calls.iter().map(|c| c.0).collect::<Vec<_>>());
    let statuses: Vec<&str> = records
        .iter()
        .rev()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [
            "success", "blocked", "success", "blocked", "success", "blocked"
        ]
    );
    let blocked = &records[records.len() - 2];
    assert_eq!(blocked["verdict"]["decision"], "reject");
    assert_eq!(blocked["verdict"]["plugin"], "intent-matrix");
    assert_eq!(
        blocked["error_message"],
        "Tool 'fx:delete_note' is marked destructive by server, use call_tool_destructive"
    );
    assert_eq!(blocked["annotation_source"], "server");

    let (status, body) = get(
        &format!("{base}/activity?intent_type=destructive"),
        Some(&key),
    )
    .await;
    assert_eq!(status, 200);
    let destructive = body["data"]["records"].as_array().unwrap();
    assert_eq!(destructive.len(), 2, "{body}");
    assert!(
        destructive
            .iter()
            .all(|r| r["intent"]["operation_type"] == "destructive")
    );
    let deleted = destructive
        .iter()
        .find(|r| r["status"] == "success")
        .unwrap();
    assert_eq!(deleted["intent"]["data_sensitivity"], "private");
    assert_eq!(deleted["intent"]["reason"], reason);
    assert_eq!(deleted["arguments"]["token"], "[REDACTED]");
    assert_eq!(deleted["source"], "mcp");
    assert!(deleted["session_id"].is_string());

    let id = deleted["id"].as_str().unwrap();
    let (status, one) = get(&format!("{base}/activity/{id}"), Some(&key)).await;
    assert_eq!(status, 200);
    assert_eq!(&one["data"], deleted);

    // The CLI reads the running server through the API.
    let config = cli_config(&proxy, log.path());
    let out = TestCommand::new(proxy.data_dir.path())
        .args([
            "activity",
            "list",
            "--intent-type",
            "destructive",
            "--no-icons",
            "--config",
        ])
        .args([&config])
        .output();
    out.assert_code(0);
    let stdout = out.stdout();
    assert!(stdout.starts_with("ID"), "{stdout}");
    assert_eq!(stdout.lines().count(), 3, "{stdout}");
    assert!(
        stdout.lines().skip(1).all(|l| l.contains(" destructive ")),
        "{stdout}"
    );
    let out = TestCommand::new(proxy.data_dir.path())
        .args(["activity", "show", id, "--config"])
        .args([&config])
        .output();
    out.assert_code(0);
    let stdout = out.stdout();
    assert!(stdout.contains("data_sensitivity: private"), "{stdout}");
    assert!(
        stdout.contains(&format!("reason:           {reason}")),
        "{stdout}"
    );
    assert!(stdout.contains("Verdict:     allow"), "{stdout}");
    assert!(stdout.contains("from server"), "{stdout}");
    let out = TestCommand::new(proxy.data_dir.path())
        .args(["activity", "list", "-o", "yaml", "-n", "1", "--config"])
        .args([&config])
        .output();
    out.assert_code(0);
    assert!(
        out.stdout().starts_with("- annotation_source: "),
        "{}",
        out.stdout()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_wants_its_key_and_says_what_is_wrong_with_a_filter() {
    let proxy = Proxy::builder(&config_with(vec![])).start();
    let base = api_base(&proxy);
    let key = api_key(&proxy);
    let (status, body) = get(&format!("{base}/activity"), None).await;
    assert_eq!(status, 401);
    assert_eq!(body["success"], false);
    assert!(body["error"].as_str().unwrap().contains("X-API-Key"));
    let (status, _) = get(&format!("{base}/activity"), Some("wrong")).await;
    assert_eq!(status, 401);
    let (status, _) = get(&format!("{base}/activity?apikey={key}"), None).await;
    assert_eq!(status, 200);
    // DNS-rebinding protection covers the API too, before the key is even looked at.
    for (header, value) in [("Host", "evil.example"), ("Origin", "http://evil.example")] {
        let response = reqwest::Client::new()
            .get(format!("{base}/status"))
            .header("X-API-Key", &key)
            .header(header, value)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 403, "{header}: {value}");
    }
    let response = reqwest::Client::new()
        .delete(format!("{base}/activity"))
        .header("X-API-Key", &key)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 405);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["success"], false);
    for (query, expected) in [
        ("intent_type=delete", "intent_type 'delete' is not valid"),
        ("status=ok", "status 'ok' is not valid"),
        ("limit=0", "limit '0' is not valid"),
        ("limit=5000", "limit '5000' is not valid"),
        ("offset=-1", "offset '-1' is not valid"),
        ("start_time=yesterday", "start_time 'yesterday'"),
        (
            "start_time=2026-01-02T00:00:00Z&end_time=2026-01-01T00:00:00Z",
            "start_time is after end_time",
        ),
        ("colour=blue", "unknown parameter 'colour'"),
        ("server=", "server is empty"),
    ] {
        let (status, body) = get(&format!("{base}/activity?{query}"), Some(&key)).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains(expected),
            "{query}: {body}"
        );
    }
    let (status, body) = get(
        &format!("{base}/activity/01J00000000000000000000000"),
        Some(&key),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = get(&format!("{base}/activity/not-an-id"), Some(&key)).await;
    assert_eq!(status, 404);
    let (status, body) = get(
        &format!("{base}/activity?start_time=2026-01-01T00:00:00%2B02:00"),
        Some(&key),
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn no_answered_call_is_lost_when_the_server_is_killed() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let config = config_with(vec![stdio_fixture("fx", log.path())]);
    let mut proxy = Proxy::builder(&config).start();
    let url = proxy.url.clone();

    // 8 clients call as fast as they can; every answered call's reason is remembered.
    let answered = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut tasks = Vec::new();
    for worker in 0..8 {
        let url = url.clone();
        let answered = answered.clone();
        tasks.push(tokio::spawn(async move {
            let client = connect(&url).await;
            for i in 0..400 {
                let reason = format!("w{worker}-c{i}");
                let variant = if i % 3 == 0 { "call_tool_read" } else { "call_tool_destructive" };
                let tool = if i % 2 == 0 { "fx:echo" } else { "fx:delete_note" };
                let arguments = json!({"name": tool, "args": {"text": "x", "id": "n"}, "intent_reason": reason});
                // A call cut off by the kill may never be answered: give up on it.
                match tokio::time::timeout(Duration::from_secs(5), call(&client, variant, arguments)).await {
                    Ok(Ok(_)) => mcpproxy_support::lock(&answered).push(reason),
                    _ => break,
                }
            }
        }));
    }
    // Let calls flow, then kill -9 in the middle of them. The wait ends: a client stops at
    // its first call unanswered for 5 s, and the wait gives up after WAIT_FOR_CALLS (far
    // more than 300 calls take on a loaded machine; a bound, not a measure of speed).
    const WAIT_FOR_CALLS: Duration = Duration::from_secs(600);
    until(
        "300 answered calls, which the kill waits for",
        WAIT_FOR_CALLS,
        || async {
            let count = mcpproxy_support::lock(&answered).len();
            if count >= 300 {
                return Ok(());
            }
            assert!(
                tasks.iter().any(|task| !task.is_finished()),
                "every client stopped (a call went unanswered for 5 s) after {count} answered \
             calls; the kill waits for 300"
            );
            Err(format!("{count} answered"))
        },
    )
    .await;
    // SIGKILL, and gone for good (its sockets closed) before the CLI looks for a running
    // server: a process still dying can accept on its control socket and refuse the next
    // connection.
    proxy.proc.kill();
    for task in tasks {
        let _ = task.await;
    }
    let answered = mcpproxy_support::lock(&answered).clone();
    assert!(answered.len() >= 300);

    // The journal opens cleanly; with no server up, the CLI reads the file directly.
    let out = TestCommand::new(proxy.data_dir.path())
        .args(["activity", "list", "-o", "json", "-n", "1000", "--data-dir"])
        .args([proxy.data_dir.path()])
        .args(["--config"])
        .args([proxy.data_dir.path().join("mcp_config.json")])
        .output();
    out.assert_code(0);
    let mut records: Vec<Value> = serde_json::from_str(&out.stdout()).unwrap();
    let mut offset = records.len();
    while offset.is_multiple_of(1000) && offset > 0 {
        let more = TestCommand::new(proxy.data_dir.path())
            .args([
                "activity",
                "list",
                "-o",
                "json",
                "-n",
                "1000",
                "--offset",
                &offset.to_string(),
                "--data-dir",
            ])
            .args([proxy.data_dir.path()])
            .args(["--config"])
            .args([proxy.data_dir.path().join("mcp_config.json")])
            .output();
        let more: Vec<Value> = serde_json::from_str(&more.stdout()).unwrap();
        if more.is_empty() {
            break;
        }
        offset += more.len();
        records.extend(more);
    }
    let recorded: std::collections::HashSet<&str> = records
        .iter()
        .filter_map(|r| r["intent"]["reason"].as_str())
        .collect();
    let missing: Vec<&String> = answered
        .iter()
        .filter(|r| !recorded.contains(r.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{} answered calls have no record, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    proxy.proc.kill();

    // And a restarted server serves the same journal.
    let restarted = Proxy::builder(&config).data_dir(proxy.data_dir).start();
    let key = api_key(&restarted);
    let (status, body) = get(
        &format!("{}/activity?limit=1", api_base(&restarted)),
        Some(&key),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["records"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn names_a_caller_sends_are_bounded_and_cannot_forge_rows() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();
    let forged_row = "x\r01FAKEFAKEFAKEFAKEFAKEFAKE  fx  delete_everything  success\n\u{1b}[2J";

    // A tool name with a carriage return, a newline and an escape sequence is refused at
    // parse time, as is a 1 MiB one. Both refusals are on the record (every refused call
    // is), their names cut to the journal's bound and printed escaped.
    let client = connect(&proxy.url).await;
    for (name, says) in [
        (format!("fx:{forged_row}"), "U+000D"),
        (format!("fx:{}", "A".repeat(1 << 20)), "at most 256 bytes"),
    ] {
        let refused = call(&client, "call_tool_read", json!({"name": name}))
            .await
            .unwrap();
        assert!(is_error(&refused));
        assert!(text(&refused).contains(says), "{}", text(&refused));
    }
    client.cancel().await.unwrap();

    // The client's own name (clientInfo) is recorded: it is cut and printed escaped.
    let mut info = rmcp::model::ClientConfig::default();
    info.client_info =
        rmcp::model::Implementation::new(format!("{forged_row}{}", "B".repeat(1 << 20)), "1.0");
    let client = info
        .serve(rmcp::transport::StreamableHttpClientTransport::from_uri(
            proxy.url.clone(),
        ))
        .await
        .unwrap();
    let mut params = rmcp::model::CallToolRequestParams::new("call_tool_read");
    params = params.with_arguments(
        json!({"name": "fx:echo", "args": {"text": "hi"}})
            .as_object()
            .unwrap()
            .clone(),
    );
    client.peer().call_tool_once(params).await.unwrap();

    let config = cli_config(&proxy, log.path());
    let out = TestCommand::new(proxy.data_dir.path())
        .args(["activity", "list", "--config"])
        .args([&config])
        .output();
    out.assert_code(0);
    let stdout = out.stdout();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "a header and three rows: {stdout}");
    // No forged row: each row is a record's own (its id first), with no raw control
    // character, and the 1 MiB name is cut.
    let ids: Vec<String> = body_ids(&proxy).await;
    for line in &lines[1..] {
        assert!(
            ids.iter().any(|id| line.starts_with(id.as_str())),
            "a row that is no record's: {line:?}"
        );
        assert!(!line.chars().any(|c| c.is_control()), "{line:?}");
        assert!(
            line.len() < 4096,
            "{} bytes: the name was not cut",
            line.len()
        );
    }

    let (status, body) = get(
        &format!("{}/activity?limit=10", api_base(&proxy)),
        Some(&api_key(&proxy)),
    )
    .await;
    assert_eq!(status, 200);
    let record = &body["data"]["records"][0];
    let client_name = record["client"]["name"].as_str().unwrap();
    assert!(
        client_name.len() <= 256 && client_name.ends_with("…[cut]"),
        "{}",
        client_name.len()
    );
    assert!(body.to_string().len() < 64 << 10, "the page stays small");

    let id = record["id"].as_str().unwrap();
    let out = TestCommand::new(proxy.data_dir.path())
        .args(["activity", "show", id, "--config"])
        .args([&config])
        .output();
    out.assert_code(0);
    let shown = out.stdout();
    assert!(
        !shown.contains('\r') && !shown.contains('\u{1b}'),
        "{shown:?}"
    );
    assert!(shown.contains("\\u{d}01FAKE"), "{shown}");
    client.cancel().await.unwrap();
}

/// The ids of the proxy's records, newest first (the REST API's first page).
async fn body_ids(proxy: &Proxy) -> Vec<String> {
    let (status, body) = get(
        &format!("{}/activity?limit=10", api_base(proxy)),
        Some(&api_key(proxy)),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["data"]["records"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["id"].as_str().map(str::to_owned))
        .collect()
}
