//! `mcpproxy plugins list` / `plugins check` / `plugins wit` / `plugins new` as a plugin
//! author uses them, including the projects `plugins new` writes (Rust, Python, JavaScript)
//! built with their own build.sh and checked against their own cases.

use crate::support::{TestCommand, artifact};

#[test]
fn list_shows_the_embedded_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let out = TestCommand::new(dir.path())
        .args(["plugins", "list"])
        .output();
    out.assert_code(0);
    let stdout = out.stdout();
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{stdout}");
    assert!(
        lines.iter().any(|l| l.starts_with("intent-matrix")
            && l.contains("validator")
            && l.contains("embedded")),
        "{stdout}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("prefix-annotator")
            && l.contains("annotator")
            && l.contains("embedded")),
        "{stdout}"
    );
    // Which of them judge calls: as `serve` would pick them (no mcpproxy runs here).
    let active = |name: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().last())
            .unwrap_or_default()
            .to_owned()
    };
    assert!(lines[0].ends_with("ACTIVE"), "{stdout}");
    assert_eq!(active("intent-matrix"), "yes", "{stdout}");
    assert_eq!(active("safety-routing"), "opt-in", "{stdout}");
    assert_eq!(active("http-sink"), "opt-in", "{stdout}");
    assert!(
        out.stderr().contains("as `mcpproxy serve` would pick them"),
        "{}",
        out.stderr()
    );
}

#[test]
fn list_as_json_and_a_plugins_dir_that_replaces_an_embedded_plugin() {
    let data = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    // A file named differently but declaring the name intent-matrix replaces the embedded one.
    std::fs::copy(
        artifact("intent_matrix"),
        plugins.path().join("custom-matrix.wasm"),
    )
    .unwrap();
    std::fs::copy(artifact("allow_all"), plugins.path().join("allow_all.wasm")).unwrap();
    std::fs::write(
        plugins.path().join("README.txt"),
        "not a plugin, and not *.wasm",
    )
    .unwrap();

    let out = TestCommand::new(data.path())
        .args(["plugins", "list", "-o", "json", "--plugins"])
        .args([plugins.path()])
        .output();
    out.assert_code(0);
    let list: serde_json::Value = serde_json::from_str(&out.stdout()).unwrap();
    let list = list.as_array().unwrap();
    let names: Vec<&str> = list.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "prefix-annotator",
            "intent-matrix",
            "clickhouse-sink",
            "http-sink",
            "safety-routing",
            "tool-scanner",
            "secret-redactor",
            "injection-marker",
            "test-allow-all"
        ]
    );
    assert_eq!(list[6]["kind"], "result-guard");
    assert_eq!(
        list[7]["opt_in"], true,
        "injection-marker is embedded but opt-in"
    );
    assert_eq!(
        list[4]["opt_in"], true,
        "safety-routing is embedded but opt-in"
    );
    assert_eq!(list[5]["kind"], "scanner");
    assert_eq!(list[2]["kind"], "sink");
    let matrix = &list[1];
    assert_eq!(matrix["kind"], "validator");
    assert!(
        matrix["source"]
            .as_str()
            .unwrap()
            .ends_with("custom-matrix.wasm"),
        "{matrix}"
    );
    assert!(matrix["size_bytes"].as_u64().unwrap() > 1000);
    assert!(!matrix["version"].as_str().unwrap().is_empty());
}

#[test]
fn a_file_that_is_no_plugin_is_refused_with_its_name_and_the_reason() {
    let data = tempfile::tempdir().unwrap();
    let cases: [(&str, Vec<u8>, &str); 3] = [
        (
            "garbage.wasm",
            b"hello, I am text".to_vec(),
            "is not a WebAssembly file",
        ),
        (
            "core.wasm",
            b"\0asm\x01\0\0\0".to_vec(),
            "is a core WebAssembly module, not a component",
        ),
        (
            "other.wasm",
            std::fs::read(artifact("not_a_plugin")).unwrap(),
            "implements none of the mcpproxy plugin worlds: it exports run",
        ),
    ];
    for (file, bytes, reason) in cases {
        let plugins = tempfile::tempdir().unwrap();
        let path = plugins.path().join(file);
        std::fs::write(&path, bytes).unwrap();
        let out = TestCommand::new(data.path())
            .args(["plugins", "list", "--plugins"])
            .args([plugins.path()])
            .output();
        out.assert_code(2);
        let stderr = out.stderr();
        assert!(stderr.contains(&path.display().to_string()), "{stderr}");
        assert!(stderr.contains(reason), "{stderr}");
    }
}

