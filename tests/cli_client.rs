//! `mcpproxy client add | remove | list`: mcpproxy written into an MCP client's own config
//! file, every other key kept, a backup first, idempotent, `--dry-run` a diff only.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{CmdOutput, TestCommand};

fn run(home: &Path, args: &[&str]) -> CmdOutput {
    TestCommand::new(&home.join(".mcpproxy"))
        .env("HOME", home.to_str().unwrap())
        .args(["client"])
        .args(args)
        .output()
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn cursor_gets_mcpproxy_beside_its_own_servers() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("cursor-mcp.json");
    let original = "{\n  \"theme\": \"dark\",\n  \"mcpServers\": {\n    \"github\": {\"url\": \"https://api.githubcopilot.com/mcp/\"},\n    \"fs\": {\"command\": \"npx\", \"args\": [\"-y\", \"server-fs\"]}\n  },\n  \"zzz\": [1, 2]\n}\n";
    std::fs::write(&file, original).unwrap();
    let path = file.to_str().unwrap();

    // A dry run prints the change and writes nothing.
    let out = run(
        home.path(),
        &["add", "cursor", "--config-file", path, "--dry-run"],
    );
    out.assert_code(0);
    assert!(
        out.stdout().contains("+    \"mcpproxy\": {"),
        "{}",
        out.stdout()
    );
    assert!(out.stdout().contains("\"serve\""), "{}", out.stdout());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), original);

    // Added: the entry runs this binary by its absolute path; the rest is as it was, in order.
    let out = run(home.path(), &["add", "cursor", "--config-file", path]);
    out.assert_code(0);
    let written = read(&file);
    let entry = &written["mcpServers"]["mcpproxy"];
    let command = entry["command"].as_str().unwrap();
    assert!(Path::new(command).is_absolute(), "{entry}");
    assert!(command.ends_with("mcpproxy"), "{entry}");
    assert_eq!(entry["args"], json!(["serve", "--stdio"]));
    assert_eq!(written["theme"], "dark");
    assert_eq!(written["zzz"], json!([1, 2]));
    assert_eq!(
        written["mcpServers"]["fs"],
        json!({"command": "npx", "args": ["-y", "server-fs"]})
    );
    let text = std::fs::read_to_string(&file).unwrap();
    let order: Vec<usize> = [
        "\"theme\"",
        "\"github\"",
        "\"fs\"",
        "\"mcpproxy\"",
        "\"zzz\"",
    ]
    .iter()
    .map(|k| text.find(k).unwrap())
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    // The backup holds the file as it was.
    let backup = format!("{path}.mcpproxy-backup");
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), original);

    // Again: nothing changes, and it says so.
    let out = run(home.path(), &["add", "cursor", "--config-file", path]);
    out.assert_code(0);
    assert!(out.stdout().contains("nothing changed"), "{}", out.stdout());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    assert!(
        !Path::new(&format!("{backup}.1")).exists(),
        "no second backup"
    );

    // --http: the URL form; remove: back to the servers it had.
    let out = run(
        home.path(),
        &["add", "cursor", "--config-file", path, "--http"],
    );
    out.assert_code(0);
    assert_eq!(
        read(&file)["mcpServers"]["mcpproxy"],
        json!({"url": "http://127.0.0.1:8080/mcp"})
    );
    let out = run(home.path(), &["remove", "cursor", "--config-file", path]);
    out.assert_code(0);
    assert_eq!(
        read(&file),
        serde_json::from_str::<Value>(original).unwrap()
    );
}

