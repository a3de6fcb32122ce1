//! Running one `code_execution`: the executor (the JavaScript runtime, compiled once in the
//! background when the tool is enabled; a cap on scripts at once), the execution's own
//! record (pending before the script starts, completed with how it ended), and the report
//! the client reads.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::inner::{InnerCalls, Tally};
use super::request::CodeRequest;
use crate::proxy::{CallContext, Proxy};
use mcpproxy_activity::{ActivityRecord, RecordType, Status};
use mcpproxy_config::CodeExecutionConfig;
use mcpproxy_plugin_host::{
    Bytes, EngineOptions, ScriptEnd, ScriptLimits, ScriptRun, ScriptRuntime,
};

/// `console.log` lines a run returns, and the longest line kept.
const MAX_LOG_LINES: usize = 100;
const MAX_LOG_LINE_BYTES: usize = 2048;
/// The largest result returned, as JSON bytes; a larger one ends the run as an error.
pub(super) const MAX_RESULT_BYTES: usize = 4 << 20;

/// The `code_execution` tool's state, shared by every session.
pub struct CodeExecutor {
    pub config: CodeExecutionConfig,
    cache_dir: Option<PathBuf>,
    runtime: OnceLock<Result<ScriptRuntime, String>>,
    permits: tokio::sync::Semaphore,
}

impl CodeExecutor {
    /// The executor for `config`; compiled components are cached in `cache_dir`. Starts
    /// compiling the runtime at once, on a thread of its own, so the first script does not
    /// wait for it (a script that comes sooner waits for the compilation to end).
    pub fn start(config: CodeExecutionConfig, cache_dir: Option<PathBuf>) -> Arc<Self> {
        let executor = Arc::new(Self {
            config,
            cache_dir,
            runtime: OnceLock::new(),
            permits: tokio::sync::Semaphore::new(config.max_concurrent.max(1) as usize),
        });
        let warm = executor.clone();
        if let Err(e) = std::thread::Builder::new()
            .name("mcpproxy-code-runtime".into())
            .spawn(move || {
                let _ = warm.runtime();
            })
        {
            tracing::warn!("cannot compile the code_execution runtime ahead of time: {e}");
        }
        executor
    }

    fn runtime(&self) -> Result<&ScriptRuntime, &str> {
        self.runtime
            .get_or_init(|| {
                let started = Instant::now();
                let options = EngineOptions::for_scripts(
                    self.cache_dir.clone(),
                    self.config.memory_bytes,
                    self.config.max_concurrent.max(1),
                );
                let runtime = ScriptRuntime::new(options).map_err(|e| e.to_string());
                match &runtime {
                    Ok(_) => tracing::info!(
                        took_ms = started.elapsed().as_millis() as u64,
                        "code_execution runtime ready"
                    ),
                    Err(e) => tracing::error!("the code_execution runtime cannot start: {e}"),
                }
                runtime
            })
            .as_ref()
            .map_err(String::as_str)
    }
}

/// How a run ended, as the report and the record say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    Returned,
    Threw,
    TimedOut,
    OutOfMemory,
    CallLimit,
    /// The runtime failed (a trap, a result too large), or the run could not start.
    Failed,
}

/// What `code_execution` answers: the result, the console, and what the run did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CodeReport {
    pub ok: bool,
    /// The returned value (absent unless `ok`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Why the run failed (absent when `ok`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub ended: Ended,
    pub logs: Vec<String>,
    #[serde(default)]
    pub logs_dropped: usize,
    /// Inner calls made.
    pub tool_calls: u32,
    pub duration_ms: u64,
    /// The most memory the script's runtime held, in bytes.
    #[serde(default)]
    pub memory_peak_bytes: usize,
    /// The execution's record (`mcpproxy activity show ID` shows it with its inner calls).
    #[serde(default)]
    pub activity_id: String,
}

impl Proxy {
    /// Whether the `code_execution` tool is offered.
    pub fn code_execution(&self) -> Option<&Arc<CodeExecutor>> {
        self.code.as_ref()
    }

