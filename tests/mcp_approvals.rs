//! A person approves the exact call (`approvals`): a destructive call waits until the person
//! at the client (the official Python SDK's elicitation callback) or someone with
//! `mcpproxy approvals` answers, and nothing reaches the upstream before; an answer covers
//! one call, a call no one answers in time is refused, and each record says how it was
//! decided.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::TestCommand;
use crate::support::approvals::{approvals, deleted, record_of, spawn_delete};
use crate::support::mcp::{Proxy, call, config_with, connect, is_error, stdio_fixture, text};

/// The fixture `fx` with destructive calls waiting for a person, for `timeout_secs`.
fn config(log: &Path, timeout_secs: u64) -> Value {
    let mut config = config_with(vec![stdio_fixture("fx", log)]);
    config["approvals"] = json!({"ask": ["destructive"], "timeout_secs": timeout_secs});
    config
}

/// `tests/python/approving_client.py` (the official Python SDK) against `proxy`, answering
/// elicitations that name `marker` (`-`: no elicitation at all), making `calls`.
fn python_client(
    python: &Path,
    proxy: &Proxy,
    marker: &str,
    calls: &Value,
) -> tokio::process::Child {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/approving_client.py");
    tokio::process::Command::new(python)
        .arg(script)
        .args([proxy.url.as_str(), marker, &calls.to_string()])
        .kill_on_drop(true)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the Python client")
}

