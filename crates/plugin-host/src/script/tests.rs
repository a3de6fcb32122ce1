//! Tests of the `code_execution` runtime: scripts run in the real component against a host
//! double that answers `echo:*`, refuses the rest and can stop a script.

use std::sync::{Arc, Mutex, OnceLock};

use super::*;

const MIB: usize = 1 << 20;

/// One runtime for the whole test process, its compiled component cached in the build's
/// output dir: compiling the interpreter takes ~20 s in a debug build, which a runner that
/// starts a process per test (nextest) would otherwise pay in every test.
fn runtime() -> &'static ScriptRuntime {
    static RUNTIME: OnceLock<ScriptRuntime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let cache = std::path::Path::new(env!("OUT_DIR")).join("test-compile-cache");
        ScriptRuntime::new(EngineOptions::for_scripts(Some(cache), 64 * MIB, 8)).expect("runtime")
    })
}

fn limits() -> ScriptLimits {
    ScriptLimits {
        timeout: Duration::from_secs(10),
        memory_bytes: 64 * MIB,
        max_log_lines: 3,
        max_log_line_bytes: 16,
    }
}

/// A host that answers `echo:*` with its arguments, refuses the rest, and stops the
/// script at its `limit`-th call; it remembers every call.
#[derive(Clone, Default)]
struct Echo {
    calls: Arc<Mutex<Vec<(String, String)>>>,
    limit: usize,
}

impl ScriptHost for Echo {
    fn call_tool(
        &mut self,
        name: &str,
        args: &str,
        _deadline: Instant,
    ) -> Result<Result<String, String>, ScriptStop> {
        let mut calls = mcpproxy_support::lock(&self.calls);
        if self.limit > 0 && calls.len() >= self.limit {
            return Err(ScriptStop(format!("call limit of {} reached", self.limit)));
        }
        calls.push((name.to_owned(), args.to_owned()));
        if name.starts_with("echo:") {
            Ok(Ok(format!("{{\"echoed\":{args}}}")))
        } else {
            Ok(Err(format!("no tool named {name}")))
        }
    }
}

fn run(code: &str, input: &str) -> ScriptRun {
    runtime().run(code, input, &limits(), Box::new(Echo::default()))
}

#[test]
fn a_script_returns_json_built_from_its_input() {
    let run = run(
        "return { doubled: input.n * 2, empty: undefined };",
        r#"{"n":21}"#,
    );
    assert_eq!(run.end, ScriptEnd::Returned(r#"{"doubled":42}"#.into()));
    assert!(run.memory_peak > 0);
}

#[test]
fn an_empty_script_returns_null() {
    assert_eq!(run("", "null").end, ScriptEnd::Returned("null".into()));
}

#[test]
fn throws_and_syntax_errors_are_reported_as_thrown() {
    assert_eq!(
        run("throw new RangeError('too far');", "null").end,
        ScriptEnd::Threw("RangeError: too far".into())
    );
    let ScriptEnd::Threw(why) = run("return {", "null").end else {
        panic!("a syntax error is thrown");
    };
    assert!(why.starts_with("SyntaxError"), "{why}");
    let ScriptEnd::Threw(why) = run("const a = {}; a.a = a; return a;", "null").end else {
        panic!("a cycle cannot be returned");
    };
    assert!(why.contains("not JSON-serialisable"), "{why}");
}

#[test]
fn call_tool_reaches_the_host_and_returns_an_envelope() {
    let host = Echo::default();
    let run = runtime().run(
        r#"const a = call_tool("echo:say", { text: input.t });
           const b = call_tool("other:thing", {});
           return [a, b];"#,
        r#"{"t":"hi"}"#,
        &limits(),
        Box::new(host.clone()),
    );
    assert_eq!(
        run.end,
        ScriptEnd::Returned(
            r#"[{"ok":true,"result":{"echoed":{"text":"hi"}}},{"error":"no tool named other:thing","ok":false}]"#
                .into()
        )
    );
    let calls = mcpproxy_support::lock(&host.calls);
    assert_eq!(calls[0], ("echo:say".into(), r#"{"text":"hi"}"#.into()));
}

#[test]
fn the_host_can_stop_a_script() {
    let host = Echo {
        limit: 2,
        ..Echo::default()
    };
    let run = runtime().run(
        "while (true) { call_tool('echo:x', {}); }",
        "null",
        &limits(),
        Box::new(host.clone()),
    );
    assert_eq!(
        run.end,
        ScriptEnd::Stopped("call limit of 2 reached".into())
    );
    assert_eq!(mcpproxy_support::lock(&host.calls).len(), 2);
}

#[test]
fn console_lines_are_kept_up_to_the_cap_and_cut() {
    let run = run(
        "console.log('a', 1, {b: 2}); console.log('x'.repeat(100)); \
         for (let i = 0; i < 5; i++) console.log(i); return 0;",
        "null",
    );
    assert_eq!(run.logs, ["a 1 {\"b\":2}", "xxxxxxxxxxxxxxxx…", "0"]);
    assert_eq!(run.logs_dropped, 4);
}

#[test]
fn an_endless_loop_ends_at_the_deadline() {
    let limits = ScriptLimits {
        timeout: Duration::from_millis(200),
        ..limits()
    };
    let run = runtime().run("for (;;) {}", "null", &limits, Box::new(Echo::default()));
    assert_eq!(run.end, ScriptEnd::TimedOut(Duration::from_millis(200)));
    // The runtime is still usable.
    assert_eq!(
        runtime()
            .run("return 1", "null", &limits, Box::new(Echo::default()))
            .end,
        ScriptEnd::Returned("1".into())
    );
}

#[test]
fn unbounded_allocation_ends_at_the_memory_cap() {
    let limits = ScriptLimits {
        memory_bytes: 24 * MIB,
        ..limits()
    };
    let run = runtime().run(
        "const keep = []; for (;;) { keep.push('x'.repeat(65536) + keep.length); }",
        "null",
        &limits,
        Box::new(Echo::default()),
    );
    let ScriptEnd::OutOfMemory(cap) = run.end else {
        panic!("expected the memory cap, got {:?}", run.end);
    };
    assert_eq!(cap.cap, 24 * MIB);
    assert!(run.memory_peak <= 24 * MIB);
}

#[test]
fn the_script_sees_no_files_environment_or_host_globals() {
    let run = run(
        "return [typeof require, typeof process, typeof fetch, typeof __mcpproxy_call_tool, \
                 typeof Deno, typeof call_tool];",
        "null",
    );
    assert_eq!(
        run.end,
        ScriptEnd::Returned(
            r#"["undefined","undefined","undefined","undefined","undefined","function"]"#.into()
        )
    );
}
