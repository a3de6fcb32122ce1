//! The audit trail under flood and damage (issue #19): a flood of large calls cannot push an
//! earlier genuine record out (minimum age, pressure mode, alert), and a damaged journal
//! file gives a clear error and can be repaired.

use std::path::Path;
use std::time::Duration;

use mcpproxy_activity::{ActivityRecord, Journal, JournalOptions, RecordType, Source, Status};
use serde_json::{Value, json};

use crate::support::TestCommand;
use crate::support::mcp::{Proxy, call, config_with, connect, is_error, stdio_fixture};
use crate::support::poll::until_value;

async fn get(proxy: &Proxy, query: &str) -> Vec<Value> {
    let key = std::fs::read_to_string(proxy.data_dir.path().join("api_key"))
        .expect("the API key file exists after start");
    let base = proxy.url.trim_end_matches("/mcp").to_owned() + "/api/v1/activity";
    let response = reqwest::Client::new()
        .get(format!("{base}?{query}"))
        .header("X-API-Key", key.trim())
        .send()
        .await
        .expect("GET");
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = response.json().await.expect("JSON body");
    body["data"]["records"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_large_calls_cannot_erase_an_earlier_destructive_call() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut config = config_with(vec![stdio_fixture("fx", log.path())]);
    config["activity"] = json!({
        "max_argument_bytes": 8192,
        "retention": {"max_bytes": 262_144, "min_age_hours": 1, "interval_seconds": 1},
    });
    let proxy = Proxy::builder(&config).start();
    let client = connect(&proxy.url).await;
    let genuine = call(
        &client,
        "call_tool_destructive",
        json!({"name": "fx:delete_note", "args": {"id": "the-real-one"}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&genuine));
    // Well past max_bytes: 120 records of ~8 KiB of arguments each is ~1 MiB.
    let blob = "A".repeat(8000);
    for i in 0..120 {
        let result = call(
            &client,
            "call_tool_write",
            json!({"name": "fx:update_note", "args": {"id": format!("flood-{i}"), "text": blob}}),
        )
        .await
        .unwrap();
        assert!(!is_error(&result), "flood call {i}");
    }
    // Retention runs every second: wait for it to find the journal under pressure.
    let alerts = until_value("an alert", Duration::from_secs(30), || async {
        let alerts = get(&proxy, "type=alert").await;
        if alerts.is_empty() {
            Err("none yet".to_owned())
        } else {
            Ok(alerts)
        }
    })
    .await;
    assert_eq!(alerts.len(), 1, "one alert for the episode");
    let alert = &alerts[0];
    assert_eq!(alert["type"], "alert");
    let message = alert["error_message"].as_str().unwrap();
    assert!(message.contains("min_age_hours"), "{message}");
    assert!(
        message.contains("mcpproxy activity list --session"),
        "{message}"
    );
    // The alert fires once retention first finds the journal over 256 KiB, which takes
    // about 30 of these records; it names the flooding session as the busiest.
    assert!(
        alert["details"]["top_sessions"][0]["records"]
            .as_u64()
            .unwrap()
            >= 30,
        "{alert}"
    );

    // Calls made under pressure are stored summarised.
    for i in 0..3 {
        call(
            &client,
            "call_tool_write",
            json!({"name": "fx:update_note", "args": {"id": format!("late-{i}"), "text": blob}}),
        )
        .await
        .unwrap();
    }
    let latest = until_value(
        "the latest records finished",
        Duration::from_secs(30),
        || async {
            let latest = get(&proxy, "tool=update_note&limit=3").await;
            if latest.iter().all(|r| r["status"] != "pending") {
                Ok(latest)
            } else {
                Err(format!("{latest:#?}"))
            }
        },
    )
    .await;
    assert_eq!(latest.len(), 3);
    for record in &latest {
        assert_eq!(record["summarised"], true, "{record}");
        assert!(record.to_string().len() <= 2048, "{record}");
    }
    // The genuine destructive call is still there, in full.
    let destructive = get(&proxy, "tool=delete_note").await;
    assert_eq!(destructive.len(), 1, "{destructive:#?}");
    assert_eq!(destructive[0]["tool_variant"], "call_tool_destructive");
    assert_eq!(destructive[0]["arguments"]["id"], "the-real-one");
    assert!(destructive[0].get("summarised").is_none());
    // Nothing of the flood was deleted either: all of it is younger than min_age.
    let all = get(&proxy, "tool=update_note&limit=1000").await;
    assert_eq!(all.len(), 123);
    client.cancel().await.unwrap();
}

/// Writes `n` records into a journal at `path`.
fn write_journal(path: &Path, n: usize) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    let journal = Journal::open(path, JournalOptions::default()).unwrap();
    let records: Vec<ActivityRecord> = (0..n)
        .map(|i| {
            let mut rec = ActivityRecord::new(RecordType::ToolCall, Source::Mcp, "fx", "echo");
            rec.status = Status::Success;
            rec.arguments = Some(json!({"i": i, "text": "x".repeat(400)}));
            rec
        })
        .collect();
    journal.bulk_load(&records).unwrap();
}

/// Overwrites 4 KiB in the middle of the file with 0xFF.
fn damage(path: &Path) {
    use std::io::{Seek, SeekFrom, Write};
    let len = std::fs::metadata(path).unwrap().len();
    let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.seek(SeekFrom::Start(len / 2 / 4096 * 4096)).unwrap();
    file.write_all(&[0xFF; 4096]).unwrap();
}

#[test]
fn a_damaged_journal_says_to_repair_and_repair_saves_the_readable_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("activity.redb");
    write_journal(&path, 600);
    damage(&path);
    let list = |dir: &Path| {
        TestCommand::new(dir)
            .args(["activity", "list", "-o", "json", "-n", "1000", "--data-dir"])
            .args([dir])
            .output()
    };
    let out = list(dir.path());
    let stderr = out.stderr();
    assert!(
        out.code().is_some_and(|c| c != 0 && c != 101),
        "exit {:?}\n{stderr}",
        out.code()
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("is damaged"), "{stderr}");
    assert!(stderr.contains("mcpproxy activity repair"), "{stderr}");
    assert_eq!(
        stderr.matches("is damaged").count(),
        1,
        "said once: {stderr}"
    );

    // redb 4.5 walks the damaged tree when it opens the file (also for its own recovery), so
    // repair falls back to scanning the raw file for record JSON: everything outside the
    // damaged 4 KiB comes back.
    let before = std::fs::read(&path).unwrap();
    let out = TestCommand::new(dir.path())
        .args(["activity", "repair", "--data-dir"])
        .args([dir.path()])
        .output();
    let stdout = out.stdout();
    out.assert_code(0);
    assert!(!out.stderr().contains("panicked"), "{}", out.stderr());
    let saved: usize = stdout
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("saved count in {stdout:?}"));
    assert!(
        (550..600).contains(&saved),
        "saved {saved} of 600: {stdout}"
    );
    let aside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains("activity.redb.damaged-"))
        .collect();
    assert_eq!(aside.len(), 1, "the damaged file is kept aside");
    assert_eq!(
        std::fs::read(&aside[0]).unwrap(),
        before,
        "and left as it was"
    );

    let out = list(dir.path());
    out.assert_code(0);
    let listed: Value = serde_json::from_str(&out.stdout()).unwrap();
    let count = listed
        .as_array()
        .or_else(|| listed["records"].as_array())
        .map(Vec::len)
        .unwrap_or_else(|| panic!("records in {listed}"));
    assert_eq!(count, saved);
}

#[test]
fn repair_of_a_readable_journal_moves_it_aside_and_keeps_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("activity.redb");
    write_journal(&path, 300);
    let list = |dir: &Path| {
        TestCommand::new(dir)
            .args(["activity", "list", "-o", "json", "-n", "1000", "--data-dir"])
            .args([dir])
            .output()
    };
    let out = TestCommand::new(dir.path())
        .args(["activity", "repair", "--data-dir"])
        .args([dir.path()])
        .output();
    out.assert_code(0);
    let stdout = out.stdout();
    let saved: usize = stdout
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("saved count in {stdout:?}"));
    assert_eq!(saved, 300, "{stdout}");
    assert!(stdout.contains("unreadable ranges"), "{stdout}");
    let aside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("activity.redb.damaged-"))
        .collect();
    assert_eq!(aside.len(), 1, "the damaged file is kept: {aside:?}");
    assert!(stdout.contains(&aside[0]), "{stdout}");

    let out = list(dir.path());
    out.assert_code(0);
    let records: Vec<Value> = serde_json::from_str(&out.stdout()).unwrap();
    assert_eq!(records.len(), saved);
}
