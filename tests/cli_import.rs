//! `mcpproxy upstream import` from a Claude Desktop config that holds the README's own
//! mcpproxy entry and a server already configured under another name.

use serde_json::{Value, json};

use crate::support::TestCommand;
use crate::support::sandbox_supported;

#[test]
fn import_skips_mcpproxy_itself_and_flags_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp_config.json");
    let original = json!({
        "listen": "127.0.0.1:18080",
        "mcpServers": [{
            "name": "fs",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
        }],
    });
    std::fs::write(&config, original.to_string()).unwrap();
    let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/import/claude_with_mcpproxy.json");
    let run = |extra: &[&str]| {
        TestCommand::new(&dir.path().join("data"))
            .args(["upstream", "import", "--from"])
            .args([&from])
            .args(extra)
            .args(["--config"])
            .args([&config])
            .output()
    };

    let out = run(&["-o", "json"]);
    out.assert_code(0);
    let outcomes: Value = serde_json::from_str(&out.stdout()).unwrap();
    let outcome = |name: &str| -> String {
        outcomes
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .and_then(|o| o["outcome"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(
        outcome("mcpproxy"),
        "skipped: this is mcpproxy itself (its command is mcpproxy)"
    );
    assert!(
        outcome("proxy-over-http").starts_with("skipped: this is mcpproxy itself"),
        "{outcomes}"
    );
    assert_eq!(
        outcome("files"),
        "skipped: same command as 'fs'; use --allow-duplicate to import it anyway"
    );
    assert_eq!(outcome("notes"), "would be added (quarantined)");

    // Added: only the new one; the table says why the others were not.
    let out = run(&["--yes"]);
    out.assert_code(0);
    assert!(
        out.stdout().contains("skipped: this is mcpproxy itself"),
        "{}",
        out.stdout()
    );
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let names: Vec<&str> = written["mcpServers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, vec!["fs", "notes"]);

    // --allow-duplicate imports the duplicate, never mcpproxy itself.
    let out = run(&["--yes", "--allow-duplicate"]);
    out.assert_code(0);
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let names: Vec<&str> = written["mcpServers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, vec!["fs", "notes", "files"]);
}

/// A Claude Desktop config holding the official filesystem server given a directory: the
/// import proposes the sandbox's write grant for it (shown, written into the launch), so
/// after one approval the server writes there, sandboxed; imported with
/// `--no-inferred-grants`, the same server is refused by its sandbox.
#[tokio::test(flavor = "multi_thread")]
async fn import_proposes_the_write_grant_of_a_filesystem_servers_directory() {
    use crate::support::mcp::{Proxy, call, config_with, connect, is_error, npm_dir, text};
    if !sandbox_supported() || !crate::support::mcp::npm_bin_installed("mcp-server-filesystem") {
        return;
    }
    let proxy = Proxy::builder(&config_with(vec![])).start();
    let config = proxy.data_dir.path().join("mcp_config.json");
    let server = npm_dir().join("node_modules/.bin/mcp-server-filesystem");
    let granted = tempfile::tempdir().unwrap();
    let refused = tempfile::tempdir().unwrap();
    let claude = tempfile::tempdir().unwrap();
    for (name, dir, extra) in [
        ("files", granted.path(), None),
        ("bare", refused.path(), Some("--no-inferred-grants")),
    ] {
        let from = claude.path().join(format!("{name}.json"));
        let desktop = json!({"mcpServers": {name: {"command": server, "args": [dir]}}});
        std::fs::write(&from, desktop.to_string()).unwrap();
        let mut args = vec![
            "upstream".to_owned(),
            "import".to_owned(),
            "--from".to_owned(),
        ];
        args.push(from.display().to_string());
        args.extend(["--yes", "--config"].map(str::to_owned));
        args.push(config.display().to_string());
        args.extend(extra.map(str::to_owned));
        let out = TestCommand::new(proxy.data_dir.path()).args(&args).output();
        out.assert_code(0);
        let proposed = format!("'{name}' may write {}", dir.display());
        assert_eq!(
            out.stderr().contains(&proposed),
            extra.is_none(),
            "{name}: {}",
            out.stderr()
        );
        assert!(
            out.stdout().contains("added (quarantined)"),
            "{}",
            out.stdout()
        );
        // One approval (once it has listed its tools): the launch as imported, grants
        // included.
        proxy
            .approve_when_listed(name, std::time::Duration::from_secs(60))
            .await;
    }
    let client = connect(&proxy.url).await;
    let write = |server: &str, dir: &std::path::Path| {
        json!({
            "name": format!("{server}:write_file"),
            "args": {"path": dir.join("note.txt"), "content": "written"},
        })
    };
    crate::support::mcp::call_until_ok(
        &client,
        "the imported server writes in its directory",
        "call_tool_destructive",
        write("files", granted.path()),
        std::time::Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(granted.path().join("note.txt")).unwrap(),
        "written"
    );
    crate::support::poll::until(
        "the server imported without grants answers",
        std::time::Duration::from_secs(60),
        || async {
            let result = call(
                &client,
                "call_tool_destructive",
                write("bare", refused.path()),
            )
            .await
            .map_err(|e| e.to_string())?;
            // Refused by its sandbox (the server itself allows the directory it was given);
            // an unknown tool means it has not started yet.
            let said = text(&result);
            if is_error(&result) && said.to_lowercase().contains("denied") {
                Ok(())
            } else {
                Err(said)
            }
        },
    )
    .await;
    assert!(!refused.path().join("note.txt").exists());
    client.cancel().await.unwrap();
}
