//! Validators in other languages: the JavaScript example `plugins/examples/js-data-guard`
//! (built from source with componentize-js), the Python example
//! `plugins/examples/py-secret-guard` (componentize-py) and the C example
//! `plugins/examples/c-tool-gate` (clang with wasi-libc, wit-bindgen, wasm-tools), each
//! loaded with `--plugins` into a real `mcpproxy serve` and driven through real MCP. The C
//! example also proves the contract's versioning rule: built against the WIT of 0.1.0 (the
//! committed copy `plugins/fixtures/wit-0.1.0`) and against a grown `0.1.x` copy of `wit/`,
//! it loads and judges the same. Also instance reuse
//! (`PluginSettings::reuse_instance`), which heavy guests want, and a per-call cost
//! measurement (`measure_per_call_cost`, ignored by default).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use mcpproxy_plugin_host::{
    EngineOptions, Limits, Plugin, PluginEngine, PluginSettings, PluginSource,
};
use mcpproxy_policy::{
    AnnotationSource, Annotations, CallRequest, Decision, EffectiveAnnotations, Intent,
    OperationType, SafetyClass, Tool, Verdict,
};
use serde_json::{Value, json};

use crate::support::mcp::{
    PLUGIN_TIMEOUT_MS, Proxy, call, config_with, connect, copy_cwasm, is_error,
    shared_compile_cache, stdio_fixture, text,
};
use crate::support::{TestCommand, artifact, artifact_bytes};

/// An example plugin in another language: where it lives, what its toolchain installs,
/// and where its `build.sh` puts the component.
struct Example {
    dir: &'static str,
    /// Whether the toolchain is installed here (the build is skipped without it).
    installed: fn() -> bool,
    /// Set (as `.ci/run` does), a missing toolchain fails the test instead of skipping it;
    /// so does `CI`.
    require: &'static str,
    /// Relative to the repository root.
    out: &'static str,
    /// The sources the component is built from, relative to `dir`.
    sources: &'static [&'static str],
}

const JS: Example = Example {
    dir: "plugins/examples/js-data-guard",
    installed: || JS.dir().join("node_modules/.bin/componentize-js").exists(),
    require: "MCPPROXY_REQUIRE_JS",
    out: "target/js-example/data_guard.wasm",
    sources: &["src", "package.json", "package-lock.json", "build.sh"],
};

const PY: Example = Example {
    dir: "plugins/examples/py-secret-guard",
    installed: || PY.dir().join(".venv/bin/componentize-py").exists(),
    require: "MCPPROXY_REQUIRE_PYTHON",
    out: "target/py-example/secret_guard.wasm",
    sources: &["src", "requirements.txt", "build.sh"],
};

const C: Example = Example {
    dir: "plugins/examples/c-tool-gate",
    installed: || {
        let tools = c_tools();
        Path::new("/usr/lib/wasm32-wasi/crt1-reactor.o").exists()
            && ["clang", "wasm-ld"].iter().all(|tool| on_path(tool))
            && tools.join("bin/wit-bindgen").exists()
            && tools.join("bin/wasm-tools").exists()
    },
    require: "MCPPROXY_REQUIRE_C",
    out: "target/c-example/tool_gate.wasm",
    sources: &["src", "build.sh"],
};

