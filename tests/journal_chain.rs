//! The audit chain end to end: real calls through a served proxy leave a hash chain that
//! `GET /api/v1/activity/verify`, `mcpproxy activity verify` (through the server and
//! offline) and an export checked with `verify --file --key` all find whole; an edited
//! export and a wrong key are refused with exit code 1, naming the record; a witness's
//! checkpoint (`GET /api/v1/activity/checkpoint`, or pushed by `activity checkpoint --push`)
//! checks out; the chain goes on whole through a `kill -9` and a restart; a sink receives
//! each record with its chain fields, and what it received verifies as an export does.

use std::path::Path;

use serde_json::{Value, json};

use crate::sink_e2e::Receiver;
use crate::support::TestCommand;
use crate::support::mcp::{
    PLUGIN_TIMEOUT_MS, Proxy, config_with, reads_and_blocked, stdio_fixture,
};
use crate::support::poll::until;

async fn verified(proxy: &Proxy) -> Value {
    let body = proxy.get_json("/api/v1/activity/verify").await;
    assert_eq!(body["success"], true, "{body}");
    body["data"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_leave_a_chain_that_verifies_through_the_api_the_cli_and_an_export() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let config = config_with(vec![stdio_fixture("fx", log.path())]);
    // `mcpproxy ARGS --config CONFIG` with the proxy's data dir.
    let cli = |dir: &Path, config: &Path, args: &[&str]| {
        TestCommand::new(dir)
            .args(args)
            .args(["--config"])
            .args([config])
            .output()
    };
    let mut proxy = Proxy::builder(&config).start();
    reads_and_blocked(&proxy, 12, 4).await;
    proxy.finished_records("tool_call", 12).await;

    let report = verified(&proxy).await;
    assert_eq!(report["ok"], true, "{report:#}");
    assert!(report["chained"].as_u64().unwrap() >= 12, "{report:#}");

    let cli_config = proxy.cli_config(log.path());
    let dir = proxy.data_dir.path().to_owned();
    let out = cli(&dir, &cli_config, &["activity", "verify"]);
    out.assert_code(0);
    assert!(
        out.stdout().contains("OK: the chain holds"),
        "{}",
        out.stdout()
    );

    let key = cli(&dir, &cli_config, &["activity", "key"]);
    key.assert_code(0);
    let key = key.stdout().trim().to_owned();
    assert_eq!(key.len(), 64, "{key}");

    // A witness keeps the head signed now; the chain is checked against it (through the
    // server: its export, checked here).
    let kept = proxy.get_json("/api/v1/activity/checkpoint").await;
    assert_eq!(kept["data"]["key"], key.as_str(), "{kept}");
    assert!(
        kept["data"]["checkpoint"]["seq"].as_u64().unwrap() >= 12,
        "{kept}"
    );
    let witness = dir.join("witness.jsonl");
    std::fs::write(&witness, format!("{}\n", kept["data"])).unwrap();
    let witness_arg = witness.to_str().unwrap();
    let out = cli(
        &dir,
        &cli_config,
        &["activity", "verify", "--witness", witness_arg],
    );
    out.assert_code(0);

    // An export with its proof verifies offline against the key.
    let export = cli(&dir, &cli_config, &["activity", "export", "--proof"]);
    export.assert_code(0);
    let file = dir.join("export.jsonl");
    std::fs::write(&file, export.stdout()).unwrap();
    let file_arg = file.to_str().unwrap();
    let out = cli(
        &dir,
        &cli_config,
        &["activity", "verify", "--file", file_arg, "--key", &key],
    );
    out.assert_code(0);
    assert!(
        out.stdout().contains("given with --key"),
        "{}",
        out.stdout()
    );

    // A blocked call turned into an allowed one: refused, naming the record.
    let blocked: Value = export
        .stdout()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["status"] == "blocked")
        .expect("a blocked call in the export");
    let edited: Vec<String> = export
        .stdout()
        .lines()
        .map(|line| {
            if line.contains(blocked["id"].as_str().unwrap()) {
                line.replace("\"status\":\"blocked\"", "\"status\":\"success\"")
            } else {
                line.to_owned()
            }
        })
        .collect();
    std::fs::write(&file, edited.join("\n")).unwrap();
    let out = cli(
        &dir,
        &cli_config,
        &["activity", "verify", "--file", file_arg, "--key", &key],
    );
    out.assert_code(1);
    assert!(
        out.stdout().contains("altered") && out.stdout().contains(blocked["id"].as_str().unwrap()),
        "{}",
        out.stdout()
    );
    // The right export, the wrong key.
    std::fs::write(&file, export.stdout()).unwrap();
    let wrong = "0".repeat(64);
    let out = cli(
        &dir,
        &cli_config,
        &["activity", "verify", "--file", file_arg, "--key", &wrong],
    );
    out.assert_code(1);
    assert!(out.stdout().contains("bad_signature"), "{}", out.stdout());

    // kill -9, a restart, more calls: the chain goes on whole.
    proxy.proc.kill();
    let mut restarted = Proxy::builder(&config).data_dir(proxy.data_dir).start();
    reads_and_blocked(&restarted, 6, 3).await;
    restarted.finished_records("tool_call", 18).await;
    let report = verified(&restarted).await;
    assert_eq!(report["ok"], true, "{report:#}");
    assert!(report["chained"].as_u64().unwrap() >= 18, "{report:#}");

    // Stopped: the CLI reads the file, and the close signed the whole chain.
    restarted.stop();
    let dir = restarted.data_dir.path().to_owned();
    let cli_config = dir.join("cli_config.json");
    let witness = dir.join("witness.jsonl");
    let out = cli(
        &dir,
        &cli_config,
        &[
            "activity",
            "verify",
            "-o",
            "json",
            "--witness",
            witness.to_str().unwrap(),
        ],
    );
    out.assert_code(0);
    let report: Value = serde_json::from_str(&out.stdout()).unwrap();
    assert_eq!(
        (report["ok"].as_bool(), report["unsigned_tail"].as_u64()),
        (Some(true), Some(0)),
        "{report:#}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_checkpoint_pushed_to_a_witness_checks_the_journal_later() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let config = config_with(vec![stdio_fixture("fx", log.path())]);
    let mut proxy = Proxy::builder(&config).start();
    reads_and_blocked(&proxy, 5, 5).await;
    proxy.finished_records("tool_call", 5).await;
    let cli_config = proxy.cli_config(log.path());
    let dir = proxy.data_dir.path().to_owned();
    let cli = |args: &[&str]| {
        TestCommand::new(&dir)
            .args(args)
            .args(["--config"])
            .args([&cli_config])
            .output()
    };

    let witness = Receiver::default();
    let url = witness.start().await;
    let out = cli(&[
        "activity",
        "checkpoint",
        "--push",
        &url,
        "--header",
        "Authorization: Bearer w",
    ]);
    out.assert_code(0);
    let kept = mcpproxy_support::lock(&witness.lines).clone();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0]["checkpoint"]["seq"], 5, "{kept:?}");
    assert_eq!(out.stdout().trim(), kept[0].to_string());

    // A witness that is not there: the push fails, saying so.
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gone_url = format!("http://{}/", gone.local_addr().unwrap());
    drop(gone);
    let out = cli(&["activity", "checkpoint", "--push", &gone_url]);
    assert_ne!(out.code(), Some(0));
    assert!(
        out.stderr().contains("is the witness up?"),
        "{}",
        out.stderr()
    );

    // Later, offline: the journal checked against what the witness kept.
    proxy.stop();
    let file = dir.join("witness.jsonl");
    std::fs::write(&file, format!("{}\n", kept[0])).unwrap();
    let key = kept[0]["key"].as_str().unwrap();
    let out = cli(&[
        "activity",
        "verify",
        "--witness",
        file.to_str().unwrap(),
        "--key",
        key,
    ]);
    out.assert_code(0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sink_receives_the_chain_fields_and_what_it_holds_verifies() {
    let receiver = Receiver::default();
    let url = receiver.start().await;
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut config = config_with(vec![stdio_fixture("fx", log.path())]);
    config["plugins"] = json!({
        "limits": {"timeout_ms": PLUGIN_TIMEOUT_MS},
        "sinks": ["http-sink"],
        "settings": {"http-sink": {"url": url}},
    });
    config["activity"] = json!({"delivery": {"interval_ms": 50, "max_backoff_ms": 300}});
    let proxy = Proxy::builder(&config).start();
    reads_and_blocked(&proxy, 8, 4).await;
    until(
        "8 records at the sink",
        std::time::Duration::from_secs(60),
        || async {
            let n = mcpproxy_support::lock(&receiver.lines).len();
            if n >= 8 {
                Ok(())
            } else {
                Err(format!("{n} records"))
            }
        },
    )
    .await;
    let lines = mcpproxy_support::lock(&receiver.lines).clone();
    for line in &lines {
        for field in ["seq", "prev", "hash"] {
            assert!(line.get(field).is_some(), "{field} missing in {line}");
        }
    }
    // What the sink holds is the chain itself: checked as an export, it holds.
    let held: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let report = mcpproxy_activity::verify_export(held.as_bytes(), None, None).unwrap();
    assert!(report.ok, "{report:#?}");
    assert_eq!(report.chained, 8);
}

/// `activity.checkpoints` in the config reaches the journal: with a checkpoint every 4
/// records, 12 calls leave at least three, and never more than 3 records unsigned at the
/// head (the default, every 1,000, would have signed none of them by count).
#[tokio::test(flavor = "multi_thread")]
async fn the_configured_checkpoint_interval_signs_the_head_that_often() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut config = config_with(vec![stdio_fixture("fx", log.path())]);
    config["activity"]["checkpoints"] = json!({"every_records": 4, "every_secs": 3600});
    let proxy = Proxy::builder(&config).start();
    reads_and_blocked(&proxy, 12, 4).await;
    proxy.finished_records("tool_call", 12).await;
    let report = verified(&proxy).await;
    assert_eq!(report["ok"], true, "{report:#}");
    let chained = report["chained"].as_u64().unwrap();
    assert!(chained >= 12, "{report:#}");
    assert!(
        report["checkpoints"].as_u64().unwrap() >= chained / 4,
        "{report:#}"
    );
    assert!(report["unsigned_tail"].as_u64().unwrap() < 4, "{report:#}");
}

