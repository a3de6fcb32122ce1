//! The `code_execution` runtime: what one script costs the proxy.
//!
//! - `empty`: a fresh instance of the JavaScript runtime runs an empty script (the floor of
//!   every execution: instantiation, the engine's start, the prelude).
//! - `calls/100`: a script that makes 100 `call_tool`s to a host that answers at once: less
//!   `empty`, divided by 100, is what one inner call costs in the runtime (arguments to
//!   JSON, the host call, the answer parsed) on top of the proxy's own call path, which an
//!   inner call shares with a direct `call_tool_read`.
//! - `calls-handoff/100`: the same, each answer coming back through a tokio runtime's
//!   `Handle::block_on`, as the proxy's inner calls do (the script runs on a blocking thread).
//!
//! The linear memory each script grew to is printed once (`memory peak`).

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use mcpproxy_plugin_host::{
    EngineOptions, ScriptEnd, ScriptHost, ScriptLimits, ScriptRuntime, ScriptStop,
};

const EMPTY: &str = "";
const CALLS: &str = "let n = 0; for (let i = 0; i < 100; i++) { \
                     if (call_tool('srv:tool', { i, text: 'hello' }).ok) n++; } return n;";

/// Answers every call at once with a small MCP result; with a runtime handle, through
/// `block_on` as the proxy does.
struct Answer(Option<tokio::runtime::Handle>);

impl ScriptHost for Answer {
    fn call_tool(
        &mut self,
        _name: &str,
        _args: &str,
        _deadline: Instant,
    ) -> Result<Result<String, String>, ScriptStop> {
        let answer = || Ok(r#"{"content":[{"type":"text","text":"ok"}]}"#.to_owned());
        Ok(match &self.0 {
            Some(handle) => handle.block_on(async { answer() }),
            None => answer(),
        })
    }
}

/// The CPU time this thread has used.
#[allow(
    unsafe_code,
    reason = "clock_gettime writes only the timespec it is given, which lives on this stack"
)]
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

fn limits() -> ScriptLimits {
    ScriptLimits {
        timeout: Duration::from_secs(10),
        memory_bytes: 64 << 20,
        max_log_lines: 100,
        max_log_line_bytes: 2048,
    }
}

fn bench(c: &mut Criterion) {
    let runtime =
        ScriptRuntime::new(EngineOptions::for_scripts(None, 64 << 20, 4)).expect("runtime");
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .expect("tokio");
    for (name, code) in [("empty", EMPTY), ("calls/100", CALLS)] {
        let run = runtime.run(code, "null", &limits(), Box::new(Answer(None)));
        assert!(matches!(run.end, ScriptEnd::Returned(_)), "{:?}", run.end);
        // CPU time of the thread, not wall time: the figure a loaded machine moves least.
        let mut cpu: Vec<Duration> = (0..300)
            .map(|_| {
                let before = thread_cpu_time();
                runtime.run(code, "null", &limits(), Box::new(Answer(None)));
                thread_cpu_time() - before
            })
            .collect();
        cpu.sort();
        eprintln!(
            "{name}: memory peak {} KiB; thread CPU time p50 {:?}, p90 {:?}",
            run.memory_peak / 1024,
            cpu[cpu.len() / 2],
            cpu[cpu.len() * 9 / 10]
        );
    }
    let mut group = c.benchmark_group("code_execution");
    group.bench_function("empty", |b| {
        b.iter(|| runtime.run(EMPTY, "null", &limits(), Box::new(Answer(None))))
    });
    group.bench_function("calls/100", |b| {
        b.iter(|| runtime.run(CALLS, "null", &limits(), Box::new(Answer(None))))
    });
    let handle = tokio.handle().clone();
    group.bench_function("calls-handoff/100", |b| {
        b.iter(|| {
            runtime.run(
                CALLS,
                "null",
                &limits(),
                Box::new(Answer(Some(handle.clone()))),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