/// Where the C example's build.sh keeps the tools it installs with cargo.
fn c_tools() -> PathBuf {
    if let Some(dir) = std::env::var_os("MCPPROXY_C_TOOLS") {
        return dir.into();
    }
    crate::support::target_dir().join("c-toolchain")
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

impl Example {
    fn dir(&self) -> PathBuf {
        crate::support::repo_root().join(self.dir)
    }

    /// The component, built from source when it is missing or older than its sources.
    /// `None` (the test is skipped) when the toolchain is not installed here; on CI (`CI`
    /// or the example's `require` variable set, as `.ci/run` does) the build always runs,
    /// and a failure fails the test.
    fn build(&self) -> Option<PathBuf> {
        let out = crate::support::repo_root().join(self.out);
        let required = std::env::var_os("CI").is_some() || std::env::var_os(self.require).is_some();
        if !(self.installed)() && !required {
            eprintln!(
                "SKIPPED: the toolchain of {} is not installed; run `bash {}/build.sh` to \
                 run this test",
                self.dir, self.dir
            );
            return None;
        }
        if !self.is_up_to_date(&out) {
            let status = Command::new("bash")
                .arg(self.dir().join("build.sh"))
                .arg(&out)
                .status()
                .unwrap_or_else(|e| panic!("run {}/build.sh: {e}", self.dir));
            assert!(status.success(), "{}/build.sh failed: {status}", self.dir);
        }
        assert!(out.is_file(), "{} missing after build.sh", out.display());
        Some(out)
    }

    /// Whether `out` is newer than every source it is built from.
    fn is_up_to_date(&self, out: &Path) -> bool {
        let Ok(built) = out.metadata().and_then(|m| m.modified()) else {
            return false;
        };
        self.sources
            .iter()
            .map(|s| self.dir().join(s))
            .chain([crate::support::repo_root().join("wit")])
            .all(|s| crate::support::newest_mtime(&s).is_some_and(|t| t <= built))
    }
}

fn js_component() -> Option<PathBuf> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT.get_or_init(|| JS.build()).clone()
}

fn py_component() -> Option<PathBuf> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT.get_or_init(|| PY.build()).clone()
}

fn c_component() -> Option<PathBuf> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT.get_or_init(|| C.build()).clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_javascript_validator_rejects_and_allows_through_mcp() {
    let Some(component) = js_component() else {
        return;
    };
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(&component, plugins.path().join("data_guard.wasm")).unwrap();
    let data = tempfile::tempdir().unwrap();
    let cache = data.path().join("cache/plugins");
    copy_cwasm(&shared_compile_cache(), &cache);

    // `plugins check` loads it as the proxy would (and fills the compile cache for serve).
    let check = TestCommand::new(data.path())
        .args([
            "plugins",
            "check",
            "--settings",
            r#"{"allowed_root":"/tmp"}"#,
        ])
        .args([plugins.path().join("data_guard.wasm")])
        .output();
    check.assert_code(0);
    assert!(
        check
            .stdout()
            .contains("validator plugin 'data-guard' 0.1.0")
            && check.stdout().contains("call: ok"),
        "{}",
        check.stdout()
    );
    copy_cwasm(&cache, &shared_compile_cache());

    let log = tempfile::NamedTempFile::new().unwrap();
    let mut config = config_with(vec![stdio_fixture("fx", log.path())]);
    config["plugins"] = json!({
        "limits": {"timeout_ms": PLUGIN_TIMEOUT_MS},
        "validators": ["intent-matrix", "data-guard"],
        "settings": {"data-guard": {"allowed_root": "/tmp"}},
    });
    let plugins_dir = plugins.path().to_str().unwrap();
    let proxy = Proxy::builder(&config)
        .args(&["--plugins", plugins_dir])
        .data_dir(data)
        .start();
    let client = connect(&proxy.url).await;

    // run_job is open-world (prefix-annotator: subprocess); intent-matrix allows the write,
    // data-guard refuses private data on it.
    let private = call(
        &client,
        "call_tool_write",
        json!({"name": "fx:run_job", "args": {"job": "nightly"}, "intent_data_sensitivity": "private"}),
    )
    .await
    .unwrap();
    assert!(is_error(&private), "{}", text(&private));
    assert_eq!(
        text(&private),
        "Tool 'fx:run_job' reaches outside systems (openWorldHint); private data may not be \
         sent to it. Remove the private data, or use a tool that stays inside your systems"
    );
    let internal = call(
        &client,
        "call_tool_write",
        json!({"name": "fx:run_job", "args": {"job": "nightly"}, "intent_data_sensitivity": "internal"}),
    )
    .await
    .unwrap();
    assert!(!is_error(&internal), "{}", text(&internal));
    assert_eq!(text(&internal), "ran nightly");

    // Paths outside allowed_root are refused, including a climb out with `..`.
    for path in ["/etc/passwd", "/tmp/../etc/passwd"] {
        let outside = call(
            &client,
            "call_tool_read",
            json!({"name": "fx:echo", "args": {"text": "hi", "path": path}}),
        )
        .await
        .unwrap();
        assert_eq!(
            text(&outside),
            format!(
                "Argument 'path' of tool 'fx:echo' names '{path}', outside the allowed root \
                 /tmp; use an absolute path under /tmp"
            )
        );
    }
    let inside = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args": {"text": "hi", "path": "/tmp/notes.txt"}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&inside), "{}", text(&inside));
    assert_eq!(text(&inside), "hi");

    let called: Vec<Value> = crate::support::mcp::call_log_lines(log.path())
        .into_iter()
        .map(|l| l["tool"].clone())
        .collect();
    assert_eq!(called, [json!("run_job"), json!("echo")]);
    client.cancel().await.unwrap();
}