#[test]
fn two_plugins_with_one_name_in_the_dir_are_refused() {
    let data = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(artifact("allow_all"), plugins.path().join("a.wasm")).unwrap();
    std::fs::copy(artifact("allow_all"), plugins.path().join("b.wasm")).unwrap();
    let out = TestCommand::new(data.path())
        .args(["plugins", "list", "--plugins"])
        .args([plugins.path()])
        .output();
    out.assert_code(2);
    let stderr = out.stderr();
    assert!(
        stderr.contains("two plugins are named 'test-allow-all'"),
        "{stderr}"
    );
    assert!(
        stderr.contains("a.wasm") && stderr.contains("b.wasm"),
        "{stderr}"
    );
}

#[test]
fn check_passes_the_default_validator_on_the_matrix_suite() {
    let data = tempfile::tempdir().unwrap();
    let out = TestCommand::new(data.path())
        .args(["plugins", "check", "--suite", "matrix"])
        .args([artifact("intent_matrix")])
        .output();
    out.assert_code(0);
    let stdout = out.stdout();
    assert!(
        stdout.contains("validator plugin 'intent-matrix'"),
        "{stdout}"
    );
    assert!(stdout.contains("call: ok"), "{stdout}");
    assert!(!stdout.contains("FAIL"), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.ends_with(" passed, 0 failed")),
        "{stdout}"
    );
}

