//! End-to-end: the audit trail fails closed. When the activity journal cannot write, every
//! call is refused with `cannot record the call: the activity journal cannot write (No space
//! left on device); nothing was run` and never reaches the upstream (the fixture's call log
//! proves it), whatever the way in (the three variants, the direct endpoint, `mcpproxy
//! call`); `/readyz`, `/metrics` and `/api/v1/status` say `failing` with the reason, and the
//! page shows a banner (in a real browser, as in `web_e2e`); and once writing works again
//! the journal recovers by itself, no restart, with every record it acknowledged.
//!
//! Two ways to fail the disk: the journal's fault seam (`MCPPROXY_TEST_JOURNAL_WRITE_FAULT_FILE`:
//! its writes fail with `ENOSPC` while a file exists), and a real full file system (a small
//! tmpfs mounted as root; skipped with a note elsewhere, a failure when
//! `MCPPROXY_REQUIRE_TMPFS` is set, as in CI).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::TestCommand;
use crate::support::mcp::{
    Client, Proxy, call, call_log_lines, config_with, connect, is_error, stdio_fixture, text,
};
use crate::support::poll::until_value;
use crate::support::time::let_pass;

/// What every refused call says while the disk is full.
const REFUSAL: &str = "cannot record the call: the activity journal cannot write (No space left on device); nothing was run";
const FULL: &str = "No space left on device";

async fn get(url: &str, key: Option<&str>) -> (u16, String) {
    let mut request = reqwest::Client::new().get(url);
    if let Some(key) = key {
        request = request.header("X-API-Key", key);
    }
    let response = request.send().await.expect("GET");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

async fn readyz(proxy: &Proxy, key: Option<&str>) -> (u16, Value) {
    let (status, body) = get(&format!("{}/readyz", proxy.base()), key).await;
    (
        status,
        serde_json::from_str(&body).expect("readyz answers JSON"),
    )
}

/// Waits (up to 60 s) until `/readyz` (with the key) says the journal is `state`.
async fn until_journal(proxy: &Proxy, key: &str, state: &str) -> Value {
    let what = format!("the journal becomes {state}");
    until_value(&what, Duration::from_secs(60), || async {
        let (_, body) = readyz(proxy, Some(key)).await;
        if body["journal"] == state {
            Ok(body)
        } else {
            Err(body.to_string())
        }
    })
    .await
}

/// Checks `/readyz` without and with the key, `/metrics` and `/api/v1/status` while the
/// journal is failing.
async fn assert_shown_failing(proxy: &Proxy, key: &str) {
    // Without the key: only whether it is ready.
    let (status, body) = readyz(proxy, None).await;
    assert_eq!(status, 503);
    assert_eq!(body, json!({"ready": false}));
    // With it: why.
    let (status, body) = readyz(proxy, Some(key)).await;
    assert_eq!(status, 503);
    assert_eq!(body["ready"], false, "{body}");
    assert_eq!(body["journal"], "failing", "{body}");
    assert_eq!(body["journal_reason"], FULL, "{body}");
    let (status, metrics) = get(&format!("{}/metrics", proxy.base()), Some(key)).await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains("mcpproxy_journal_failing 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(r#"mcpproxy_journal_failure{{reason="{FULL}"}} 1"#)),
        "{metrics}"
    );
    // The page's source: the status endpoint.
    let (status, body) = get(&format!("{}/api/v1/status", proxy.base()), Some(key)).await;
    assert_eq!(status, 200);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["data"]["journal"]["state"], "failing", "{body}");
    assert_eq!(body["data"]["journal"]["reason"], FULL, "{body}");
}

/// Checks the same places say `ok` again.
async fn assert_shown_ok(proxy: &Proxy, key: &str) {
    let (status, body) = readyz(proxy, None).await;
    assert_eq!(status, 200);
    assert_eq!(body, json!({"ready": true}));
    let (_, body) = readyz(proxy, Some(key)).await;
    assert_eq!(body["journal"], "ok", "{body}");
    assert_eq!(body.get("journal_reason"), None, "{body}");
    let (_, metrics) = get(&format!("{}/metrics", proxy.base()), Some(key)).await;
    assert!(
        metrics.contains("mcpproxy_journal_failing 0\n"),
        "{metrics}"
    );
    assert!(!metrics.contains("mcpproxy_journal_failure{"), "{metrics}");
}