/// The Python example through real MCP: secrets in arguments are refused, clean calls pass,
/// and a validator that raises (a bad pattern in its settings for one tool) rejects that
/// call, failing closed, while the next call works.
#[tokio::test(flavor = "multi_thread")]
async fn a_python_validator_rejects_secrets_and_fails_closed_when_it_raises() {
    let Some(component) = py_component() else {
        return;
    };
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(&component, plugins.path().join("secret_guard.wasm")).unwrap();
    let data = tempfile::tempdir().unwrap();
    let cache = data.path().join("cache/plugins");
    copy_cwasm(&shared_compile_cache(), &cache);

    let check = TestCommand::new(data.path())
        .args(["plugins", "check", "--timeout-ms", "10000"])
        .args([plugins.path().join("secret_guard.wasm")])
        .output();
    check.assert_code(0);
    assert!(
        check
            .stdout()
            .contains("validator plugin 'secret-guard' 0.1.0")
            && check
                .stdout()
                .contains("call: ok (call_tool_read of example:list_items: allow)"),
        "{}",
        check.stdout()
    );
    copy_cwasm(&cache, &shared_compile_cache());

    let log = tempfile::NamedTempFile::new().unwrap();
    let mut config = config_with(vec![stdio_fixture("fx", log.path())]);
    config["plugins"] = json!({
        "limits": {"timeout_ms": PLUGIN_TIMEOUT_MS},
        "validators": ["intent-matrix", "secret-guard"],
        "settings": {"secret-guard": {
            "extra_patterns": {"an internal ticket token": "TKT-[0-9]{6}"},
            // Not a regular expression: re.compile raises on calls of run_job only.
            "tool_patterns": {"fx:run_job": {"broken": "("}},
        }},
        // Room for a debug build of the proxy on a loaded machine (release: ~1.4 ms a call).
        "plugin_limits": {"secret-guard": {"timeout_ms": 10_000}},
    });
    let plugins_dir = plugins.path().to_str().unwrap();
    let proxy = Proxy::builder(&config)
        .args(&["--plugins", plugins_dir])
        .data_dir(data)
        .start();
    let client = connect(&proxy.url).await;
    let echo = |text: &str| json!({"name": "fx:echo", "args": {"text": text}});

    for (input, what) in [
        (
            "deploy with AKIAIOSFODNN7EXAMPLE please",
            "an AWS access key ID",
        ),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n",
            "a private key",
        ),
        (
            "token 9fQ2xLr7Vb3KpZ8mWc1TyH6sJd4NaE0uGq5R",
            "a high-entropy token",
        ),
        ("see TKT-123456", "an internal ticket token"),
    ] {
        let result = call(&client, "call_tool_read", echo(input)).await.unwrap();
        assert!(is_error(&result), "{input}: {}", text(&result));
        assert_eq!(
            text(&result),
            format!(
                "Argument 'text' of tool 'fx:echo' looks like it holds {what}; secrets may \
                 not be sent to tools. Remove it, or refer to the secret by name and let the \
                 tool read it from its own configuration"
            )
        );
    }
    // A git commit hash and a long path are not secrets.
    let clean = "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904 in /home/user/projects/mcpproxy";
    let result = call(&client, "call_tool_read", echo(clean)).await.unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(text(&result), clean);

    // The plugin raises on run_job: the call is rejected, naming the plugin.
    let raised = call(
        &client,
        "call_tool_write",
        json!({"name": "fx:run_job", "args": {"job": "nightly"}}),
    )
    .await
    .unwrap();
    assert!(is_error(&raised), "{}", text(&raised));
    assert!(
        text(&raised)
            .starts_with("Call blocked because the validator plugin 'secret-guard' trapped"),
        "{}",
        text(&raised)
    );
    // ... and the next call gets a fresh instance that works.
    let result = call(&client, "call_tool_read", echo("hello again"))
        .await
        .unwrap();
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(text(&result), "hello again");

    let called: Vec<Value> = crate::support::mcp::call_log_lines(log.path())
        .into_iter()
        .map(|l| l["arguments"]["text"].clone())
        .collect();
    assert_eq!(called, [json!(clean), json!("hello again")]);
    client.cancel().await.unwrap();
}

