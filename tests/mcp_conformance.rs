//! The MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! `tests/conformance/package.json` with the Node 22 it needs; `npm ci --prefix
//! tests/conformance`) against the conformance fixture (`tests/conformance-server`):
//! directly, where exactly the scenarios in [`PASS`] must pass, and through mcpproxy's
//! direct endpoint `/mcp/servers/NAME`, where every scenario that passes directly must pass
//! too. `tests/conformance/run.sh` runs the suite and writes the JSON summary read here;
//! `docs/conformance.md` lists the scenarios (and why any cannot pass). The direct run is
//! made once, in the same test as the proxied one.
//!
//! Without the suite installed the tests skip with a note, unless `MCPPROXY_REQUIRE_NODE22`
//! is set (as in CI), which makes a missing suite a failure.

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mcp::{Proc, Proxy, config_with, pipe_lines};
use crate::support::poll::until_blocking;

/// Scenarios that pass directly but not (or not always) through the direct endpoint, and
/// why; `docs/conformance.md` lists the same. None at present: every scenario that passes
/// directly must pass through mcpproxy, with at least as many successful checks.
const NOT_THROUGH_THE_PROXY: &[(&str, &str)] = &[];

/// Scenarios that pass through the direct endpoint with fewer successful checks than
/// directly, and why; `docs/conformance.md` lists the same. Each is a check the suite makes
/// of an event stream only, and marks "not applicable" (INFO, not a failure or a warning)
/// when a server answers with a JSON body, which streamable HTTP allows.
const FEWER_CHECKS_THROUGH_THE_PROXY: &[(&str, &str)] = &[
    (
        "server-sse-multiple-streams",
        "mcpproxy answers a request whose first message is its reply (here `tools/list`) as a \
         JSON body; the suite then checks that the three requests were accepted and skips the \
         check of their streams",
    ),
    (
        "server-sse-polling",
        "the upstream behind the proxy speaks stdio, so `test_reconnection` closes no stream: \
         its reply is the first message and comes as a JSON body, and the suite skips the \
         priming-event and retry checks",
    ),
];

/// The scenarios the fixture passes when the suite talks to it directly.
const PASS: &[&str] = &[
    "caching",
    "completion-complete",
    "dns-rebinding-protection",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "http-custom-header-server-validation",
    "http-header-validation",
    "input-required-result-basic-elicitation",
    "input-required-result-basic-list-roots",
    "input-required-result-basic-sampling",
    "input-required-result-capability-check",
    "input-required-result-ignore-extra-params",
    "input-required-result-missing-input-response",
    "input-required-result-multi-round",
    "input-required-result-multiple-input-requests",
    "input-required-result-non-tool-request",
    "input-required-result-request-state",
    "input-required-result-result-type",
    "input-required-result-tampered-state",
    "input-required-result-unsupported-methods",
    "input-required-result-validate-input",
    "json-schema-2020-12",
    "logging-set-level",
    "ping",
    "prompts-get-embedded-resource",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-with-image",
    "prompts-list",
    "resources-list",
    "resources-read-binary",
    "resources-read-text",
    "resources-subscribe",
    "resources-templates-read",
    "resources-unsubscribe",
    "sep-2164-resource-not-found",
    "sep-2640-skills-directory",
    "sep-2640-skills-enumeration",
    "sep-2640-skills-manifest",
    "server-initialize",
    "server-session-lifecycle",
    "server-sse-multiple-streams",
    "server-sse-polling",
    "server-stateless",
    "tasks-capability-negotiation",
    "tasks-dispatch-and-envelope",
    "tasks-lifecycle",
    "tasks-mrtr-composition",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-request-state-removal",
    "tasks-required-task-error",
    "tasks-wire-fields",
    "tools-call-audio",
    "tools-call-elicitation",
    "tools-call-embedded-resource",
    "tools-call-error",
    "tools-call-image",
    "tools-call-mixed-content",
    "tools-call-sampling",
    "tools-call-simple-text",
    "tools-call-with-logging",
    "tools-call-with-progress",
    "tools-list",
];

