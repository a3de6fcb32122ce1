//! The README's 5-minute tour, run as written: its commands, read out of README.md, run in
//! bash with a fresh `HOME` and the binary this test run built on `PATH` as `mcpproxy`, and
//! what the README shows they print is what they print. A README that drifts from the
//! binary (a line the banner no longer prints, a column `plugins list` gained, a count of
//! tools or matrix cases) fails here.
//!
//! What the test changes, each for a reason of the test machine's, never the command:
//! - `cargo run --release --` runs the binary already built (the test's own build);
//! - `MCPPROXY_LISTEN` puts `serve` on a free port, since 8080 may be taken; the address is
//!   written back as `127.0.0.1:8080` before output is compared;
//! - `/tmp/playground` is a temp dir;
//! - the config's `npx -y @modelcontextprotocol/server-filesystem@VERSION` runs that version
//!   installed in `tests/npm` (tests reach no registry but their own on loopback; the
//!   launcher tests run `npx -y` against one);
//! - ids, times, durations and plugin sizes may differ from the README's.
//!
//! Step 7 (a sink to an HTTP endpoint) is left to `sink_e2e`, which runs `http-sink`
//! against a real endpoint; steps 3's client entries to `cli_client`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mcp::{Proc, call, connect, is_error, pipe_lines, text};

/// The tour: from its heading to the next.
fn tour() -> String {
    let readme =
        std::fs::read_to_string(crate::support::repo_root().join("README.md")).expect("README.md");
    let start = readme
        .find("## A 5-minute tour")
        .expect("the README has a 5-minute tour");
    let rest = &readme[start + 3..];
    let end = rest.find("\n## ").map_or(rest.len(), |e| e + 1);
    rest[..end].to_owned()
}

/// The tour's fenced blocks of `kind` (`console`, `json`), in order.
fn blocks(tour: &str, kind: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut lines = tour.lines();
    while let Some(line) = lines.next() {
        if line.trim_end() == format!("```{kind}") {
            let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
            found.push(body.join("\n"));
        }
    }
    found
}

/// A console block's commands, each with the lines the README shows it printing.
fn commands(block: &str) -> Vec<(String, Vec<String>)> {
    let mut commands: Vec<(String, Vec<String>)> = Vec::new();
    for line in block.lines() {
        if let Some(command) = line.strip_prefix("$ ") {
            commands.push((command.to_owned(), Vec::new()));
        } else if let Some((_, shown)) = commands.last_mut() {
            shown.push(line.to_owned());
        }
    }
    commands
}

/// What varies from run to run, made alike: ids, times, durations, sizes, column spacing.
fn normalize(line: &str) -> String {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let mut out: Vec<String> = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let ulid = token.len() == 26
            && token
                .chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase());
        let date = token.len() == 10
            && token.chars().filter(|c| *c == '-').count() == 2
            && token.replace('-', "").chars().all(|c| c.is_ascii_digit());
        let clock = token.len() == 8
            && token.chars().filter(|c| *c == ':').count() == 2
            && token.replace(':', "").chars().all(|c| c.is_ascii_digit());
        let millis = token
            .strip_suffix("ms")
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        let size = tokens.get(i + 1) == Some(&"KiB") && token.parse::<f64>().is_ok();
        out.push(match () {
            () if ulid => "<id>".into(),
            () if date => "<date>".into(),
            () if clock => "<time>".into(),
            () if millis => "<n>ms".into(),
            () if size => "<n>".into(),
            () => (*token).to_owned(),
        });
    }
    out.join(" ")
}

/// Whether `actual` is what `shown` shows: line by line after [`normalize`], where a
/// shown `...` stands for any number of lines.
fn shows(shown: &[String], actual: &[String]) -> bool {
    match shown.split_first() {
        None => actual.is_empty(),
        Some((first, rest)) if first.trim() == "..." => {
            (0..=actual.len()).any(|skip| shows(rest, &actual[skip..]))
        }
        Some((first, rest)) => actual
            .split_first()
            .is_some_and(|(line, more)| normalize(first) == normalize(line) && shows(rest, more)),
    }
}