/// The C example through real MCP, with its settings from the config: a denied tool, a tool
/// that needs a reason (refused without one, allowed with one) and arguments over the size
/// cap are refused with messages naming the rule; everything else passes. `plugins check`
/// runs the example's own cases first (every rule, `warn_only`, and bad settings failing
/// closed).
#[tokio::test(flavor = "multi_thread")]
async fn a_c_validator_gates_tools_by_its_settings_through_mcp() {
    let Some(component) = c_component() else {
        return;
    };
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(&component, plugins.path().join("tool_gate.wasm")).unwrap();
    let data = tempfile::tempdir().unwrap();

    let check = TestCommand::new(data.path())
        .args(["plugins", "check"])
        .args([plugins.path().join("tool_gate.wasm")])
        .args(["--cases".as_ref(), C.dir().join("cases.json").as_os_str()])
        .output();
    check.assert_code(0);
    let stdout = check.stdout();
    assert!(
        stdout.contains("validator plugin 'tool-gate' 0.1.0")
            && stdout.contains("PASS  settings of the wrong shape fail closed, naming the key")
            && stdout.lines().any(|l| l == "10 passed, 0 failed"),
        "{stdout}"
    );

    let log = tempfile::NamedTempFile::new().unwrap();
    let mut config = config_with(vec![stdio_fixture("fx", log.path())]);
    config["plugins"] = json!({
        "limits": {"timeout_ms": PLUGIN_TIMEOUT_MS},
        "validators": ["intent-matrix", "tool-gate"],
        "settings": {"tool-gate": {
            "deny": ["fx:delete_*", "*:wipe_*"],
            "require_reason": ["fx:update_?ote"],
            "max_args_bytes": 64,
        }},
    });
    let plugins_dir = plugins.path().to_str().unwrap();
    let proxy = Proxy::builder(&config)
        .args(&["--plugins", plugins_dir])
        .data_dir(data)
        .start();
    let client = connect(&proxy.url).await;

    // intent-matrix allows a destructive call of a destructive tool; tool-gate denies it.
    let denied = call(
        &client,
        "call_tool_destructive",
        json!({"name": "fx:delete_note", "args": {"id": "n1"}}),
    )
    .await
    .unwrap();
    assert!(is_error(&denied), "{}", text(&denied));
    assert_eq!(
        text(&denied),
        "Tool 'fx:delete_note' is denied by tool-gate's rule 'fx:delete_*'; use another tool, \
         or ask the operator to change plugins.settings.tool-gate.deny"
    );

    let update = |reason: Option<&str>| {
        let mut args = json!({"name": "fx:update_note", "args": {"id": "n1", "text": "hello"}});
        if let Some(reason) = reason {
            args["intent_reason"] = json!(reason);
        }
        args
    };
    let unexplained = call(&client, "call_tool_write", update(None))
        .await
        .unwrap();
    assert!(is_error(&unexplained), "{}", text(&unexplained));
    assert_eq!(
        text(&unexplained),
        "Tool 'fx:update_note' needs a reason (tool-gate's rule 'fx:update_?ote'): call it \
         again with intent_reason saying why"
    );
    let explained = call(&client, "call_tool_write", update(Some("fix the greeting")))
        .await
        .unwrap();
    assert!(!is_error(&explained), "{}", text(&explained));
    assert_eq!(text(&explained), "updated n1");

    // {"text":"..."} with 80 characters of text is 91 bytes, over the cap of 64.
    let long = "x".repeat(80);
    let too_big = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args": {"text": long}}),
    )
    .await
    .unwrap();
    assert!(is_error(&too_big), "{}", text(&too_big));
    assert_eq!(
        text(&too_big),
        "The arguments of tool 'fx:echo' are 91 bytes, over tool-gate's limit of 64; send \
         less, e.g. a reference to the data instead of the data"
    );
    let small = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:echo", "args": {"text": "hi"}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&small), "{}", text(&small));
    assert_eq!(text(&small), "hi");

    let called: Vec<Value> = crate::support::mcp::call_log_lines(log.path())
        .into_iter()
        .map(|l| l["tool"].clone())
        .collect();
    assert_eq!(called, [json!("update_note"), json!("echo")]);
    client.cancel().await.unwrap();
}

