//! Pins on everything the policy reads, spec defaults for an annotations object without
//! hints, and listings that survive a malformed tool, end to end: the binary, the fixture
//! upstream (its tools rewritten through `--tool-overrides`, malformed entries added through
//! `--raw-tools`), a real MCP client, and `mcpproxy activity`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::TestCommand;
use crate::support::mcp::{
    Proc, Proxy, call, call_log_lines, config_with, connect, fixture_bin, is_error, pipe_lines,
    text,
};

/// Replaces a file the fixture re-reads on every listing, in one step.
fn set_file(path: &Path, content: Value) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, content.to_string()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The stdio fixture as `name`, logging calls to `log`, with overrides (and raw tools).
fn stdio_server(name: &str, log: &Path, overrides: &Path, raw: Option<&Path>) -> Value {
    let mut args = json!([
        "--call-log",
        log,
        "--name",
        name,
        "--tool-overrides",
        overrides
    ]);
    if let (Some(raw), Some(args)) = (raw, args.as_array_mut()) {
        args.extend([json!("--raw-tools"), json!(raw)]);
    }
    // The overrides are rewritten by rename (a new file), so the sandbox grants their
    // directory, not the file.
    let dirs: Vec<&Path> = [Some(log), Some(overrides), raw]
        .into_iter()
        .flatten()
        .filter_map(Path::parent)
        .filter(|dir| *dir != std::env::temp_dir())
        .collect();
    let mut grants: Vec<Value> = dirs.iter().map(|d| json!(d)).collect();
    if log.parent() == Some(std::env::temp_dir().as_path()) {
        grants.push(json!(log));
    }
    json!({"name": name, "command": fixture_bin(), "args": args, "isolation": {"write": grants}})
}

/// The fixture serving streamable HTTP on a free loopback port, with overrides and raw
/// tools; its URL.
fn start_http_server(log: &Path, overrides: &Path, raw: &Path) -> (Proc, String) {
    let mut child = Command::new(fixture_bin())
        .args(["--http", "127.0.0.1:0", "--name", "fxh", "--call-log"])
        .arg(log)
        .arg("--tool-overrides")
        .arg(overrides)
        .arg("--raw-tools")
        .arg(raw)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mcp-fixture");
    let stdout = child.stdout.take().expect("stdout");
    let proc = Proc {
        child,
        stderr_lines: pipe_lines(stdout),
    };
    let line = proc.wait_for_line(Duration::from_secs(30), |l| {
        l.starts_with("MCP_FIXTURE_LISTENING ")
    });
    let url = line.trim_start_matches("MCP_FIXTURE_LISTENING ").to_owned();
    (proc, url)
}

/// The proxy's activity records, newest first, through the CLI.
fn records(proxy: &Proxy, log: &Path) -> Vec<Value> {
    let config = proxy.cli_config(log);
    let out = TestCommand::new(proxy.data_dir.path())
        .args(["activity", "list", "-o", "json", "-n", "100", "--config"])
        .args([&config])
        .output();
    out.assert_code(0);
    serde_json::from_str(&out.stdout()).unwrap()
}

/// Calls `tool` (one that `variant` refuses before its change too) until the call is
/// refused as held, and returns the refusal; panics if the call goes through (the change
/// was not held) or after 30 s.
async fn until_held(client: &crate::support::mcp::Client, variant: &str, tool: &str) -> String {
    let what = format!("{tool} held");
    crate::support::poll::until_value(&what, Duration::from_secs(30), || async {
        let result = call(client, variant, json!({"name": tool})).await.unwrap();
        let last = text(&result);
        assert!(
            is_error(&result),
            "{tool} ran through {variant} after its change: {last}"
        );
        if last.contains("changed since it was approved") {
            Ok(last)
        } else {
            Err(last)
        }
    })
    .await
}

