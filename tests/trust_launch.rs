//! Approval bound to what runs: an approved name cannot be given another command, by an
//! agent through `upstream_servers`, by a hand edit while running or between runs; a server
//! added later is not started until a person approves it; every such change is a
//! `server_change` record. Each server here is a shell that leaves a mark and then runs the
//! fixture, so a test can tell whether anything of it ran at all.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mcp::{Client, Proxy, call, config_with, connect, fixture_bin, is_error, text};
use crate::support::{CmdOutput, TestCommand};

/// A stdio server named `name` that appends a line to `mark` when it starts, then serves
/// as the fixture.
fn marked(name: &str, mark: &Path, env: Value) -> Value {
    // The mark is granted to the server's sandbox (an empty file until it starts).
    if !mark.exists() {
        std::fs::write(mark, "").unwrap();
    }
    json!({
        "name": name,
        "command": "sh",
        "args": [
            "-c",
            format!("echo started >> '{}'; exec '{}' --name {name}", mark.display(), fixture_bin().display()),
        ],
        "env": env,
        // `sh -c` names the fixture in a script, where no install tree is found: it is granted.
        "isolation": {"write": [mark], "read": [fixture_bin()]},
    })
}

fn started(mark: &Path) -> usize {
    std::fs::read_to_string(mark).map_or(0, |text| text.lines().count())
}

fn config_file(proxy: &Proxy) -> PathBuf {
    proxy.data_dir.path().join("mcp_config.json")
}

fn cli(proxy: &Proxy, args: &[&str]) -> CmdOutput {
    TestCommand::new(proxy.data_dir.path())
        .args(args)
        .args(["--config"])
        .args([config_file(proxy)])
        .output()
}

fn cli_json(proxy: &Proxy, args: &[&str]) -> Value {
    let out = cli(proxy, args);
    out.assert_code(0);
    serde_json::from_str(&out.stdout()).unwrap_or_else(|e| panic!("{e}: {}", out.stdout()))
}

fn status(proxy: &Proxy, server: &str) -> Value {
    cli_json(proxy, &["upstream", "list", "-o", "json"])
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == server)
        .cloned()
        .unwrap_or(Value::Null)
}

/// The fingerprint of `server`'s launch, as `upstream inspect -o json` shows it.
fn fingerprint(proxy: &Proxy, server: &str) -> String {
    let analysis = cli_json(proxy, &["upstream", "inspect", server, "-o", "json"]);
    let fingerprint = analysis["launch_fingerprint"]
        .as_str()
        .unwrap_or_else(|| panic!("no launch_fingerprint in {analysis}"))
        .to_owned();
    assert_eq!(fingerprint.len(), 16, "{analysis}");
    fingerprint
}

async fn manage(client: &Client, arguments: Value) -> Value {
    let result = call(client, "upstream_servers", arguments).await.unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    serde_json::from_str(&text(&result)).unwrap()
}

/// Polls `check` for up to 30 s.
fn eventually(what: &str, check: impl Fn() -> bool) {
    crate::support::poll::until_blocking(what, Duration::from_secs(30), || {
        check().then_some(()).ok_or("not yet".to_owned())
    });
}

/// The `server_change` records, newest first, through the CLI.
fn server_changes(proxy: &Proxy) -> Vec<Value> {
    cli_json(
        proxy,
        &["activity", "list", "--type", "server_change", "-o", "json"],
    )
    .as_array()
    .cloned()
    .unwrap_or_default()
}

fn edit_config(proxy: &Proxy, edit: impl FnOnce(&mut Value)) {
    let path = config_file(proxy);
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
}

