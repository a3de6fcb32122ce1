//! Result cases: parsing (strict, with the case and key named) and running them against the
//! embedded `secret-redactor` and the `guard-trap` fixture.

use super::*;
use mcpproxy_plugin_host::{EngineOptions, PluginEngine, PluginSource};
use mcpproxy_policy::Limits;

fn plugin(crate_name: &str) -> Plugin {
    let engine = PluginEngine::new(EngineOptions::default()).unwrap();
    let path = plugin_artifacts::artifact(crate_name);
    let bytes = std::fs::read(&path).unwrap();
    let limits = Limits {
        timeout: std::time::Duration::from_secs(10),
        ..Limits::default()
    };
    Plugin::load(&engine, &bytes, PluginSource::File(path), limits).unwrap()
}

#[test]
fn cases_run_against_a_guard_and_say_what_it_answered() {
    let cases = parse(
        r#"[
          {"name": "a token", "items": ["token ghp_R7kQ2mZx9Lw4Tv8Np3Hs6Jd1Fb5Gc0Ya2Ue7W"],
           "expect": "redact", "kinds": ["github-token"]},
          {"name": "a resource", "result": {"kind": "resource", "server": "fs", "name": "file:///x"},
           "items": [{"kind": "resource-text", "text": "AKIAZ7Q4RT3XW5LMN2PB", "uri": "file:///x"}],
           "expect": "redact"},
          {"name": "plain text", "items": ["hello"], "expect": "pass"},
          {"name": "a wrong expectation", "items": ["hello"], "expect": "block"},
          {"name": "ignored by its settings", "items": ["AKIAZ7Q4RT3XW5LMN2PB"],
           "settings": {"ignore_kinds": ["aws-access-key"]}, "expect": "pass"}
        ]"#,
        "cases.json",
    )
    .unwrap();
    let redactor = plugin("secret_redactor");
    let results: Vec<CaseResult> = cases
        .iter()
        .map(|c| c.run(&redactor, &serde_json::json!({})))
        .collect();
    let passed: Vec<bool> = results.iter().map(|r| r.passed).collect();
    assert_eq!(passed, [true, true, true, false, true], "{results:?}");
    assert_eq!(results[0].got, "redact 1 (github-token)");
    assert_eq!(results[3].expected, "block");
    assert_eq!(results[3].got, "pass");
}

#[test]
fn a_faulting_guard_fails_its_case_with_the_fault() {
    let cases = parse(r#"[{"items": ["TRAP"], "expect": "pass"}]"#, "c.json").unwrap();
    let result = cases[0].run(&plugin("guard_trap"), &serde_json::json!({}));
    assert!(!result.passed);
    assert!(
        result
            .got
            .starts_with("result-guard plugin 'guard-trap' trapped"),
        "{}",
        result.got
    );
}

#[test]
fn bad_cases_name_the_case_and_the_key() {
    let err = |text: &str| parse(text, "c.json").unwrap_err().to_string();
    assert_eq!(
        err(r#"[{"items": ["x"], "expect": "pass", "colour": 1}]"#),
        "c.json: case 0: key `colour`: unknown field `colour`, expected one of `name`, `result`, \
         `items`, `settings`, `expect`, `kinds`, `message`"
    );
    assert!(
        err(r#"[{"name": "n", "items": ["x"], "expect": "maybe"}]"#)
            .starts_with("c.json: case 0 (\"n\"): key `expect`: unknown variant `maybe`"),
        "{}",
        err(r#"[{"name": "n", "items": ["x"], "expect": "maybe"}]"#)
    );
    assert_eq!(
        err(r#"[{"items": ["x"], "expect": "pass", "message": "m"}]"#),
        "c.json: case 0: key `message`: only a `block` has a message: remove `message`, or \
         expect block"
    );
    assert_eq!(
        err(r#"[{"items": [{"kind": "image", "text": "x"}], "expect": "pass"}]"#),
        "c.json: case 0: key `items[0].kind`: 'image' is not one of text, resource-text, structured"
    );
    assert_eq!(err("[]"), "c.json holds no cases");
}