    /// Runs one script: records it, runs it in a fresh runtime instance on a blocking
    /// thread (its `call_tool`s are calls through this proxy), and records how it ended.
    /// The run is a task of its own: a caller that goes away (a cancelled request) stops the
    /// script's further tool calls, and the record is still completed.
    pub async fn execute_code(
        self: &Arc<Self>,
        request: CodeRequest,
        context: CallContext,
    ) -> CodeReport {
        let cancelled = Arc::new(AtomicBool::new(false));
        let _cancel_on_drop = CancelOnDrop(cancelled.clone());
        let proxy = self.clone();
        let started = Instant::now();
        tokio::spawn(async move { proxy.run_code(request, context, cancelled).await })
            .await
            .unwrap_or_else(|e| CodeReport {
                ok: false,
                result: None,
                error: Some(format!("the script's task failed: {e}")),
                ended: Ended::Failed,
                logs: Vec::new(),
                logs_dropped: 0,
                tool_calls: 0,
                duration_ms: elapsed_ms(started),
                memory_peak_bytes: 0,
                activity_id: String::new(),
            })
    }

    async fn run_code(
        self: Arc<Self>,
        request: CodeRequest,
        context: CallContext,
        cancelled: Arc<AtomicBool>,
    ) -> CodeReport {
        let started = Instant::now();
        let mut record = self.code_draft(&request, &context);
        let id = record.id.clone();
        let fail = |error: String, ended: Ended| CodeReport {
            ok: false,
            result: None,
            error: Some(error),
            ended,
            logs: Vec::new(),
            logs_dropped: 0,
            tool_calls: 0,
            duration_ms: elapsed_ms(started),
            memory_peak_bytes: 0,
            activity_id: id.clone(),
        };
        let Some(executor) = self.code.clone() else {
            return fail(
                "code_execution is disabled: set \"code_execution\": {\"enabled\": true} in \
                 mcp_config.json"
                    .to_owned(),
                Ended::Failed,
            );
        };
        // Fail closed: no script runs off the record.
        if let Err(refusal) = self.record_pending(record.clone()).await {
            return fail(refusal, Ended::Failed);
        }
        let Ok(_permit) = executor.permits.acquire().await else {
            return fail("the proxy is shutting down".to_owned(), Ended::Failed);
        };
        if cancelled.load(Ordering::Relaxed) {
            let report = fail(
                "the request was cancelled before the script started".to_owned(),
                Ended::Failed,
            );
            complete(&mut record, &report, &Tally::default());
            self.journal.submit(record);
            return report;
        }
        let tally = Arc::new(Mutex::new(Tally::default()));
        let mut inner_context = context;
        inner_context.parent_id = Some(id.clone());
        inner_context.origin = None;
        inner_context.dry_run = false;
        let host = InnerCalls {
            proxy: self.clone(),
            handle: tokio::runtime::Handle::current(),
            context: inner_context,
            ceiling: request.ceiling,
            intent: request.intent.clone(),
            max_calls: request.max_tool_calls,
            allowed_servers: request.allowed_servers.clone(),
            tally: tally.clone(),
            cancelled,
        };
        let limits = ScriptLimits {
            timeout: request.timeout,
            memory_bytes: executor.config.memory_bytes,
            max_log_lines: MAX_LOG_LINES,
            max_log_line_bytes: MAX_LOG_LINE_BYTES,
        };
        let input = request.input.to_string();
        let code = request.code;
        let runner = executor.clone();
        let run = tokio::task::spawn_blocking(move || match runner.runtime() {
            Ok(runtime) => Ok(runtime.run(&code, &input, &limits, Box::new(host))),
            Err(e) => Err(format!("the code_execution runtime cannot start: {e}")),
        })
        .await;
        let tally = std::mem::take(&mut *mcpproxy_support::lock(&tally));
        let report = match run {
            Ok(Ok(run)) => report_of(run, &tally, id.clone(), started),
            Ok(Err(e)) => fail(e, Ended::Failed),
            Err(e) => fail(format!("the script's thread failed: {e}"), Ended::Failed),
        };
        complete(&mut record, &report, &tally);
        self.journal.submit(record);
        report
    }