/// The contract's versioning rule (docs/plugins.md, "Versioning of the contract"): within
/// `0.1.x` the contract only grows, and the host matches interfaces by name and `0.1`
/// line, so a plugin whose names carry another `0.1.x` than the host's loads and works. The
/// C example is built from source against a grown copy of `wit/`: package `0.1.9`, a new
/// host function it does not call and a new world, each `@since(version = 0.1.9)`. The
/// component really names `@0.1.9` (read back with wasm-tools), and the `0.1.1` host loads
/// it as a validator, links its `host@0.1.9` import, and it passes every one of its cases.
/// A plugin that calls the new function is refused when it loads, naming what the host
/// lacks.
#[test]
fn a_validator_built_against_a_grown_0_1_contract_loads_and_judges_the_same() {
    if c_component().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let wit = dir.path().join("wit");
    copy_dir(&crate::support::repo_root().join("wit"), &wit);
    let grow = |file: &str, from: &str, to: &str| {
        let path = wit.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file} no longer holds {from:?}");
        std::fs::write(&path, text.replace(from, to)).unwrap();
    };
    grow(
        "worlds.wit",
        "package mcpproxy:plugin@0.1.1;",
        "package mcpproxy:plugin@0.1.9;\n\n\
         /// A kind of plugin 0.1.1 does not know.\n\
         @since(version = 0.1.9)\n\
         world auditor-plugin {\n  import host;\n  export metadata;\n  export auditor;\n}",
    );
    grow(
        "host.wit",
        "  config: func() -> string;\n",
        "  config: func() -> string;\n\n  @since(version = 0.1.9)\n  now-ms: func() -> u64;\n",
    );
    std::fs::write(
        wit.join("auditor.wit"),
        "@since(version = 0.1.9)\ninterface auditor {\n  note: func(line: string);\n}\n",
    )
    .unwrap();

    let out = dir.path().join("tool_gate_0_1_9.wasm");
    let names = build_example_against(&wit, &out);
    for name in [
        "export mcpproxy:plugin/validator@0.1.9;",
        "export mcpproxy:plugin/metadata@0.1.9;",
        "import mcpproxy:plugin/host@0.1.9;",
    ] {
        assert!(names.contains(name), "{name} missing from:\n{names}");
    }
    assert!(
        !names.contains("@0.1.0") && !names.contains("@0.1.1"),
        "{names}"
    );

    let data = passes_its_cases(&out);

    // A plugin that calls the addition needs a host that has it: this one refuses it when
    // it loads, naming the function it lacks.
    let uses_addition = build_c_validator(
        &wit,
        dir.path(),
        r#"#include "validator_plugin.h"
void exports_mcpproxy_plugin_metadata_info(exports_mcpproxy_plugin_metadata_plugin_info_t *ret) {
    validator_plugin_string_dup(&ret->name, "uses-now");
    validator_plugin_string_dup(&ret->version, "0.1.0");
    validator_plugin_string_dup(&ret->description, "Calls host.now-ms, added in 0.1.9");
}
void exports_mcpproxy_plugin_validator_validate(
    exports_mcpproxy_plugin_validator_call_request_t *request,
    exports_mcpproxy_plugin_validator_verdict_t *ret) {
    ret->tag = mcpproxy_plugin_host_now_ms() % 2 == 0 ? MCPPROXY_PLUGIN_TYPES_VERDICT_ALLOW
                                                      : MCPPROXY_PLUGIN_TYPES_VERDICT_ALLOW;
    exports_mcpproxy_plugin_validator_call_request_free(request);
}
"#,
    );
    let check = TestCommand::new(data.path())
        .args(["plugins", "check"])
        .args([&uses_addition])
        .output();
    check.assert_code(2);
    let stderr = check.stderr();
    assert!(
        stderr.contains(&uses_addition.display().to_string()) && stderr.contains("now-ms"),
        "{stderr}"
    );
}