/// The machine this tour runs on: a fresh HOME, a playground, the binary on PATH.
struct Machine {
    home: tempfile::TempDir,
    playground: tempfile::TempDir,
    listen: String,
}

impl Machine {
    fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        // Start from the compiled plugins the test run already has (a debug build compiles
        // them in seconds per start); what the tour shows does not depend on it.
        crate::support::mcp::copy_cwasm(
            &crate::support::mcp::shared_compile_cache(),
            &home.path().join(".mcpproxy/cache/plugins"),
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self {
            home,
            playground: tempfile::tempdir().unwrap(),
            listen: format!("127.0.0.1:{port}"),
        }
    }

    /// The command as the README writes it, with the test machine's substitutions.
    fn command(&self, command: &str) -> String {
        command
            .replace("cargo run --release --", "mcpproxy")
            .replace("127.0.0.1:8080", &self.listen)
            .replace(
                "/tmp/playground",
                &self.playground.path().display().to_string(),
            )
    }

    fn bash(&self, command: &str) -> Command {
        let bin_dir = Path::new(env!("CARGO_BIN_EXE_mcpproxy"))
            .parent()
            .expect("the binary's directory")
            .to_owned();
        let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )))
        .unwrap();
        let mut cmd = Command::new("bash");
        cmd.args(["-c", &self.command(command)])
            .env("HOME", self.home.path())
            .env("PATH", path)
            .env("MCPPROXY_LISTEN", &self.listen)
            .env("NO_COLOR", "1")
            .env("COLUMNS", "160")
            .env_remove("MCPPROXY_DATA_DIR")
            .env_remove("MCPPROXY_CONFIG")
            .env_remove("RUST_LOG");
        cmd
    }

    /// Runs a one-shot command: its stdout lines, after a successful exit. `upstream
    /// approve`, which asks in a terminal, runs in one (util-linux `script`), answered `y`.
    fn run(&self, command: &str) -> Vec<String> {
        let out = if command.contains("upstream approve") {
            let mut child = self
                .bash(&format!(
                    "script -qec {} /dev/null",
                    shell_quote(&self.command(command))
                ))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("run script");
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("stdin");
            stdin.write_all(b"y\n").expect("answer the question");
            drop(stdin);
            child.wait_with_output().expect("run script")
        } else {
            self.bash(command).output().expect("run bash")
        };
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "`{command}` failed: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
            .lines()
            .map(|l| l.replace(&self.listen, "127.0.0.1:8080"))
            .collect()
    }

    /// Starts `serve` as the README writes it and checks the lines it shows come first.
    fn serve(&self, command: &str, shown: &[String]) -> Proc {
        let mut child = self
            .bash(command)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve");
        let proc = Proc {
            stderr_lines: pipe_lines(child.stderr.take().expect("stderr")),
            child,
        };
        let mut printed = Vec::new();
        while printed.len() < shown.len() {
            let line = proc.wait_for_line(Duration::from_secs(120), |_| true);
            printed.push(line.replace(&self.listen, "127.0.0.1:8080"));
        }
        assert!(
            shows(shown, &printed),
            "`{command}` printed\n{}\nwhere the README shows\n{}",
            printed.join("\n"),
            shown.join("\n")
        );
        proc
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.listen)
    }
}

/// Whether `actual` has what `shown` shows: every key of an object shown (the README
/// shows a few of a hit's annotations), other values equal.
fn has(actual: &Value, shown: &Value) -> bool {
    match (actual, shown) {
        (Value::Object(actual), Value::Object(shown)) => shown
            .iter()
            .all(|(k, v)| actual.get(k).is_some_and(|a| has(a, v))),
        _ => actual == shown,
    }
}

