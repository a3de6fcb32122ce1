//! Running `code_execution` scripts: the embedded JavaScript runtime (`plugins/code-runtime`,
//! world `code-runtime` of the internal package `mcpproxy:code`, `wit/code/`) on an engine of
//! its own, a fresh instance per script, with a memory cap, a deadline enforced by epoch
//! interruption, and WASI linked empty (no files, environment or sockets; see `wasi`). The
//! script's only way out is that package's `host` import, which this module hands to a
//! [`ScriptHost`] the proxy implements (tool calls through its policy and journal);
//! `console.log` lines are kept here, capped.
//!
//! Whatever the script does, [`ScriptRuntime::run`] returns a [`ScriptRun`] saying how it
//! ended: returned, threw, ran out of time or memory, was stopped by the host (its call
//! limit), or trapped. Nothing outlives the run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Store, Trap};
use wasmtime_wasi::{WasiCtxView, WasiView};

use super::bindings::code_world::mcpproxy::code::host as code_host;
use super::bindings::code_world::{CodeRuntime, CodeRuntimePre};
use super::deadline::{ArmedDeadline, HoldsDeadline};
use super::engine::{EngineOptions, PluginEngine};
use super::error::Error;
use super::host::PluginCtx;
use super::limits::{MemoryCapExceeded, MemoryLimiter};
use super::slots::{SLOT_WAIT, is_pool_exhausted};
use mcpproxy_policy::Limits;

/// The runtime component, built from `plugins/code-runtime` by `build.rs`, deflated
/// (`crate::embedded::inflate`).
pub(crate) const CODE_RUNTIME: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/code_runtime.wasm.deflate"));

/// The name the runtime's own log lines (stdout, stderr) carry.
const RUNTIME_NAME: &str = "code-runtime";

/// What a script reaches through `call_tool`: the proxy implements it.
pub trait ScriptHost: Send {
    /// Calls `name` (`server:tool`) with `args` (a JSON object, as text), finishing by
    /// `deadline` (the script's own). `Ok(Ok(json))` is the tool's result and `Ok(Err(why))`
    /// a refusal or failure, both handed to the script; `Err(stop)` ends the script.
    fn call_tool(
        &mut self,
        name: &str,
        args: &str,
        deadline: Instant,
    ) -> Result<Result<String, String>, ScriptStop>;
}

/// The host ends the script (its call limit was reached, say): said in the run's outcome.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScriptStop(pub String);

/// The limits of one script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptLimits {
    /// Wall-clock budget: instantiation, the script and its tool calls together.
    pub timeout: Duration,
    /// The most linear memory the runtime may hold.
    pub memory_bytes: usize,
    /// `console.log` lines kept; later ones are counted and dropped.
    pub max_log_lines: usize,
    /// Longest `console.log` line kept, in bytes; the rest is cut.
    pub max_log_line_bytes: usize,
}

/// How a script ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptEnd {
    /// It returned: the value as JSON text (`null` for `undefined`).
    Returned(String),
    /// It threw (or did not parse): what was thrown.
    Threw(String),
    /// It ran past its deadline and was stopped.
    TimedOut(Duration),
    /// It asked for more memory than its cap and was stopped.
    OutOfMemory(MemoryCapExceeded),
    /// The host stopped it (see [`ScriptStop`]).
    Stopped(String),
    /// The runtime trapped (a stack overflow, say), or could not be started.
    Failed(String),
}

/// One script's run: how it ended, its console, and what it used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptRun {
    pub end: ScriptEnd,
    /// The `console.log` lines kept (see [`ScriptLimits`]).
    pub logs: Vec<String>,
    /// Lines past [`ScriptLimits::max_log_lines`], dropped.
    pub logs_dropped: usize,
    /// The largest the runtime's linear memory grew to, in bytes.
    pub memory_peak: usize,
    /// From instantiation to the end.
    pub elapsed: Duration,
}

/// The JavaScript runtime, compiled once; each [`ScriptRuntime::run`] gets a fresh instance.
pub struct ScriptRuntime {
    engine: PluginEngine,
    pre: CodeRuntimePre<ScriptCtx>,
}

impl ScriptRuntime {
    /// Builds an engine for scripts (`options.max_memory_bytes` is the largest cap a run may
    /// get; `options.max_instances` the scripts that run at once) and compiles the runtime,
    /// or loads it from the compile cache.
    pub fn new(options: EngineOptions) -> Result<Self, Error> {
        let engine = PluginEngine::new(options)?;
        let engine_error = |e: wasmtime::Error| Error::Engine(format!("{e:#}"));
        let (component, _) = engine
            .compile(&crate::embedded::inflate(CODE_RUNTIME))
            .map_err(engine_error)?;
        let mut linker = Linker::new(engine.engine());
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(engine_error)?;
        CodeRuntime::add_to_linker::<ScriptCtx, HasSelf<ScriptCtx>>(&mut linker, |ctx| ctx)
            .map_err(engine_error)?;
        let pre = linker
            .instantiate_pre(&component)
            .and_then(CodeRuntimePre::new)
            .map_err(engine_error)?;
        Ok(Self { engine, pre })
    }