/// The versioning rule from the other side: the C example built from source against the
/// WIT mcpproxy 0.1.0 shipped (the committed copy `plugins/fixtures/wit-0.1.0`, before
/// `host.caller`, the result guards, the scanner and the JSON-lines sinks) names `@0.1.0` in
/// every import and export, and this `0.1.1` host loads it as a validator, links its
/// `host@0.1.0` import, and it passes every one of its cases.
#[test]
fn a_validator_built_against_the_0_1_0_contract_loads_and_judges_the_same() {
    if c_component().is_none() {
        return;
    }
    let wit = crate::support::repo_root().join("plugins/fixtures/wit-0.1.0");
    let worlds = std::fs::read_to_string(wit.join("worlds.wit")).unwrap();
    assert!(
        worlds.starts_with("package mcpproxy:plugin@0.1.0;"),
        "{worlds}"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tool_gate_0_1_0.wasm");
    let names = build_example_against(&wit, &out);
    for name in [
        "export mcpproxy:plugin/validator@0.1.0;",
        "export mcpproxy:plugin/metadata@0.1.0;",
        "import mcpproxy:plugin/host@0.1.0;",
    ] {
        assert!(names.contains(name), "{name} missing from:\n{names}");
    }
    assert!(!names.contains("@0.1.1"), "{names}");

    passes_its_cases(&out);
}

/// Builds the C example into `out` against the contract in `wit` (its build.sh with
/// `MCPPROXY_WIT`) and returns the component's imports and exports as wasm-tools prints them.
fn build_example_against(wit: &Path, out: &Path) -> String {
    let status = Command::new("bash")
        .arg(C.dir().join("build.sh"))
        .arg(out)
        .env("MCPPROXY_WIT", wit)
        .status()
        .expect("run build.sh");
    assert!(
        status.success(),
        "build.sh against {} failed: {status}",
        wit.display()
    );
    let names = Command::new(c_tools().join("bin/wasm-tools"))
        .args(["component", "wit"])
        .arg(out)
        .output()
        .expect("run wasm-tools component wit");
    assert!(names.status.success(), "{names:?}");
    String::from_utf8_lossy(&names.stdout).into_owned()
}

/// `plugins check` loads the C example built into `out` as a validator, and it passes all
/// ten of its cases; returns the data dir the check used.
fn passes_its_cases(out: &Path) -> tempfile::TempDir {
    let data = tempfile::tempdir().unwrap();
    let check = TestCommand::new(data.path())
        .args(["plugins", "check"])
        .args([out])
        .args(["--cases".as_ref(), C.dir().join("cases.json").as_os_str()])
        .output();
    check.assert_code(0);
    let stdout = check.stdout();
    assert!(
        stdout.contains("validator plugin 'tool-gate' 0.1.0")
            && stdout.lines().any(|l| l == "10 passed, 0 failed"),
        "{stdout}"
    );
    data
}

/// Builds `source` (C) into a validator component against `wit`, as the C example's
/// build.sh does, with the tools it installed: wit-bindgen, clang, wasm-tools and the
/// WASI preview1 reactor adapter.
fn build_c_validator(wit: &Path, dir: &Path, source: &str) -> PathBuf {
    let run = |cmd: &mut Command| {
        let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
        assert!(out.status.success(), "{cmd:?}: {out:?}");
    };
    let tools = c_tools();
    let bindings = dir.join("bindings");
    run(Command::new(tools.join("bin/wit-bindgen"))
        .arg("c")
        .arg(wit)
        .args(["--world", "validator-plugin", "--out-dir"])
        .arg(&bindings));
    std::fs::write(dir.join("plugin.c"), source).unwrap();
    let core = dir.join("core.wasm");
    run(Command::new("clang")
        .args(["--target=wasm32-wasi", "-mexec-model=reactor", "-O2", "-I"])
        .arg(&bindings)
        .arg(dir.join("plugin.c"))
        .arg(bindings.join("validator_plugin.c"))
        .arg(bindings.join("validator_plugin_component_type.o"))
        .arg("-o")
        .arg(&core));
    let adapter = std::fs::read_dir(&tools)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("wasi_snapshot_preview1.reactor-") && n.ends_with(".wasm")
            })
        })
        .expect("the adapter build.sh wrote");
    let out = dir.join("plugin.wasm");
    run(Command::new(tools.join("bin/wasm-tools"))
        .args(["component", "new"])
        .arg(&core)
        .arg("--adapt")
        .arg(format!("wasi_snapshot_preview1={}", adapter.display()))
        .arg("-o")
        .arg(&out));
    out
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn engine() -> PluginEngine {
    PluginEngine::new(EngineOptions::default()).expect("engine")
}