/// `text` as one word for bash.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// Runs each command of `block` and checks what it printed where the README shows output.
/// `ids` maps the README's record ids to this run's.
fn run_block(machine: &Machine, block: &str, ids: &mut Vec<(String, String)>) {
    for (command, shown) in commands(block) {
        let mut command = command;
        for (readme_id, id) in ids.iter() {
            command = command.replace(readme_id, id);
        }
        let printed = machine.run(&command);
        if !shown.is_empty() {
            assert!(
                shows(&shown, &printed),
                "`{command}` printed\n{}\nwhere the README shows\n{}",
                printed.join("\n"),
                shown.join("\n")
            );
        }
        // The ids the README's listing shows, in this run's order.
        for (readme, actual) in shown.iter().zip(&printed) {
            if let (Some(readme_id), Some(id)) = (
                readme.split_whitespace().next().filter(|t| t.len() == 26),
                actual.split_whitespace().next().filter(|t| t.len() == 26),
            ) {
                ids.push((readme_id.to_owned(), id.to_owned()));
            }
        }
    }
}

/// The README's step 2 config, runnable here (see the module's note on `npx -y`).
fn runnable_config(config: &str, machine: &Machine) -> Value {
    let mut config: Value =
        serde_json::from_str(&machine.command(config)).expect("the README's config is JSON");
    for server in config["mcpServers"].as_array_mut().expect("mcpServers") {
        if server["command"] != "npx" {
            continue;
        }
        let args = server["args"].as_array().cloned().unwrap_or_default();
        let package = args
            .iter()
            .filter_map(Value::as_str)
            .find(|a| a.starts_with("@modelcontextprotocol/"))
            .expect("an official package")
            .to_owned();
        let (name, version) = package[1..]
            .split_once('@')
            .map(|(n, v)| (format!("@{n}"), v.to_owned()))
            .expect("a pinned version");
        let installed: Value = serde_json::from_str(
            &std::fs::read_to_string(
                crate::support::mcp::npm_dir().join(format!("node_modules/{name}/package.json")),
            )
            .expect("the package is installed in tests/npm"),
        )
        .unwrap();
        assert_eq!(
            installed["version"], version,
            "the README pins {package}; tests/npm has another version"
        );
        let bin = installed["bin"]
            .as_object()
            .and_then(|b| b.keys().next().cloned())
            .expect("a bin");
        server["command"] = json!(
            crate::support::mcp::npm_dir()
                .join("node_modules/.bin")
                .join(bin)
        );
        server["args"] = json!(
            args.into_iter()
                .skip_while(|a| a.as_str() != Some(package.as_str()))
                .skip(1)
                .collect::<Vec<_>>()
        );
    }
    config
}