/// `activity.checkpoints.signing_key` as a `${secret:NAME}`: `serve` signs with the stored
/// key and makes no key file, `activity key` prints its public half, the chain verifies
/// against it; a reference to nothing, or a value that is not a key, stops `serve` with an
/// error naming the reference and never the value.
#[tokio::test(flavor = "multi_thread")]
async fn a_signing_key_kept_as_a_secret_signs_the_checkpoints() {
    let seed = "5a".repeat(32);
    let expected = mcpproxy_activity::SigningKey::from_hex_seed(&seed, "test")
        .unwrap()
        .public_hex();
    let dir = tempfile::tempdir().unwrap();
    crate::upstream_secret_refs::secret_set(dir.path(), "AUDIT_KEY", &seed).assert_code(0);
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut config = config_with(vec![stdio_fixture("fx", log.path())]);
    config["activity"]["checkpoints"] =
        json!({"every_records": 2, "signing_key": "${secret:AUDIT_KEY}"});
    let data_dir = dir.path().to_owned();
    let proxy = Proxy::builder(&config)
        .data_dir(dir)
        .env(&[("MCPPROXY_CREDENTIALS", "file")])
        .start();
    reads_and_blocked(&proxy, 6, 3).await;
    proxy.finished_records("tool_call", 6).await;
    let kept = proxy.get_json("/api/v1/activity/checkpoint").await;
    assert_eq!(kept["data"]["key"], expected.as_str(), "{kept}");
    assert_eq!(
        kept["data"]["checkpoint"]["key"],
        expected.as_str(),
        "{kept}"
    );
    let report = verified(&proxy).await;
    assert_eq!(
        (&report["ok"], &report["key"]),
        (&json!(true), &json!(expected))
    );
    assert!(
        !data_dir.join(mcpproxy_activity::KEY_FILE).exists(),
        "no key file beside a journal whose key the config gives"
    );
    let config_path = data_dir.join("mcp_config.json");
    let out = TestCommand::new(&data_dir)
        .env("MCPPROXY_CREDENTIALS", "file")
        .args(["activity", "key", "--config"])
        .arg_path(&config_path)
        .output();
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), expected);
    drop(proxy);

    // A secret that is not stored, and one that is not a key: `serve` refuses to start.
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path();
    let config_path = data_dir.join("mcp_config.json");
    for (name, value) in [
        ("MISSING_KEY", None),
        ("NOT_A_KEY", Some("hunter2-hunter2")),
    ] {
        if let Some(value) = value {
            crate::upstream_secret_refs::secret_set(data_dir, name, value).assert_code(0);
        }
        config["activity"]["checkpoints"]["signing_key"] = json!(format!("${{secret:{name}}}"));
        std::fs::write(&config_path, config.to_string()).unwrap();
        let out = TestCommand::new(data_dir)
            .env("MCPPROXY_CREDENTIALS", "file")
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg_path(&config_path)
            .output();
        assert_ne!(out.code(), Some(0));
        let said = out.stderr();
        assert!(
            said.contains("activity.checkpoints.signing_key")
                && said.contains(&format!("${{secret:{name}}}"))
                && !said.contains("hunter2"),
            "{said}"
        );
        let fix = if value.is_some() {
            "64 hex digits"
        } else {
            "mcpproxy secret set MISSING_KEY"
        };
        assert!(said.contains(fix), "{said}");
    }
}