/// Scenarios the suite runs but whose every check it skips, and why: they pass whatever a
/// server does, so they count neither as passed nor failed (docs/conformance.md lists them).
const ASSERTS_NOTHING: &[(&str, &str)] = &[(
    "tasks-status-notifications",
    "the suite marks its one check pending (a subscriptions/listen rewrite) and skips it",
)];

/// The scenarios the fixture does not pass directly, and why (docs/conformance.md says more).
/// None at present: a scenario that stops passing must be listed here with its reason.
const FAIL: &[(&str, &str)] = &[];

/// How long one whole suite run may take (it takes seconds; each scenario is capped at 20 s).
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// The `mcp-conformance-fixture` binary, built on first use if this test run did not build it.
fn fixture_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| crate::support::mcp::workspace_bin("mcp-conformance-fixture"))
        .clone()
}

/// The fixture serving streamable HTTP on a free loopback port, and its URL.
fn start_fixture() -> (Proc, String) {
    let mut child = Command::new(fixture_bin())
        .args(["--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mcp-conformance-fixture");
    let stdout = child.stdout.take().expect("stdout");
    let proc = Proc {
        child,
        stderr_lines: pipe_lines(stdout),
    };
    let line = proc.wait_for_line(Duration::from_secs(30), |l| {
        l.starts_with("MCP_FIXTURE_LISTENING ")
    });
    let url = line.trim_start_matches("MCP_FIXTURE_LISTENING ").to_owned();
    (proc, url)
}

/// One scenario's outcome in a run's summary.
#[derive(Debug)]
struct Outcome {
    passed: bool,
    /// Checks that succeeded (a scenario whose checks were skipped passes with fewer).
    successes: u64,
    failures: Vec<String>,
}

/// Runs the whole suite against `url` with `tests/conformance/run.sh`; every scenario's
/// outcome by name. Panics when the run does not finish within [`RUN_TIMEOUT`].
fn run_suite(
    url: &str,
    out_dir: &Path,
    label: &str,
) -> std::collections::BTreeMap<String, Outcome> {
    let summary_path = out_dir.join(format!("{label}.json"));
    let mut child = Command::new("bash")
        .arg(crate::support::node::conformance_dir().join("run.sh"))
        .arg(url)
        .arg(&summary_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("run tests/conformance/run.sh");
    // A suite still running when the wait gives up is killed, its whole process group.
    struct KillGroup(i32);
    impl Drop for KillGroup {
        fn drop(&mut self) {
            // SAFETY: kill(2) on the process group of our own child.
            unsafe { libc::kill(-self.0, libc::SIGKILL) };
        }
    }
    let group = KillGroup(child.id() as i32);
    let what = format!("the conformance suite finishes against {url}");
    let status = until_blocking(&what, RUN_TIMEOUT, || {
        let exited = child.try_wait().expect("wait for run.sh");
        exited.ok_or_else(|| "still running".to_owned())
    });
    std::mem::forget(group);
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    assert!(status.success(), "run.sh failed ({status}): {stderr}");
    let text = std::fs::read_to_string(&summary_path).expect("read the suite summary");
    let summary: Value = serde_json::from_str(&text).expect("the summary is JSON");
    summary["scenarios"]
        .as_object()
        .expect("scenarios")
        .iter()
        .map(|(name, scenario)| {
            let failures = scenario["failures"]
                .as_array()
                .map(|f| {
                    f.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            let passed = scenario["passed"].as_bool().expect("passed is a bool");
            let successes = scenario["counts"]["SUCCESS"].as_u64().unwrap_or(0);
            (
                name.clone(),
                Outcome {
                    passed,
                    successes,
                    failures,
                },
            )
        })
        .collect()
}

fn passed(outcomes: &std::collections::BTreeMap<String, Outcome>) -> BTreeSet<&str> {
    outcomes
        .iter()
        .filter(|(_, o)| o.passed)
        .map(|(name, _)| name.as_str())
        .collect()
}

/// The failed checks of `names`, one line each, for assertion messages.
fn failures_of<'a>(
    outcomes: &std::collections::BTreeMap<String, Outcome>,
    names: impl IntoIterator<Item = &'a str>,
) -> String {
    names
        .into_iter()
        .map(|name| {
            let failures = outcomes
                .get(name)
                .map_or_else(|| vec!["(not run)".to_owned()], |o| o.failures.clone());
            format!("{name}:\n    {}", failures.join("\n    "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_lists_name_every_scenario_once() {
    let pass: BTreeSet<&str> = PASS.iter().copied().collect();
    let fail: BTreeSet<&str> = FAIL.iter().map(|(name, _)| *name).collect();
    assert_eq!(pass.len(), PASS.len(), "PASS has duplicates");
    assert_eq!(fail.len(), FAIL.len(), "FAIL has duplicates");
    let nothing: BTreeSet<&str> = ASSERTS_NOTHING.iter().map(|(name, _)| *name).collect();
    assert!(pass.is_disjoint(&fail), "{:?}", pass.intersection(&fail));
    assert!(
        pass.is_disjoint(&nothing),
        "{:?}",
        pass.intersection(&nothing)
    );
    assert!(
        fail.is_disjoint(&nothing),
        "{:?}",
        fail.intersection(&nothing)
    );
    assert_eq!(
        pass.len() + fail.len() + nothing.len(),
        65,
        "the suite has 65 server scenarios"
    );
    // A scenario allowed fewer checks through the proxy must pass directly.
    for (name, _) in FEWER_CHECKS_THROUGH_THE_PROXY {
        assert!(pass.contains(name), "{name} is not in PASS");
    }
}

/// The suite against the fixture directly, then through mcpproxy's direct endpoint, in one
/// test: the direct run is what the proxied one is compared with, and a test runner that runs
/// each test in a process of its own (nextest) would otherwise make it twice.
#[test]
fn the_fixture_passes_directly_and_every_passing_scenario_passes_through_the_proxy() {
    if !crate::support::node::conformance_installed() {
        return;
    }
    let direct = {
        let (_fixture, url) = start_fixture();
        let out = tempfile::tempdir().expect("tempdir");
        run_suite(&url, out.path(), "direct")
    };
    the_fixture_passes_the_expected_scenarios_directly(&direct);
    every_scenario_that_passes_directly_passes_through_the_direct_endpoint(&direct);
}

fn the_fixture_passes_the_expected_scenarios_directly(
    outcomes: &std::collections::BTreeMap<String, Outcome>,
) {
    let all: BTreeSet<&str> = PASS
        .iter()
        .copied()
        .chain(FAIL.iter().map(|(name, _)| *name))
        .chain(ASSERTS_NOTHING.iter().map(|(name, _)| *name))
        .collect();
    let ran: BTreeSet<&str> = outcomes.keys().map(String::as_str).collect();
    assert_eq!(
        ran, all,
        "the suite ran other scenarios than PASS, FAIL and ASSERTS_NOTHING name"
    );

    // A scenario that asserts nothing is no evidence either way; once the suite checks
    // something in it, it belongs in PASS or FAIL.
    for (name, _) in ASSERTS_NOTHING {
        let outcome = &outcomes[*name];
        assert!(
            outcome.successes == 0 && outcome.failures.is_empty(),
            "{name} now checks something ({} successes, failures {:?}): move it from \
             ASSERTS_NOTHING to PASS or FAIL (and update docs/conformance.md)",
            outcome.successes,
            outcome.failures
        );
    }

    let expected: BTreeSet<&str> = PASS.iter().copied().collect();
    let actual: BTreeSet<&str> = passed(outcomes)
        .into_iter()
        .filter(|name| !ASSERTS_NOTHING.iter().any(|(nothing, _)| nothing == name))
        .collect();
    let regressed: Vec<&str> = expected.difference(&actual).copied().collect();
    assert!(
        regressed.is_empty(),
        "scenarios in PASS failed against the fixture:\n{}",
        failures_of(outcomes, regressed.iter().copied())
    );
    let improved: Vec<&str> = actual.difference(&expected).copied().collect();
    assert!(
        improved.is_empty(),
        "scenarios in FAIL now pass against the fixture; move them to PASS (and update docs/conformance.md): {improved:?}"
    );
}

fn every_scenario_that_passes_directly_passes_through_the_direct_endpoint(
    direct: &std::collections::BTreeMap<String, Outcome>,
) {
    let out = tempfile::tempdir().expect("tempdir");

    let upstream = json!({
        "name": "conf",
        "command": fixture_bin(),
        "args": ["--name", "conf"],
    });
    let proxy = Proxy::builder(&config_with(vec![upstream])).start();
    let endpoint = format!("{}/mcp/servers/conf", proxy.base());
    let proxied = run_suite(&endpoint, out.path(), "proxied");

    let excused: BTreeSet<&str> = NOT_THROUGH_THE_PROXY
        .iter()
        .map(|(name, _)| *name)
        .collect();
    let lost: Vec<&str> = passed(direct)
        .difference(&passed(&proxied))
        .copied()
        .filter(|name| !excused.contains(name))
        .collect();
    assert!(
        lost.is_empty(),
        "scenarios that pass directly fail through {endpoint} (and are not in NOT_THROUGH_THE_PROXY):\n{}",
        failures_of(&proxied, lost.iter().copied())
    );
    // Passing is not enough: a scenario whose checks the suite skipped (say, because the
    // proxy did not declare an extension) passes with fewer successes.
    let thinner: Vec<String> = passed(direct)
        .into_iter()
        .filter(|name| !excused.contains(name))
        .filter(|name| {
            !FEWER_CHECKS_THROUGH_THE_PROXY
                .iter()
                .any(|(fewer, _)| fewer == name)
        })
        .filter_map(|name| {
            let (d, p) = (direct[name].successes, proxied[name].successes);
            (p < d).then(|| format!("{name}: {d} checks succeed directly, {p} through the proxy"))
        })
        .collect();
    assert!(
        thinner.is_empty(),
        "scenarios pass through {endpoint} with fewer successful checks:\n{}",
        thinner.join("\n")
    );

    // Calls answered with a task are judged and recorded like any call; each record is
    // completed with how its task ended once tasks/get showed the end.
    let records = task_records(&proxy);
    let ended = |tool: &str, status: &str, task_status: &str| {
        records.iter().any(|r| {
            r["tool_name"] == tool
                && r["status"] == status
                && r["details"]["task_status"] == task_status
        })
    };
    assert!(
        ended("slow_compute", "success", "completed"),
        "no completed slow_compute task record: {records:#?}"
    );
    assert!(
        ended("failing_job", "error", "completed"),
        "a task whose tool failed is an error record: {records:#?}"
    );
    assert!(
        ended("protocol_error_job", "error", "failed"),
        "a failed task is an error record: {records:#?}"
    );
    assert!(
        ended("slow_compute", "error", "cancelled"),
        "a cancelled task is an error record: {records:#?}"
    );
}

/// The activity records of calls answered with a task (they carry `details.task_id`).
fn task_records(proxy: &Proxy) -> Vec<Value> {
    let output = Command::new(env!("CARGO_BIN_EXE_mcpproxy"))
        .args([
            "activity",
            "list",
            "--output",
            "jsonl",
            "--limit",
            "1000",
            "--data-dir",
        ])
        .arg(proxy.data_dir.path())
        .env("HOME", proxy.data_dir.path())
        .output()
        .expect("run mcpproxy activity list");
    assert!(
        output.status.success(),
        "activity list failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|r| r["details"]["task_id"].is_string())
        .collect()
}