    /// Runs `code` (a function body) with `input` (JSON text) as its global `input`, in a
    /// fresh instance. Blocks the thread: call it where blocking is fine (a blocking task).
    pub fn run(
        &self,
        code: &str,
        input: &str,
        limits: &ScriptLimits,
        host: Box<dyn ScriptHost>,
    ) -> ScriptRun {
        let started = Instant::now();
        let give_up = started + SLOT_WAIT;
        let call_limits = Limits {
            timeout: limits.timeout,
            memory_bytes: limits.memory_bytes,
            reuse_instance: false,
        };
        let mut host = Some(host);
        loop {
            let ctx = ScriptCtx::new(limits);
            let mut store = Store::new(self.engine.engine(), ctx);
            store.limiter(|ctx| &mut ctx.limiter);
            self.engine.arm_deadline(&mut store, &call_limits);
            match self.pre.instantiate(&mut store) {
                Ok(bindings) => {
                    store.data_mut().plugin.slot_signal = Some(self.engine.slot_signal().clone());
                    store.data_mut().host = host.take();
                    let outcome = bindings
                        .mcpproxy_code_runner()
                        .call_run(&mut store, code, input);
                    let end = match outcome {
                        Ok(Ok(value)) => ScriptEnd::Returned(value),
                        Ok(Err(thrown)) => ScriptEnd::Threw(thrown),
                        Err(e) => classify(e, limits),
                    };
                    return store.into_data().finish(end, started);
                }
                Err(e) if is_pool_exhausted(&e) && Instant::now() < give_up => {
                    drop(store);
                    self.engine.slot_signal().wait_until(give_up);
                }
                Err(e) => {
                    let end = match classify(e, limits) {
                        ScriptEnd::Failed(why) => {
                            ScriptEnd::Failed(format!("the runtime could not be started: {why}"))
                        }
                        other => other,
                    };
                    return store.into_data().finish(end, started);
                }
            }
        }
    }
}

/// Turns a wasmtime error from a run into how the script ended.
fn classify(err: wasmtime::Error, limits: &ScriptLimits) -> ScriptEnd {
    for cause in err.chain() {
        if let Some(cap) = cause.downcast_ref::<MemoryCapExceeded>() {
            return ScriptEnd::OutOfMemory(cap.clone());
        }
        if let Some(stop) = cause.downcast_ref::<ScriptStop>() {
            return ScriptEnd::Stopped(stop.0.clone());
        }
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => ScriptEnd::TimedOut(limits.timeout),
        Some(trap) => {
            let text = trap.to_string();
            ScriptEnd::Failed(text.strip_prefix("wasm trap: ").unwrap_or(&text).to_owned())
        }
        None => ScriptEnd::Failed(format!("{err:#}")),
    }
}

/// The state of one script's store.
struct ScriptCtx {
    /// WASI with nothing granted, the runtime's stdout/stderr log, the slot signal.
    plugin: PluginCtx,
    limiter: PeakLimiter,
    host: Option<Box<dyn ScriptHost>>,
    deadline_at: Option<Instant>,
    logs: Vec<String>,
    logs_dropped: usize,
    max_log_lines: usize,
    max_log_line_bytes: usize,
}

impl ScriptCtx {
    /// The host is moved in once an instance exists (a retry after a full pool makes a new
    /// store).
    fn new(limits: &ScriptLimits) -> Self {
        Self {
            plugin: PluginCtx::new(RUNTIME_NAME.into(), Arc::from("{}"), limits.memory_bytes),
            limiter: PeakLimiter {
                cap: MemoryLimiter::new(limits.memory_bytes),
                peak: 0,
            },
            host: None,
            deadline_at: None,
            logs: Vec::new(),
            logs_dropped: 0,
            max_log_lines: limits.max_log_lines,
            max_log_line_bytes: limits.max_log_line_bytes,
        }
    }

    fn finish(mut self, end: ScriptEnd, started: Instant) -> ScriptRun {
        self.plugin.end_call();
        ScriptRun {
            end,
            logs: std::mem::take(&mut self.logs),
            logs_dropped: self.logs_dropped,
            memory_peak: self.limiter.peak,
            elapsed: started.elapsed(),
        }
    }
}

impl HoldsDeadline for ScriptCtx {
    fn hold_deadline(&mut self, armed: ArmedDeadline) {
        self.deadline_at = Some(armed.at());
        self.plugin.hold_deadline(armed);
    }
}

impl WasiView for ScriptCtx {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        self.plugin.ctx()
    }
}

impl code_host::Host for ScriptCtx {
    fn call_tool(
        &mut self,
        name: String,
        args: String,
    ) -> wasmtime::Result<Result<String, String>> {
        let deadline = self.deadline_at.unwrap_or_else(Instant::now);
        let Some(host) = self.host.as_mut() else {
            return Ok(Err("no tools are reachable from this script".to_owned()));
        };
        host.call_tool(&name, &args, deadline)
            .map_err(wasmtime::Error::new)
    }

    fn console_log(&mut self, line: String) {
        if self.logs.len() >= self.max_log_lines {
            self.logs_dropped = self.logs_dropped.saturating_add(1);
            return;
        }
        self.logs.push(cut(line, self.max_log_line_bytes));
    }
}

/// `text` cut to at most `max` bytes, on a character boundary, marked when cut.
fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// The memory cap, and the largest size the memory grew to.
struct PeakLimiter {
    cap: MemoryLimiter,
    peak: usize,
}

impl wasmtime::ResourceLimiter for PeakLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.cap.memory_growing(current, desired, maximum)?;
        if allowed {
            self.peak = self.peak.max(desired);
        }
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.cap.table_growing(current, desired, maximum)
    }
}

impl EngineOptions {
    /// Options for the scripts' engine: memory slots of `memory_bytes`, `concurrent` scripts
    /// at once, compiled components cached in `cache_dir`.
    pub fn for_scripts(
        cache_dir: Option<std::path::PathBuf>,
        memory_bytes: usize,
        concurrent: u32,
    ) -> Self {
        Self {
            cache_dir,
            max_memory_bytes: memory_bytes,
            max_instances: concurrent,
        }
    }
}

#[cfg(test)]
mod tests;
