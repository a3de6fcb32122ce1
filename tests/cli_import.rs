//! `mcpproxy upstream import` from a Claude Desktop config that holds the README's own
//! mcpproxy entry and a server already configured under another name.

use serde_json::{Value, json};

use crate::support::TestCommand;

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