#[test]
fn check_fails_an_allow_everything_validator_and_names_the_cases() {
    let data = tempfile::tempdir().unwrap();
    let out = TestCommand::new(data.path())
        .args(["plugins", "check", "--suite", "matrix"])
        .args([artifact("allow_all")])
        .output();
    out.assert_code(1);
    let stdout = out.stdout();
    assert!(
        stdout.contains("FAIL  call_tool_read / operation_type absent / destructiveHint=true"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "Tool 'github:delete_repo' is marked destructive by server, use call_tool_destructive"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("FAIL  call_tool_read / intent declares write / strict"),
        "{stdout}"
    );
    let summary = stdout.lines().last().unwrap();
    assert!(
        summary.ends_with("failed") && !summary.ends_with(" 0 failed"),
        "{summary}"
    );
}

#[test]
fn check_runs_the_prefix_suite_on_the_default_annotator() {
    let data = tempfile::tempdir().unwrap();
    let out = TestCommand::new(data.path())
        .args(["plugins", "check", "--suite", "prefix", "-o", "json"])
        .args([artifact("prefix_annotator")])
        .output();
    out.assert_code(0);
    let report: serde_json::Value = serde_json::from_str(&out.stdout()).unwrap();
    assert_eq!(report["passed"], true);
    assert_eq!(report["plugin"]["kind"], "annotator");
    assert!(report["suite"].as_array().unwrap().len() >= 21);
}

#[test]
fn check_reports_a_plugin_that_runs_past_its_deadline() {
    // `plugins check` loads the plugin (instantiates it and asks who it is) under the same
    // deadline as its call: a deadline short enough to be the test's point (20 ms) also
    // failed the load on a loaded machine. One a descheduled load cannot reach still stops
    // the spinning call.
    let data = tempfile::tempdir().unwrap();
    let out = TestCommand::new(data.path())
        .args(["plugins", "check", "--timeout-ms", "1000"])
        .args([artifact("spin_loop")])
        .output();
    out.assert_code(1);
    let stdout = out.stdout();
    assert!(
        stdout.contains(
            "call: FAILED: validator plugin 'test-spin-loop' ran past its deadline of 1000 ms"
        ),
        "{stdout}"
    );
}

#[test]
fn check_refuses_a_suite_for_the_wrong_kind() {
    let data = tempfile::tempdir().unwrap();
    let out = TestCommand::new(data.path())
        .args(["plugins", "check", "--suite", "prefix"])
        .args([artifact("intent_matrix")])
        .output();
    out.assert_code(2);
    assert!(
        out.stderr()
            .contains("the prefix suite is for annotator plugins, and"),
        "{}",
        out.stderr()
    );
}

#[test]
fn check_refuses_settings_that_are_not_a_json_object() {
    let data = tempfile::tempdir().unwrap();
    let out = TestCommand::new(data.path())
        .args(["plugins", "check", "--settings", "[1]"])
        .args([artifact("intent_matrix")])
        .output();
    out.assert_code(2);
    assert!(
        out.stderr().contains("--settings must be a JSON object"),
        "{}",
        out.stderr()
    );
}

#[test]
fn list_uses_the_configs_plugin_dir_like_serve_does() {
    let data = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(artifact("allow_all"), plugins.path().join("allow_all.wasm")).unwrap();
    let config = data.path().join("mcp_config.json");
    std::fs::write(
        &config,
        serde_json::json!({"plugins": {"dir": plugins.path()}}).to_string(),
    )
    .unwrap();
    let out = TestCommand::new(data.path())
        .args(["plugins", "list", "--config"])
        .args([&config])
        .output();
    out.assert_code(0);
    assert!(out.stdout().contains("test-allow-all"), "{}", out.stdout());
}

#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    // `mcpproxy plugins list | head -0`: the pipe is closed before anything is printed.
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mcpproxy"))
        .env("MCPPROXY_DATA_DIR", dir.path())
        .env("HOME", dir.path())
        .args(["plugins", "list"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `plugins check --cases`: an author's own table, against the compiled default validator.
#[test]
fn check_runs_the_authors_own_cases_and_fails_on_a_wrong_expectation() {
    let data = tempfile::tempdir().unwrap();
    let cases = data.path().join("cases.json");
    std::fs::write(
        &cases,
        r#"[
          {"name": "a read of a destructive tool is refused",
           "variant": "read",
           "tool": {"server": "github", "name": "delete_repo",
                    "annotations": {"destructiveHint": true}},
           "expect": "reject", "message": "use call_tool_destructive"},
          {"name": "a prefix-inferred delete is refused too",
           "variant": "read", "tool": {"server": "github", "name": "delete_branch"},
           "expect": "reject", "message": "inferred destructive by prefix-annotator"},
          {"variant": "read", "tool": {"name": "list_items",
                                       "annotations": {"readOnlyHint": true}},
           "intent": {"operation_type": "read"}, "expect": "allow"},
          {"name": "lenient settings turn the mismatch into a warning",
           "variant": "read",
           "tool": {"server": "github", "name": "delete_repo",
                    "annotations": {"destructiveHint": true}},
           "settings": {"strict_server_validation": false},
           "expect": "warn"}
        ]"#,
    )
    .unwrap();
    let out = TestCommand::new(data.path())
        .args(["plugins", "check"])
        .args([artifact("intent_matrix")])
        .args(["--cases".as_ref(), cases.as_os_str()])
        .output();
    out.assert_code(0);
    let stdout = out.stdout();
    assert!(
        stdout.contains("PASS  a read of a destructive tool is refused"),
        "{stdout}"
    );
    assert!(
        stdout.contains("PASS  case 2: call_tool_read of example:list_items"),
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l == "4 passed, 0 failed"),
        "{stdout}"
    );

    // The same table says the opposite: every case fails, and the exit status says so.
    let wrong = std::fs::read_to_string(&cases)
        .unwrap()
        .replace("\"expect\": \"reject\"", "\"expect\": \"allow\"")
        .replace(", \"message\": \"use call_tool_destructive\"", "")
        .replace(
            ", \"message\": \"inferred destructive by prefix-annotator\"",
            "",
        );
    std::fs::write(&cases, wrong).unwrap();
    let out = TestCommand::new(data.path())
        .args(["plugins", "check"])
        .args([artifact("intent_matrix")])
        .args(["--cases".as_ref(), cases.as_os_str()])
        .output();
    out.assert_code(1);
    let stdout = out.stdout();
    assert!(
        stdout.contains("FAIL  a read of a destructive tool is refused\n      expected allow"),
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l == "2 passed, 2 failed"),
        "{stdout}"
    );
}

