//! `--scenario soak`: does mcpproxy's memory stay flat under abuse? Starts
//! `mcp-fixture` and `mcpproxy serve --plugins DIR` (a directory holding a faulting
//! validator such as the test fixture `trap.wasm`), then reads the proxy's resident
//! memory from `/proc/<pid>/status` after each phase:
//!
//! 1. `start`: the proxy is ready, nothing called yet;
//! 2. `warm-up`: a few faulting calls (the baseline the later phases compare to);
//! 3. `faulting-calls`: N `call_tool_read` calls of `fx:echo`, each of which the
//!    faulting validator traps on, so the proxy must reject it (fail closed) with a
//!    tool error that says the plugin trapped;
//! 4. `session-churn`: M MCP sessions opened (`initialize`, `notifications/initialized`)
//!    and closed (HTTP `DELETE`) over plain HTTP;
//! 5. `idle`: a short pause with nothing sent.
//!
//! A call that succeeds or fails in any other way, and a session that cannot be opened
//! or closed, is a failure of the scenario (counted per phase; exit status 1). Linux
//! only: memory is read from `/proc`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rmcp::model::{CallToolRequestParams, CallToolResponse, JsonObject};
use rmcp::service::{Peer, RoleClient};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::run;
use crate::scenario::{self, SERVER};

/// The text every rejection of a trapped validator carries ("validator plugin 'x'
/// trapped: ...", see the proxy's fail-closed message).
const FAULT_MARK: &str = "trapped";
/// The MCP protocol version the churned sessions ask for (one with HTTP sessions:
/// `mcp-session-id` and `DELETE`).
const PROTOCOL_VERSION: &str = "2025-06-18";

/// What the soak needs.
#[derive(Debug, Clone)]
pub struct Options {
    pub fixture: PathBuf,
    pub mcpproxy: PathBuf,
    /// Passed to `mcpproxy serve --plugins`; must hold a validator that faults.
    pub plugins: PathBuf,
    /// Extra top-level keys for mcpproxy's generated config.
    pub proxy_config: JsonObject,
    pub warmup: usize,
    pub calls: usize,
    pub sessions: usize,
    /// Calls, or sessions being opened and closed, in flight at once.
    pub concurrency: usize,
    /// The pause of the last phase.
    pub idle: Duration,
    /// The longest one call or one HTTP request may take.
    pub call_timeout: Duration,
}

/// The proxy's memory at one moment, from `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Memory {
    /// `VmRSS`: resident now, in KiB.
    pub rss_kib: u64,
    /// `VmHWM`: the most ever resident, in KiB.
    pub peak_kib: u64,
}

/// One phase and the memory after it.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub phase: &'static str,
    /// Calls made or sessions opened and closed.
    pub done: usize,
    /// Of those, how many did not behave as expected.
    pub errors: usize,
    pub first_error: Option<String>,
    pub elapsed_s: f64,
    #[serde(flatten)]
    pub memory: Memory,
}

/// The whole soak.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub scenario: &'static str,
    pub proxy_url: String,
    pub plugins: PathBuf,
    pub proxy_config: JsonObject,
    pub concurrency: usize,
    pub phases: Vec<Phase>,
}

impl Summary {
    /// Failures over all phases.
    pub fn errors(&self) -> usize {
        self.phases.iter().map(|p| p.errors).sum()
    }
}

