//! `mcpproxy call` and `mcpproxy tools` from the shell, with a server running (through the
//! REST API) and without (in-process).

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::mcp::{Proxy, call_log_lines, config_with, stdio_fixture};
use crate::support::{CmdOutput, TestCommand};

/// Where the CLI runs: a config file and a data dir, with or without a server on `listen`.
struct Setup {
    config: PathBuf,
    data_dir: PathBuf,
    log: PathBuf,
    _proxy: Option<Proxy>,
    _dir: tempfile::TempDir,
}

impl Setup {
    fn without_server() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("calls.log");
        let mut config = config_with(vec![stdio_fixture("fx", &log)]);
        // A port nothing listens on, so the CLI works in-process.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        config["listen"] = json!(format!("127.0.0.1:{port}"));
        let path = dir.path().join("mcp_config.json");
        std::fs::write(
            &path,
            crate::support::mcp::grant_fixture_files(&config).to_string(),
        )
        .unwrap();
        // The CLI works in-process and compiles the plugins; start from the compiled ones
        // the test run already has (a debug build takes seconds per start, and far longer
        // with -vv, whose compiler traces fill the log).
        let data_dir = dir.path().join("data");
        crate::support::mcp::copy_cwasm(
            &crate::support::mcp::shared_compile_cache(),
            &data_dir.join("cache/plugins"),
        );
        Self {
            config: path,
            data_dir,
            log,
            _proxy: None,
            _dir: dir,
        }
    }

    fn with_server() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("calls.log");
        let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", &log)])).start();
        let addr = proxy
            .url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp");
        let mut config = config_with(vec![stdio_fixture("fx", &log)]);
        config["listen"] = json!(addr);
        let path = dir.path().join("mcp_config.json");
        std::fs::write(
            &path,
            crate::support::mcp::grant_fixture_files(&config).to_string(),
        )
        .unwrap();
        Self {
            config: path,
            data_dir: proxy.data_dir.path().to_owned(),
            log,
            _proxy: Some(proxy),
            _dir: dir,
        }
    }

    fn run(&self, args: &[&str]) -> CmdOutput {
        TestCommand::new(&self.data_dir)
            .args(args)
            .args(["--config"])
            .args([&self.config])
            .output()
    }

    fn calls(&self) -> usize {
        call_log_lines(&self.log).len()
    }

    fn records(&self) -> Vec<Value> {
        let out = self.run(&["activity", "list", "-o", "json", "-n", "100"]);
        out.assert_code(0);
        serde_json::from_str(&out.stdout()).unwrap()
    }
}

fn one_line(out: &CmdOutput) -> String {
    let stderr = out.stderr();
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr: {stderr}");
    lines[0].to_owned()
}