/// What the Python client saw, once it succeeded (within `within`).
async fn python_finished(client: tokio::process::Child, within: Duration) -> Value {
    let out = tokio::time::timeout(within, client.wait_with_output())
        .await
        .expect("the Python client finished in time")
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The id of the first call waiting for approval, once one waits (`what` names the wait).
async fn first_waiting(proxy: &Proxy, what: &str) -> String {
    crate::support::poll::until_value(what, Duration::from_secs(60), || async {
        let out = approvals(proxy, &["list", "-o", "json"]);
        let all: Vec<Value> = serde_json::from_str(&out.stdout()).unwrap_or_default();
        all.first()
            .and_then(|p| p["id"].as_str().map(str::to_owned))
            .ok_or_else(|| "none waits".to_owned())
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_person_at_the_client_approves_one_destructive_call_and_denies_another() {
    let Some(python) = crate::support::test_python() else {
        return;
    };
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config(log.path(), 60)).start();
    let calls = json!([
        ["call_tool_read", {"name": "fx:get_status"}],
        ["call_tool_destructive", {"name": "fx:delete_note", "args": {"id": "keep-APPROVE"}}],
        ["call_tool_destructive", {"name": "fx:delete_note", "args": {"id": "other"}}],
    ]);
    let client = python_client(&python, &proxy, "APPROVE", &calls);
    let seen = python_finished(client, Duration::from_secs(120)).await;

    // The read was not asked about; each destructive call was, with what it will send.
    let questions = seen["questions"].as_array().unwrap();
    assert_eq!(questions.len(), 2, "{seen}");
    let first = questions[0]["message"].as_str().unwrap();
    for needle in [
        "destructive",
        "fx",
        "delete_note",
        "keep-APPROVE",
        "destructiveHint",
    ] {
        assert!(first.contains(needle), "{needle:?} in {first}");
    }
    let results = seen["results"].as_array().unwrap();
    assert_eq!(results[0]["is_error"], false, "{seen}");
    assert_eq!(results[1]["is_error"], false, "{seen}");
    assert_eq!(results[2]["is_error"], true, "{seen}");
    assert_eq!(
        results[2]["text"],
        "The call to 'fx:delete_note' was denied by the user"
    );
    // Only the approved call reached the upstream.
    assert_eq!(deleted(log.path()), vec!["keep-APPROVE".to_owned()]);

    let approved = record_of(&proxy, "keep-APPROVE").await;
    assert_eq!(approved["status"], "success", "{approved}");
    assert_eq!(approved["approval"]["asked_via"], "client");
    assert_eq!(approved["approval"]["decided_by"], "client");
    assert_eq!(approved["approval"]["decision"], "approved");
    assert_eq!(approved["approval"]["reason"], "looks right");
    assert_eq!(
        approved["approval"]["arguments_hash"]
            .as_str()
            .map(str::len),
        Some(64)
    );
    let denied = record_of(&proxy, "other").await;
    assert_eq!(denied["status"], "blocked", "{denied}");
    assert_eq!(denied["approval"]["decision"], "denied");
    assert_ne!(
        denied["approval"]["arguments_hash"], approved["approval"]["arguments_hash"],
        "each answer covers its own arguments"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_elicitation_a_call_waits_for_mcpproxy_approvals_and_an_answer_covers_one_call() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config(log.path(), 4)).start();
    let delete = |id: &'static str| spawn_delete(&proxy, id);
    let pending = |want: usize| {
        let proxy = &proxy;
        async move {
            crate::support::poll::until_value(
                "the calls wait for approval",
                Duration::from_secs(30),
                || async {
                    let out = approvals(proxy, &["list", "-o", "json"]);
                    out.assert_code(0);
                    let all: Vec<Value> = serde_json::from_str(&out.stdout()).unwrap();
                    if all.len() == want {
                        Ok(all)
                    } else {
                        Err(format!("{} waiting", all.len()))
                    }
                },
            )
            .await
        }
    };
    let a = delete("a");
    let waiting = pending(1).await;
    let b = delete("b");
    let waiting_both = pending(2).await;
    let id_of = |arg: &str| {
        waiting_both
            .iter()
            .find(|p| p["arguments"]["id"] == arg)
            .and_then(|p| p["id"].as_str())
            .unwrap()
            .to_owned()
    };
    let (id_a, id_b) = (id_of("a"), id_of("b"));

    // The agent cannot answer through the endpoint it calls tools with: no tool answers an
    // approval, `upstream_servers` has no such operation, and the calls still wait.
    let agent = connect(&proxy.url).await;
    let tools = agent.list_all_tools().await.unwrap();
    assert!(
        tools.iter().all(|t| !t.name.contains("approv")),
        "no MCP tool answers approvals: {:?}",
        tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>()
    );
    for attempt in [
        json!({"operation": "approve", "name": id_a}),
        json!({"operation": "patch", "name": "fx", "approve": id_a}),
    ] {
        let answer = call(&agent, "upstream_servers", attempt.clone()).await;
        assert!(
            answer.as_ref().map_or(true, is_error),
            "{attempt} is refused: {answer:?}"
        );
    }
    let through_a_tool = call(
        &agent,
        "call_tool_write",
        json!({"name": "mcpproxy:approve", "args": {"id": id_a}}),
    )
    .await;
    assert!(
        through_a_tool.as_ref().map_or(true, is_error),
        "{through_a_tool:?}"
    );
    agent.cancel().await.ok();
    assert_eq!(pending(2).await.len(), 2, "both calls still wait");
    let metrics = || proxy.get_text("/metrics");
    let text_metrics = metrics().await;
    assert!(
        text_metrics.contains("mcpproxy_approvals_pending 2"),
        "{text_metrics}"
    );
    assert_eq!(waiting[0]["id"], id_a.as_str());
    assert_eq!(waiting[0]["class"], "destructive");
    assert_eq!(waiting[0]["variant"], "call_tool_destructive");
    assert!(
        deleted(log.path()).is_empty(),
        "nothing reaches the upstream before an answer"
    );
    let text_list = approvals(&proxy, &["list"]);
    assert!(
        text_list.stdout().contains("fx:delete_note"),
        "{}",
        text_list.stdout()
    );

    // Approving A sends A, and only A.
    let out = approvals(&proxy, &["approve", &id_a, "--reason", "ticket 42"]);
    out.assert_code(0);
    let result_a = a.await.unwrap();
    assert!(!is_error(&result_a), "{}", text(&result_a));
    assert_eq!(deleted(log.path()), vec!["a".to_owned()]);
    assert_eq!(pending(1).await[0]["id"], id_b.as_str(), "B still waits");
    // The answer is spent: it cannot release anything again.
    let again = approvals(&proxy, &["approve", &id_a]);
    assert_ne!(again.code(), Some(0));
    assert!(
        again.stderr().contains("no call waits for approval"),
        "{}",
        again.stderr()
    );

    // B is denied through REST.
    let denied = reqwest::Client::new()
        .post(format!("{}/api/v1/approvals/{id_b}/deny", proxy.base()))
        .header("X-API-Key", proxy.api_key())
        .json(&json!({"reason": "not today"}))
        .send()
        .await
        .unwrap();
    assert!(denied.status().is_success());
    let result_b = b.await.unwrap();
    assert!(is_error(&result_b));
    assert!(
        text(&result_b).contains("was denied by a person (rest)"),
        "{}",
        text(&result_b)
    );

    // C waits until the timeout, then is refused.
    let result_c = delete("c").await.unwrap();
    assert!(is_error(&result_c));
    assert_eq!(
        text(&result_c),
        "The call to 'fx:delete_note' was not approved within 4 s (approvals.timeout_secs); it was not sent"
    );
    assert_eq!(deleted(log.path()), vec!["a".to_owned()]);

    let text_metrics = metrics().await;
    for line in [
        "mcpproxy_approvals_pending 0",
        r#"mcpproxy_approvals_total{decision="approved",asked_via="page"} 1"#,
        r#"mcpproxy_approvals_total{decision="denied",asked_via="page"} 1"#,
        r#"mcpproxy_approvals_total{decision="timed_out",asked_via="page"} 1"#,
    ] {
        assert!(text_metrics.contains(line), "{line} in {text_metrics}");
    }

    let a = record_of(&proxy, "a").await;
    assert_eq!(
        (
            &a["status"],
            &a["approval"]["asked_via"],
            &a["approval"]["decided_by"],
            &a["approval"]["reason"]
        ),
        (
            &json!("success"),
            &json!("page"),
            &json!("cli"),
            &json!("ticket 42")
        )
    );
    let b = record_of(&proxy, "b").await;
    assert_eq!(
        (&b["status"], &b["approval"]["decision"]),
        (&json!("blocked"), &json!("denied"))
    );
    let c = record_of(&proxy, "c").await;
    assert_eq!(
        (&c["status"], &c["approval"]["decision"]),
        (&json!("blocked"), &json!("timed_out"))
    );
    assert!(c["approval"].get("decided_by").is_none());

    // `activity list --approval` and `approval=` find them by how they ended.
    let config = proxy.data_dir.path().join("mcp_config.json");
    let listed = |decision: &str| {
        let out = TestCommand::new(proxy.data_dir.path())
            .args([
                "activity",
                "list",
                "--approval",
                decision,
                "-o",
                "json",
                "--config",
            ])
            .arg_path(&config)
            .output();
        out.assert_code(0);
        let records: Vec<Value> = serde_json::from_str(&out.stdout()).unwrap();
        records
            .iter()
            .map(|r| r["arguments"]["id"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(listed("denied"), vec!["b"]);
    assert_eq!(listed("any"), vec!["c", "b", "a"]);
    let page = proxy.get_json("/api/v1/activity?approval=timed_out").await;
    assert_eq!(page["data"]["records"][0]["arguments"]["id"], "c", "{page}");
    assert_eq!(page["data"]["records"].as_array().map(Vec::len), Some(1));
}

/// `mcpproxy call tool-destructive --yes`: approved in advance, through the running server
/// and in a proxy of its own (no server owns the data dir); without `--yes` and without a
/// terminal it says how to answer, and the call times out unanswered.
#[tokio::test(flavor = "multi_thread")]
async fn mcpproxy_call_answers_its_own_approval_with_yes() {
    let cli_call = |dir: &Path, id: &str, yes: bool| {
        let config = dir.join("mcp_config.json");
        let mut args = vec![
            "call".to_owned(),
            "tool-destructive".to_owned(),
            "fx:delete_note".to_owned(),
            "-j".to_owned(),
            json!({ "id": id }).to_string(),
        ];
        if yes {
            args.push("--yes".to_owned());
        }
        TestCommand::new(dir)
            .args(args)
            .args(["--config"])
            .arg_path(&config)
            .output()
    };

    // Through the running server.
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config(log.path(), 3)).start();
    let dir = proxy.data_dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || cli_call(&dir, "served", true))
        .await
        .unwrap();
    out.assert_code(0);
    let record = record_of(&proxy, "served").await;
    assert_eq!(
        (&record["status"], &record["approval"]["decided_by"]),
        (&json!("success"), &json!("--yes"))
    );
    // Not a terminal, no --yes: it says how to answer, and no one does.
    let dir = proxy.data_dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || cli_call(&dir, "unanswered", false))
        .await
        .unwrap();
    assert_ne!(out.code(), Some(0));
    assert!(
        out.stderr()
            .contains("the call waits for a person's approval")
            && out.stderr().contains("mcpproxy approvals approve"),
        "{}",
        out.stderr()
    );
    assert_eq!(deleted(log.path()), vec!["served".to_owned()]);
    drop(proxy);

    // In a proxy of its own.
    let dir = tempfile::tempdir().unwrap();
    let log = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        dir.path().join("mcp_config.json"),
        config(log.path(), 3).to_string(),
    )
    .unwrap();
    let out = cli_call(dir.path(), "alone", true);
    out.assert_code(0);
    assert_eq!(deleted(log.path()), vec!["alone".to_owned()]);
}

/// The page shows a waiting call with a badge, and its Approve and Deny buttons answer it
/// (headless Chromium).
#[tokio::test(flavor = "multi_thread")]
async fn the_page_shows_waiting_calls_and_its_buttons_answer_them() {
    if !crate::web_e2e::browser_installed() {
        return;
    }
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config(log.path(), 60)).start();
    let delete = |id: &'static str| spawn_delete(&proxy, id);
    let approved = delete("page-yes");
    let denied = delete("page-no");
    let profile = tempfile::tempdir().unwrap();
    let driver = crate::web_e2e::Driver::start(profile.path()).await;
    let url = format!("{}/#key={}", proxy.base(), proxy.api_key());
    driver.post("/url", json!({ "url": url })).await;
    let rows = "return [...document.querySelectorAll('#approvals-table tbody tr')].map(r => r.textContent)";
    driver
        .wait_for(rows, |rows| rows.as_array().is_some_and(|r| r.len() == 2))
        .await;
    let badge = driver
        .wait_for(
            "const b = document.getElementById('approvals-badge'); return b.hidden ? '' : b.textContent",
            |t| t.as_str().is_some_and(|t| t.starts_with('2')),
        )
        .await;
    assert_eq!(badge, "2 waiting for approval");
    let press = |id: &str, verb: &str| {
        format!(
            "const row = [...document.querySelectorAll('#approvals-table tbody tr')].find(r => \
             r.textContent.includes('{id}')); row.querySelector('button[data-answer=\"{verb}\"]').click(); \
             return true"
        )
    };
    driver.script(&press("page-yes", "approve")).await;
    let result = approved.await.unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    driver
        .wait_for(rows, |rows| rows.as_array().is_some_and(|r| r.len() == 1))
        .await;
    driver.script(&press("page-no", "deny")).await;
    let result = denied.await.unwrap();
    assert_eq!(
        text(&result),
        "The call to 'fx:delete_note' was denied by a person (page)"
    );
    driver
        .wait_for(
            "return document.getElementById('approvals').hidden",
            |hidden| *hidden == json!(true),
        )
        .await;
    assert_eq!(deleted(log.path()), vec!["page-yes".to_owned()]);
    let record = record_of(&proxy, "page-yes").await;
    assert_eq!(record["approval"]["decided_by"], "page");
}

/// The official Python SDK client without elicitation: its destructive call waits, told so
/// by progress notifications, while `mcpproxy approvals approve` runs in another process.
#[tokio::test(flavor = "multi_thread")]
async fn a_python_client_without_elicitation_waits_for_mcpproxy_approvals_in_another_process() {
    let Some(python) = crate::support::test_python() else {
        return;
    };
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config(log.path(), 60)).start();
    let calls =
        json!([["call_tool_destructive", {"name": "fx:delete_note", "args": {"id": "py-wait"}}]]);
    let client = python_client(&python, &proxy, "-", &calls);
    let id = first_waiting(&proxy, "the Python client's call waits for approval").await;
    assert!(deleted(log.path()).is_empty());
    approvals(&proxy, &["approve", &id]).assert_code(0);
    let seen = python_finished(client, Duration::from_secs(60)).await;
    assert_eq!(seen["results"][0]["is_error"], false, "{seen}");
    assert_eq!(seen["questions"], json!([]), "no elicitation was declared");
    let told = seen["progress"][0]["message"].as_str().unwrap_or_default();
    assert!(
        told.contains("waiting for a person to approve") && told.contains(&id),
        "{seen}"
    );
    assert_eq!(deleted(log.path()), vec!["py-wait".to_owned()]);
}

