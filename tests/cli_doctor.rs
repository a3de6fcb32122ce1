//! `mcpproxy doctor` as a person runs it when something is off, and the read-only commands
//! that keep working from the running owner while the config file has a typo.

use serde_json::{Value, json};

use crate::support::TestCommand;
use crate::support::mcp::{Proxy, config_with, stdio_fixture};

/// A typo in the file locks no one out while the proxy serves on: `upstream list` and
/// `activity list` answer from the running owner, with a note naming the file's problem;
/// `doctor` names it with its line and column, says the owner runs, and exits 1. A server
/// whose command is nowhere, a grant of a path that does not exist, and a validator the
/// config names but the running proxy does not have in force are each a problem with what to
/// do; a sound setup is `no problems found` and exit 0.
#[test]
fn doctor_says_what_is_wrong_and_a_typo_locks_no_one_out() {
    let calls = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", calls.path())])).start();
    let data_dir = proxy.data_dir.path();
    let config = data_dir.join("mcp_config.json");
    let run = |args: &[&str]| {
        TestCommand::new(data_dir)
            .args(args)
            .args(["--config"])
            .args([&config])
            .output()
    };
    let sound = run(&["doctor"]);
    assert_eq!(
        sound.code(),
        Some(0),
        "{}{}",
        sound.stdout(),
        sound.stderr()
    );
    assert!(
        sound.stdout().contains("ok       owner: mcpproxy ")
            && sound.stdout().contains(&format!("serving {}", proxy.url))
            && sound.stdout().ends_with("no problems found\n"),
        "{}",
        sound.stdout()
    );

    // A trailing comma, as a hand edit leaves it.
    let good = std::fs::read_to_string(&config).unwrap();
    let broken = good.trim_end().trim_end_matches('}').to_owned() + ",}";
    std::fs::write(&config, &broken).unwrap();
    for command in [&["upstream", "list"][..], &["activity", "list"]] {
        let out = run(command);
        out.assert_code(0);
        assert!(
            out.stderr().contains("invalid JSON")
                && out.stderr().contains("the running mcpproxy answers"),
            "{command:?}: {}",
            out.stderr()
        );
    }
    let out = run(&["upstream", "list"]);
    assert!(out.stdout().contains("fx"), "{}", out.stdout());
    let doctor = run(&["doctor"]);
    assert_eq!(doctor.code(), Some(1), "{}", doctor.stdout());
    let report = doctor.stdout();
    assert!(
        report.contains("problem  config: ")
            && report.contains("line 1, column")
            && report.contains("invalid JSON")
            && report.contains("ok       owner: mcpproxy ")
            && report.contains("1 problem found"),
        "{report}"
    );

    // Sound JSON again, with three things that cannot work.
    let mut value: Value = serde_json::from_str(&good).unwrap();
    let missing_dir = data_dir.join("no-such-dir");
    value["mcpServers"].as_array_mut().unwrap().push(
        json!({"name": "ghost", "command": "/nonexistent/ghost-server",
                     "isolation": {"read": [missing_dir]}}),
    );
    value["plugins"] = json!({"validators": ["intent-matrix", "not-loaded"]});
    std::fs::write(&config, value.to_string()).unwrap();
    let doctor = run(&["doctor"]);
    assert_eq!(doctor.code(), Some(1), "{}", doctor.stdout());
    let report = doctor.stdout();
    for expected in [
        "problem  server ghost: `/nonexistent/ghost-server` is not an executable file, nor found in PATH",
        "fix: install it, or set `command` to its full path",
        &format!("the granted path {} does not exist", missing_dir.display()),
        "problem  plugins: plugins.validators names 'not-loaded', which the running mcpproxy does not have in force",
        "`mcpproxy plugins reload`",
    ] {
        assert!(report.contains(expected), "no {expected:?} in\n{report}");
    }
    // `plugins reload` reads the config's lists again: it refuses the edit, naming the
    // plugin, where it said "reloaded" with the lists the proxy had started with.
    let reload = run(&["plugins", "reload"]);
    assert_ne!(reload.code(), Some(0), "{}", reload.stdout());
    assert!(
        reload
            .stderr()
            .contains("plugins.validators names 'not-loaded'"),
        "{}",
        reload.stderr()
    );
    // `plugins list` says what the running proxy has in force: the edit named a validator
    // it does not have, and the reload was refused, so intent-matrix alone judges.
    let list = run(&["plugins", "list", "-o", "json"]);
    list.assert_code(0);
    let plugins: Value = serde_json::from_str(&list.stdout()).unwrap();
    let active = |name: &str| {
        plugins
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| p["active"].clone())
            .unwrap_or(Value::Null)
    };
    assert_eq!(active("intent-matrix"), "yes", "{plugins:#}");
    assert_eq!(active("safety-routing"), "opt-in", "{plugins:#}");
    let json = run(&["doctor", "-o", "json"]);
    let findings: Value = serde_json::from_str(&json.stdout()).unwrap();
    assert!(
        findings
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["subject"] == "server ghost" && f["ok"] == false && f["fix"].is_string()),
        "{findings:#}"
    );
}