fn exercise(setup: &Setup) {
    // A read succeeds and prints the text, then the structured content (which says more:
    // the server's name).
    let out = setup.run(&["call", "tool-read", "fx:get_status"]);
    out.assert_code(0);
    assert!(out.stdout().starts_with("ok\n"), "{}", out.stdout());
    assert!(
        out.stdout().contains("\"server\": \"fx\""),
        "{}",
        out.stdout()
    );
    let out = setup.run(&[
        "call",
        "tool-read",
        "-t",
        "fx:echo",
        "-j",
        r#"{"text": "raw"}"#,
        "-o",
        "json",
    ]);
    out.assert_code(0);
    let raw: Value = serde_json::from_str(&out.stdout()).unwrap();
    assert_eq!(raw["content"][0]["text"], "raw");

    // tool-read on a destructive tool: the exact text, exit 3, the upstream not called.
    let before = setup.calls();
    let out = setup.run(&[
        "call",
        "tool-read",
        "fx:delete_note",
        "--args",
        r#"{"id": "n1"}"#,
    ]);
    out.assert_code(3);
    assert_eq!(
        one_line(&out),
        "rejected by intent-matrix: Tool 'fx:delete_note' is marked destructive by server, use `mcpproxy call tool-destructive`"
    );
    assert_eq!(setup.calls(), before);

    // --dry-run shows the verdict and calls nothing.
    let out = setup.run(&[
        "call",
        "tool-destructive",
        "fx:delete_item",
        "--args",
        r#"{"id": "9"}"#,
        "--dry-run",
    ]);
    out.assert_code(0);
    let stdout = out.stdout();
    assert!(
        stdout.contains("Dry run: fx:delete_item via call_tool_destructive"),
        "{stdout}"
    );
    assert!(
        stdout.contains("(from prefix-annotator: name prefix 'delete_')"),
        "{stdout}"
    );
    assert!(stdout.contains("Safety class: dangerous"), "{stdout}");
    assert!(stdout.contains("Verdict:      allow"), "{stdout}");
    let out = setup.run(&["call", "tool-read", "fx:delete_item", "--dry-run"]);
    out.assert_code(3);
    assert!(
        out.stdout().contains(
            "Verdict:      reject by intent-matrix: Tool 'fx:delete_item' is inferred destructive"
        ),
        "{}",
        out.stdout()
    );
    assert_eq!(setup.calls(), before);

    // --reason and --sensitivity land in the record; the source is the CLI.
    let out = setup.run(&[
        "call",
        "tool-destructive",
        "fx:delete_note",
        "--args",
        r#"{"id": "n1"}"#,
        "--reason",
        "cleanup requested by ops",
        "--sensitivity",
        "internal",
    ]);
    out.assert_code(0);
    assert_eq!(setup.calls(), before + 1);
    let records = setup.records();
    let record = records
        .iter()
        .find(|r| r["intent"]["reason"] == "cleanup requested by ops")
        .expect("the call's record");
    assert_eq!(record["intent"]["data_sensitivity"], "internal");
    assert_eq!(record["intent"]["operation_type"], "destructive");
    assert_eq!(record["source"], "cli");
    let dry = records
        .iter()
        .find(|r| r["dry_run"] == true && r["tool_name"] == "delete_item")
        .expect("dry run recorded");
    assert_eq!(dry["source"], "cli");

    // isError from the tool: exit 5.
    setup.run(&["call", "tool-read", "fx:fail"]).assert_code(5);

    // Bad input: one line, usage exit code, nothing called.
    let before = setup.calls();
    for (args, expected) in [
        (
            vec!["call", "tool-read", "fx:echo", "--args", "{not json"],
            "--args is not valid JSON",
        ),
        (
            vec!["call", "tool-read", "fx:echo", "--args", "[1]"],
            "--args must be a JSON object",
        ),
        (
            vec!["call", "tool-read", "fx:echo", "--sensitivity", "secret"],
            "invalid --sensitivity 'secret': must be public, internal, private, or unknown",
        ),
        (vec!["call", "tool-read", "echo"], "must be \"server:tool\""),
        (vec!["call", "tool-read", "nope:echo"], "nope"),
        (
            vec!["call", "tool", "fx:echo"],
            "`mcpproxy call tool` was removed",
        ),
    ] {
        let out = setup.run(&args);
        out.assert_code(2);
        let line = one_line(&out);
        assert!(line.contains(expected), "{args:?}: {line}");
    }
    assert_eq!(setup.calls(), before);

    // Tool search and listing.
    let out = setup.run(&["tools", "search", "delete note", "-n", "2"]);
    out.assert_code(0);
    let first = out.stdout().lines().nth(1).unwrap_or_default().to_owned();
    assert!(
        first.starts_with("fx:delete_note") && first.contains("call_tool_destructive"),
        "{}",
        out.stdout()
    );
    let out = setup.run(&["tools", "list", "--server", "fx", "-o", "json"]);
    out.assert_code(0);
    let tools: Vec<Value> = serde_json::from_str(&out.stdout()).unwrap();
    assert_eq!(tools.len(), 16);
    assert!(
        tools
            .iter()
            .any(|t| t["name"] == "fx:frobnicate" && t["annotation_source"] == "meta")
    );
}

#[test]
fn call_and_tools_work_in_process_without_a_server() {
    exercise(&Setup::without_server());
}

#[test]
fn call_and_tools_go_through_a_running_server() {
    let setup = Setup::with_server();
    exercise(&setup);
    // The in-process path would have opened the journal, which the server holds: the API
    // was used. And the server's own audit trail has the CLI calls.
    let records = setup.records();
    assert!(records.iter().all(|r| r["source"] == "cli"));
}