/// A `code_execution` script's destructive call waits for approval like any other (the
/// script waits), and its record, a child of the script's, says who approved it.
#[tokio::test(flavor = "multi_thread")]
async fn a_scripts_inner_call_waits_for_approval_like_any_other() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut config = config(log.path(), 60);
    config["code_execution"] = json!({"enabled": true, "timeout_ms": 120_000});
    let proxy = Proxy::builder(&config).start();
    let data_dir = proxy.data_dir.path().to_owned();
    let script = data_dir.join("delete.js");
    std::fs::write(
        &script,
        "const done = call_tool('fx:delete_note', { id: 'from-script' });
         return { ok: done.ok, error: done.error ?? null };",
    )
    .unwrap();
    let config_path = data_dir.join("mcp_config.json");
    let run = tokio::task::spawn_blocking(move || {
        TestCommand::new(&data_dir)
            .args(["code", "run"])
            .arg_path(&script)
            .args(["--intent", "destructive", "-o", "json", "--config"])
            .arg_path(&config_path)
            .output()
    });
    let id = first_waiting(&proxy, "the script's call waits for approval").await;
    approvals(&proxy, &["approve", &id, "--reason", "scripted cleanup"]).assert_code(0);
    let out = run.await.unwrap();
    out.assert_code(0);
    let report: Value = serde_json::from_str(&out.stdout()).unwrap();
    assert_eq!(report["result"]["ok"], true, "{report}");
    assert_eq!(deleted(log.path()), vec!["from-script".to_owned()]);
    let record = record_of(&proxy, "from-script").await;
    assert!(record["parent_id"].is_string(), "{record}");
    assert_eq!(record["approval"]["decided_by"], "cli");
    assert_eq!(record["approval"]["reason"], "scripted cleanup");
}