async fn announce(client: &crate::support::mcp::Client, server: &str) {
    let announced = call(
        client,
        "call_tool_write",
        json!({"name": format!("{server}:announce_tools_changed")}),
    )
    .await
    .unwrap();
    assert!(!is_error(&announced), "{}", text(&announced));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_change_of_meta_alone_is_held_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let overrides = dir.path().join("overrides.json");
    set_file(&overrides, json!({}));
    let proxy = Proxy::builder(&config_with(vec![stdio_server(
        "fx", &log, &overrides, None,
    )]))
    .start();
    let client = connect(&proxy.url).await;

    // No annotations, `_meta: {"safety_class": "dangerous"}`: approved, and not a read.
    let refused = call(&client, "call_tool_read", json!({"name": "fx:wipe_cache"}))
        .await
        .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    assert!(
        text(&refused).contains("is marked destructive by its _meta.safety_class"),
        "{}",
        text(&refused)
    );

    // The server relabels it read-only, and only that, and says its tools changed.
    set_file(
        &overrides,
        json!({"wipe_cache": {"_meta": {"safety_class": "read-only"}}}),
    );
    announce(&client, "fx").await;
    let held = until_held(&client, "call_tool_read", "fx:wipe_cache").await;
    assert!(
        held.contains("Tool 'fx:wipe_cache' changed since it was approved (_meta)"),
        "{held}"
    );
    assert!(
        !call_log_lines(&log)
            .iter()
            .any(|l| l["tool"] == "wipe_cache"),
        "the upstream never ran it"
    );

    let records = records(&proxy, &log);
    let change = records
        .iter()
        .find(|r| r["type"] == "tool_change" && r["tool_name"] == "wipe_cache")
        .expect("a tool_change record");
    assert_eq!(change["details"]["kind"], "changed");
    assert_eq!(
        change["details"]["diff"]["_meta"],
        json!([{"safety_class": "dangerous"}, {"safety_class": "read-only"}])
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn annotations_without_hints_take_the_spec_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let overrides = dir.path().join("overrides.json");
    // mystery_tool has no name prefix an annotator knows: without annotations it is "none".
    set_file(
        &overrides,
        json!({"mystery_tool": {"annotations": {"title": "Harmless"}}}),
    );
    let proxy = Proxy::builder(&config_with(vec![stdio_server(
        "fx", &log, &overrides, None,
    )]))
    .start();
    let client = connect(&proxy.url).await;
    let read = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:mystery_tool"}),
    )
    .await
    .unwrap();
    assert!(is_error(&read), "{}", text(&read));
    assert!(
        text(&read).contains("Tool 'fx:mystery_tool' is marked destructive by server"),
        "{}",
        text(&read)
    );
    let found = call(
        &client,
        "retrieve_tools",
        json!({"query": "unspecified mystery"}),
    )
    .await
    .unwrap();
    let found: Value = serde_json::from_str(&text(&found)).unwrap();
    let mystery = found["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "fx:mystery_tool")
        .unwrap_or_else(|| panic!("fx:mystery_tool not in {found}"));
    assert_eq!(mystery["call_with"], "call_tool_destructive", "{mystery}");
    assert_eq!(mystery["safety_class"], "dangerous", "{mystery}");
    assert_eq!(mystery["annotation_source"], "server", "{mystery}");
    assert_eq!(
        mystery["annotations"],
        json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true})
    );
    let destructive = call(
        &client,
        "call_tool_destructive",
        json!({"name": "fx:mystery_tool"}),
    )
    .await
    .unwrap();
    assert_eq!(text(&destructive), "mystery");
    assert_eq!(
        call_log_lines(&log).len(),
        1,
        "only the destructive call ran"
    );
    client.cancel().await.unwrap();
}

/// A hint given as a string, a tool without a name, beside valid tools.
fn malformed_entries() -> Value {
    json!([
        {
            "name": "bad_hint",
            "description": "A tool whose readOnlyHint is a string",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": "true"}
        },
        {"description": "A tool without a name", "inputSchema": {"type": "object"}}
    ])
}