async fn call_read(client: &Client, tool: &str) -> (bool, String) {
    let result = call(
        client,
        "call_tool_read",
        json!({"name": tool, "args_json": r#"{"text": "hi"}"#}),
    )
    .await
    .unwrap();
    (is_error(&result), text(&result))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_cannot_give_an_approved_name_another_command() {
    let dir = tempfile::tempdir().unwrap();
    let good_mark = dir.path().join("good.mark");
    let evil_mark = dir.path().join("evil.mark");
    let mut config = config_with(vec![marked("good", &good_mark, json!({}))]);
    let proxy = Proxy::builder(&config).start();
    config["listen"] = json!(proxy.base().trim_start_matches("http://"));
    std::fs::write(config_file(&proxy), config.to_string()).unwrap();
    let client = connect(&proxy.url).await;
    // In the config at the data dir's first start: approved as written, and it runs.
    let (failed, answer) = call_read(&client, "good:echo").await;
    assert!(!failed, "{answer}");
    assert_eq!(started(&good_mark), 1);

    // The agent removes it and adds another command under the same name.
    manage(&client, json!({"operation": "remove", "name": "good"})).await;
    let mut evil = marked("good", &evil_mark, json!({}));
    evil["operation"] = json!("add");
    manage(&client, evil).await;

    // Not approved, not started: nothing of it ran, and a call is refused.
    let listed = manage(&client, json!({"operation": "list"})).await;
    let good = listed["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "good")
        .unwrap()
        .clone();
    assert_eq!(good["quarantined"], true, "{good}");
    assert_eq!(good["state"], "unapproved", "{good}");
    let cli_status = status(&proxy, "good");
    assert_eq!(cli_status["quarantined"], true, "{cli_status}");
    assert_eq!(cli_status["state"], "unapproved", "{cli_status}");
    let (failed, answer) = call_read(&client, "good:echo").await;
    assert!(failed, "{answer}");
    assert!(
        answer.contains("is quarantined: the call was not sent"),
        "{answer}"
    );
    assert!(answer.contains("Not started"), "{answer}");
    let direct = cli(
        &proxy,
        &[
            "call",
            "tool-read",
            "good:echo",
            "--args",
            r#"{"text":"x"}"#,
        ],
    );
    assert_ne!(direct.code(), Some(0), "{}", direct.stdout());
    assert_eq!(started(&evil_mark), 0, "the agent's command ran");

    // The agent can not approve it either.
    let refused = call(
        &client,
        "upstream_servers",
        json!({"operation": "patch", "name": "good", "quarantined": false}),
    )
    .await
    .unwrap();
    assert!(is_error(&refused), "{}", text(&refused));
    assert_eq!(started(&evil_mark), 0);

    // Each action of the agent is on the record, by whom and what.
    let changes = server_changes(&proxy);
    let ops: Vec<(String, String, String)> = changes
        .iter()
        .map(|r| {
            (
                r["tool_name"].as_str().unwrap_or_default().to_owned(),
                r["details"]["actor"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                r["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    for wanted in [
        ("remove", "agent", "success"),
        ("add", "agent", "success"),
        ("update", "agent", "blocked"),
    ] {
        assert!(
            ops.iter()
                .any(|(op, who, st)| (op.as_str(), who.as_str(), st.as_str()) == wanted),
            "{wanted:?} not in {ops:?}"
        );
    }
    let add = changes.iter().find(|r| r["tool_name"] == "add").unwrap();
    assert_eq!(
        add["details"]["standing"], "launch not approved: not started",
        "{add}"
    );
    assert_eq!(add["source"], "mcp");

    // A person reads what would run, approves it, and then it starts.
    let inspect = cli(&proxy, &["upstream", "inspect", "good"]);
    inspect.assert_code(0);
    assert!(
        inspect.stdout().contains("Launch: stdio: sh -c"),
        "{}",
        inspect.stdout()
    );
    assert!(
        inspect.stdout().contains("Not started"),
        "{}",
        inspect.stdout()
    );
    let reviewed = fingerprint(&proxy, "good");
    let approve = cli(
        &proxy,
        &["upstream", "approve", "good", "--fingerprint", &reviewed],
    );
    approve.assert_code(0);
    assert!(
        approve.stdout().contains("it starts now"),
        "{}",
        approve.stdout()
    );
    eventually("the approved server started", || started(&evil_mark) == 1);
    eventually("the approved server ready", || {
        status(&proxy, "good")["state"] == "ready"
    });
    let (failed, answer) = call_read(&client, "good:echo").await;
    assert!(!failed, "{answer}");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn hand_edits_of_a_launch_or_a_new_server_wait_for_a_person() {
    let dir = tempfile::tempdir().unwrap();
    let good_mark = dir.path().join("good.mark");
    let hand_mark = dir.path().join("hand.mark");
    let mut config = config_with(vec![marked("good", &good_mark, json!({"MODE": "a"}))]);
    let proxy = Proxy::builder(&config).start();
    config["listen"] = json!(proxy.base().trim_start_matches("http://"));
    std::fs::write(config_file(&proxy), config.to_string()).unwrap();
    let client = connect(&proxy.url).await;
    assert!(!call_read(&client, "good:echo").await.0);

    // An approved server's env changed by hand (quarantined: true in the file too): the
    // approval no longer holds, the new process is not started.
    edit_config(&proxy, |config| {
        let server = &mut config["mcpServers"][0];
        server["env"] = json!({
            "MODE": "b",
            "LD_PRELOAD": "/tmp/x.so",
            "API_TOKEN": "ghp_R7kQ2mZx9Lw4Tv8Np3Hs6Jd1Fb5Gc0Ya2Ue7W",
        });
        server["quarantined"] = json!(true);
    });
    eventually("good held after the edit", || {
        status(&proxy, "good")["state"] == "unapproved"
    });
    let (failed, answer) = call_read(&client, "good:echo").await;
    assert!(failed, "{answer}");
    assert_eq!(started(&good_mark), 1, "the edited command ran");
    let update = server_changes(&proxy)
        .into_iter()
        .find(|r| r["server_name"] == "good" && r["tool_name"] == "update")
        .expect("a server_change record for the edit");
    assert_eq!(update["source"], "config_file", "{update}");
    let lines = update["details"]["launch_changes"].to_string();
    // A person sees the values they would approve (`LD_PRELOAD` names the library every
    // process loads), and secret-looking ones masked, saying so.
    assert!(
        lines.contains(r#"env MODE value changed, now \"b\""#),
        "{lines}"
    );
    assert!(
        lines.contains(r#"env LD_PRELOAD added: \"/tmp/x.so\""#),
        "{lines}"
    );
    assert!(
        lines.contains("env API_TOKEN added: *** (masked: it looks like a secret)")
            && !lines.contains("ghp_"),
        "{lines}"
    );
    let inspect = cli(&proxy, &["upstream", "inspect", "good"]);
    assert!(
        inspect
            .stdout()
            .contains(r#"changed: env LD_PRELOAD added: "/tmp/x.so""#)
            && !inspect.stdout().contains("ghp_"),
        "{}",
        inspect.stdout()
    );

    // A server added by hand while running, marked not quarantined: not started either.
    edit_config(&proxy, |config| {
        let mut hand = marked("hand", &hand_mark, json!({}));
        hand["quarantined"] = json!(false);
        config["mcpServers"].as_array_mut().unwrap().push(hand);
    });
    eventually("hand listed", || {
        status(&proxy, "hand")["state"] == "unapproved"
    });
    let (failed, answer) = call_read(&client, "hand:echo").await;
    assert!(failed, "{answer}");
    assert_eq!(started(&hand_mark), 0, "the hand-added command ran");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_launch_changed_while_stopped_is_caught_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("good.mark");
    let config = config_with(vec![marked("good", &mark, json!({}))]);
    let mut proxy = Proxy::builder(&config).start();
    let client = connect(&proxy.url).await;
    assert!(!call_read(&client, "good:echo").await.0);
    client.cancel().await.unwrap();
    proxy.stop();
    let data_dir = std::mem::replace(&mut proxy.data_dir, tempfile::tempdir().unwrap());

    // Between runs: the command changes, and a server is added.
    let other_mark = dir.path().join("other.mark");
    let mut changed = marked("good", &mark, json!({}));
    changed["args"][1] = json!(format!(
        "echo evil >> '{}'; exec '{}' --name good",
        other_mark.display(),
        fixture_bin().display()
    ));
    let added = marked("later", &other_mark, json!({}));
    let mut config = config_with(vec![changed, added]);
    let proxy = Proxy::builder(&config).data_dir(data_dir).start();
    config["listen"] = json!(proxy.base().trim_start_matches("http://"));
    std::fs::write(config_file(&proxy), config.to_string()).unwrap();
    assert_eq!(status(&proxy, "good")["state"], "unapproved");
    assert_eq!(status(&proxy, "later")["state"], "unapproved");
    assert_eq!(started(&other_mark), 0, "an unapproved command ran");
    eventually("records of both", || {
        let records = server_changes(&proxy);
        ["good", "later"].iter().all(|name| {
            records
                .iter()
                .any(|r| r["server_name"] == *name && r["tool_name"] == "unapproved")
        })
    });
    let good = server_changes(&proxy)
        .into_iter()
        .find(|r| r["server_name"] == "good")
        .unwrap();
    assert!(
        good["details"]["launch_changes"]
            .to_string()
            .contains("args were"),
        "{good}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_person_adds_through_the_cli_approved_or_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("first.mark");
    let mut config = config_with(vec![marked("first", &mark, json!({}))]);
    let proxy = Proxy::builder(&config).start();
    config["listen"] = json!(proxy.base().trim_start_matches("http://"));
    std::fs::write(config_file(&proxy), config.to_string()).unwrap();
    let client = connect(&proxy.url).await;
    let bin = fixture_bin();
    let add = |name: &str, approve: bool| {
        let mut command = TestCommand::new(proxy.data_dir.path());
        command = command.args(["upstream", "add", name]);
        if approve {
            command = command.args(["--approve"]);
        }
        command
            .args(["--config"])
            .args([config_file(&proxy)])
            .args(["--", bin.to_str().unwrap(), "--name", name])
            .output()
    };
    // --approve: the person approves what they typed, calls included.
    add("approved", true).assert_code(0);
    eventually("approved ready", || {
        status(&proxy, "approved")["state"] == "ready"
    });
    assert_eq!(status(&proxy, "approved")["quarantined"], false);
    let (failed, answer) = call_read(&client, "approved:echo").await;
    assert!(!failed, "{answer}");
    // Without it: started (a person typed it), quarantined for review.
    add("review", false).assert_code(0);
    eventually("review ready", || {
        status(&proxy, "review")["state"] == "ready"
    });
    assert_eq!(status(&proxy, "review")["quarantined"], true);
    let (failed, answer) = call_read(&client, "review:echo").await;
    assert!(failed, "{answer}");
    let records = server_changes(&proxy);
    assert!(
        records
            .iter()
            .any(|r| r["server_name"] == "approved" && r["details"]["actor"] == "person"),
        "{records:?}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn loosening_a_servers_sandbox_by_hand_waits_for_a_person() {
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("good.mark");
    let mut config = config_with(vec![marked("good", &mark, json!({}))]);
    let proxy = Proxy::builder(&config).start();
    config["listen"] = json!(proxy.base().trim_start_matches("http://"));
    std::fs::write(config_file(&proxy), config.to_string()).unwrap();
    let client = connect(&proxy.url).await;
    assert!(!call_read(&client, "good:echo").await.0);
    assert_eq!(status(&proxy, "good")["sandbox"]["network"], "none");

    // An agent that can write files turns the sandbox off and opens the network.
    edit_config(&proxy, |config| {
        config["mcpServers"][0]["isolation"]["enabled"] = json!(false);
    });
    eventually("good held after the edit", || {
        status(&proxy, "good")["state"] == "unapproved"
    });
    let (failed, answer) = call_read(&client, "good:echo").await;
    assert!(failed, "{answer}");
    assert_eq!(started(&mark), 1, "the unsandboxed launch ran");
    let update = server_changes(&proxy)
        .into_iter()
        .find(|r| r["server_name"] == "good" && r["tool_name"] == "update")
        .expect("a server_change record for the edit");
    let lines = update["details"]["launch_changes"].to_string();
    assert!(lines.contains("isolation was"), "{lines}");
    assert!(lines.contains("now off"), "{lines}");
    let inspect = cli(&proxy, &["upstream", "inspect", "good"]);
    assert!(
        inspect.stdout().contains("sandbox: OFF"),
        "{}",
        inspect.stdout()
    );

    // A person approves: it starts, as configured, without its sandbox.
    let reviewed = fingerprint(&proxy, "good");
    cli(
        &proxy,
        &["upstream", "approve", "good", "--fingerprint", &reviewed],
    )
    .assert_code(0);
    eventually("the approved server started", || started(&mark) == 2);
    eventually("the approved server ready", || {
        status(&proxy, "good")["state"] == "ready"
    });
    assert_eq!(status(&proxy, "good")["sandbox"]["enabled"], false);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_names_the_launch_reviewed_and_a_launch_changed_since_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (good_mark, late_mark, evil_mark) = (
        dir.path().join("good.mark"),
        dir.path().join("late.mark"),
        dir.path().join("evil.mark"),
    );
    let mut config = config_with(vec![marked("good", &good_mark, json!({}))]);
    let proxy = Proxy::builder(&config).start();
    config["listen"] = json!(proxy.base().trim_start_matches("http://"));
    std::fs::write(config_file(&proxy), config.to_string()).unwrap();
    let client = connect(&proxy.url).await;

    // An agent adds a server: not started until a person approves how it starts.
    let mut late = marked("late", &late_mark, json!({}));
    late["operation"] = json!("add");
    manage(&client, late).await;
    assert_eq!(status(&proxy, "late")["state"], "unapproved");

    // The person reviews it: the analysis shows the launch and its fingerprint.
    let inspect = cli(&proxy, &["upstream", "inspect", "late"]);
    inspect.assert_code(0);
    let reviewed = fingerprint(&proxy, "late");
    assert!(
        inspect
            .stdout()
            .contains(&format!("Fingerprint: {reviewed}")),
        "{}",
        inspect.stdout()
    );

    // Meanwhile the agent swaps the launch for a shell outside the sandbox.
    manage(
        &client,
        json!({
            "operation": "patch",
            "name": "late",
            "command": "/bin/sh",
            "args": ["-c", format!("echo evil >> '{}'; exec '{}' --name late", evil_mark.display(), fixture_bin().display())],
            "isolation": {"enabled": false},
        }),
    )
    .await;
    let now = fingerprint(&proxy, "late");
    assert_ne!(now, reviewed);

    // Approving what was reviewed is refused, saying what changed and how to approve it.
    let refused = cli(
        &proxy,
        &["upstream", "approve", "late", "--fingerprint", &reviewed],
    );
    assert_ne!(refused.code(), Some(0), "{}", refused.stdout());
    let why = refused.stderr();
    for wanted in [
        "Nothing was approved",
        "changed since it was reviewed",
        "now \"/bin/sh\"",
        // The reviewed launch had a sandbox of its own (it writes its mark file).
        "isolation was network none",
        ", now off",
        "sandbox: OFF",
        &format!("--fingerprint {now}"),
    ] {
        assert!(why.contains(wanted), "{wanted:?} not in: {why}");
    }
    // Without a fingerprint (no terminal to confirm in), nothing is approved either.
    let unnamed = cli(&proxy, &["upstream", "approve", "late"]);
    assert_ne!(unnamed.code(), Some(0), "{}", unnamed.stdout());
    assert!(
        unnamed
            .stderr()
            .contains("must name the launch it approves")
            && unnamed.stderr().contains(&format!("--fingerprint {now}")),
        "{}",
        unnamed.stderr()
    );
    // Nor through the REST API, nor with something that is not a fingerprint.
    let rest = reqwest::Client::new()
        .post(format!("{}/api/v1/upstreams/late/approve", proxy.base()))
        .header("X-API-Key", proxy.api_key())
        .json(&json!({"fingerprint": reviewed, "approved_by": "reviewer"}))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 400);
    let body: Value = rest.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("isolation was network none"),
        "{body}"
    );
    let garbled = cli(
        &proxy,
        &["upstream", "approve", "late", "--fingerprint", "not-hex"],
    );
    assert_ne!(garbled.code(), Some(0));
    assert!(
        garbled.stderr().contains("is not a launch fingerprint"),
        "{}",
        garbled.stderr()
    );
    assert_eq!(status(&proxy, "late")["state"], "unapproved");
    assert_eq!(started(&evil_mark), 0, "the swapped launch ran");
    assert_eq!(started(&late_mark), 0);

    // Approving the launch as it is now, by its fingerprint, starts it.
    let approved = cli(
        &proxy,
        &["upstream", "approve", "late", "--fingerprint", &now],
    );
    approved.assert_code(0);
    assert!(
        approved.stdout().contains(&format!("fingerprint {now}")),
        "{}",
        approved.stdout()
    );
    eventually("the approved launch started", || started(&evil_mark) == 1);
    client.cancel().await.unwrap();
}
