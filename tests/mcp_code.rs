//! `code_execution` end to end: a script run by `mcpproxy serve` in its WebAssembly runtime,
//! calling the official npm filesystem and memory servers through the proxy's policy, over
//! MCP; its limits (time, memory, tool calls); its records and their parent links; and the
//! tool's absence when the config does not enable it.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mcp::{
    Proxy, call, config_with, connect, copy_cwasm, is_error, npm_bin_installed, npm_dir,
    shared_compile_cache, text,
};

/// The report `code_execution` answers, from its structured content.
fn report(result: &rmcp::model::CallToolResult) -> Value {
    result
        .structured_content
        .clone()
        .unwrap_or_else(|| serde_json::from_str(&text(result)).expect("a JSON report"))
}

/// Every record of the proxy's journal (newest first), once none is pending.
async fn records(proxy: &Proxy) -> Vec<Value> {
    crate::support::poll::until_value("no record pending", Duration::from_secs(30), || async {
        let body = proxy.activity("limit=1000").await;
        let records = body["data"]["records"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if records.iter().all(|r| r["status"] != "pending") {
            return Ok(records);
        }
        let pending: Vec<Value> = records
            .into_iter()
            .filter(|r| r["status"] == "pending")
            .collect();
        Err(format!("records stayed pending: {pending:?}"))
    })
    .await
}

fn fs_and_memory(root: &Path, memory_file: &Path) -> Value {
    let mut config = config_with(vec![
        json!({
            "name": "fs",
            "command": "npx",
            "args": ["--prefix", npm_dir(), "--no-install", "mcp-server-filesystem", root],
            // The directory it serves, granted to its sandbox.
            "isolation": {"write": [root]},
        }),
        json!({
            "name": "memory",
            "command": "npx",
            "args": ["--prefix", npm_dir(), "--no-install", "mcp-server-memory"],
            "env": {"MEMORY_FILE_PATH": memory_file},
            // Its file, in a directory its sandbox may write.
            "isolation": {"write": [memory_file.parent().unwrap()]},
        }),
    ]);
    config["code_execution"] = json!({"enabled": true, "memory_mib": 32, "timeout_ms": 120_000});
    config
}

#[tokio::test(flavor = "multi_thread")]
async fn scripts_orchestrate_real_servers_within_the_policy_and_their_limits() {
    if !npm_bin_installed("mcp-server-filesystem") || !npm_bin_installed("mcp-server-memory") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    for (name, body) in [
        ("a.txt", "alpha"),
        ("b.txt", "bravo bravo"),
        ("c.txt", "charlie!"),
    ] {
        std::fs::write(root_path.join(name), body).unwrap();
    }
    let memory_file = root_path.join("memory.jsonl");
    let proxy = Proxy::builder(&fs_and_memory(&root_path, &memory_file)).start();
    let client = connect(&proxy.url).await;

    let tools = client.peer().list_all_tools().await.unwrap();
    let tool = tools
        .iter()
        .find(|t| t.name == "code_execution")
        .expect("code_execution is listed when enabled");
    assert_eq!(
        tool.annotations.as_ref().and_then(|a| a.read_only_hint),
        Some(false)
    );

    // Three files read by one script; only the summary comes back.
    let summary = call(
        &client,
        "code_execution",
        json!({
            "code": "const sizes = {};
                     for (const name of input.files) {
                       const r = call_tool('fs:read_text_file', { path: input.root + '/' + name });
                       if (!r.ok) throw new Error(r.error);
                       sizes[name] = r.result.content[0].text.length;
                     }
                     console.log('read', input.files.length, 'files');
                     return { sizes, total: Object.values(sizes).reduce((a, b) => a + b, 0) };",
            "input": {"root": root_path, "files": ["a.txt", "b.txt", "c.txt"]},
        }),
    )
    .await
    .unwrap();
    // The runtime is compiled by now: later proxies of this test binary find it cached.
    copy_cwasm(
        &proxy.data_dir.path().join("cache/plugins"),
        &shared_compile_cache(),
    );
    assert!(!is_error(&summary), "{}", text(&summary));
    let body = report(&summary);
    assert_eq!(
        body["result"],
        json!({"sizes": {"a.txt": 5, "b.txt": 11, "c.txt": 8}, "total": 24})
    );
    assert_eq!(body["logs"], json!(["read 3 files"]));
    assert_eq!(body["tool_calls"], 3);
    assert_eq!(body["ended"], "returned");
    let reading_id = body["activity_id"].as_str().unwrap().to_owned();

    // A read ceiling cannot reach write_file: the matrix's message, with what fixes it from a
    // script (its intent; the call variant it names is not the script's to choose), and no
    // file.
    let target = root_path.join("written.txt");
    let refused = call(
        &client,
        "code_execution",
        json!({
            "code": "return call_tool('fs:write_file', { path: input, content: 'x' });",
            "input": target,
        }),
    )
    .await
    .unwrap();
    let body = report(&refused);
    assert_eq!(body["ok"], true, "{body}");
    assert_eq!(body["result"]["ok"], false, "{body}");
    assert_eq!(
        body["result"]["error"],
        "Tool 'fs:write_file' is marked destructive by server, use call_tool_destructive (in \
         code_execution: this script's calls go out as call_tool_read at most; run it with \
         \"intent\": {\"operation_type\": \"destructive\"} to call this tool)"
    );
    assert!(!target.exists(), "a read-ceiling script wrote the file");

    // A write ceiling creates memory entities and reads them back.
    let remembered = call(
        &client,
        "code_execution",
        json!({
            "code": "const made = call_tool('memory:create_entities', { entities: [
                       { name: 'mcpproxy', entityType: 'project', observations: ['written by a script'] }
                     ] });
                     if (!made.ok) return made;
                     const graph = call_tool('memory:read_graph', {});
                     return graph.ok ? graph.result.structuredContent ?? JSON.parse(graph.result.content[0].text) : graph;",
            "intent": {"operation_type": "write", "reason": "remember the project"},
        }),
    )
    .await
    .unwrap();
    let body = report(&remembered);
    assert_eq!(body["ok"], true, "{body}");
    assert_eq!(body["result"]["entities"][0]["name"], "mcpproxy", "{body}");

    // An endless loop ends at its timeout, and the proxy goes on serving.
    let looped = call(
        &client,
        "code_execution",
        json!({"code": "for (;;) {}", "options": {"timeout_ms": 500}}),
    )
    .await
    .unwrap();
    assert!(is_error(&looped));
    let body = report(&looped);
    assert_eq!(body["ended"], "timed_out", "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("ran past its timeout of 500 ms"),
        "{body}"
    );
    let still = call(
        &client,
        "call_tool_read",
        json!({"name": "fs:read_text_file", "args": {"path": root_path.join("a.txt")}}),
    )
    .await
    .unwrap();
    assert_eq!(text(&still), "alpha");

    // Allocation without bound ends at the memory cap (32 MiB here).
    let hog = call(
        &client,
        "code_execution",
        json!({"code": "const keep = []; for (;;) { keep.push('x'.repeat(1 << 16) + keep.length); }"}),
    )
    .await
    .unwrap();
    let body = report(&hog);
    assert_eq!(body["ended"], "out_of_memory", "{body}");
    assert!(body["error"].as_str().unwrap().contains("32 MiB"), "{body}");

    // max_tool_calls stops a loop of calls.
    let limited = call(
        &client,
        "code_execution",
        json!({
            "code": "for (;;) { call_tool('fs:list_allowed_directories', {}); }",
            "options": {"max_tool_calls": 3},
        }),
    )
    .await
    .unwrap();
    let body = report(&limited);
    assert_eq!(body["ended"], "call_limit", "{body}");
    assert_eq!(body["tool_calls"], 3);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("limit of 3 tool calls"),
        "{body}"
    );

    // Every inner call is a record of its own, linked to its execution's record.
    let all = records(&proxy).await;
    let execution = all
        .iter()
        .find(|r| r["id"] == reading_id.as_str())
        .expect("the execution's record");
    assert_eq!(execution["type"], "code_execution");
    assert_eq!(execution["status"], "success");
    assert_eq!(execution["details"]["ended"], "returned");
    assert_eq!(execution["details"]["inner_calls"], 3);
    assert_eq!(execution["details"]["outcomes"]["success"], 3);
    assert!(
        execution["arguments"]["code"]
            .as_str()
            .unwrap()
            .contains("fs:read_text_file")
    );
    let children: Vec<&Value> = all
        .iter()
        .filter(|r| r["parent_id"] == reading_id.as_str())
        .collect();
    assert_eq!(children.len(), 3);
    assert!(children.iter().all(|c| c["tool_name"] == "read_text_file"
        && c["status"] == "success"
        && c["tool_variant"] == "call_tool_read"));
    let listed: Vec<&Value> = execution["details"]["calls"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert!(children.iter().all(|c| listed.contains(&&c["id"])));
    let blocked = all
        .iter()
        .find(|r| r["tool_name"] == "write_file")
        .expect("the refused write has its record");
    assert_eq!(blocked["status"], "blocked");
    assert!(blocked["parent_id"].is_string());
    // Under a write ceiling, a read-only tool is still called as a read; a tool that writes
    // as a write, with the script's reason.
    let read_graph = all
        .iter()
        .find(|r| r["tool_name"] == "read_graph")
        .expect("read_graph's record");
    assert_eq!(read_graph["tool_variant"], "call_tool_read", "{read_graph}");
    assert_eq!(read_graph["verdict"]["decision"], "allow", "{read_graph}");
    let create = all
        .iter()
        .find(|r| r["tool_name"] == "create_entities")
        .expect("create_entities' record");
    assert_eq!(create["tool_variant"], "call_tool_write", "{create}");
    assert_eq!(
        create["intent"]["reason"], "remember the project",
        "{create}"
    );
    // Every inner call has a parent, and every parent is an execution.
    let executions: Vec<&Value> = all
        .iter()
        .filter(|r| r["type"] == "code_execution")
        .collect();
    assert_eq!(executions.len(), 6);
    for record in all.iter().filter(|r| r["type"] == "tool_call") {
        if let Some(parent) = record["parent_id"].as_str() {
            assert!(executions.iter().any(|e| e["id"] == parent), "{record}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_disabled_code_execution_is_not_listed_and_a_call_is_refused() {
    let proxy = Proxy::builder(&config_with(vec![])).start();
    let client = connect(&proxy.url).await;
    let tools = client.peer().list_all_tools().await.unwrap();
    assert!(tools.iter().all(|t| t.name != "code_execution"));
    let refused = call(&client, "code_execution", json!({"code": "return 1"}))
        .await
        .unwrap_err();
    assert!(
        refused.contains("\"code_execution\": {\"enabled\": true}"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn code_run_goes_through_the_running_proxy_and_activity_show_draws_the_tree() {
    if !npm_bin_installed("mcp-server-filesystem") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    std::fs::write(root_path.join("a.txt"), "alpha").unwrap();
    let mut config = config_with(vec![json!({
        "name": "fs",
        "command": "npx",
        "args": ["--prefix", npm_dir(), "--no-install", "mcp-server-filesystem", root_path],
        "isolation": {"write": [root_path]},
    })]);
    config["code_execution"] = json!({"enabled": true, "timeout_ms": 120_000});
    let proxy = Proxy::builder(&config).start();
    let data_dir = proxy.data_dir.path().to_owned();
    let config_path = data_dir.join("mcp_config.json");
    let script = data_dir.join("copy.js");
    std::fs::write(
        &script,
        "const read = call_tool('fs:read_text_file', { path: input.from });
         if (!read.ok) throw new Error(read.error);
         console.log('copying', read.result.content[0].text.length, 'characters');
         const wrote = call_tool('fs:write_file', { path: input.to, content: read.result.content[0].text });
         return { wrote: wrote.ok, error: wrote.error ?? null };",
    )
    .unwrap();
    let input = json!({"from": root_path.join("a.txt"), "to": root_path.join("b.txt")}).to_string();
    let run = |intent: &str| {
        crate::support::TestCommand::new(&data_dir)
            .args(["code", "run"])
            .arg_path(&script)
            .args([
                "--input", &input, "--intent", intent, "-o", "json", "--config",
            ])
            .arg_path(&config_path)
            .output()
    };

    // A read ceiling: the read passes, the write is refused inside the script.
    let out = run("read");
    out.assert_code(0);
    let report: Value = serde_json::from_str(&out.stdout()).unwrap();
    assert_eq!(report["result"]["wrote"], false, "{report}");
    assert!(!root_path.join("b.txt").exists());
    assert_eq!(report["logs"], json!(["copying 5 characters"]));
    let id = report["activity_id"].as_str().unwrap().to_owned();

    // A destructive ceiling lets the script write.
    let out = run("destructive");
    out.assert_code(0);
    let report: Value = serde_json::from_str(&out.stdout()).unwrap();
    assert_eq!(report["result"], json!({"wrote": true, "error": null}));
    assert_eq!(
        std::fs::read_to_string(root_path.join("b.txt")).unwrap(),
        "alpha"
    );

    // `activity show` of the first run draws its two inner calls under it.
    let shown = crate::support::poll::until_value(
        "`activity show` draws two inner calls",
        Duration::from_secs(30),
        || async {
            let out = crate::support::TestCommand::new(&data_dir)
                .args(["activity", "show", &id, "--config"])
                .arg_path(&config_path)
                .output();
            let shown = out.stdout();
            if shown.contains("Inner calls: 2") {
                Ok(shown)
            } else {
                Err(shown)
            }
        },
    )
    .await;
    assert!(
        shown.contains("Type:        code_execution (source: cli)"),
        "{shown}"
    );
    assert!(shown.contains("Inner calls: 2"), "{shown}");
    assert!(
        shown.contains("├─ ") && shown.contains("fs:read_text_file via call_tool_read: success"),
        "{shown}"
    );
    assert!(
        shown.contains("└─ ")
            && shown.contains("fs:write_file via call_tool_read: blocked")
            && shown.contains("use call_tool_destructive"),
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_page_shows_an_executions_inner_calls_as_a_tree() {
    use crate::web_e2e::{Driver, browser_installed};
    if !browser_installed() {
        return;
    }
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut config = config_with(vec![crate::support::mcp::stdio_fixture("fx", log.path())]);
    config["code_execution"] = json!({"enabled": true, "timeout_ms": 120_000});
    let proxy = Proxy::builder(&config).start();
    let client = connect(&proxy.url).await;
    let ran = call(
        &client,
        "code_execution",
        json!({"code": "call_tool('fx:echo', {text: 'one'}); \
                        return call_tool('fx:echo', {text: 'two'}).ok;"}),
    )
    .await
    .unwrap();
    let body = report(&ran);
    assert_eq!(body["result"], true, "{body}");
    let id = body["activity_id"].as_str().unwrap().to_owned();

    let profile = tempfile::tempdir().unwrap();
    let driver = Driver::start(profile.path()).await;
    driver.open_page(&proxy).await;
    driver
        .wait_for(
            "return document.querySelector('#upstreams tbody').innerText",
            |t| t.as_str().is_some_and(|t| t.contains("fx")),
        )
        .await;
    driver
        .script(&format!("showDetail('{id}'); return true"))
        .await;
    let tree = driver
        .wait_for(
            "return document.getElementById('detail-calls').textContent",
            |t| t.as_str().is_some_and(|t| t.contains("Inner calls:")),
        )
        .await;
    let tree = tree.as_str().unwrap();
    assert_eq!(tree.matches("fx:echo success").count(), 2, "{tree}");
    assert!(tree.contains("├─ ") && tree.contains("└─ "), "{tree}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scripts_calls_to_a_quarantined_server_are_held_and_never_sent() {
    use crate::support::mcp::{call_log_lines, stdio_fixture};
    let held_log = tempfile::NamedTempFile::new().unwrap();
    let open_log = tempfile::NamedTempFile::new().unwrap();
    let mut held = stdio_fixture("held", held_log.path());
    held["quarantined"] = json!(true);
    let mut config = config_with(vec![held, stdio_fixture("open", open_log.path())]);
    config["code_execution"] = json!({"enabled": true, "timeout_ms": 120_000});
    let proxy = Proxy::builder(&config).start();
    let client = connect(&proxy.url).await;
    let ran = call(
        &client,
        "code_execution",
        json!({"code": "return [call_tool('held:echo', {text: 'x'}), \
                                call_tool('open:echo', {text: 'y'}).ok];"}),
    )
    .await
    .unwrap();
    let body = report(&ran);
    assert_eq!(body["result"][0]["ok"], false, "{body}");
    assert!(
        body["result"][0]["error"]
            .as_str()
            .unwrap()
            .contains("quarantined"),
        "{body}"
    );
    assert_eq!(body["result"][1], true, "{body}");
    assert!(call_log_lines(held_log.path()).is_empty());
    assert_eq!(call_log_lines(open_log.path()).len(), 1);
    let all = records(&proxy).await;
    let execution = all
        .iter()
        .find(|r| r["id"] == body["activity_id"])
        .expect("the execution's record");
    assert_eq!(
        execution["details"]["outcomes"],
        json!({"held": 1, "success": 1})
    );

    // options.allowed_servers narrows what a script reaches; a bad name never becomes a call.
    let narrowed = call(
        &client,
        "code_execution",
        json!({
            "code": "return [call_tool('open:echo', {text: 'z'}), call_tool('nocolon', {})];",
            "options": {"allowed_servers": ["held"]},
        }),
    )
    .await
    .unwrap();
    let body = report(&narrowed);
    assert_eq!(
        body["result"][0]["error"],
        "server 'open' is not in this script's options.allowed_servers (held)",
        "{body}"
    );
    assert_eq!(body["result"][1]["ok"], false, "{body}");
    assert_eq!(call_log_lines(open_log.path()).len(), 1);

    // A tool's own error comes back as {ok: false} with its text.
    let failed = call(
        &client,
        "code_execution",
        json!({"code": "return call_tool('open:fail', {});"}),
    )
    .await
    .unwrap();
    assert_eq!(
        report(&failed)["result"],
        json!({"ok": false, "error": "open:fail reported an error: fixture failure"})
    );

    // The deadline also ends a script that waits on a slow tool.
    let waited = call(
        &client,
        "code_execution",
        json!({
            "code": "return call_tool('open:slow', {ms: 600000});",
            "options": {"timeout_ms": 500},
        }),
    )
    .await
    .unwrap();
    let body = report(&waited);
    // The script stops at its deadline, or the abandoned call's error reaches it first and
    // it returns that (both at the same instant: either may win).
    assert!(
        body["ended"] == "timed_out"
            || body["result"]["error"] == "open:slow did not answer before the script's deadline",
        "{body}"
    );
    assert_eq!(body["tool_calls"], 1, "{body}");
    // The call it abandoned reached the upstream: its record ends as abandoned, not
    // `pending` for ever (`records` waits until nothing is pending).
    assert!(
        call_log_lines(open_log.path())
            .iter()
            .any(|line| line.to_string().contains("slow")),
        "the slow call was sent"
    );
    let all = records(&proxy).await;
    let execution = all
        .iter()
        .find(|r| r["id"] == body["activity_id"])
        .expect("the execution's record");
    let inner_id = &execution["details"]["calls"][0];
    let inner = all
        .iter()
        .find(|r| &r["id"] == inner_id)
        .unwrap_or_else(|| panic!("the inner call's record {inner_id}"));
    assert_eq!(inner["status"], "error", "{inner}");
    assert_eq!(inner["parent_id"], body["activity_id"], "{inner}");
    assert!(
        inner["error_message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("abandoned at the script's deadline before the upstream answered"),
        "{inner}"
    );
}