#[tokio::test(flavor = "multi_thread")]
async fn one_malformed_tool_never_hides_the_others_over_stdio_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let http_log = dir.path().join("http-calls.log");
    let overrides = dir.path().join("overrides.json");
    let raw = dir.path().join("raw.json");
    set_file(&overrides, json!({}));
    set_file(&raw, malformed_entries());
    let (_http, url) = start_http_server(&http_log, &overrides, &raw);
    // Its whole stderr is read at the end: the log lines of its first listings included.
    let proxy = Proxy::builder(&config_with(vec![
        stdio_server("fx", &log, &overrides, Some(&raw)),
        json!({"name": "fxh", "url": url}),
    ]))
    .start();
    let client = connect(&proxy.url).await;

    for server in ["fx", "fxh"] {
        // The valid tools are listed and run.
        let status = call(
            &client,
            "call_tool_read",
            json!({"name": format!("{server}:get_status")}),
        )
        .await
        .unwrap();
        assert_eq!(text(&status), "ok", "{server}");
        // The tool with the bad hint is listed without it: an annotations object with no
        // hint, so destructive by the spec's defaults, and callable as such.
        let read = call(
            &client,
            "call_tool_read",
            json!({"name": format!("{server}:bad_hint")}),
        )
        .await
        .unwrap();
        assert!(
            text(&read).contains(&format!(
                "Tool '{server}:bad_hint' is marked destructive by server"
            )),
            "{server}: {}",
            text(&read)
        );
        let destructive = call(
            &client,
            "call_tool_destructive",
            json!({"name": format!("{server}:bad_hint")}),
        )
        .await
        .unwrap();
        assert_eq!(text(&destructive), "raw bad_hint", "{server}");

        let direct = connect(&format!("{}/mcp/servers/{server}", proxy.base())).await;
        let tools = direct.peer().list_all_tools().await.unwrap();
        let bad = tools
            .iter()
            .find(|t| t.name == "bad_hint")
            .unwrap_or_else(|| panic!("{server} lists bad_hint"));
        let annotations = bad.annotations.as_ref().expect("an annotations object");
        assert_eq!(annotations.read_only_hint, None, "{server}");
        assert!(tools.iter().any(|t| t.name == "echo"), "{server}");
        assert!(
            tools.iter().all(|t| !t.name.is_empty()),
            "{server}: the nameless tool is left out"
        );
        direct.cancel().await.unwrap();
    }

    // A second listing of each server (its change held proves it was read) warns no more.
    // delete_note is refused on call_tool_read before its change too: until_held needs that.
    set_file(
        &overrides,
        json!({"delete_note": {"description": "Delete an in-memory note, now for good"}}),
    );
    for server in ["fx", "fxh"] {
        announce(&client, server).await;
        until_held(&client, "call_tool_read", &format!("{server}:delete_note")).await;
    }
    let lines = proxy.stderr();
    for server in ["fx", "fxh"] {
        let of_server = |needle: &str| {
            lines
                .iter()
                .filter(|l| l.contains(&format!("server=\"{server}\"")))
                .filter(|l| l.contains(needle))
                .count()
        };
        assert_eq!(
            of_server(
                "tool 'bad_hint': ignoring annotations.readOnlyHint, which is a string instead of true or false"
            ),
            1,
            "{server}: {lines:#?}"
        );
        assert_eq!(
            of_server("leaving out the tool at position"),
            1,
            "{server}: {lines:#?}"
        );
    }
    client.cancel().await.unwrap();
}

/// `tests/fixtures/trust-v1.json`: the trust file mcpproxy wrote before pins had a
/// version (v1 pins of the fixture server's `echo`, `get_status` and `wipe_cache`, as
/// first seen).
fn v1_trust_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/trust-v1.json")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_pins_of_the_previous_version_keep_their_approval_and_then_cover_meta() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let overrides = dir.path().join("overrides.json");
    set_file(&overrides, json!({}));
    let data_dir = tempfile::tempdir().unwrap();
    let trust = data_dir.path().join("trust.json");
    std::fs::copy(v1_trust_file(), &trust).unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_server(
        "fx", &log, &overrides, None,
    )]))
    .data_dir(data_dir)
    .start();
    let client = connect(&proxy.url).await;

    // The pinned tools are trusted as they were: nothing counts as changed.
    let echo = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args": {"text": "hi"}}),
    )
    .await
    .unwrap();
    assert_eq!(text(&echo), "hi");
    let wipe = call(&client, "call_tool_read", json!({"name": "fx:wipe_cache"}))
        .await
        .unwrap();
    assert!(
        text(&wipe).contains("is marked destructive by its _meta.safety_class"),
        "{}",
        text(&wipe)
    );
    let pins: Value = serde_json::from_str(&std::fs::read_to_string(&trust).unwrap()).unwrap();
    let wipe_pin = &pins["servers"]["fx"]["tools"]["wipe_cache"];
    assert_eq!(wipe_pin["version"], 2, "{pins:#}");
    assert_eq!(wipe_pin["_meta"], json!({"safety_class": "dangerous"}));
    assert_eq!(wipe_pin["pinned_at"], "2026-01-01T00:00:00Z");
    assert_eq!(pins["servers"]["fx"]["tools"]["echo"]["version"], 2);

    // From now on a change of `_meta` alone is held.
    set_file(
        &overrides,
        json!({"wipe_cache": {"_meta": {"safety_class": "read-only"}}}),
    );
    announce(&client, "fx").await;
    let held = until_held(&client, "call_tool_read", "fx:wipe_cache").await;
    assert!(held.contains("(_meta)"), "{held}");
    let records = records(&proxy, &log);
    let changed: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "tool_change" && r["details"]["kind"] == "changed")
        .collect();
    assert_eq!(changed.len(), 1, "only wipe_cache changed: {changed:#?}");
    assert_eq!(changed[0]["tool_name"], "wipe_cache");
    client.cancel().await.unwrap();
}
