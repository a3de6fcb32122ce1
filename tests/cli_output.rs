//! What the CLI prints for people: held calls with their real line breaks, tables that fit
//! the terminal's width, quarantined servers and held tools named where tools are listed
//! (and in `retrieve_tools`), a tool's result printed once, errors naming CLI commands.
//! Against a running server with three upstreams: the fixture `fx`, the fixture again as
//! `mem`, quarantined, and `broken`, whose command does not exist.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::mcp::{
    Proxy, call, config_with, connect, grant_fixture_files, npm_bin_installed, npm_dir,
    stdio_fixture,
};
use crate::support::{CmdOutput, TestCommand};

struct Setup {
    proxy: Proxy,
    config: PathBuf,
    _dir: tempfile::TempDir,
}

impl Setup {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut mem = stdio_fixture("mem", &dir.path().join("mem.log"));
        mem["quarantined"] = json!(true);
        let servers = vec![
            stdio_fixture("fx", &dir.path().join("fx.log")),
            mem,
            json!({"name": "broken", "command": dir.path().join("no-such-server")}),
        ];
        let proxy = Proxy::builder(&config_with(servers.clone())).start();
        let mut config = config_with(servers);
        config["listen"] = json!(proxy.base().trim_start_matches("http://"));
        let path = dir.path().join("mcp_config.json");
        std::fs::write(&path, grant_fixture_files(&config).to_string()).unwrap();
        Self {
            proxy,
            config: path,
            _dir: dir,
        }
    }

    fn run(&self, args: &[&str]) -> CmdOutput {
        self.run_at(None, args)
    }

    fn run_at(&self, columns: Option<usize>, args: &[&str]) -> CmdOutput {
        let mut command = TestCommand::new(self.proxy.data_dir.path())
            .args(args)
            .args(["--config"])
            .args([&self.config]);
        if let Some(columns) = columns {
            command = command.env("COLUMNS", &columns.to_string());
        }
        command.output()
    }
}