#[test]
fn check_names_the_case_and_the_key_of_a_bad_cases_file() {
    let data = tempfile::tempdir().unwrap();
    let cases = data.path().join("cases.json");
    std::fs::write(
        &cases,
        r#"[{"variant": "read", "tool": {"name": "a"}, "expect": "allow"},
            {"variant": "read", "tool": {"name": "a"}, "expect": "allowed"}]"#,
    )
    .unwrap();
    let out = TestCommand::new(data.path())
        .args(["plugins", "check"])
        .args([artifact("intent_matrix")])
        .args(["--cases".as_ref(), cases.as_os_str()])
        .output();
    assert_ne!(out.code(), Some(0));
    assert!(
        out.stderr()
            .contains("case 1: key `expect`: unknown variant `allowed`"),
        "{}",
        out.stderr()
    );
}

/// `plugins wit DIR` writes the contract a plugin builds against.
#[test]
fn wit_writes_the_contract_out() {
    let data = tempfile::tempdir().unwrap();
    let out_dir = data.path().join("contract");
    let out = TestCommand::new(data.path())
        .args(["plugins", "wit"])
        .args([&out_dir])
        .output();
    out.assert_code(0);
    let repo_wit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
    for file in ["worlds.wit", "types.wit", "deps/cli/cli.wit"] {
        assert_eq!(
            std::fs::read_to_string(out_dir.join(file)).unwrap(),
            std::fs::read_to_string(repo_wit.join(file)).unwrap(),
            "{file}"
        );
    }
}

/// `plugins new --lang rust`: the project builds as its README says (cargo, offline from the
/// local registry cache) against the written-out wit/, and passes its own cases.
#[test]
fn a_new_rust_validator_builds_as_written_and_passes_its_cases() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("no-blocked");
    let out = TestCommand::new(data.path())
        .args(["plugins", "new", "no-blocked", "--lang", "rust", "--dir"])
        .args([&dir])
        .output();
    out.assert_code(0);
    for file in [
        "README.md",
        "build.sh",
        "Cargo.toml",
        "src/lib.rs",
        "cases.json",
        "wit/worlds.wit",
    ] {
        assert!(dir.join(file).is_file(), "{file} missing: {}", out.stdout());
    }
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(readme.contains("bash build.sh"), "{readme}");
    assert!(
        readme.contains("mcpproxy plugins check no_blocked.wasm --cases cases.json"),
        "{readme}"
    );
    // The config it shows loads the plugin in every `serve` (the one an IDE starts too): a
    // plugins dir in the config, not `serve --plugins DIR`, which loads it in one process.
    let snippet = readme
        .split("```json\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a JSON config in the README");
    let snippet: serde_json::Value = serde_json::from_str(snippet).expect("the README's JSON");
    assert_eq!(
        snippet["plugins"]["dir"], "~/.mcpproxy/plugins",
        "{snippet}"
    );
    assert_eq!(
        snippet["plugins"]["validators"],
        serde_json::json!(["intent-matrix", "no-blocked"]),
        "{snippet}"
    );
    assert!(!readme.contains("serve --plugins plugins"), "{readme}");

    // A target dir kept across runs (the build is the same every time).
    let target = crate::support::target_dir().join("template-build");
    let mut build = std::process::Command::new("bash");
    build
        .arg(dir.join("build.sh"))
        .env("CARGO_NET_OFFLINE", "true")
        .env("CARGO_TARGET_DIR", &target);
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET"] {
        build.env_remove(var);
    }
    let status = build.status().expect("run build.sh");
    assert!(
        status.success(),
        "build.sh of the new project failed: {status}"
    );

    let out = TestCommand::new(data.path())
        .args(["plugins", "check"])
        .args([dir.join("no_blocked.wasm")])
        .args(["--cases".as_ref(), dir.join("cases.json").as_os_str()])
        .output();
    out.assert_code(0);
    let stdout = out.stdout();
    assert!(
        stdout.contains("validator plugin 'no-blocked' 0.1.0"),
        "{stdout}"
    );
    assert!(
        stdout.contains("PASS  a blocked tool is refused"),
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l == "2 passed, 0 failed"),
        "{stdout}"
    );
}