#[tokio::test(flavor = "multi_thread")]
async fn the_readme_tour_runs_as_written() {
    if !crate::support::sandbox_supported()
        || !crate::support::mcp::npm_bin_installed("mcp-server-filesystem")
    {
        return;
    }
    let tour = tour();
    let console = blocks(&tour, "console");
    let json_blocks = blocks(&tour, "json");
    let machine = Machine::new();

    // 1. Start it with no config.
    let first = commands(&console[0]);
    let (serve_command, banner) = &first[0];
    let mut serve = machine.serve(serve_command, banner);
    serve.terminate();

    // 2. Configure an upstream; restart; approve.
    let config = runnable_config(&json_blocks[0], &machine);
    let config_path = machine.home.path().join(".mcpproxy/mcp_config.json");
    std::fs::write(&config_path, config.to_string()).unwrap();
    let not_started = "upstream fs (stdio): not started (launch not approved)";
    assert!(tour.contains(&format!("`{not_started}`")), "{tour}");
    let serve = machine.serve(serve_command, &["...".to_owned()]);
    serve.wait_for_line(Duration::from_secs(120), |l| l.starts_with(not_started));
    let mut ids = Vec::new();
    run_block(&machine, &console[1], &mut ids);
    assert!(
        tour.contains("shows `fs` with STATE\n`ready` and 14 TOOLS"),
        "{tour}"
    );
    crate::support::poll::until("fs is ready", Duration::from_secs(120), || async {
        let list = machine.run("mcpproxy upstream list");
        let header: Vec<&str> = list[0].split_whitespace().collect();
        assert_eq!(header[..3], ["NAME", "STATE", "TOOLS"], "{list:?}");
        let row = list
            .iter()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|cells| cells.first() == Some(&"fs"));
        match row {
            Some(cells) if cells[1..3] == ["ready", "14"] => Ok(()),
            _ => Err(list.join("\n")),
        }
    })
    .await;

    // 4. Make a call: the search, the wrong variant, the right one.
    let client = connect(&machine.url()).await;
    let block = |has: &[&str]| -> String {
        json_blocks
            .iter()
            .find(|b| has.iter().all(|h| b.contains(h)))
            .unwrap_or_else(|| panic!("no JSON block of the tour has {has:?}"))
            .clone()
    };
    let search: Value =
        serde_json::from_str(&block(&["\"retrieve_tools\""])).expect("the search is JSON");
    let found = call(&client, "retrieve_tools", search["arguments"].clone())
        .await
        .unwrap();
    let found: Value = serde_json::from_str(&text(&found)).expect("retrieve_tools answers JSON");
    let hit = found["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "fs:write_file"))
        .unwrap_or_else(|| panic!("no fs:write_file hit: {found}"));
    let shown: Value = serde_json::from_str(&block(&["\"call_with\""]).replace(", ...}", "}"))
        .expect("the hit is JSON");
    for (key, value) in shown.as_object().unwrap() {
        if key != "score" {
            assert!(
                has(&hit[key], value),
                "{key} of the hit is not {value}: {hit}"
            );
        }
    }
    let destructive: Value = serde_json::from_str(&machine.command(&block(&["intent_reason"])))
        .expect("the call is JSON");
    let refused = call(
        &client,
        "call_tool_read",
        json!({"name": "fs:write_file", "args": destructive["arguments"]["args"]}),
    )
    .await;
    let refused = match refused {
        Ok(result) => {
            assert!(is_error(&result), "{result:?}");
            text(&result)
        }
        Err(message) => message,
    };
    assert!(refused.contains("use call_tool_destructive"), "{refused}");
    let written = call(
        &client,
        "call_tool_destructive",
        destructive["arguments"].clone(),
    )
    .await
    .unwrap();
    assert!(!is_error(&written), "{}", text(&written));
    assert_eq!(
        std::fs::read_to_string(machine.playground.path().join("notes.txt")).unwrap(),
        "hello"
    );
    client.cancel().await.unwrap();

    // 5. Look at and test the policy. 6. Read the audit trail, call from the shell.
    run_block(&machine, &console[2], &mut ids);
    run_block(&machine, &console[3], &mut ids);
    drop(serve);
}

#[test]
fn the_comparison_skips_what_varies_and_nothing_else() {
    let shown = [
        "ID  TIME  TOOL".to_owned(),
        "...".to_owned(),
        "61 passed, 0 failed".to_owned(),
    ];
    let actual = [
        "ID    TIME   TOOL".to_owned(),
        "a".to_owned(),
        "b".to_owned(),
        "61 passed, 0 failed".to_owned(),
    ];
    assert!(shows(&shown, &actual));
    assert!(!shows(&shown, &actual[..3]));
    assert!(!shows(
        &shown,
        &["ID TIME TOOL".to_owned(), "60 passed, 1 failed".to_owned()]
    ));
    assert_eq!(
        normalize("01M80S20FFWGPHYV9YR1J7ZWK4  2026-11-22 04:43:30  fs  success  2ms  100.3 KiB"),
        "<id> <date> <time> fs success <n>ms <n> KiB"
    );
}