#[test]
fn cli_output_reads_well() {
    let setup = Setup::start();

    // Item: a held call prints its analysis with real line breaks, as MCP clients get it.
    let out = setup.run(&["call", "tool-read", "mem:get_status"]);
    out.assert_code(3);
    let stderr = out.stderr();
    assert!(
        stderr.starts_with("held: Server 'mem' is quarantined"),
        "{stderr}"
    );
    assert!(stderr.lines().count() > 3, "one line per line: {stderr}");
    assert!(!stderr.contains("\\u{a}"), "escaped newlines: {stderr}");

    // CLI errors name CLI commands, not the MCP tools.
    let out = setup.run(&["call", "tool-read", "fx:no_such_tool"]);
    out.assert_code(2);
    assert!(
        out.stderr().contains("`mcpproxy tools search WORDS`")
            && !out.stderr().contains("retrieve_tools"),
        "{}",
        out.stderr()
    );
    let out = setup.run(&[
        "call",
        "tool-read",
        "fx:delete_note",
        "-j",
        r#"{"id": "n1"}"#,
    ]);
    out.assert_code(3);
    assert!(
        out.stderr()
            .contains("use `mcpproxy call tool-destructive`"),
        "{}",
        out.stderr()
    );

    // Tables fit the width given by COLUMNS: no line longer, no header word split.
    for columns in [100, 60] {
        for args in [
            &["activity", "list"][..],
            &["tools", "list"],
            &["tools", "search", "delete note"],
            &["upstream", "list"],
        ] {
            let out = setup.run_at(Some(columns), args);
            out.assert_code(0);
            let stdout = out.stdout();
            for line in stdout.lines() {
                assert!(
                    line.chars().count() <= columns,
                    "{args:?} at {columns} columns: a line of {}:\n{stdout}",
                    line.chars().count()
                );
            }
            let header = stdout.lines().next().unwrap_or_default();
            assert!(
                header.starts_with("NAME") || header.starts_with("ID"),
                "{header}"
            );
        }
    }
    // At 100 columns the reason stays readable; annotations are flags, not JSON.
    // A security report fits the width too (long schemas and descriptions wrap under their
    // label; 32 of 73 lines ran past 100 columns), and a server that never listed its tools
    // says it was not scanned rather than `0 findings`.
    let out = setup.run_at(Some(100), &["upstream", "inspect", "fx"]);
    out.assert_code(0);
    let report = out.stdout();
    assert!(
        report.lines().all(|l| l.chars().count() <= 100),
        "a line over 100 columns:\n{report}"
    );
    assert!(
        report.contains("  inputSchema: {\"properties\": {"),
        "{report}"
    );
    let out = setup.run(&["upstream", "inspect", "broken"]);
    out.assert_code(0);
    assert!(
        out.stdout()
            .contains("No scan yet: the server has listed no tools")
            && !out.stdout().contains("0 findings"),
        "{}",
        out.stdout()
    );
    let out = setup.run_at(Some(100), &["activity", "list"]);
    assert!(out.stdout().lines().next().unwrap().contains("DURATION"));
    // Narrowed, a row's time keeps its time of day (the date gives way), and its id stays
    // whole: `2026-11-28 1…` told nothing.
    let row = out.stdout().lines().nth(1).unwrap_or_default().to_owned();
    let mut cells = row.split_whitespace();
    assert_eq!(
        cells.next().unwrap_or_default().len(),
        26,
        "{}",
        out.stdout()
    );
    // The time column: its date (whole or cut to `…`) may go, then the time of day.
    let time_of_day = cells
        .find(|cell| cell.contains(':'))
        .unwrap_or_default()
        .trim_start_matches('…');
    assert!(
        time_of_day.len() == 8
            && time_of_day.chars().filter(|c| *c == ':').count() == 2
            && time_of_day.chars().all(|c| c.is_ascii_digit() || c == ':'),
        "the time of day is cut: {time_of_day:?} in\n{}",
        out.stdout()
    );
    assert!(
        out.stdout().contains("Tool 'fx:delete_note' is marked"),
        "{}",
        out.stdout()
    );
    let out = setup.run_at(Some(100), &["tools", "list"]);
    assert!(!out.stdout().contains('{'), "{}", out.stdout());
    let line = out
        .stdout()
        .lines()
        .find(|l| l.starts_with("fx:delete_note"))
        .unwrap_or_default()
        .to_owned();
    assert!(line.contains("destructive"), "{}", out.stdout());
    // An error state is a word in the table; the message is under it.
    let out = setup.run_at(Some(100), &["upstream", "list"]);
    let row = out
        .stdout()
        .lines()
        .find(|l| l.starts_with("broken"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        row.split_whitespace().nth(1) == Some("error"),
        "{}",
        out.stdout()
    );
    assert!(
        out.stdout().contains("mcpproxy upstream logs broken"),
        "{}",
        out.stdout()
    );
    // Piped with COLUMNS unset, a script gets whole lines.
    let out = TestCommand::new(setup.proxy.data_dir.path())
        .args(["activity", "list", "--config"])
        .args([&setup.config])
        .env("COLUMNS", "")
        .output();
    assert!(
        out.stdout().lines().any(|l| l.chars().count() > 100),
        "{}",
        out.stdout()
    );

    // Quarantined tools are not listed, but said to wait, with the commands to approve them.
    let out = setup.run(&["tools", "list", "--server", "mem"]);
    out.assert_code(3);
    let stderr = out.stderr();
    assert!(
        stderr.contains("1 server waits for approval (mem;"),
        "{stderr}"
    );
    assert!(
        stderr.contains("`mcpproxy upstream inspect mem`")
            && stderr.contains("`mcpproxy upstream approve mem`"),
        "{stderr}"
    );
    // At 100 columns the note wraps: lines of their own under its label, none wider, and
    // nothing lost (it ran to 240 columns on one line).
    let out = setup.run_at(Some(100), &["tools", "list", "--server", "mem"]);
    out.assert_code(3);
    let stderr = out.stderr();
    let lines: Vec<&str> = stderr
        .lines()
        .skip_while(|l| !l.starts_with("note: "))
        .collect();
    assert!(
        lines.len() > 1
            && lines[0].starts_with("note: ")
            && lines[1..].iter().all(|l| l.starts_with("      "))
            && lines.iter().all(|l| l.chars().count() <= 100),
        "{stderr}"
    );
    let joined = lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
    assert!(
        joined.contains("`mcpproxy upstream approve mem`"),
        "{stderr}"
    );
    let out = setup.run(&["tools", "list"]);
    out.assert_code(0);
    assert!(out.stderr().contains("(mem;"), "{}", out.stderr());
    assert!(!out.stdout().contains("mem:"), "{}", out.stdout());
    let out = setup.run(&["tools", "search", "status"]);
    out.assert_code(0);
    assert!(out.stderr().contains("(mem;"), "{}", out.stderr());
    // A server with nothing held: no note.
    let out = setup.run(&["tools", "list", "--server", "fx"]);
    out.assert_code(0);
    assert!(!out.stderr().contains("note:"), "{}", out.stderr());

    // A server that failed to start: its logs say so, with the error.
    let out = setup.run(&["upstream", "logs", "broken"]);
    out.assert_code(0);
    assert!(
        out.stderr()
            .contains("'broken' is not running: its last start failed:"),
        "stdout:\n{}\nstderr:\n{}",
        out.stdout(),
        out.stderr()
    );

    // Dry runs are counted as dry runs, not successes.
    setup
        .run(&[
            "call",
            "tool-read",
            "fx:echo",
            "-j",
            r#"{"text": "x"}"#,
            "--dry-run",
        ])
        .assert_code(0);
    let out = setup.run(&["activity", "stats", "-o", "json"]);
    out.assert_code(0);
    let stats: Value = serde_json::from_str(&out.stdout()).unwrap();
    assert_eq!(stats["dry_runs"], 1, "{stats}");
    let count = |status: &str| {
        stats["by_status"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["key"] == status)
            .map_or(0, |g| g["calls"].as_u64().unwrap())
    };
    assert_eq!(count("dry-run"), 1, "{stats}");
    assert_eq!(count("success"), 0, "{stats}");

    // An approval record says what was approved and by whom.
    setup.run(&["upstream", "approve", "mem"]).assert_code(0);
    let out = setup.run(&["activity", "list", "--type", "approval", "-o", "json"]);
    out.assert_code(0);
    let records: Value = serde_json::from_str(&out.stdout()).unwrap();
    let id = records[0]["id"].as_str().unwrap().to_owned();
    let out = setup.run(&["activity", "show", &id]);
    out.assert_code(0);
    assert!(
        out.stdout()
            .contains("Approved:    server mem (quarantine cleared;"),
        "{}",
        out.stdout()
    );
    assert!(!out.stdout().contains("via -"), "{}", out.stdout());
}

#[tokio::test(flavor = "multi_thread")]
async fn retrieve_tools_says_what_waits_for_approval() {
    let setup = tokio::task::spawn_blocking(Setup::start).await.unwrap();
    let client = connect(&setup.proxy.url).await;
    let result = call(&client, "retrieve_tools", json!({"query": "status"}))
        .await
        .unwrap();
    let body: Value = result.structured_content.clone().unwrap();
    assert!(
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["server"] != "mem"),
        "{body}"
    );
    assert_eq!(body["withheld"]["servers"][0]["name"], "mem");
    let note = body["note"].as_str().unwrap();
    assert!(
        note.contains("1 server waits for approval")
            && note.contains("mcpproxy upstream approve mem"),
        "{note}"
    );
    client.cancel().await.unwrap();
}