/// Runs the soak. `Err` when it could not be run at all (a process did not start, the
/// proxy died, memory could not be read); failed calls and sessions are counted instead.
pub async fn soak(opts: &Options) -> Result<Summary> {
    if opts.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    if !opts.plugins.is_dir() {
        bail!(
            "--plugins {} is not a directory; point it at a directory holding a faulting \
             validator, e.g. the trap.wasm the host's build script leaves in \
             $CARGO_TARGET_DIR/wasm-plugins/wasm32-wasip2/release/",
            opts.plugins.display()
        );
    }
    let dir = tempfile::Builder::new()
        .prefix("mcp-load-soak-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let (mut fixture, fixture_url) = scenario::start_fixture(&opts.fixture).await?;
    let (mut proxy, proxy_url) = scenario::start_proxy(
        &opts.mcpproxy,
        &fixture_url,
        &opts.proxy_config,
        Some(&opts.plugins),
        dir.path(),
    )
    .await?;
    let pid = proxy
        .id()
        .context("mcpproxy exited right after it was ready")?;

    let result = phases(opts, &proxy_url, pid).await;

    let _ = proxy.kill().await;
    let _ = fixture.kill().await;
    Ok(Summary {
        scenario: "soak",
        proxy_url,
        plugins: opts.plugins.clone(),
        proxy_config: opts.proxy_config.clone(),
        concurrency: opts.concurrency,
        phases: result?,
    })
}

/// The five phases, memory read after each.
async fn phases(opts: &Options, url: &str, pid: u32) -> Result<Vec<Phase>> {
    let mut phases = vec![Phase::new("start", Tally::default(), read_memory(pid)?)];

    let clients = run::connect(url, 1, run::Connections::PerRequest).await?;
    let peer = clients
        .first()
        .map(|c| c.peer().clone())
        .context("no MCP session was opened")?;
    let params = CallToolRequestParams::new("call_tool_read").with_arguments(scenario::object(
        json!({"name": format!("{SERVER}:echo"), "args": {"text": "hi"}}),
    )?);
    eprintln!("mcp-load: soak: {} warm-up calls ...", opts.warmup);
    let warm = faulting_calls(&peer, &params, opts.warmup, opts, pid).await;
    if let Some((_, first)) = &warm.first {
        bail!(
            "warm-up: {} of {} calls did not come back as the expected fault; first: {first}. \
             Is the faulting validator in --plugins {}, and does the config run it?",
            warm.errors,
            opts.warmup,
            opts.plugins.display()
        );
    }
    phases.push(Phase::new("warm-up", warm, read_memory(pid)?));

    eprintln!("mcp-load: soak: {} faulting calls ...", opts.calls);
    let calls = faulting_calls(&peer, &params, opts.calls, opts, pid).await;
    phases.push(Phase::new("faulting-calls", calls, read_memory(pid)?));
    for client in clients {
        let _ = tokio::time::timeout(Duration::from_secs(5), client.cancel()).await;
    }

    eprintln!(
        "mcp-load: soak: {} sessions opened and closed ...",
        opts.sessions
    );
    let churn = churn(url, opts, pid).await?;
    phases.push(Phase::new("session-churn", churn, read_memory(pid)?));

    let started = Instant::now();
    tokio::time::sleep(opts.idle).await;
    let idle = Tally {
        elapsed: started.elapsed(),
        ..Tally::default()
    };
    phases.push(Phase::new("idle", idle, read_memory(pid)?));
    Ok(phases)
}

/// How a phase went.
#[derive(Debug, Default)]
struct Tally {
    done: usize,
    errors: usize,
    /// (item number, text) of the lowest-numbered failure.
    first: Option<(usize, String)>,
    elapsed: Duration,
}

impl Tally {
    fn fail(&mut self, n: usize, text: String) {
        self.errors += 1;
        self.keep_first(n, text);
    }

    fn keep_first(&mut self, n: usize, text: String) {
        if self.first.as_ref().is_none_or(|(m, _)| n < *m) {
            self.first = Some((n, text));
        }
    }

    fn merge(&mut self, other: Tally) {
        self.done += other.done;
        self.errors += other.errors;
        if let Some((n, text)) = other.first {
            self.keep_first(n, text);
        }
    }
}

impl Phase {
    fn new(phase: &'static str, tally: Tally, memory: Memory) -> Self {
        Self {
            phase,
            done: tally.done,
            errors: tally.errors,
            first_error: tally.first.map(|(_, text)| text),
            elapsed_s: tally.elapsed.as_secs_f64(),
            memory,
        }
    }
}

/// Runs `total` calls with `opts.concurrency` in flight; each must come back as a tool
/// error naming the fault. Stops early if the proxy process is gone.
async fn faulting_calls(
    peer: &Peer<RoleClient>,
    params: &CallToolRequestParams,
    total: usize,
    opts: &Options,
    pid: u32,
) -> Tally {
    let timeout = opts.call_timeout;
    let peer = peer.clone();
    let params = params.clone();
    items(total, opts.concurrency, pid, move |_| {
        let peer = peer.clone();
        let params = params.clone();
        async move {
            match tokio::time::timeout(timeout, peer.call_tool_once(params)).await {
                Err(_) => Err(format!("no answer within {timeout:?}")),
                Ok(Err(e)) => Err(format!("request failed: {e}")),
                Ok(Ok(CallToolResponse::Complete(result))) => {
                    let text = run::result_text(&result);
                    match result.is_error {
                        Some(true) if text.contains(FAULT_MARK) => Ok(()),
                        Some(true) => Err(format!(
                            "a tool error that does not mention the fault: {text}"
                        )),
                        _ => Err(format!(
                            "the call succeeded, but the faulting validator should have \
                             blocked it: {text}"
                        )),
                    }
                }
                Ok(Ok(_)) => Err("the server answered with a task or an input request, \
                                  not a tool result"
                    .into()),
            }
        }
    })
    .await
}

/// Opens and closes `opts.sessions` sessions over plain HTTP.
async fn churn(url: &str, opts: &Options, pid: u32) -> Result<Tally> {
    crate::install_crypto_provider();
    let http = reqwest::Client::builder()
        .timeout(opts.call_timeout)
        .build()
        .context("cannot build the HTTP client")?;
    let url = url.to_owned();
    Ok(items(opts.sessions, opts.concurrency, pid, move |n| {
        let http = http.clone();
        let url = url.clone();
        async move { open_and_close(&http, &url, n).await }
    })
    .await)
}

/// One session: `initialize`, `notifications/initialized`, `DELETE`.
async fn open_and_close(http: &reqwest::Client, url: &str, n: usize) -> Result<(), String> {
    let initialize = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "mcp-load-soak", "version": env!("CARGO_PKG_VERSION")}
        }
    });
    let response = post(http, url, None, &initialize)
        .send()
        .await
        .map_err(|e| format!("session {n}: initialize: {e}"))?;
    let status = response.status();
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = response
        .text()
        .await
        .map_err(|e| format!("session {n}: initialize: cannot read the answer: {e}"))?;
    if !status.is_success() {
        return Err(format!(
            "session {n}: initialize: HTTP {status}: {}",
            clip(&body)
        ));
    }
    let Some(session) = session else {
        return Err(format!(
            "session {n}: initialize: HTTP {status} without an mcp-session-id header"
        ));
    };
    if !body.contains("\"result\"") {
        return Err(format!(
            "session {n}: initialize: no result in the answer: {}",
            clip(&body)
        ));
    }

    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = post(http, url, Some(&session), &initialized)
        .send()
        .await
        .map_err(|e| format!("session {n}: notifications/initialized: {e}"))?;
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        return Err(format!(
            "session {n}: notifications/initialized: HTTP {status}: {}",
            clip(&body)
        ));
    }

    let response = http
        .delete(url)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", PROTOCOL_VERSION)
        .send()
        .await
        .map_err(|e| format!("session {n}: DELETE: {e}"))?;
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        return Err(format!(
            "session {n}: DELETE: HTTP {status}: {}",
            clip(&body)
        ));
    }
    Ok(())
}

fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: &Value,
) -> reqwest::RequestBuilder {
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", PROTOCOL_VERSION);
    }
    request
}

/// The first 300 characters of an answer, for an error message.
fn clip(text: &str) -> String {
    const MAX: usize = 300;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// Runs `one(n)` for n in 0..total with `concurrency` tasks pulling numbers from a
/// shared counter, and tallies the outcomes. A task stops once process `pid` (the
/// proxy) has gone, so a crashed proxy does not cost `total` timeouts.
async fn items<F, Fut>(total: usize, concurrency: usize, pid: u32, one: F) -> Tally
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<(), String>> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..concurrency.min(total) {
        let next = next.clone();
        let one = one.clone();
        tasks.spawn(async move {
            let mut mine = Tally::default();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= total {
                    break;
                }
                mine.done += 1;
                if let Err(text) = one(n).await {
                    mine.fail(n, text);
                    if read_memory(pid).is_err() {
                        mine.fail(n, format!("mcpproxy (pid {pid}) is gone"));
                        break;
                    }
                }
            }
            mine
        });
    }
    let mut all = Tally::default();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(part) => all.merge(part),
            Err(e) => all.fail(usize::MAX, format!("a load task failed: {e}")),
        }
    }
    all.elapsed = started.elapsed();
    all
}

/// Reads `pid`'s memory from `/proc/<pid>/status`.
fn read_memory(pid: u32) -> Result<Memory> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!("cannot read {path}: has mcpproxy exited? (the soak needs Linux's /proc)")
    })?;
    parse_status(&text).with_context(|| format!("in {path}"))
}