fn load_bytes(
    engine: &PluginEngine,
    bytes: &[u8],
    path: PathBuf,
    settings: PluginSettings,
) -> Plugin {
    let mut plugin = Plugin::load(engine, bytes, PluginSource::File(path), settings.limits)
        .expect("load plugin");
    plugin.configure(&settings);
    plugin
}

fn load(engine: &PluginEngine, crate_name: &str, settings: PluginSettings) -> Plugin {
    load_bytes(
        engine,
        &artifact_bytes(crate_name),
        artifact(crate_name),
        settings,
    )
}

fn reuse(limits: Limits) -> PluginSettings {
    PluginSettings {
        limits: Limits {
            reuse_instance: true,
            ..limits
        },
        ..Default::default()
    }
}

/// A write of an open-world tool with a path under /tmp: the JS example rejects it when the
/// intent says `private` data and allows it otherwise; both Rust validators allow it.
fn request(private: bool) -> CallRequest {
    CallRequest {
        variant: OperationType::Write,
        tool: Tool {
            server: "fx".into(),
            name: "run_job".into(),
            description: "Run a named job".into(),
            input_schema: json!({"type": "object"}).into(),
            annotations: None,
            meta: None,
            ..Default::default()
        },
        intent: Some(Intent {
            operation_type: None,
            data_sensitivity: Some(if private { "private" } else { "internal" }.into()),
            reason: Some("nightly run".into()),
        }),
        effective: EffectiveAnnotations {
            annotations: Some(Annotations {
                read_only_hint: Some(false),
                open_world_hint: Some(true),
                ..Default::default()
            }),
            source: AnnotationSource::Plugin("prefix-annotator".into()),
            reason: Some("name prefix 'run_'".into()),
            safety_class: SafetyClass::Subprocess,
        },
        args: json!({"job": "nightly", "path": "/tmp/jobs/nightly.toml"}),
    }
}

#[test]
fn a_reused_instance_is_dropped_after_a_fault_and_its_deadline_is_rearmed() {
    let engine = engine();
    let limits = Limits {
        timeout: Duration::from_millis(30),
        memory_bytes: 8 << 20,
        ..Limits::default()
    };
    // Faults other than the deadline get a deadline a loaded test machine cannot hit first.
    let roomy = Limits {
        timeout: Duration::from_secs(10),
        ..limits
    };
    for (crate_name, what, limits) in [
        ("spin_loop", "ran past its deadline of 30 ms", limits),
        (
            "trap",
            "trapped: wasm `unreachable` instruction executed",
            roomy,
        ),
        ("memory_hog", "over its cap of 8 MiB", roomy),
    ] {
        let bad = load(&engine, crate_name, reuse(limits));
        assert!(bad.reuses_instances());
        // The faulted instance is thrown away: the next call faults the same way, in a new
        // instance, rather than "cannot enter component instance".
        for _ in 0..3 {
            let fault = bad.validate(&request(false)).unwrap_err();
            assert!(fault.to_string().contains(what), "{crate_name}: {fault}");
        }
    }

    // The deadline counts from each call, not from the instance's birth: a warm instance
    // idle for longer than its deadline still answers.
    let good = load(&engine, "safety_routing", reuse(limits));
    for _ in 0..3 {
        assert_eq!(good.validate(&request(false)).unwrap(), Verdict::Allow);
        std::thread::sleep(Duration::from_millis(80));
    }
}