/// A project `plugins new` wrote, built with its own `build.sh` (as its README says) and
/// checked against its own `cases.json`. The project is written to a temporary directory,
/// then copied over the language's shared project dir (`support::templates`), where the
/// toolchain its build.sh installs (`keep`: a venv, node_modules) stays between runs.
struct TemplateBuild {
    lang: &'static str,
    /// What build.sh installs into the project, kept between runs.
    keep: &'static str,
    /// Environment for build.sh (where the C toolchain is kept).
    env: Vec<(&'static str, std::path::PathBuf)>,
}

impl TemplateBuild {
    /// Writes, builds and checks `no-blocked`; `--timeout-ms` for a debug build of the proxy
    /// running a heavy guest on a loaded machine.
    fn builds_and_passes_its_cases(&self) {
        let data = tempfile::tempdir().unwrap();
        let fresh = data.path().join("no-blocked");
        let out = TestCommand::new(data.path())
            .args(["plugins", "new", "no-blocked", "--lang", self.lang, "--dir"])
            .args([&fresh])
            .output();
        out.assert_code(0);
        let readme = std::fs::read_to_string(fresh.join("README.md")).unwrap();
        assert!(readme.contains("bash build.sh"), "{readme}");

        // Built in the language's shared project dir (its toolchain kept there), then the
        // component and its cases copied out so the dir is free for the next test.
        let (wasm, cases) = {
            let project =
                crate::support::templates::TemplateProject::take(self.lang, self.keep, &fresh);
            project.build(&self.env);
            let wasm = data.path().join("no_blocked.wasm");
            let cases = data.path().join("cases.json");
            std::fs::copy(project.dir.join("no_blocked.wasm"), &wasm).unwrap();
            std::fs::copy(project.dir.join("cases.json"), &cases).unwrap();
            (wasm, cases)
        };

        // Compiling a componentize-py or componentize-js component to native code takes a
        // debug build of the proxy minutes; keep the compiled code between runs.
        let cache = data.path().join("cache/plugins");
        crate::support::mcp::copy_cwasm(&crate::support::mcp::shared_compile_cache(), &cache);
        let out = TestCommand::new(data.path())
            .args(["plugins", "check", "--timeout-ms", "10000"])
            .args([&wasm])
            .args(["--cases".as_ref(), cases.as_os_str()])
            .output();
        crate::support::mcp::copy_cwasm(&cache, &crate::support::mcp::shared_compile_cache());
        out.assert_code(0);
        let stdout = out.stdout();
        assert!(
            stdout.contains("validator plugin 'no-blocked' 0.1.0"),
            "{stdout}"
        );
        assert!(
            stdout.contains("PASS  a blocked tool is refused"),
            "{stdout}"
        );
        assert!(
            stdout.lines().any(|l| l == "2 passed, 0 failed"),
            "{stdout}"
        );
    }
}

/// Whether `program --version` runs; when it does not, the test is skipped with a note,
/// unless `CI` or `require` is set (as `.ci/run` does), which makes it a failure.
fn toolchain(program: &str, args: &[&str], require: &str) -> bool {
    let ok = std::process::Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none() && std::env::var_os(require).is_none(),
            "`{program} {}` failed, and CI or {require} requires it",
            args.join(" ")
        );
        eprintln!(
            "SKIPPED: `{program} {}` failed; install it to run this test",
            args.join(" ")
        );
    }
    ok
}

