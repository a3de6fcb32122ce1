//! docs/cli.md's table of commands checked against the binary's own `--help`: a command the
//! binary has and the table lacks (or names wrongly) fails here, so the table cannot fall
//! behind the clap definitions again (it lacked `code`, `plugins new`, `plugins wit` and
//! `activity repair`).

use std::process::Command;

/// The subcommands a `--help` lists (`help` left out).
fn subcommands(args: &[&str]) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpproxy"))
        .args(args)
        .arg("--help")
        .env("NO_COLOR", "1")
        .output()
        .expect("run mcpproxy --help");
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // A command's name starts its line two spaces in; continuation lines are deeper.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|name| name != "help")
        .collect()
}

#[test]
fn the_command_table_names_every_command_the_binary_has() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/cli.md"),
    )
    .expect("docs/cli.md");
    // The table's first column: | [`activity list`](#...) |
    let rows: Vec<String> = doc
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.strip_prefix("| [`"))
        .filter_map(|l| l.split('`').next().map(str::to_owned))
        .collect();
    assert!(rows.len() > 10, "no table found in docs/cli.md: {rows:?}");
    let commands = subcommands(&[]);
    assert!(commands.contains(&"serve".to_owned()), "{commands:?}");
    let mut missing = Vec::new();
    for command in &commands {
        if rows.iter().any(|r| r == command) {
            continue;
        }
        // A command listed by its subcommands must list each of them.
        let subs = subcommands(&[command]);
        let listed: Vec<&String> = subs
            .iter()
            .filter(|sub| rows.contains(&format!("{command} {sub}")))
            .collect();
        if subs.is_empty() || listed.len() != subs.len() {
            missing.extend(
                subs.iter()
                    .filter(|sub| !rows.contains(&format!("{command} {sub}")))
                    .map(|sub| format!("{command} {sub}")),
            );
            if subs.is_empty() {
                missing.push(command.clone());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/cli.md's command table lacks {missing:?}: add a row for each (rows: {rows:?})"
    );
    // And no row names a command the binary does not have.
    for row in &rows {
        let mut words = row.split(' ');
        let command = words.next().unwrap_or_default().to_owned();
        assert!(
            commands.contains(&command),
            "docs/cli.md lists `{row}`, which mcpproxy does not have"
        );
        if let Some(sub) = words.next() {
            assert!(
                subcommands(&[&command]).iter().any(|s| s == sub),
                "docs/cli.md lists `{row}`, which mcpproxy does not have"
            );
        }
    }
}