    /// The execution's record as it starts: the code (capped and redacted like arguments),
    /// its input and options, the intent; pending.
    fn code_draft(&self, request: &CodeRequest, context: &CallContext) -> ActivityRecord {
        let mut record = ActivityRecord::new(
            RecordType::CodeExecution,
            context.source,
            "mcpproxy",
            "code_execution",
        );
        let arguments = json!({
            "code": request.code,
            "input": request.input,
            "options": request.options_json(),
        });
        self.activity.keep_arguments(&mut record, &arguments);
        record.tool_variant = Some(request.ceiling);
        record.intent = Some(request.intent.clone());
        context.stamp_caller(&mut record);
        record.parent_id = context.parent_id.clone();
        record
    }
}

fn report_of(run: ScriptRun, tally: &Tally, activity_id: String, started: Instant) -> CodeReport {
    let (ended, result, error) = match run.end {
        ScriptEnd::Returned(text) if text.len() > MAX_RESULT_BYTES => (
            Ended::Failed,
            None,
            Some(format!(
                "the script returned {} of JSON; a result is at most {}",
                Bytes(text.len()),
                Bytes(MAX_RESULT_BYTES)
            )),
        ),
        ScriptEnd::Returned(text) => match serde_json::from_str(&text) {
            Ok(value) => (Ended::Returned, Some(value), None),
            Err(e) => (
                Ended::Failed,
                None,
                Some(format!("the script's result is not JSON: {e}")),
            ),
        },
        ScriptEnd::Threw(thrown) => (
            Ended::Threw,
            None,
            Some(format!("the script threw: {thrown}")),
        ),
        ScriptEnd::TimedOut(timeout) => (
            Ended::TimedOut,
            None,
            Some(format!(
                "the script ran past its timeout of {} ms and was stopped (options.timeout_ms, \
                 at most code_execution.timeout_ms)",
                timeout.as_millis()
            )),
        ),
        ScriptEnd::OutOfMemory(cap) => (
            Ended::OutOfMemory,
            None,
            Some(format!(
                "the script used more memory than its cap of {} and was stopped \
                 (code_execution.memory_mib)",
                Bytes(cap.cap)
            )),
        ),
        ScriptEnd::Stopped(why) if tally.limit_reached => (Ended::CallLimit, None, Some(why)),
        ScriptEnd::Stopped(why) => (Ended::Failed, None, Some(why)),
        ScriptEnd::Failed(why) => (
            Ended::Failed,
            None,
            Some(format!("the script's runtime failed: {why}")),
        ),
    };
    CodeReport {
        ok: ended == Ended::Returned,
        result,
        error,
        ended,
        logs: run.logs,
        logs_dropped: run.logs_dropped,
        tool_calls: tally.calls,
        duration_ms: elapsed_ms(started),
        memory_peak_bytes: run.memory_peak,
        activity_id,
    }
}

/// The execution's record, completed: how it ended, its inner calls and their outcomes.
fn complete(record: &mut ActivityRecord, report: &CodeReport, tally: &Tally) {
    record.status = if report.ok {
        Status::Success
    } else {
        Status::Error
    };
    if let Some(error) = &report.error {
        record.error_message = Some(error.clone());
    }
    record.duration_ms = report.duration_ms;
    record.response_bytes = report
        .result
        .as_ref()
        .map_or(0, super::super::record::json_len);
    record.details = Some(json!({
        "ended": report.ended,
        "inner_calls": tally.calls,
        "outcomes": tally.outcomes,
        "calls": tally.ids,
        "logs": report.logs.len() + report.logs_dropped,
        "memory_peak_bytes": report.memory_peak_bytes,
    }));
}

/// Tells the script's tool calls that the caller went away.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}