/// `call tool-read fs:list_directory` against the official filesystem server prints the
/// listing once: its structured content is the same text again.
#[test]
fn a_listing_is_printed_once() {
    if !npm_bin_installed("mcp-server-filesystem") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("hello.txt"), "hi").unwrap();
    let root = root.canonicalize().unwrap();
    let mut config = config_with(vec![json!({
        "name": "fs",
        "command": "npx",
        "args": ["--prefix", npm_dir(), "--no-install", "mcp-server-filesystem", root],
        "isolation": {"write": [root]},
    })]);
    // A port nothing listens on: the CLI works in-process.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    config["listen"] = json!(format!("127.0.0.1:{port}"));
    let path = dir.path().join("mcp_config.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let out = TestCommand::new(&dir.path().join("data"))
        .args(["call", "tool-read", "fs:list_directory", "-j"])
        .args([json!({"path": root}).to_string()])
        .args(["--config"])
        .args([&path])
        .output();
    out.assert_code(0);
    assert_eq!(
        out.stdout().matches("hello.txt").count(),
        1,
        "{}",
        out.stdout()
    );
}

/// `--color` is explained once, in the top-level help; each command's help has one line.
#[test]
fn colour_is_explained_once() {
    let dir = tempfile::tempdir().unwrap();
    let help = |args: &[&str]| {
        let out = TestCommand::new(dir.path()).args(args).output();
        out.assert_code(0);
        out.stdout()
    };
    let top = help(&["--help"]);
    assert!(top.contains("NO_COLOR"), "{top}");
    for args in [
        &["call", "tool-read", "--help"][..],
        &["activity", "list", "--help"],
        &["upstream", "list", "--help"],
    ] {
        let text = help(args);
        // One line (`Colour: auto, always or never (see `mcpproxy --help`)`), not the
        // possible values with their explanations.
        assert_eq!(text.matches("Colour").count(), 1, "{args:?}:\n{text}");
        assert!(!text.contains("dumb"), "{args:?}:\n{text}");
        assert!(!text.contains("NO_COLOR"), "{args:?}:\n{text}");
    }
}