/// The upstream call's deadline counts from the answer, not from the question: a call
/// approved after longer than `tool_call_timeout_ms` still runs.
#[tokio::test(flavor = "multi_thread")]
async fn an_approval_slower_than_the_call_timeout_still_lets_the_call_run() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut config = config(log.path(), 60);
    config["tool_call_timeout_ms"] = json!(1500);
    let proxy = Proxy::builder(&config).start();
    let call = spawn_delete(&proxy, "slow-answer");
    let id = first_waiting(&proxy, "the call waits").await;
    // It waits from no later than now.
    let asked = std::time::Instant::now();
    // The person answers after the call's whole timeout has passed.
    crate::support::poll::until(
        "the call timeout passes",
        Duration::from_secs(10),
        || async {
            (asked.elapsed() > Duration::from_millis(2000))
                .then_some(())
                .ok_or_else(|| "not yet".to_owned())
        },
    )
    .await;
    approvals(&proxy, &["approve", &id]).assert_code(0);
    let result = call.await.unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(deleted(log.path()), vec!["slow-answer".to_owned()]);
    let record = record_of(&proxy, "slow-answer").await;
    assert!(
        record["approval"]["waited_ms"].as_u64().unwrap() >= 2000,
        "{record}"
    );
}

/// `mcpproxy call tool-destructive` at a terminal (a pseudo-terminal made by util-linux's
/// `script`): the person is shown the call and asked; `y` sends it, `n` refuses it, and the
/// record names the terminal as who decided.
#[tokio::test(flavor = "multi_thread")]
async fn mcpproxy_call_at_a_terminal_asks_the_person_there() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: util-linux's `script` (to make a terminal) is not installed");
        return;
    }
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config(log.path(), 60)).start();
    let at_terminal = |id: &str, typed: &str| {
        let dir = proxy.data_dir.path().to_owned();
        let config = dir.join("mcp_config.json");
        let command = format!(
            "{} call tool-destructive fx:delete_note -j '{}' --config {}",
            env!("CARGO_BIN_EXE_mcpproxy"),
            json!({ "id": id }),
            config.display()
        );
        let typed = typed.to_owned();
        tokio::task::spawn_blocking(move || {
            use std::io::Write;
            let mut script = std::process::Command::new("script")
                .args(["--quiet", "--return", "--command", &command, "/dev/null"])
                .env("MCPPROXY_DATA_DIR", &dir)
                .env("HOME", &dir)
                .env("NO_COLOR", "1")
                .env_remove("RUST_LOG")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("run script");
            script
                .stdin
                .take()
                .unwrap()
                .write_all(typed.as_bytes())
                .unwrap();
            script.wait_with_output().expect("script's output")
        })
    };
    let out = at_terminal("typed-yes", "y\n").await.unwrap();
    let screen = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        screen.contains("needs your approval") && screen.contains("Approve this call? [y/N]"),
        "the terminal shows the call and asks: {screen}"
    );
    assert!(screen.contains("typed-yes"), "with its arguments: {screen}");
    assert!(out.status.success(), "{screen}");
    assert_eq!(deleted(log.path()), ["typed-yes"]);
    let record = record_of(&proxy, "typed-yes").await;
    assert_eq!(record["approval"]["decided_by"], "terminal", "{record}");
    assert_eq!(record["approval"]["decision"], "approved", "{record}");

    let out = at_terminal("typed-no", "n\n").await.unwrap();
    let screen = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!out.status.success(), "{screen}");
    assert!(screen.contains("was denied"), "{screen}");
    assert_eq!(deleted(log.path()), ["typed-yes"]);
    let record = record_of(&proxy, "typed-no").await;
    assert_eq!(record["status"], "blocked", "{record}");
    assert_eq!(record["approval"]["decided_by"], "terminal", "{record}");
}