/// The `text` argument of every `fx:echo` call in the journal (paged through the API).
async fn echoed_in_journal(proxy: &Proxy, key: &str) -> Vec<(String, String)> {
    let mut echoes = Vec::new();
    let mut offset = 0;
    loop {
        let url = format!(
            "{}/api/v1/activity?tool=echo&limit=1000&offset={offset}",
            proxy.base()
        );
        let (status, body) = get(&url, Some(key)).await;
        assert_eq!(status, 200, "{body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        let records = body["data"]["records"].as_array().unwrap().clone();
        offset += records.len();
        for record in &records {
            let text_arg = record["arguments"]["text"].as_str().unwrap().to_owned();
            let status = record["status"].as_str().unwrap_or_default().to_owned();
            echoes.push((text_arg, status));
        }
        if body["data"]["has_more"] != true {
            echoes.sort();
            return echoes;
        }
    }
}

/// Waits until the journal holds a successful echo record for each of `texts` and no
/// other. Under `async` durability a call's completion is acknowledged once queued, so the
/// record can read `pending` for a flush interval after the answer.
async fn until_echoes_recorded(proxy: &Proxy, key: &str, texts: &[String]) {
    let mut expected: Vec<(String, String)> = texts
        .iter()
        .map(|text_arg| (text_arg.clone(), "success".to_owned()))
        .collect();
    expected.sort();
    crate::support::poll::until(
        "the journal holds a successful record of every call that ran",
        Duration::from_secs(30),
        || async {
            let echoes = echoed_in_journal(proxy, key).await;
            if echoes == expected {
                Ok(())
            } else {
                Err(format!(
                    "{} records {echoes:?}, want {} {expected:?}",
                    echoes.len(),
                    expected.len()
                ))
            }
        },
    )
    .await;
}

/// An echo through `variant` whose result is checked: `Ok(())` when it ran, `Err(text)`
/// when it was refused.
async fn echo(client: &Client, variant: &str, text_arg: &str) -> Result<(), String> {
    let result = call(
        client,
        variant,
        json!({"name": "fx:echo", "args": {"text": text_arg}}),
    )
    .await
    .expect("the proxy answers");
    if is_error(&result) {
        Err(text(&result))
    } else {
        assert_eq!(text(&result), text_arg);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn injected_write_errors_refuse_every_call_until_the_journal_recovers_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let flag = dir.path().join("disk-full");
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", &log)]))
        .env(&[("MCPPROXY_TEST_JOURNAL_WRITE_FAULT_FILE", &flag)])
        .start();
    let key = proxy.api_key();
    let client = connect(&proxy.url).await;
    echo(&client, "call_tool_read", "before").await.unwrap();
    assert_eq!(call_log_lines(&log).len(), 1);
    assert_shown_ok(&proxy, &key).await;

    // The disk fills up.
    std::fs::write(&flag, "").unwrap();
    let refused = |result: Result<CallResult, String>| match result {
        Ok(CallResult::Refused(text)) => assert_eq!(text, REFUSAL),
        other => panic!("expected the refusal, got {other:?}"),
    };
    // The first call after the failure is refused (its pending record cannot be made
    // durable), and so is every later one, whichever way it comes in.
    refused(
        tool(
            &client,
            "call_tool_write",
            "update_note",
            json!({"id": "n", "text": "x"}),
        )
        .await,
    );
    refused(tool(&client, "call_tool_read", "echo", json!({"text": "during"})).await);
    refused(
        tool(
            &client,
            "call_tool_destructive",
            "delete_note",
            json!({"id": "n"}),
        )
        .await,
    );
    let direct = connect(&format!("{}/mcp/servers/fx", proxy.base())).await;
    let result = call(&direct, "echo", json!({"text": "direct"}))
        .await
        .unwrap();
    assert!(is_error(&result), "{result:?}");
    assert_eq!(text(&result), REFUSAL);
    let cli = TestCommand::new(proxy.data_dir.path())
        .args([
            "call",
            "tool-read",
            "fx:echo",
            "-j",
            r#"{"text": "cli"}"#,
            "--config",
        ])
        .args([proxy.cli_config(&log)])
        .output();
    cli.assert_code(2);
    assert_eq!(cli.stderr().trim(), format!("error: {REFUSAL}"));
    // Nothing reached the upstream.
    assert_eq!(call_log_lines(&log).len(), 1, "a refused call ran");
    assert_shown_failing(&proxy, &key).await;

    // Space is freed: the journal writes again by itself, and calls run.
    std::fs::remove_file(&flag).unwrap();
    until_journal(&proxy, &key, "ok").await;
    assert_shown_ok(&proxy, &key).await;
    echo(&client, "call_tool_read", "after").await.unwrap();
    assert_eq!(call_log_lines(&log).len(), 2);
    // The records acknowledged before stay; the refused calls have none.
    until_echoes_recorded(&proxy, &key, &["after".to_owned(), "before".to_owned()]).await;
    let (_, body) = get(
        &format!("{}/api/v1/activity?limit=1000", proxy.base()),
        Some(&key),
    )
    .await;
    let body: Value = serde_json::from_str(&body).unwrap();
    let calls = body["data"]["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["type"] == "tool_call")
        .count();
    assert_eq!(calls, 2, "{body}");
    client.cancel().await.ok();
    direct.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn async_durability_refuses_calls_once_it_knows_and_loses_no_record() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let flag = dir.path().join("disk-full");
    let mut config = config_with(vec![stdio_fixture("fx", &log)]);
    config["activity"] = json!({"durability": "async", "async_flush_ms": 20});
    let proxy = Proxy::builder(&config)
        .env(&[("MCPPROXY_TEST_JOURNAL_WRITE_FAULT_FILE", &flag)])
        .start();
    let key = proxy.api_key();
    let client = connect(&proxy.url).await;
    echo(&client, "call_tool_read", "before").await.unwrap();

    std::fs::write(&flag, "").unwrap();
    // Async mode acknowledges a record once queued: calls run until the writer finds the
    // disk full (at its next fsync, within async_flush_ms), and are refused from then on.
    let mut ran = vec!["before".to_owned()];
    let mut refusal = None;
    for i in 0..2_000 {
        let text_arg = format!("during-{i}");
        match echo(&client, "call_tool_read", &text_arg).await {
            Ok(()) => ran.push(text_arg),
            Err(text) => {
                refusal = Some(text);
                break;
            }
        }
        if i % 10 == 9 {
            let_pass(
                Duration::from_millis(30),
                "the writer's fsync comes every async_flush_ms: calls spread over time reach it",
            )
            .await;
        }
    }
    assert_eq!(refusal.as_deref(), Some(REFUSAL), "no call was refused");
    assert_eq!(
        echo(&client, "call_tool_write", "again").await,
        Err(REFUSAL.to_owned())
    );
    assert_eq!(call_log_lines(&log).len(), ran.len(), "a refused call ran");
    assert_shown_failing(&proxy, &key).await;

    std::fs::remove_file(&flag).unwrap();
    until_journal(&proxy, &key, "ok").await;
    echo(&client, "call_tool_read", "after").await.unwrap();
    ran.push("after".to_owned());
    // Every call that ran is on the record, those that ran while the writer had not yet
    // found out included: kept in memory and written once the disk took writes again.
    until_echoes_recorded(&proxy, &key, &ran).await;
    client.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_page_shows_a_banner_while_the_journal_cannot_write() {
    use crate::web_e2e::{Driver, browser_installed};
    if !browser_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let flag = dir.path().join("disk-full");
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", &log)]))
        .env(&[("MCPPROXY_TEST_JOURNAL_WRITE_FAULT_FILE", &flag)])
        .start();
    let key = proxy.api_key();
    let profile = tempfile::tempdir().unwrap();
    let driver = Driver::start(profile.path()).await;
    driver
        .post(
            "/url",
            json!({"url": format!("{}/#key={key}", proxy.base())}),
        )
        .await;
    let banner = "const b = document.getElementById('journal-banner'); \
                  return b.hidden ? '' : b.innerText";
    driver
        .wait_for(
            "return document.querySelector('#upstreams tbody').innerText",
            |t| t.as_str().is_some_and(|t| t.contains("fx")),
        )
        .await;
    assert_eq!(
        driver.script(banner).await,
        "",
        "a banner while the journal writes"
    );

    std::fs::write(&flag, "").unwrap();
    let client = connect(&proxy.url).await;
    assert_eq!(
        echo(&client, "call_tool_read", "refused").await,
        Err(REFUSAL.to_owned())
    );
    // The page reads the status every 5 s.
    let shown = driver
        .wait_for(banner, |t| t.as_str().is_some_and(|t| t.contains(FULL)))
        .await;
    assert!(
        shown
            .as_str()
            .unwrap()
            .starts_with("The activity journal cannot write (No space left on device)"),
        "{shown}"
    );

    std::fs::remove_file(&flag).unwrap();
    until_journal(&proxy, &key, "ok").await;
    driver
        .wait_for(banner, |t| t.as_str().is_some_and(str::is_empty))
        .await;
    client.cancel().await.ok();
}

/// How a call through a variant ended.
#[derive(Debug)]
enum CallResult {
    Ran,
    Refused(String),
}

async fn tool(
    client: &Client,
    variant: &str,
    tool: &str,
    args: Value,
) -> Result<CallResult, String> {
    let result = call(
        client,
        variant,
        json!({"name": format!("fx:{tool}"), "args": args}),
    )
    .await?;
    Ok(if is_error(&result) {
        CallResult::Refused(text(&result))
    } else {
        CallResult::Ran
    })
}

/// A tmpfs mounted for a test, unmounted (lazily if busy) when dropped.
struct Mount(PathBuf);

impl Mount {
    /// Mounts a `size` tmpfs at `at`; `Err` says why not (not root, no mount).
    fn tmpfs(at: &Path, size: &str) -> Result<Self, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not running as root".into());
        }
        std::fs::create_dir_all(at).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(at)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Self(at.to_owned()))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// Fills the file system under `dir` with `dir/filler` until it is full.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).unwrap();
    let chunk = vec![0xa5u8; 64 << 10];
    loop {
        match file.write_all(&chunk) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling the tmpfs failed: {e}"),
        }
    }
    // What a page is worth may still fit.
    while file.write_all(&[0xa5u8; 512]).is_ok() {}
    let _ = file.sync_all();
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_full_disk_refuses_calls_and_the_journal_recovers_once_space_is_freed() {
    let required = std::env::var_os("MCPPROXY_REQUIRE_TMPFS").is_some_and(|v| v == "1");
    let outer = tempfile::tempdir().unwrap();
    let mnt = outer.path().join("mnt");
    // 32 MiB: the data dir's files, and the journal's write-ahead log (preallocated, 8 MiB),
    // with room to spare until the test fills it.
    let mount = match Mount::tmpfs(&mnt, "32m") {
        Ok(mount) => mount,
        Err(why) if required => panic!("MCPPROXY_REQUIRE_TMPFS is set but: {why}"),
        Err(why) => {
            eprintln!(
                "skipping the real full-disk test: {why} (run as root, or set MCPPROXY_REQUIRE_TMPFS=1 to make this a failure)"
            );
            return;
        }
    };
    let log = outer.path().join("calls.log");
    let data_dir = tempfile::tempdir_in(&mnt).unwrap();
    // The compiled plugins stay off the small file system.
    let cache = outer.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::os::unix::fs::symlink(&cache, data_dir.path().join("cache")).unwrap();
    let mut config = config_with(vec![stdio_fixture("fx", &log)]);
    // Large records fill the journal's file fast.
    config["activity"] = json!({"max_argument_bytes": 16384});
    let proxy = Proxy::builder(&config).data_dir(data_dir).start();
    let key = proxy.api_key();
    let client = connect(&proxy.url).await;
    let pad = "x".repeat(12_000);
    let mut ran = Vec::new();
    let text_arg = format!("before {pad}");
    echo(&client, "call_tool_read", &text_arg).await.unwrap();
    ran.push(text_arg);

    let filler = fill(&mnt);
    // Calls go on while what the journal's file already holds takes their records (and the
    // write-ahead log, preallocated, acknowledges them); the first write that needs new
    // space fails, and from then on every call is refused. Pauses let the idle checkpoint
    // (1 s without calls) write the log into the file.
    let mut refusal = None;
    'rounds: for round in 0..60 {
        for i in 0..25 {
            let text_arg = format!("during {round}-{i} {pad}");
            match echo(&client, "call_tool_read", &text_arg).await {
                Ok(()) => ran.push(text_arg),
                Err(text) => {
                    refusal = Some(text);
                    break 'rounds;
                }
            }
        }
        let_pass(
            Duration::from_millis(1_500),
            "the idle checkpoint runs after 1 s without calls",
        )
        .await;
    }
    assert_eq!(
        refusal.as_deref(),
        Some(REFUSAL),
        "no call was refused on a full disk"
    );
    refused_destructive(&client).await;
    assert_eq!(call_log_lines(&log).len(), ran.len(), "a refused call ran");
    assert_shown_failing(&proxy, &key).await;

    // Space is freed: no restart, the journal writes again, and nothing it acknowledged is
    // lost.
    std::fs::remove_file(&filler).unwrap();
    until_journal(&proxy, &key, "ok").await;
    assert_shown_ok(&proxy, &key).await;
    let text_arg = format!("after {pad}");
    echo(&client, "call_tool_read", &text_arg).await.unwrap();
    ran.push(text_arg);
    until_echoes_recorded(&proxy, &key, &ran).await;
    client.cancel().await.ok();
    drop(proxy);
    drop(mount);
}

/// A destructive call on a full disk is refused and not run.
async fn refused_destructive(client: &Client) {
    match tool(
        client,
        "call_tool_destructive",
        "delete_note",
        json!({"id": "n"}),
    )
    .await
    {
        Ok(CallResult::Refused(text)) => assert_eq!(text, REFUSAL),
        other => panic!("expected the refusal, got {other:?}"),
    }
}
