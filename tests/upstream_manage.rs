//! End-to-end: changing the upstream servers while mcpproxy runs. Through MCP (the
//! `upstream_servers` tool), the CLI (`mcpproxy upstream add|remove|enable|disable|logs`)
//! and hand edits of the file: each change lands in `mcp_config.json` and in
//! `retrieve_tools` without a restart; an invalid hand edit is refused and the proxy keeps
//! serving; servers are imported from Claude Desktop and Cursor config files.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mcp::{Client, Proxy, call, config_with, connect, fixture_bin, is_error, text};
use crate::support::{CmdOutput, TestCommand};

fn config_file(proxy: &Proxy) -> PathBuf {
    proxy.data_dir.path().join("mcp_config.json")
}

fn read_config(proxy: &Proxy) -> Value {
    serde_json::from_str(&std::fs::read_to_string(config_file(proxy)).unwrap()).unwrap()
}

fn server_entry(config: &Value, name: &str) -> Option<Value> {
    config["mcpServers"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
}

fn cli(proxy: &Proxy, args: &[&str]) -> CmdOutput {
    TestCommand::new(proxy.data_dir.path())
        .args(args)
        .args(["--config"])
        .args([config_file(proxy)])
        .output()
}

async fn manage(client: &Client, arguments: Value) -> Value {
    let result = call(client, "upstream_servers", arguments.clone())
        .await
        .unwrap_or_else(|e| panic!("{arguments}: {e}"));
    assert!(!is_error(&result), "{arguments}: {}", text(&result));
    serde_json::from_str(&text(&result)).unwrap()
}

/// The names of the tools `retrieve_tools` finds for `query`.
async fn found(client: &Client, query: &str) -> Vec<String> {
    let result = call(
        client,
        "retrieve_tools",
        json!({"query": query, "limit": 100}),
    )
    .await
    .unwrap();
    let body: Value = serde_json::from_str(&text(&result)).unwrap();
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits (up to 30 s) for `check` to hold, polling.
async fn eventually(what: &str, check: impl AsyncFn() -> bool) {
    let check = &check;
    let deadline = Duration::from_secs(30);
    crate::support::poll::until(what, deadline, move || async move {
        check().await.then_some(()).ok_or("not yet".to_owned())
    })
    .await;
}

/// Waits until `server` has listed its tools (approving earlier is refused) or is waiting
/// for its launch to be approved (then nothing of it runs), approves it from the CLI, and
/// waits until its tools are searchable.
async fn approve_when_ready(proxy: &Proxy, client: &Client, server: &str) {
    eventually(&format!("{server} ready or unapproved"), async || {
        serde_json::from_str::<Value>(&cli(proxy, &["upstream", "list", "-o", "json"]).stdout())
            .is_ok_and(|list| {
                list.as_array().unwrap().iter().any(|s| {
                    s["name"] == server && (s["state"] == "ready" || s["state"] == "unapproved")
                })
            })
    })
    .await;
    // The approval names the launch reviewed (needed when its launch is not approved).
    let inspected = cli(proxy, &["upstream", "inspect", server, "-o", "json"]);
    let analysis: Value = serde_json::from_str(&inspected.stdout()).expect("an analysis");
    let fingerprint = analysis["launch_fingerprint"].as_str().unwrap_or_default();
    cli(
        proxy,
        &["upstream", "approve", server, "--fingerprint", fingerprint],
    )
    .assert_code(0);
    let tool = format!("{server}:frobnicate");
    eventually(&format!("{server}'s tools searchable"), async || {
        found(client, "frobnicate").await.contains(&tool)
    })
    .await;
}

fn fixture(name: &str, log: &Path) -> Value {
    json!({
        "command": fixture_bin(),
        "args": ["--name", name, "--call-log", log],
        "isolation": {"write": [log]},
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_servers_adds_patches_and_removes_through_mcp() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut first = fixture("fx", log.path());
    first["name"] = json!("fx");
    let proxy = Proxy::builder(&config_with(vec![first])).start();
    let client = connect(&proxy.url).await;

    // Offered, and annotated so that IDEs ask first.
    let tools = client.peer().list_all_tools().await.unwrap();
    let tool = tools
        .iter()
        .find(|t| t.name == "upstream_servers")
        .expect("upstream_servers is offered");
    let annotations = tool.annotations.as_ref().unwrap();
    assert_eq!(annotations.destructive_hint, Some(true));
    assert_eq!(annotations.read_only_hint, Some(false));

    // add: written to the file quarantined, not started (an agent's launch spec waits for a
    // person), its tools not searchable.
    let log2 = tempfile::NamedTempFile::new().unwrap();
    let mut add = fixture("fx2", log2.path());
    add["operation"] = json!("add");
    add["name"] = json!("fx2");
    add["env_json"] = json!(r#"{"A": "1", "B": "2"}"#);
    let answer = manage(&client, add).await;
    assert_eq!(answer["added"], json!(["fx2"]), "{answer}");
    let entry = server_entry(&read_config(&proxy), "fx2").expect("fx2 in the file");
    assert_eq!(entry["quarantined"], true);
    assert_eq!(entry["env"], json!({"A": "1", "B": "2"}));
    let listed = manage(&client, json!({"operation": "list"})).await;
    let fx2 = listed["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "fx2")
        .unwrap()
        .clone();
    assert_eq!(fx2["quarantined"], true);
    assert_eq!(fx2["state"], "unapproved", "{fx2}");
    assert_eq!(
        fx2["env"],
        json!(["A", "B"]),
        "env values are hidden: {fx2}"
    );
    assert!(
        !found(&client, "frobnicate")
            .await
            .contains(&"fx2:frobnicate".to_owned())
    );

    // An agent cannot approve what it added.
    let refused = call(
        &client,
        "upstream_servers",
        json!({"operation": "patch", "name": "fx2", "quarantined": false}),
    )
    .await
    .unwrap();
    assert!(is_error(&refused));
    assert!(
        text(&refused).contains("a person approves"),
        "{}",
        text(&refused)
    );

    // A person approves (once it has listed its tools); the tools become searchable.
    approve_when_ready(&proxy, &client, "fx2").await;

    // patch: maps merge, null removes, scalars replace; disabled leaves the index.
    let answer = manage(
        &client,
        json!({"operation": "patch", "name": "fx2", "env_json": r#"{"B": null, "C": "3"}"#, "enabled": false}),
    )
    .await;
    assert_eq!(answer["restarted"], json!(["fx2"]));
    let entry = server_entry(&read_config(&proxy), "fx2").unwrap();
    assert_eq!(entry["env"], json!({"A": "1", "C": "3"}));
    assert_eq!(entry["enabled"], false);
    eventually("fx2 gone from the index", async || {
        !found(&client, "frobnicate")
            .await
            .contains(&"fx2:frobnicate".to_owned())
    })
    .await;

    // tail_log: the server's stderr, from the running fx.
    let logs = manage(
        &client,
        json!({"operation": "tail_log", "name": "fx", "lines": 5}),
    )
    .await;
    assert!(
        logs["lines"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["line"].as_str().unwrap().contains("serving MCP on stdio")),
        "{logs}"
    );

    // remove: out of the file and of the list.
    let answer = manage(&client, json!({"operation": "remove", "name": "fx2"})).await;
    assert_eq!(answer["removed"], json!(["fx2"]));
    assert!(server_entry(&read_config(&proxy), "fx2").is_none());
    let listed = manage(&client, json!({"operation": "list"})).await;
    assert_eq!(listed["total"], 1);

    // A change that would make the config invalid is refused and changes nothing.
    let before = std::fs::read_to_string(config_file(&proxy)).unwrap();
    let invalid = call(
        &client,
        "upstream_servers",
        json!({"operation": "add", "name": "bad name", "command": "x"}),
    )
    .await
    .unwrap();
    assert!(is_error(&invalid));
    assert!(
        text(&invalid).contains("not a valid server name"),
        "{}",
        text(&invalid)
    );
    assert_eq!(
        std::fs::read_to_string(config_file(&proxy)).unwrap(),
        before
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_and_hand_edits_change_servers_without_a_restart() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut first = fixture("fx", log.path());
    first["name"] = json!("fx");
    let proxy = Proxy::builder(&config_with(vec![first])).start();
    let client = connect(&proxy.url).await;

    // mcpproxy upstream add, through the running owner.
    let log2 = tempfile::NamedTempFile::new().unwrap();
    let bin = fixture_bin();
    // (`--config` before `--`: everything after it is the server's command line.)
    let out = TestCommand::new(proxy.data_dir.path())
        .args(["upstream", "add", "cli2", "--config"])
        .args([config_file(&proxy)])
        .args(["--", bin.to_str().unwrap(), "--name", "cli2", "--call-log"])
        .args([log2.path()])
        .output();
    out.assert_code(0);
    assert!(out.stdout().contains("added cli2"), "{}", out.stdout());
    let entry = server_entry(&read_config(&proxy), "cli2").unwrap();
    assert_eq!(entry["quarantined"], true);
    assert_eq!(entry["command"], bin.to_str().unwrap());
    approve_when_ready(&proxy, &client, "cli2").await;
    let out = cli(&proxy, &["upstream", "logs", "cli2", "-n", "10"]);
    out.assert_code(0);
    assert!(
        out.stdout().contains("serving MCP on stdio"),
        "{}",
        out.stdout()
    );
    cli(&proxy, &["upstream", "disable", "cli2"]).assert_code(0);
    assert_eq!(
        server_entry(&read_config(&proxy), "cli2").unwrap()["enabled"],
        false
    );
    cli(&proxy, &["upstream", "remove", "cli2"]).assert_code(0);
    assert!(server_entry(&read_config(&proxy), "cli2").is_none());

    // A hand edit: a server added in the file after the first start is not started, even
    // with `quarantined: false` (an agent that can write files could have written it),
    // until a person approves it.
    let mut config = read_config(&proxy);
    let mut hand = fixture("hand", log2.path());
    hand["name"] = json!("hand");
    hand["quarantined"] = json!(false);
    config["mcpServers"].as_array_mut().unwrap().push(hand);
    std::fs::write(
        config_file(&proxy),
        serde_json::to_string_pretty(&config).unwrap(),
    )
    .unwrap();
    approve_when_ready(&proxy, &client, "hand").await;

    // An invalid hand edit is refused: the servers keep running, calls work.
    std::fs::write(
        config_file(&proxy),
        r#"{"mcpServers": [{"name": "no way", "command": "x"}]}"#,
    )
    .unwrap();
    proxy.proc.wait_for_line(Duration::from_secs(30), |l| {
        l.contains("ignored the edit of") && l.contains("not a valid server name")
    });
    let result = call(
        &client,
        "call_tool_read",
        json!({"name": "hand:echo", "args_json": r#"{"text": "still here"}"#}),
    )
    .await
    .unwrap();
    assert_eq!(text(&result), "still here");
    assert!(
        found(&client, "frobnicate")
            .await
            .contains(&"fx:frobnicate".to_owned())
    );
    client.cancel().await.unwrap();
}

#[test]
fn servers_are_imported_from_claude_desktop_and_cursor_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp_config.json");
    std::fs::write(&config, "{\"mcpServers\": []}\n").unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/import");
    let run = |args: &[&str]| {
        TestCommand::new(&dir.path().join("data"))
            .args(["upstream", "import"])
            .args(args)
            .args(["--config"])
            .args([&config])
            .output()
    };

    // A preview changes nothing.
    let claude = fixtures.join("claude_desktop_config.json");
    let out = run(&["--from", claude.to_str().unwrap()]);
    out.assert_code(0);
    assert!(out.stdout().contains("would be added"), "{}", out.stdout());
    assert!(out.stderr().contains("--yes"), "{}", out.stderr());
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "{\"mcpServers\": []}\n"
    );

    let out = run(&["--from", claude.to_str().unwrap(), "--yes"]);
    out.assert_code(0);
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let servers = written["mcpServers"].as_array().unwrap();
    assert_eq!(servers.len(), 2);
    assert_eq!(servers[0]["name"], "filesystem");
    assert_eq!(servers[0]["command"], "npx");
    assert_eq!(servers[1]["name"], "my-notes", "names are made valid");
    assert_eq!(servers[1]["env"], json!({"NOTES_TOKEN": "secret-value"}));
    assert!(servers.iter().all(|s| s["quarantined"] == true));

    // Cursor: the HTTP server arrives, the name already present is skipped.
    let cursor = fixtures.join("cursor_mcp.json");
    let out = run(&["--from", cursor.to_str().unwrap(), "--yes", "-o", "json"]);
    out.assert_code(0);
    let outcomes: Value = serde_json::from_str(&out.stdout()).unwrap();
    assert_eq!(
        outcomes,
        json!([
            {"name": "github", "server": "https://api.githubcopilot.com/mcp/", "outcome": "added (quarantined)"},
            {"name": "filesystem", "server": "npx -y @modelcontextprotocol/server-filesystem /home/me", "outcome": "exists: skipped"},
        ])
    );
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let github = written["mcpServers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "github")
        .unwrap()
        .clone();
    assert_eq!(github["url"], "https://api.githubcopilot.com/mcp/");
    assert_eq!(github["quarantined"], true);

    // Not a config file mcpproxy can import: said so.
    let out = run(&["--from", config.to_str().unwrap()]);
    assert_ne!(out.0.status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tool_can_be_made_read_only_or_turned_off() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut first = fixture("fx", log.path());
    first["name"] = json!("fx");
    let mut config = config_with(vec![first.clone()]);
    config["management"] = json!({"read_only": true});
    let proxy = Proxy::builder(&config).start();
    let client = connect(&proxy.url).await;
    let listed = manage(&client, json!({"operation": "list"})).await;
    assert_eq!(listed["total"], 1);
    manage(&client, json!({"operation": "tail_log", "name": "fx"})).await;
    let refused = call(
        &client,
        "upstream_servers",
        json!({"operation": "patch", "name": "fx", "enabled": false}),
    )
    .await
    .unwrap();
    assert!(is_error(&refused));
    assert!(text(&refused).contains("read-only"), "{}", text(&refused));
    let out = cli(&proxy, &["upstream", "disable", "fx"]);
    out.assert_code(2);
    assert!(out.stderr().contains("read-only"), "{}", out.stderr());
    // restart is not a change to the file: it works.
    cli(&proxy, &["upstream", "restart", "fx"]).assert_code(0);
    client.cancel().await.unwrap();

    let mut config = config_with(vec![first]);
    config["management"] = json!({"upstream_servers_tool": false});
    let proxy = Proxy::builder(&config).start();
    let client = connect(&proxy.url).await;
    let tools = client.peer().list_all_tools().await.unwrap();
    assert_eq!(
        tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>(),
        [
            "retrieve_tools",
            "call_tool_read",
            "call_tool_write",
            "call_tool_destructive"
        ]
    );
    let hidden = call(&client, "upstream_servers", json!({"operation": "list"})).await;
    assert!(hidden.is_err(), "{hidden:?}");
    client.cancel().await.unwrap();
}

/// `method path` on the REST API with the key and `body`; the JSON answer.
async fn rest(proxy: &Proxy, method: reqwest::Method, path: &str, body: Value) -> Value {
    reqwest::Client::new()
        .request(method, format!("{}/api/v1{path}", proxy.base()))
        .header("X-API-Key", proxy.api_key())
        .json(&body)
        .send()
        .await
        .expect("reach the REST API")
        .json()
        .await
        .expect("a JSON answer")
}

/// `server`'s entry in `mcpproxy upstream list -o json`.
fn listed(proxy: &Proxy, server: &str) -> Value {
    let list: Value =
        serde_json::from_str(&cli(proxy, &["upstream", "list", "-o", "json"]).stdout())
            .unwrap_or(Value::Null);
    list.as_array()
        .into_iter()
        .flatten()
        .find(|s| s["name"] == server)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Waits until `server` is `ready` with `quarantined` as given.
async fn until_ready(proxy: &Proxy, server: &str, quarantined: bool) {
    eventually(
        &format!("{server} ready, quarantined: {quarantined}"),
        async || {
            let entry = listed(proxy, server);
            entry["state"] == "ready" && entry["quarantined"] == quarantined
        },
    )
    .await;
}

/// Calls `server:echo`: `Ok(text)` when it ran, `Err(text)` when refused.
async fn echo(client: &Client, server: &str) -> Result<String, String> {
    let result = call(
        client,
        "call_tool_read",
        json!({"name": format!("{server}:echo"), "args": {"text": "hi"}}),
    )
    .await?;
    if is_error(&result) {
        Err(text(&result))
    } else {
        Ok(text(&result))
    }
}

/// Asserts that `server` is quarantined now: listed so, its call refused unsent, its tools
/// out of search.
async fn assert_quarantined(proxy: &Proxy, client: &Client, server: &str, after: &str) {
    until_ready(proxy, server, true).await;
    let refused = echo(client, server)
        .await
        .expect_err(&format!("{after}: a call to {server} ran"));
    assert!(
        refused.contains(&format!(
            "Server '{server}' is quarantined: the call was not sent"
        )),
        "{after}: {refused}"
    );
    assert!(
        !found(client, "frobnicate")
            .await
            .contains(&format!("{server}:frobnicate")),
        "{after}: {server}'s tools are searchable"
    );
}

/// docs/trust-model.md: a person's `PATCH /api/v1/upstreams/NAME` approves the launch it
/// writes but leaves the server quarantined unless `?approve=true`; so do the CLI's
/// `upstream disable|enable`. Until then nothing reaches the server.
#[tokio::test(flavor = "multi_thread")]
async fn a_persons_patch_leaves_a_quarantined_server_quarantined_until_approved() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut server = fixture("fx", log.path());
    server["name"] = json!("fx");
    server["quarantined"] = json!(true);
    let proxy = Proxy::builder(&config_with(vec![server])).start();
    let client = connect(&proxy.url).await;
    assert_quarantined(&proxy, &client, "fx", "at start").await;

    // A launch change, a change of nothing that runs, and `quarantined: false` written by
    // the person: each leaves it quarantined.
    for patch in [
        json!({"env": {"PATCHED": "1"}}),
        json!({"auto_approve_tool_changes": false}),
        json!({"quarantined": false}),
    ] {
        let answer = rest(
            &proxy,
            reqwest::Method::PATCH,
            "/upstreams/fx",
            patch.clone(),
        )
        .await;
        assert_eq!(answer["success"], true, "{patch}: {answer}");
        assert_quarantined(&proxy, &client, "fx", &format!("PATCH {patch}")).await;
    }
    assert_eq!(
        server_entry(&read_config(&proxy), "fx").unwrap()["env"]["PATCHED"],
        "1"
    );
    // The CLI's way of changing a server.
    cli(&proxy, &["upstream", "disable", "fx"]).assert_code(0);
    cli(&proxy, &["upstream", "enable", "fx"]).assert_code(0);
    assert_quarantined(&proxy, &client, "fx", "disable and enable").await;
    assert!(
        crate::support::mcp::call_log_lines(log.path())
            .iter()
            .all(|l| l["tool"] != "echo"),
        "a call reached the quarantined server"
    );

    // `?approve=true` is the person's approval: the calls run.
    let answer = rest(
        &proxy,
        reqwest::Method::PATCH,
        "/upstreams/fx?approve=true",
        json!({"env": {"PATCHED": "2"}}),
    )
    .await;
    assert_eq!(answer["success"], true, "{answer}");
    until_ready(&proxy, "fx", false).await;
    assert_eq!(echo(&client, "fx").await.as_deref(), Ok("hi"));
    client.cancel().await.unwrap();
}

/// `mcpproxy upstream approve NAME --launch-only` (and the REST API's `launch_only`) on a
/// server whose launch is not approved starts it quarantined: its tools listed for review
/// (`upstream inspect`), its calls refused unsent, its tools out of search; a plain
/// `approve` then approves its calls.
#[tokio::test(flavor = "multi_thread")]
async fn approve_launch_only_starts_a_server_quarantined_for_review() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut first = fixture("fx", log.path());
    first["name"] = json!("fx");
    let proxy = Proxy::builder(&config_with(vec![first])).start();
    let client = connect(&proxy.url).await;

    // Two servers added by a hand edit: not started until a person approves them.
    let late_log = tempfile::NamedTempFile::new().unwrap();
    let mut config = read_config(&proxy);
    for name in ["late", "later"] {
        let mut hand = fixture(name, late_log.path());
        hand["name"] = json!(name);
        config["mcpServers"].as_array_mut().unwrap().push(hand);
    }
    std::fs::write(
        config_file(&proxy),
        serde_json::to_string_pretty(&config).unwrap(),
    )
    .unwrap();
    for name in ["late", "later"] {
        eventually(&format!("{name} unapproved"), async || {
            listed(&proxy, name)["state"] == "unapproved"
        })
        .await;
    }

    // The launch each approval names: its fingerprint, as the analysis shows it.
    let mut fingerprints = Vec::new();
    for name in ["late", "later"] {
        let analysis = rest(
            &proxy,
            reqwest::Method::GET,
            &format!("/upstreams/{name}/analysis"),
            Value::Null,
        )
        .await;
        let fingerprint = analysis["data"]["launch_fingerprint"]
            .as_str()
            .unwrap_or_else(|| panic!("no fingerprint in {analysis}"))
            .to_owned();
        fingerprints.push(fingerprint);
    }
    let out = cli(
        &proxy,
        &[
            "upstream",
            "approve",
            "late",
            "--launch-only",
            "--fingerprint",
            &fingerprints[0],
        ],
    );
    out.assert_code(0);
    assert_quarantined(&proxy, &client, "late", "approve --launch-only").await;
    let answer = rest(
        &proxy,
        reqwest::Method::POST,
        "/upstreams/later/approve",
        json!({"launch_only": true, "fingerprint": fingerprints[1]}),
    )
    .await;
    assert_eq!(answer["success"], true, "{answer}");
    assert_eq!(answer["data"]["unquarantined"], false, "{answer}");
    assert!(answer["data"]["launch"].is_string(), "{answer}");
    assert_quarantined(&proxy, &client, "later", "launch_only: true").await;

    // Started: its tools are there to review.
    let inspect = cli(&proxy, &["upstream", "inspect", "late"]);
    inspect.assert_code(0);
    assert!(
        inspect.stdout().contains("Tool echo"),
        "{}",
        inspect.stdout()
    );
    assert!(
        crate::support::mcp::call_log_lines(late_log.path()).is_empty(),
        "a call reached a server approved for launch only"
    );

    // The person's approval of its calls.
    cli(&proxy, &["upstream", "approve", "late"]).assert_code(0);
    until_ready(&proxy, "late", false).await;
    assert_eq!(echo(&client, "late").await.as_deref(), Ok("hi"));
    assert!(
        found(&client, "frobnicate")
            .await
            .contains(&"late:frobnicate".to_owned())
    );
    assert!(echo(&client, "later").await.is_err(), "later is still held");
    client.cancel().await.unwrap();
}

/// A grant that contains the data dir (the home directory holds `~/.mcpproxy`) can never
/// start: `upstream add` refuses it with the reason and writes nothing, whether an mcpproxy
/// runs (the change goes through it) or not (the CLI edits the file).
#[test]
fn a_grant_that_reaches_the_data_dir_is_refused_at_add() {
    let proxy = Proxy::builder(&config_with(vec![])).start();
    let data_dir = proxy.data_dir.path().to_owned();
    let home_like = data_dir.parent().expect("the data dir's parent").to_owned();
    let before = std::fs::read_to_string(config_file(&proxy)).unwrap();
    let add = |dir: &Path, config: &Path| {
        TestCommand::new(dir)
            .args(["upstream", "add", "homely", "--write"])
            .args([&home_like])
            .args(["--config"])
            .args([config])
            .args(["--", fixture_bin().to_str().unwrap()])
            .output()
    };
    let refused = |out: &CmdOutput| {
        assert_ne!(out.code(), Some(0), "{}", out.stdout());
        let stderr = out.stderr();
        assert!(
            stderr.contains("could never start")
                && stderr.contains(&format!("`{}`", home_like.display()))
                && stderr.contains("mcpproxy's data dir")
                && stderr.contains("grant a directory beside it instead"),
            "{stderr}"
        );
    };
    let out = add(&data_dir, &config_file(&proxy));
    refused(&out);
    assert_eq!(
        std::fs::read_to_string(config_file(&proxy)).unwrap(),
        before,
        "the config changed"
    );
    // A path argument inside the data dir is not proposed as a grant (it would make the add
    // fail): left out, said on stderr, and the server is added.
    let out = TestCommand::new(&data_dir)
        .args(["upstream", "add", "reader", "--config"])
        .args([config_file(&proxy)])
        .args(["--", fixture_bin().to_str().unwrap()])
        .args([config_file(&proxy)])
        .output();
    out.assert_code(0);
    assert!(
        out.stderr().contains("not proposed as a grant")
            && out.stderr().contains("which a server may never reach"),
        "{}",
        out.stderr()
    );
    let reader = server_entry(&read_config(&proxy), "reader").expect("reader added");
    assert!(reader["isolation"]["read"].is_null(), "{reader}");
    // No mcpproxy on this data dir: the CLI checks before it writes, too.
    let offline = tempfile::tempdir().unwrap();
    let offline_data = offline.path().join("data");
    let offline_config = offline.path().join("mcp_config.json");
    std::fs::write(&offline_config, "{}").unwrap();
    let out = TestCommand::new(&offline_data)
        .args(["upstream", "add", "homely", "--write"])
        .args([offline.path()])
        .args(["--config"])
        .args([&offline_config])
        .args(["--", fixture_bin().to_str().unwrap()])
        .output();
    assert_ne!(out.code(), Some(0), "{}", out.stdout());
    assert!(
        out.stderr().contains("mcpproxy's data dir"),
        "{}",
        out.stderr()
    );
    assert!(
        !std::fs::read_to_string(&offline_config)
            .unwrap_or_default()
            .contains("homely"),
        "the file was written"
    );
}

/// `upstream edit`: a person changes a running server's environment and sandbox without
/// removing it or editing the file by hand. The change is shown first, values included
/// (secret-looking ones masked); made, it is in the file and the server restarts with it,
/// approved (not `unapproved`, as a hand edit of the same change leaves it). What cannot be
/// done is refused with what to give instead.
#[tokio::test(flavor = "multi_thread")]
async fn a_person_edits_a_running_server_and_approves_what_is_shown() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut fx = fixture("fx", log.path());
    fx["name"] = json!("fx");
    fx["env"] = json!({"MODE": "a"});
    let proxy = Proxy::builder(&config_with(vec![fx])).start();
    let granted = tempfile::tempdir().unwrap();
    let granted = granted.path().to_str().unwrap().to_owned();
    let out = cli(
        &proxy,
        &[
            "upstream",
            "edit",
            "fx",
            "--env",
            "MODE=b",
            "--env",
            "API_TOKEN=ghp_R7kQ2mZx9Lw4Tv8Np3Hs6Jd1Fb5Gc0Ya2Ue7W",
            "--write",
            &granted,
        ],
    );
    out.assert_code(0);
    let shown = out.stdout();
    for expected in [
        "'fx' will start changed:",
        r#"env MODE value changed, now "b""#,
        "env API_TOKEN added: *** (masked: it looks like a secret)",
        "isolation was",
        "changed 'fx' and approved its launch as shown",
    ] {
        assert!(shown.contains(expected), "no {expected:?} in {shown}");
    }
    assert!(!shown.contains("ghp_"), "{shown}");
    let entry = server_entry(&read_config(&proxy), "fx").unwrap();
    assert_eq!(entry["env"]["MODE"], "b", "{entry}");
    assert!(
        entry["isolation"]["write"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == granted.as_str()),
        "{entry}"
    );
    eventually("fx runs again, approved", async || {
        serde_json::from_str::<Value>(&cli(&proxy, &["upstream", "list", "-o", "json"]).stdout())
            .is_ok_and(|list| {
                list.as_array()
                    .unwrap()
                    .iter()
                    .any(|s| s["name"] == "fx" && s["state"] == "ready")
            })
    })
    .await;

    // Back again: the variable unset, the grant revoked.
    let out = cli(
        &proxy,
        &[
            "upstream",
            "edit",
            "fx",
            "--unset-env",
            "API_TOKEN",
            "--revoke",
            &granted,
        ],
    );
    out.assert_code(0);
    assert!(
        out.stdout().contains("env API_TOKEN removed"),
        "{}",
        out.stdout()
    );
    let entry = server_entry(&read_config(&proxy), "fx").unwrap();
    assert!(entry["env"].get("API_TOKEN").is_none(), "{entry}");

    for (args, says) in [
        (&["upstream", "edit", "fx"][..], "nothing to change"),
        (
            &["upstream", "edit", "fx", "--unset-env", "NOPE"],
            "the server has no variable NOPE",
        ),
        (
            &["upstream", "edit", "fx", "--revoke", "/nowhere"],
            "grants no such path",
        ),
        (&["upstream", "edit", "ghost", "--env", "A=1"], "ghost"),
        (
            &["upstream", "edit", "fx", "--env", "NOEQUALS"],
            "write KEY=VALUE",
        ),
    ] {
        let out = cli(&proxy, args);
        assert_ne!(out.code(), Some(0), "{args:?}: {}", out.stdout());
        assert!(out.stderr().contains(says), "{args:?}: {}", out.stderr());
    }
}
