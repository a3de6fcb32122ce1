//! The settings: `ignore_kinds`, and unusable settings failing closed.

use super::*;

#[test]
fn settings_ignore_kinds() {
    let tools = [tool("t", "See https://a.io and <SYSTEM>.", OBJECT)];
    let config = r#"{"ignore_kinds":["url"],"strict_server_validation":true}"#;
    let found = run(config, &tools, &[]);
    assert_eq!(kinds(&found), vec![HIDDEN_INSTRUCTIONS]);
    assert_eq!(kinds(&run("", &tools, &[])), vec![HIDDEN_INSTRUCTIONS, URL]);
    assert_eq!(
        kinds(&run("{}", &tools, &[])),
        vec![HIDDEN_INSTRUCTIONS, URL]
    );
}

#[test]
fn bad_settings_fail_closed() {
    let tools = [tool("t", "See https://a.io.", OBJECT)];
    for (config, says) in [
        ("{not json", "not valid JSON"),
        ("[]", "must be a JSON object, not a list"),
        (
            r#"{"ignore_kinds":"url"}"#,
            "must be a list of finding kinds, not a string",
        ),
        (
            r#"{"ignore_kinds":[1]}"#,
            "must list kinds as strings, but it holds a number",
        ),
        (
            r#"{"ignore_kinds":["urls"]}"#,
            "names 'urls', which is not a finding kind",
        ),
        (r#"{"ignore_kinds":["\u001b[31m"]}"#, "names '\\u{1b}[31m'"),
    ] {
        let found = run(config, &tools, &[]);
        assert_eq!(found.len(), 1, "{config}");
        let f = &found[0];
        assert_eq!(
            (f.kind, f.severity, f.tool.as_str()),
            (SCANNER_ERROR, Severity::Danger, "")
        );
        assert!(f.detail.starts_with("The tool-scanner settings (plugins.settings.tool-scanner) are unusable, so no tool was scanned: "), "{}", f.detail);
        assert!(f.detail.contains(says), "{config}: {}", f.detail);
        assert!(!f.detail.chars().any(needs_escape));
    }
}
