//! mcpproxy as the CLIENT of the MCP conformance suite's client scenarios: the suite
//! (`@modelcontextprotocol/conformance`, pinned in `tests/conformance/package.json` with the
//! Node 22 it needs) starts each scenario's server, and `tests/conformance/client.sh` puts
//! mcpproxy in front of it as an HTTP upstream, exercises it with the CLI (`tools list`,
//! `call`) and stops it. Every non-auth client scenario must pass except those in
//! [`CANNOT_PASS`], and each of those must still fail (a scenario that starts passing is
//! taken off the list). Every `auth/*` scenario of the 2025-11-25 and 2026-07-28 sets
//! ([`AUTH_DISCOVERY`], [`AUTH_SCOPES_AND_TOKENS`], [`AUTH_ISSUER`]) must pass too: `client.sh` logs in with `mcpproxy upstream login`
//! when the scenario's server asks for it (the suite's authorization server sends the
//! browser straight back with a code), and logs in again when the server asks for more
//! access. The extension scenarios ([`AUTH_EXTENSIONS`]), which mcpproxy does not implement, assert
//! nothing: they run, reported and never required, only when `MCPPROXY_CONFORMANCE_AUTH_EXTENSIONS=1`.
//! `docs/conformance.md` has the table.
//!
//! Without the suite installed the test skips with a note, unless `MCPPROXY_REQUIRE_NODE22`
//! is set (as in CI), which makes a missing suite a failure.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::mcp::shared_compile_cache;

/// Every client scenario of the suite but `auth/*`, as `conformance list` names them.
const SCENARIOS: &[&str] = &[
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "request-metadata",
    "sep-2322-client-request-state",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
    "json-schema-ref-no-deref",
    "json-schema-2020-12-preservation",
    "sep-2640-client-no-prefetch",
    "sep-2640-client-verify-digest",
    "sep-2640-client-verify-size",
    "sep-2640-client-verify-frontmatter",
];

/// The `auth/*` client scenarios of the 2025-03-26, 2025-06-18, 2025-11-25 and 2026-07-28
/// sets, as `conformance list` names them: each must pass. In three groups, each a test of its
/// own, so a runner that runs tests side by side (nextest) spreads their minutes: discovery
/// and registration, scopes and token endpoints, the `iss` checks.
const AUTH_DISCOVERY: &[&str] = &[
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/authorization-server-migration",
];
const AUTH_SCOPES_AND_TOKENS: &[&str] = &[
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
];
const AUTH_ISSUER: &[&str] = &[
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
];

/// Every required `auth/*` scenario.
fn auth_scenarios() -> impl Iterator<Item = &'static &'static str> {
    AUTH_DISCOVERY
        .iter()
        .chain(AUTH_SCOPES_AND_TOKENS)
        .chain(AUTH_ISSUER)
}

/// Set to run the extension scenarios too (they are reported, never required).
const EXTENSIONS_ENV: &str = "MCPPROXY_CONFORMANCE_AUTH_EXTENSIONS";

/// The `auth/*` scenarios of extensions mcpproxy does not implement: none passes, so they
/// assert nothing and run only when [`EXTENSIONS_ENV`] is set, reported, not required (docs/conformance.md
/// says why each does not pass).
const AUTH_EXTENSIONS: &[&str] = &[
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/enterprise-managed-authorization",
    "auth/dpop",
    "auth/dpop-nonce",
    "auth/wif-jwt-bearer",
];

/// Scenarios that cannot pass with mcpproxy as the client, and why.
const CANNOT_PASS: &[(&str, &str)] = &[
    (
        "elicitation-sep1034-client-defaults",
        "the tool asks its client for input (elicitation/create) and expects it accepted with \
         the schema's defaults; mcpproxy passes an elicitation on to the client whose call \
         caused it, and that is a person at `mcpproxy call`, who cannot answer one",
    ),
    (
        "sep-2322-client-request-state",
        "three of its five checks need the client to answer an input_required result (an \
         elicitation) and retry with the requestState; mcpproxy hands input_required results \
         to the client whose call it is (where the answer must come from), and `mcpproxy call` \
         has no person to answer; the two checks that need no answer pass",
    ),
    (
        "sep-2640-client-no-prefetch",
        "an extension (skills, SEP-2640) mcpproxy does not implement: it never calls \
         skills/list, so the suite records no check",
    ),
    (
        "sep-2640-client-verify-digest",
        "the skills extension (SEP-2640), not implemented: no check is recorded",
    ),
    (
        "sep-2640-client-verify-size",
        "the skills extension (SEP-2640), not implemented: no check is recorded",
    ),
    (
        "sep-2640-client-verify-frontmatter",
        "the skills extension (SEP-2640), not implemented: no check is recorded",
    ),
];

/// What one scenario's run came to.
#[derive(Debug)]
struct Outcome {
    passed: bool,
    /// Checks by status (`SUCCESS`, `FAILURE`, `SKIPPED`, ...).
    counts: BTreeMap<String, usize>,
    failures: Vec<String>,
}