#[test]
fn arguments_stay_out_of_the_log_even_at_vv() {
    let setup = Setup::without_server();
    let out = TestCommand::new(&setup.data_dir)
        .args([
            "-vv",
            "call",
            "tool-read",
            "fx:echo",
            "--args",
            r#"{"text": "hunter2-in-the-arguments"}"#,
            "--config",
        ])
        .args([&setup.config])
        .output();
    out.assert_code(0);
    assert!(
        out.stdout().contains("hunter2-in-the-arguments"),
        "the tool answered"
    );
    let log = out.stderr();
    assert!(log.lines().count() > 10, "-vv logs: {log}");
    assert!(
        !log.contains("hunter2"),
        "the arguments reached the log:\n{}",
        log.lines()
            .filter(|l| l.contains("hunter2"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Every command takes the same `-o table|json|jsonl`: `json` is one document, `jsonl` one
/// compact value per line (each item of a list on its own line), `pretty` is still `table`.
#[test]
fn one_output_vocabulary_across_commands() {
    let setup = Setup::without_server();
    setup
        .run(&["call", "tool-read", "fx:echo", "-j", r#"{"text": "a"}"#])
        .assert_code(0);
    setup
        .run(&[
            "call",
            "tool-read",
            "fx:echo",
            "-j",
            r#"{"text": "b"}"#,
            "-o",
            "pretty",
        ])
        .assert_code(0);

    let jsonl = |args: &[&str]| -> Vec<Value> {
        let mut args = args.to_vec();
        args.extend(["-o", "jsonl"]);
        let out = setup.run(&args);
        out.assert_code(0);
        out.stdout()
            .lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|e| {
                    panic!("{args:?}: not one JSON value per line ({e}): {line}")
                })
            })
            .collect()
    };
    let json = |args: &[&str]| -> Value {
        let mut args = args.to_vec();
        args.extend(["-o", "json"]);
        let out = setup.run(&args);
        out.assert_code(0);
        serde_json::from_str(&out.stdout())
            .unwrap_or_else(|e| panic!("{args:?}: not one JSON document ({e})"))
    };

    // Lists: as many lines as the JSON document has items, the same items.
    for args in [
        &["activity", "list"][..],
        &["tools", "list", "--server", "fx"],
        &["upstream", "list"],
        &["plugins", "list"],
    ] {
        let lines = jsonl(args);
        let document = json(args);
        let items = document.as_array().expect("a list");
        assert!(!items.is_empty(), "{args:?}");
        assert_eq!(&lines, items, "{args:?}");
    }
    assert_eq!(jsonl(&["activity", "list"]).len(), 2);

    // Single results: one line.
    let result = jsonl(&["call", "tool-read", "fx:echo", "-j", r#"{"text": "c"}"#]);
    assert_eq!(result.len(), 1);
    assert_eq!(result[0]["content"][0]["text"], "c");
    let stats = jsonl(&["activity", "stats"]);
    assert_eq!(stats.len(), 1);
    assert_eq!(stats, vec![json(&["activity", "stats"])]);
    let id = json(&["activity", "list"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(jsonl(&["activity", "show", &id]).len(), 1);

    // A word outside the vocabulary is refused with the words it takes.
    let out = setup.run(&["activity", "list", "-o", "xml"]);
    out.assert_code(2);
    assert!(
        out.stderr().contains("table, json, jsonl"),
        "{}",
        out.stderr()
    );
}

/// Colour on a terminal only: `--color always` paints the status words, piped output (the
/// default `auto`) and `NO_COLOR` on a real terminal (a pty from `script`) get none.
#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    let setup = Setup::without_server();
    setup
        .run(&["call", "tool-read", "fx:echo", "-j", r#"{"text": "a"}"#])
        .assert_code(0);
    setup
        .run(&[
            "call",
            "tool-read",
            "fx:delete_note",
            "-j",
            r#"{"id": "n1"}"#,
        ])
        .assert_code(3);

    let out = setup.run(&["activity", "list", "--color", "always"]);
    out.assert_code(0);
    assert!(
        out.stdout().contains("\x1b[32msuccess\x1b[0m"),
        "{}",
        out.stdout()
    );
    assert!(
        out.stdout().contains("\x1b[31mblocked\x1b[0m"),
        "{}",
        out.stdout()
    );
    let piped = setup.run(&["activity", "list"]);
    assert!(!piped.stdout().contains('\x1b'), "{}", piped.stdout());

    // Through a pseudo-terminal: coloured unless NO_COLOR is set.
    let on_a_terminal = |no_color: Option<&str>| -> String {
        let command = format!(
            "{} activity list --config {} --data-dir {}",
            env!("CARGO_BIN_EXE_mcpproxy"),
            setup.config.display(),
            setup.data_dir.display()
        );
        let mut script = std::process::Command::new("script");
        script
            .args(["-qec", &command, "/dev/null"])
            .env("HOME", &setup.data_dir)
            .env("TERM", "xterm")
            .env_remove("RUST_LOG")
            .env_remove("NO_COLOR");
        if let Some(value) = no_color {
            script.env("NO_COLOR", value);
        }
        let out = script.output().expect("run `script` (util-linux)");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(on_a_terminal(None).contains("\x1b[32msuccess"));
    assert!(!on_a_terminal(Some("1")).contains("\x1b[3"));
    // An empty NO_COLOR does not count (no-color.org).
    assert!(on_a_terminal(Some("")).contains("\x1b[31mblocked"));
}

/// A secret in a call's arguments reaches the tool as it was sent, and never the audit
/// trail: `activity list`, `activity show` and `activity export` show it masked, as they
/// show a secret in a result.
#[test]
fn secrets_in_arguments_are_masked_in_the_audit_trail() {
    let setup = Setup::without_server();
    let key = "AKIAIOSFODNN7EXAMPLE";
    let out = setup.run(&[
        "call",
        "tool-read",
        "fx:echo",
        "--args",
        &format!(r#"{{"text": "deploy with {key} now"}}"#),
    ]);
    out.assert_code(0);
    assert_eq!(setup.calls(), 1, "the call reached the tool");

    let records = setup.records();
    let call = records
        .iter()
        .find(|r| r["tool_name"] == "echo")
        .unwrap_or_else(|| panic!("no record of the call: {records:#?}"));
    assert_eq!(call["arguments"]["text"], "deploy with *** now", "{call:#}");
    let id = call["id"].as_str().expect("the record's id");
    for command in [
        vec!["activity", "show", id, "-o", "json"],
        vec!["activity", "list", "-o", "json"],
        vec!["activity", "export"],
    ] {
        let out = setup.run(&command);
        out.assert_code(0);
        assert!(
            !out.stdout().contains(key) && !out.stderr().contains(key),
            "`{}` shows the key: {}",
            command.join(" "),
            out.stdout()
        );
    }
}

/// A record's verdict reads as its caller received it: an agent's call refused with `use
/// call_tool_destructive` shows that advice in `activity show`, not the CLI's wording of it
/// (which names `mcpproxy call tool-destructive`, a command the agent never saw).
#[tokio::test(flavor = "multi_thread")]
async fn a_records_verdict_reads_as_its_caller_received_it() {
    let setup = Setup::with_server();
    let proxy = setup._proxy.as_ref().expect("a running server");
    let client = crate::support::mcp::connect(&proxy.url).await;
    let refused = crate::support::mcp::call(
        &client,
        "call_tool_write",
        json!({"name": "fx:delete_item", "args": {"id": "1"}}),
    )
    .await
    .expect("a tool result");
    let sent = crate::support::mcp::text(&refused);
    assert!(sent.contains("use call_tool_destructive"), "{sent}");
    let record = proxy
        .finished_records("tool_call", 1)
        .await
        .into_iter()
        .find(|r| r["tool_name"] == "delete_item")
        .expect("the refused call's record");
    let id = record["id"].as_str().expect("the record's id");
    let out = setup.run(&["activity", "show", id]);
    out.assert_code(0);
    let shown = out.stdout();
    let verdict = shown
        .lines()
        .find(|l| l.starts_with("Verdict:"))
        .unwrap_or_else(|| panic!("no verdict line: {shown}"));
    assert!(
        verdict.contains("use call_tool_destructive") && !verdict.contains("mcpproxy call"),
        "the record says other than the agent got ({sent:?}): {verdict}"
    );
}
