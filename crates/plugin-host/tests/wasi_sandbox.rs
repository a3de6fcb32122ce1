//! The deny-all WASI that validators, annotators and scanners get, proved from inside a
//! guest: the fixture `wasi-probe` (plugins/fixtures/wasi-probe) tries to read a file, list
//! a directory, read the environment, open TCP and UDP sockets and resolve a name, and
//! reports each outcome in its verdict; clocks, randomness and stdio must work, and what
//! the guest prints reaches the log only up to the per-call budget.

use std::collections::HashMap;
use std::net::TcpListener;

use mcpproxy_plugin_host::{
    EngineOptions, Limits, Plugin, PluginEngine, PluginSettings, PluginSource,
};
use mcpproxy_policy::{CallRequest, EffectiveAnnotations, OperationType, Tool, Verdict};
use serde_json::{Value, json};

// The compiled test plugins, built from source by the `plugin-artifacts` crate.
use plugin_artifacts::{artifact, artifact_bytes};

#[path = "support/logged.rs"]
mod logged;

fn probe(reuse_instance: bool) -> Plugin {
    let engine = PluginEngine::new(EngineOptions::default()).expect("engine");
    // A deadline a loaded test machine cannot hit: the flood of output takes a while.
    let limits = Limits {
        reuse_instance,
        timeout: std::time::Duration::from_secs(30),
        ..Limits::default()
    };
    let mut plugin = Plugin::load(
        &engine,
        &artifact_bytes("wasi_probe"),
        PluginSource::File(artifact("wasi_probe")),
        limits,
    )
    .expect("the probe loads: every WASI import it names is linked");
    plugin.configure(&PluginSettings {
        limits,
        ..Default::default()
    });
    plugin
}

fn request(args: Value) -> CallRequest {
    CallRequest {
        variant: OperationType::Read,
        tool: Tool {
            server: "fx".into(),
            name: "probe".into(),
            description: "probe the sandbox".into(),
            input_schema: json!({"type": "object"}).into(),
            annotations: None,
            meta: None,
            ..Default::default()
        },
        intent: None,
        effective: EffectiveAnnotations::unknown(),
        args,
    }
}

/// The probe's report, `key=value` pairs (values may contain spaces inside parentheses).
fn report(plugin: &Plugin, args: Value) -> HashMap<String, String> {
    let verdict = plugin
        .validate(&request(args))
        .expect("the probe does not fault");
    let Verdict::Warn(text) = verdict else {
        panic!("the probe answers warn with its report, got {verdict:?}");
    };
    let mut out = HashMap::new();
    let mut depth = 0i32;
    let mut current = String::new();
    for ch in text.chars().chain(std::iter::once(' ')) {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        if ch == ' ' && depth == 0 {
            if let Some((k, v)) = current.split_once('=') {
                out.insert(k.to_owned(), v.to_owned());
            }
            current.clear();
        } else {
            current.push(ch);
        }
    }
    out
}

#[track_caller]
fn assert_denied(report: &HashMap<String, String>, key: &str) {
    let value = report
        .get(key)
        .unwrap_or_else(|| panic!("no {key} in {report:?}"));
    assert!(value.starts_with("denied("), "{key}: {value}");
}

#[test]
fn a_plugin_cannot_reach_files_environment_or_network() {
    // A real listener on loopback: the probe's connection must not reach it.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    // The host has what the guest must not see.
    assert!(std::path::Path::new("/etc/passwd").exists());

    for reuse in [false, true] {
        let plugin = probe(reuse);
        let report = report(&plugin, json!({"port": port}));
        for key in ["passwd", "root", "home", "tcp", "udp", "lookup"] {
            assert_denied(&report, key);
        }
        assert_eq!(report["env"], "0", "no environment variables: {report:?}");
        assert_eq!(report["args"], "0", "no arguments: {report:?}");
        assert_eq!(report["stdin"], "0", "stdin is empty: {report:?}");
    }
    assert_eq!(
        listener.accept().map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "no connection reached the listener"
    );
}

#[test]
fn a_plugin_has_clocks_randomness_and_bounded_stdio() {
    let plugin = probe(false);
    let first = report(&plugin, json!({"port": 9}));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let guest_now: u64 = first["clock"].parse().unwrap();
    // The guest's wall clock is the host's (within a day, to stay clear of any timing).
    assert!(guest_now.abs_diff(now) < 86_400, "{guest_now} vs {now}");
    // The monotonic clock advances (the probe reads it until it has moved by 1 ms, giving
    // up after 2 s of wall-clock time) and never steps back.
    let advanced: u64 = first["monotonic"].parse().unwrap();
    assert!(
        advanced >= 1_000_000,
        "the guest's monotonic clock advanced by {advanced} ns while it waited for 1 ms: {first:?}"
    );
    assert_eq!(
        first["monotonic_backwards"], "0",
        "the guest's monotonic clock stepped back: {first:?}"
    );
    // Each fresh instance seeds its hash keys from WASI randomness: two calls differ.
    let second = report(&plugin, json!({"port": 9}));
    assert_ne!(first["random"], second["random"], "random bytes repeat");

    // Far more output than the log keeps: dropped past the cap, the call still answers,
    // and so does the next one.
    let (flood, logged) =
        logged::capture(|| report(&plugin, json!({"port": 9, "print_lines": 5_000})));
    assert_eq!(flood["env"], "0");
    // What reached the log: the first lines, up to the budget.
    let printed: Vec<String> = logged
        .into_iter()
        .filter(|l| l.starts_with("probe "))
        .collect();
    let expected: Vec<String> = (0..LOG_LINES_PER_CALL)
        .map(|i| format!("probe stdout line {i}"))
        .collect();
    assert_eq!(
        printed.len(),
        LOG_LINES_PER_CALL,
        "lines that reached the log of the 5,001 the guest printed"
    );
    assert_eq!(printed, expected, "the first lines are the ones kept");
    // The next call has a budget of its own.
    let (after, logged) = logged::capture(|| report(&plugin, json!({"port": 9})));
    assert_eq!(after["stdin"], "0");
    assert_eq!(
        logged
            .iter()
            .filter(|l| l.starts_with("probe "))
            .collect::<Vec<_>>(),
        ["probe stdout line 0", "probe stderr line"]
    );
}

/// Log lines a plugin's call may write, stdout and stderr included (docs/plugins.md: at
/// most 32 lines per call).
const LOG_LINES_PER_CALL: usize = 32;