#[test]
fn reused_instances_answer_concurrent_calls_correctly() {
    let engine = engine();
    // What is tested is reuse under concurrency, not the deadline: give the calls one a
    // loaded two-core runner cannot hit (8 threads on 2 cores wait their turn).
    let roomy = Limits {
        timeout: Duration::from_secs(10),
        ..Limits::default()
    };
    let plugin = Arc::new(load(&engine, "intent_matrix", reuse(roomy)));
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let plugin = plugin.clone();
            std::thread::spawn(move || {
                for j in 0..50 {
                    let mut req = request(false);
                    let expect = if (i + j) % 2 == 0 {
                        Decision::Allow
                    } else {
                        // A read of a tool the server marks destructive.
                        req.variant = OperationType::Read;
                        req.effective.annotations = Some(Annotations {
                            destructive_hint: Some(true),
                            ..Default::default()
                        });
                        req.effective.source = AnnotationSource::Server;
                        Decision::Reject
                    };
                    let verdict = plugin.validate(&req).expect("no fault");
                    assert_eq!(verdict.decision(), expect, "{i}/{j}: {verdict:?}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// Mean and median cost of one `validate` call, after a warm-up.
fn per_call(plugin: &Plugin, req: &CallRequest, calls: usize) -> (f64, f64) {
    for _ in 0..calls.min(50) {
        let _ = plugin.validate(req);
    }
    let mut samples: Vec<f64> = (0..calls)
        .map(|_| {
            let start = Instant::now();
            let verdict = plugin.validate(req);
            let elapsed = start.elapsed().as_secs_f64() * 1e6;
            std::hint::black_box(verdict).expect("no fault");
            elapsed
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    (mean, samples[samples.len() / 2])
}

/// Per-call cost of the Rust validators and the JavaScript, Python and C ones, fresh
/// instance and reused. The C example runs twice: with settings that allow the request and
/// with settings that deny it.
/// Run it optimised: `cargo test --release -p mcpproxy --test integration
/// plugin_languages::measure_per_call_cost -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check: run with --ignored --nocapture (in --release)"]
fn measure_per_call_cost() {
    let engine = engine();
    let data_guard = json!({"allowed_root": "/tmp"});
    let mut plugins = vec![
        (
            "rust safety-routing",
            artifact_bytes("safety_routing"),
            artifact("safety_routing"),
            data_guard.clone(),
        ),
        (
            "rust intent-matrix",
            artifact_bytes("intent_matrix"),
            artifact("intent_matrix"),
            data_guard.clone(),
        ),
    ];
    if let Some(js) = js_component() {
        plugins.push((
            "js data-guard",
            std::fs::read(&js).unwrap(),
            js,
            data_guard.clone(),
        ));
    }
    if let Some(py) = py_component() {
        plugins.push((
            "python secret-guard",
            std::fs::read(&py).unwrap(),
            py,
            data_guard,
        ));
    }
    if let Some(c) = c_component() {
        let bytes = std::fs::read(&c).unwrap();
        plugins.push((
            "c tool-gate (allow)",
            bytes.clone(),
            c.clone(),
            json!({"deny": ["*:delete_*", "*:wipe_*"], "require_reason": ["fx:run_*"],
                   "max_args_bytes": 4096}),
        ));
        plugins.push((
            "c tool-gate (deny)",
            bytes,
            c,
            json!({"deny": ["fx:run_*"]}),
        ));
    }
    for (label, bytes, path, settings) in plugins {
        for reuse_instance in [false, true] {
            let plugin = load_bytes(
                &engine,
                &bytes,
                path.clone(),
                PluginSettings {
                    settings: settings.clone(),
                    // A deadline a descheduled call on a loaded machine cannot hit: the
                    // measurement is of the cost, not of the limit.
                    limits: Limits {
                        reuse_instance,
                        timeout: Duration::from_secs(10),
                        ..Limits::default()
                    },
                    reuse_chosen: true,
                },
            );
            for private in [false, true] {
                let calls = if reuse_instance { 20_000 } else { 2_000 };
                let (mean, p50) = per_call(&plugin, &request(private), calls);
                println!(
                    "{label:<22} {:<6} {:<6} mean {mean:>8.1} µs  p50 {p50:>8.1} µs  ({calls} calls)",
                    if reuse_instance { "reused" } else { "fresh" },
                    if private { "private" } else { "internal" },
                );
            }
        }
    }
}