/// `VmRSS` and `VmHWM` from the text of a `/proc/<pid>/status` file.
pub fn parse_status(text: &str) -> Result<Memory> {
    let field = |name: &str| -> Result<u64> {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .with_context(|| format!("no {name} line"))?;
        let value = line.trim();
        let number = value
            .strip_suffix("kB")
            .with_context(|| format!("{name} is not in kB: {value:?}"))?;
        number
            .trim()
            .parse()
            .with_context(|| format!("{name} is not a number of kB: {value:?}"))
    };
    Ok(Memory {
        rss_kib: field("VmRSS")?,
        peak_kib: field("VmHWM")?,
    })
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The soak as a table, one row per phase, RSS change from the warm-up baseline.
pub fn table(summary: &Summary) -> String {
    let mut out = format!(
        "mcpproxy --plugins {}, concurrency {}\n",
        summary.plugins.display(),
        summary.concurrency
    );
    if !summary.proxy_config.is_empty() {
        let extra = Value::Object(summary.proxy_config.clone());
        out.push_str(&format!("mcpproxy config extra: {extra}\n"));
    }
    let baseline = summary
        .phases
        .iter()
        .find(|p| p.phase == "warm-up")
        .map(|p| p.memory.rss_kib);
    out.push_str(&format!(
        "{:<15} {:>7} {:>7} {:>9} {:>9} {:>9} {:>9}\n",
        "phase", "done", "errors", "secs", "RSS MiB", "Δ MiB", "peak MiB"
    ));
    for p in &summary.phases {
        let delta = baseline.map_or_else(
            || "-".to_owned(),
            |b| format!("{:+.1}", mib(p.memory.rss_kib) - mib(b)),
        );
        out.push_str(&format!(
            "{:<15} {:>7} {:>7} {:>9.1} {:>9.1} {:>9} {:>9.1}\n",
            p.phase,
            p.done,
            p.errors,
            p.elapsed_s,
            mib(p.memory.rss_kib),
            delta,
            mib(p.memory.peak_kib),
        ));
    }
    for p in summary.phases.iter().filter(|p| p.errors > 0) {
        out.push_str(&format!(
            "{}: {} errors; first: {}\n",
            p.phase,
            p.errors,
            p.first_error.as_deref().unwrap_or("?")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tmcpproxy\nUmask:\t0022\nState:\tS (sleeping)\n\
        VmPeak:\t 1234567 kB\nVmSize:\t 1200000 kB\nVmHWM:\t   81234 kB\n\
        VmRSS:\t   40960 kB\nRssAnon:\t   30000 kB\nThreads:\t7\n";

    #[test]
    fn reads_rss_and_peak_from_proc_status() {
        let memory = parse_status(STATUS).unwrap();
        assert_eq!(
            memory,
            Memory {
                rss_kib: 40960,
                peak_kib: 81234
            }
        );
    }

    #[test]
    fn a_status_without_the_fields_is_an_error_that_names_them() {
        let err = parse_status("Name:\tx\nVmHWM:\t1 kB\n").unwrap_err();
        assert!(format!("{err:#}").contains("VmRSS"), "{err:#}");
        // `VmRSSx:` is not `VmRSS:`; a unit other than kB is refused.
        assert!(parse_status("VmRSSx:\t1 kB\nVmHWM:\t1 kB\n").is_err());
        let err = parse_status("VmRSS:\t1 MB\nVmHWM:\t1 kB\n").unwrap_err();
        assert!(format!("{err:#}").contains("not in kB"), "{err:#}");
    }

    #[test]
    fn reads_this_process() {
        let memory = read_memory(std::process::id()).unwrap();
        assert!(memory.rss_kib > 0 && memory.peak_kib >= memory.rss_kib);
    }

    fn phase(name: &'static str, done: usize, errors: usize, rss_kib: u64) -> Phase {
        Phase {
            phase: name,
            done,
            errors,
            first_error: (errors > 0).then(|| "boom".to_owned()),
            elapsed_s: 1.5,
            memory: Memory {
                rss_kib,
                peak_kib: 102_400,
            },
        }
    }

    #[test]
    fn the_table_shows_each_phase_against_the_warm_up() {
        let summary = Summary {
            scenario: "soak",
            proxy_url: "http://127.0.0.1:1/mcp".into(),
            plugins: "p".into(),
            proxy_config: JsonObject::new(),
            concurrency: 8,
            phases: vec![
                phase("start", 0, 0, 30_720),
                phase("warm-up", 200, 0, 40_960),
                phase("faulting-calls", 10_000, 2, 46_080),
            ],
        };
        let table = table(&summary);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "mcpproxy --plugins p, concurrency 8");
        assert!(lines[1].starts_with("phase"), "{table}");
        let row: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(row, ["start", "0", "0", "1.5", "30.0", "-10.0", "100.0"]);
        let row: Vec<&str> = lines[4].split_whitespace().collect();
        assert_eq!(
            row,
            [
                "faulting-calls",
                "10000",
                "2",
                "1.5",
                "45.0",
                "+5.0",
                "100.0"
            ]
        );
        assert_eq!(lines[5], "faulting-calls: 2 errors; first: boom");
        assert_eq!(summary.errors(), 2);
    }

    #[test]
    fn a_tally_keeps_the_lowest_numbered_failure() {
        let mut a = Tally {
            done: 3,
            ..Tally::default()
        };
        a.fail(7, "seven".into());
        let mut b = Tally {
            done: 2,
            ..Tally::default()
        };
        b.fail(3, "three".into());
        b.fail(9, "nine".into());
        a.merge(b);
        assert_eq!((a.done, a.errors), (5, 3));
        assert_eq!(a.first, Some((3, "three".to_owned())));
    }

    #[test]
    fn the_json_has_the_memory_beside_each_phase() {
        let value = serde_json::to_value(phase("idle", 0, 0, 2048)).unwrap();
        assert_eq!(value["rss_kib"], 2048);
        assert_eq!(value["peak_kib"], 102_400);
        assert_eq!(value["phase"], "idle");
    }
}
