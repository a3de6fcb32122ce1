//! Waits in which time itself is what a test needs: an interval that must elapse (a flush,
//! a rate-limit window, an idle period), not a condition another process brings about. A
//! condition is waited for with [`crate::support::poll::until`]; this module is the only
//! other place a test sleeps, and each wait names its reason. A test that checks the rule
//! keeps `sleep(` out of `tests/*.rs`.

use std::path::Path;
use std::time::Duration;

/// Lets `duration` pass, because `why` (said at the call, so every such wait explains itself):
/// the behaviour under test depends on time having elapsed, and there is nothing to poll.
pub(crate) async fn let_pass(duration: Duration, why: &str) {
    debug_assert!(!why.is_empty(), "say why time must pass");
    tokio::time::sleep(duration).await;
}

/// [`let_pass`] for a test or a thread without a runtime.
pub(crate) fn let_pass_blocking(duration: Duration, why: &str) {
    debug_assert!(!why.is_empty(), "say why time must pass");
    std::thread::sleep(duration);
}

/// Test modules that still sleep, each with why it is not fixed here.
const EXEMPT: &[(&str, &str)] = &[(
    "plugin_languages.rs",
    "edited by another change at the same time; its sleep moves there",
)];

#[test]
fn no_test_module_sleeps() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&tests).expect("read tests/") {
        let path = entry.expect("an entry of tests/").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.extension().is_none_or(|e| e != "rs") || EXEMPT.iter().any(|(e, _)| *e == name) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read a test module");
        for (n, line) in text.lines().enumerate() {
            // A method `.sleep(` is not Rust's (a Python script's `time.sleep`, say).
            let comment = line.trim_start().starts_with("//");
            let sleeps = line
                .match_indices("sleep(")
                .any(|(i, _)| !line[..i].ends_with('.'));
            if !comment && sleeps {
                found.push(format!("tests/{name}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "tests sleep outside tests/support: wait for the condition with \
         support::poll::until, or, where time itself must pass, call \
         support::time::let_pass(duration, \"why\"):\n{}",
        found.join("\n")
    );
}