/// Runs `scenario` with mcpproxy as the client; passing means the suite passed it with at
/// least one successful check.
fn run_scenario(scenario: &str, out: &Path) -> Outcome {
    let dir = crate::support::node::conformance_dir();
    let status = Command::new(dir.join("node_modules/.bin/node"))
        .arg(dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .args([
            "client",
            "--scenario",
            scenario,
            "--timeout",
            "120000",
            "--command",
        ])
        .arg(dir.join("client.sh"))
        .arg("-o")
        .arg(out)
        .env("MCPPROXY", env!("CARGO_BIN_EXE_mcpproxy"))
        .env("MCPPROXY_PLUGIN_CACHE", shared_compile_cache())
        .env_remove("RUST_LOG")
        .output()
        .expect("run the conformance suite");
    // The suite writes `OUT/<scenario>-<time>/checks.json`; `auth/x` lands in `OUT/auth/`.
    let (dir_of_runs, name) = match scenario.rsplit_once('/') {
        Some((group, name)) => (out.join(group), name),
        None => (out.to_path_buf(), scenario),
    };
    let checks: Vec<Value> = std::fs::read_dir(&dir_of_runs)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{name}-"))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("checks.json")).ok())
        .filter_map(|text| serde_json::from_str::<Vec<Value>>(&text).ok())
        .flatten()
        .collect();
    let mut counts = BTreeMap::new();
    let mut failures = Vec::new();
    for check in &checks {
        let status = check["status"].as_str().unwrap_or("?").to_owned();
        if status == "FAILURE" {
            failures.push(format!(
                "{}: {}",
                check["id"].as_str().unwrap_or("?"),
                check["errorMessage"].as_str().unwrap_or("")
            ));
        }
        *counts.entry(status).or_insert(0) += 1;
    }
    let passed = status.status.success()
        && failures.is_empty()
        && counts.get("SUCCESS").copied().unwrap_or(0) > 0;
    if !passed && failures.is_empty() && checks.is_empty() {
        failures.push(format!(
            "no checks recorded; suite output: {}",
            String::from_utf8_lossy(&status.stdout)
                .chars()
                .take(4000)
                .collect::<String>()
        ));
    }
    Outcome {
        passed,
        counts,
        failures,
    }
}

/// Runs `scenarios` and fails with every one that did not pass.
fn every_one_passes(scenarios: &[&str]) {
    if !crate::support::node::conformance_installed() {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let mut failed = Vec::new();
    for scenario in scenarios {
        let outcome = run_scenario(scenario, out.path());
        eprintln!(
            "{scenario}: {} {:?}",
            if outcome.passed { "passed" } else { "failed" },
            outcome.counts
        );
        if !outcome.passed {
            failed.push(format!(
                "{scenario} failed: {:?} {:?}",
                outcome.counts, outcome.failures
            ));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn every_auth_discovery_scenario_passes_with_mcpproxy_logging_in() {
    every_one_passes(AUTH_DISCOVERY);
}

#[test]
fn every_auth_scope_and_token_scenario_passes_with_mcpproxy_logging_in() {
    every_one_passes(AUTH_SCOPES_AND_TOKENS);
}

#[test]
fn every_auth_issuer_scenario_passes_with_mcpproxy_logging_in() {
    every_one_passes(AUTH_ISSUER);
}

/// The extension scenarios, when asked for ([`EXTENSIONS_ENV`]): run and reported.
#[test]
fn the_auth_extension_scenarios_are_reported_when_asked_for() {
    if std::env::var_os(EXTENSIONS_ENV).is_none_or(|v| v.is_empty() || v == "0")
        || !crate::support::node::conformance_installed()
    {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    for scenario in AUTH_EXTENSIONS {
        let outcome = run_scenario(scenario, out.path());
        eprintln!(
            "{scenario} (extension, reported): {} {:?}",
            if outcome.passed { "passed" } else { "failed" },
            outcome.counts
        );
    }
}

#[test]
fn the_lists_name_client_scenarios_once() {
    assert_eq!(
        auth_scenarios().count(),
        27,
        "the core sets have 27 auth scenarios"
    );
    for scenario in auth_scenarios().chain(AUTH_EXTENSIONS) {
        assert!(scenario.starts_with("auth/"), "{scenario}");
        assert!(!SCENARIOS.contains(scenario), "{scenario} is listed twice");
        assert_eq!(
            auth_scenarios()
                .chain(AUTH_EXTENSIONS)
                .filter(|s| s == &scenario)
                .count(),
            1,
            "{scenario} is listed twice"
        );
    }
    for (name, why) in CANNOT_PASS {
        assert!(SCENARIOS.contains(name), "{name} is not a client scenario");
        assert!(!why.is_empty());
        assert_eq!(
            CANNOT_PASS.iter().filter(|(n, _)| n == name).count(),
            1,
            "{name} is listed twice"
        );
    }
}

#[test]
fn every_client_scenario_passes_with_mcpproxy_as_the_client_except_the_listed_ones() {
    if !crate::support::node::conformance_installed() {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let mut unexpected = Vec::new();
    for scenario in SCENARIOS {
        let outcome = run_scenario(scenario, out.path());
        let expected_to_fail = CANNOT_PASS.iter().any(|(name, _)| name == scenario);
        eprintln!(
            "{scenario}: {} {:?}",
            if outcome.passed { "passed" } else { "failed" },
            outcome.counts
        );
        match (outcome.passed, expected_to_fail) {
            (false, false) => unexpected.push(format!(
                "{scenario} failed: {:?} {:?}",
                outcome.counts, outcome.failures
            )),
            (true, true) => unexpected.push(format!(
                "{scenario} passes now: take it off CANNOT_PASS (and docs/conformance.md)"
            )),
            _ => {}
        }
    }
    assert!(unexpected.is_empty(), "{unexpected:#?}");
}