/// `plugins new --lang python`: componentize-py (PyPI, pinned in the project's
/// requirements.txt) in a venv, as the generated build.sh installs it.
#[test]
fn a_new_python_validator_builds_as_written_and_passes_its_cases() {
    if !toolchain(
        "python3",
        &["-c", "import ensurepip, venv"],
        "MCPPROXY_REQUIRE_PYTHON",
    ) {
        return;
    }
    TemplateBuild {
        lang: "python",
        keep: ".venv",
        env: Vec::new(),
    }
    .builds_and_passes_its_cases();
}

/// `plugins new --lang js`: componentize-js (npm, pinned in the project's package.json),
/// as the generated build.sh installs it.
#[test]
fn a_new_javascript_validator_builds_as_written_and_passes_its_cases() {
    if !toolchain("npm", &["--version"], "MCPPROXY_REQUIRE_JS") {
        return;
    }
    TemplateBuild {
        lang: "js",
        keep: "node_modules",
        env: Vec::new(),
    }
    .builds_and_passes_its_cases();
}

/// `plugins new --lang c`: clang with wasi-libc, and wit-bindgen, wasm-tools and the WASI
/// adapter, which the generated build.sh installs with cargo (kept where the C example's
/// build.sh keeps them, so they are built once).
#[test]
fn a_new_c_validator_builds_as_written_and_passes_its_cases() {
    if !toolchain("clang", &["--version"], "MCPPROXY_REQUIRE_C")
        || !toolchain("wasm-ld", &["--version"], "MCPPROXY_REQUIRE_C")
    {
        return;
    }
    if !std::path::Path::new("/usr/lib/wasm32-wasi/crt1-reactor.o").exists() {
        assert!(
            std::env::var_os("CI").is_none() && std::env::var_os("MCPPROXY_REQUIRE_C").is_none(),
            "wasi-libc is missing, and CI or MCPPROXY_REQUIRE_C requires it"
        );
        eprintln!("SKIPPED: wasi-libc is not installed");
        return;
    }
    let tools = std::env::var_os("MCPPROXY_C_TOOLS").map_or_else(
        || crate::support::target_dir().join("c-toolchain"),
        std::path::PathBuf::from,
    );
    TemplateBuild {
        lang: "c",
        keep: ".c-tools",
        env: vec![("C_TOOLS", tools)],
    }
    .builds_and_passes_its_cases();
}

/// `plugins check NAME` checks an embedded plugin by its name, as a file is checked.
#[test]
fn check_takes_an_embedded_plugins_name() {
    let data = tempfile::tempdir().unwrap();
    let out = TestCommand::new(data.path())
        .args(["plugins", "check", "intent-matrix", "--suite", "matrix"])
        .output();
    out.assert_code(0);
    let stdout = out.stdout();
    assert!(
        stdout.contains("validator plugin 'intent-matrix'"),
        "{stdout}"
    );
    assert!(stdout.contains("call: ok"), "{stdout}");
    // Every embedded plugin, by the name `plugins list` gives it.
    let out = TestCommand::new(data.path())
        .args(["plugins", "list", "-o", "json"])
        .output();
    out.assert_code(0);
    let plugins: serde_json::Value = serde_json::from_str(&out.stdout()).unwrap();
    for plugin in plugins.as_array().unwrap() {
        let name = plugin["name"].as_str().unwrap();
        let out = TestCommand::new(data.path())
            .args(["plugins", "check", name, "-o", "json"])
            .output();
        let report: serde_json::Value = serde_json::from_str(&out.stdout())
            .unwrap_or_else(|e| panic!("{name}: {e}: {}", out.stderr()));
        assert_eq!(report["plugin"]["name"], name, "{report}");
    }
    // Neither a file nor an embedded plugin: the names are listed.
    let out = TestCommand::new(data.path())
        .args(["plugins", "check", "no-such-plugin"])
        .output();
    out.assert_code(2);
    assert!(
        out.stderr().contains("intent-matrix") && out.stderr().contains("no-such-plugin"),
        "{}",
        out.stderr()
    );
}