#[test]
fn each_client_is_listed_with_its_file_and_state() {
    let home = tempfile::tempdir().unwrap();
    // VS Code's file in its usual place (Linux), with another server.
    let vscode = if cfg!(target_os = "macos") {
        home.path()
            .join("Library/Application Support/Code/User/mcp.json")
    } else {
        home.path().join(".config/Code/User/mcp.json")
    };
    std::fs::create_dir_all(vscode.parent().unwrap()).unwrap();
    std::fs::write(
        &vscode,
        r#"{"servers": {"other": {"type": "http", "url": "http://h/mcp"}}}"#,
    )
    .unwrap();
    run(home.path(), &["add", "vscode"]).assert_code(0);
    assert_eq!(read(&vscode)["servers"]["mcpproxy"]["type"], "stdio");
    assert_eq!(read(&vscode)["servers"]["other"]["url"], "http://h/mcp");
    // Windsurf's file does not exist yet: made.
    run(home.path(), &["add", "windsurf", "--http"]).assert_code(0);
    let windsurf = home.path().join(".codeium/windsurf/mcp_config.json");
    assert_eq!(
        read(&windsurf)["mcpServers"]["mcpproxy"]["serverUrl"],
        "http://127.0.0.1:8080/mcp"
    );

    let out = run(home.path(), &["list", "-o", "json"]);
    out.assert_code(0);
    let list: Value = serde_json::from_str(&out.stdout()).unwrap();
    let state = |client: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|c| c["client"] == client)
            .map(|c| c["state"].as_str().unwrap().to_owned())
            .unwrap()
    };
    assert_eq!(state("vscode"), "set up (stdio)");
    assert_eq!(state("windsurf"), "set up (http)");
    assert_eq!(state("cursor"), "no config file");
    assert_eq!(state("claude-desktop"), "no config file");
    let out = run(home.path(), &["list"]);
    out.assert_code(0);
    assert!(out.stdout().starts_with("CLIENT"), "{}", out.stdout());
    assert!(
        out.stdout().contains(vscode.to_str().unwrap()),
        "{}",
        out.stdout()
    );

    // Claude Desktop connects to no URL: refused with what to do.
    let out = run(home.path(), &["add", "claude-desktop", "--http"]);
    out.assert_code(2);
    assert!(out.stderr().contains("without --http"), "{}", out.stderr());
}

#[test]
fn a_file_with_comments_is_read_but_never_rewritten() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("mcp.json");
    let original = "{\n  // my servers\n  \"servers\": {\n    \"other\": {\"url\": \"http://h/mcp\"},\n  },\n}\n";
    std::fs::write(&file, original).unwrap();
    let out = run(
        home.path(),
        &["add", "vscode", "--config-file", file.to_str().unwrap()],
    );
    out.assert_code(2);
    let stderr = out.stderr();
    assert!(
        stderr.contains("has comments or trailing commas (JSONC)"),
        "{stderr}"
    );
    assert!(stderr.contains("\"mcpproxy\": {"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), original);

    // Not JSON at all: said so, nothing written.
    std::fs::write(&file, "{ nope").unwrap();
    let out = run(
        home.path(),
        &["add", "cursor", "--config-file", file.to_str().unwrap()],
    );
    out.assert_code(2);
    assert!(out.stderr().contains("is not JSON"), "{}", out.stderr());
}

/// `client add --http` writes the address the running mcpproxy listens on (here a port the
/// OS picked, not the config's `listen`); with none running it writes the config's address
/// and says that nothing answers there yet, and that it is only the default.
#[test]
fn http_clients_get_the_address_the_running_proxy_listens_on() {
    let proxy =
        crate::support::mcp::Proxy::builder(&crate::support::mcp::config_with(vec![])).start();
    let file = proxy.data_dir.path().join("cursor-mcp.json");
    let out = TestCommand::new(proxy.data_dir.path())
        .args(["client", "add", "cursor", "--http", "--config-file"])
        .args([&file])
        .output();
    out.assert_code(0);
    assert_eq!(
        read(&file)["mcpServers"]["mcpproxy"],
        json!({"url": proxy.url}),
        "{}",
        out.stderr()
    );
    assert!(!out.stderr().contains("note:"), "{}", out.stderr());

    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("cursor-mcp.json");
    let out = run(
        home.path(),
        &[
            "add",
            "cursor",
            "--http",
            "--config-file",
            file.to_str().unwrap(),
        ],
    );
    out.assert_code(0);
    assert_eq!(
        read(&file)["mcpServers"]["mcpproxy"],
        json!({"url": "http://127.0.0.1:8080/mcp"})
    );
    assert!(
        out.stderr().contains("no mcpproxy is running on")
            && out.stderr().contains("the config does not set `listen`"),
        "{}",
        out.stderr()
    );
}
