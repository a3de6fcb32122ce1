//! `--scenario proxy-overhead` (issue 3): start `mcp-fixture` over HTTP and
//! `mcpproxy` in front of it, then measure the same cheap call direct to the
//! fixture and through the proxy, each at concurrency 1 and 16.
//!
//! Both processes listen on 127.0.0.1 with an OS-chosen port, use a temporary
//! config and data directory, and are killed when the scenario ends, however it
//! ends (`kill_on_drop`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use rmcp::model::JsonObject;
use serde::Serialize;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader, Lines};
use tokio::process::{Child, Command};

use crate::run::{self, LoadSpec, Report};

/// How long each process may take to print its ready line(s).
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// The concurrency levels measured for each path.
const CONCURRENCY: [usize; 2] = [1, 16];
/// The upstream's name in mcpproxy's config; the proxied tool is `fx:echo`.
pub(crate) const SERVER: &str = "fx";

/// What the scenario needs besides the common load options.
#[derive(Debug, Clone)]
pub struct Options {
    pub fixture: PathBuf,
    pub mcpproxy: PathBuf,
    pub requests: usize,
    pub warmup: usize,
    pub sessions: usize,
    pub call_timeout: Duration,
    pub connections: run::Connections,
    /// Extra top-level keys for mcpproxy's generated config (e.g. `activity`).
    pub proxy_config: JsonObject,
    /// Passed to `mcpproxy serve --plugins`, if given.
    pub plugins: Option<PathBuf>,
}

/// One measured case: which path and its report.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    /// `direct` (client → fixture) or `proxy` (client → mcpproxy → fixture).
    pub path: &'static str,
    #[serde(flatten)]
    pub report: Report,
}

/// The whole scenario's result.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub scenario: &'static str,
    pub fixture_url: String,
    pub proxy_url: String,
    /// The extra config keys mcpproxy ran with (`--proxy-config`).
    pub proxy_config: JsonObject,
    pub cases: Vec<Case>,
}

impl Summary {
    /// Errors over all cases.
    pub fn errors(&self) -> usize {
        self.cases.iter().map(|c| c.report.errors).sum()
    }
}

/// Runs the scenario and returns every case's report.
pub async fn proxy_overhead(opts: &Options) -> Result<Summary> {
    let dir = tempfile::Builder::new()
        .prefix("mcp-load-")
        .tempdir()
        .context("cannot create a temporary directory")?;

    let (mut fixture, fixture_url) = start_fixture(&opts.fixture).await?;
    let (mut proxy, proxy_url) = start_proxy(
        &opts.mcpproxy,
        &fixture_url,
        &opts.proxy_config,
        opts.plugins.as_deref(),
        dir.path(),
    )
    .await?;

    let result = measure(opts, &fixture_url, &proxy_url).await;

    // kill_on_drop covers the error paths; on the normal path kill and reap now.
    let _ = proxy.kill().await;
    let _ = fixture.kill().await;
    let cases = result?;
    Ok(Summary {
        scenario: "proxy-overhead",
        fixture_url,
        proxy_url,
        proxy_config: opts.proxy_config.clone(),
        cases,
    })
}

/// The four measurements, alternating direct and proxied at each concurrency.
async fn measure(opts: &Options, fixture_url: &str, proxy_url: &str) -> Result<Vec<Case>> {
    let echo_args = object(json!({"text": "hi"}))?;
    let proxied_args = object(json!({"name": format!("{SERVER}:echo"), "args": {"text": "hi"}}))?;
    let mut cases = Vec::new();
    for concurrency in CONCURRENCY {
        for (path, url, tool, args) in [
            ("direct", fixture_url, "echo", &echo_args),
            ("proxy", proxy_url, "call_tool_read", &proxied_args),
        ] {
            let spec = LoadSpec {
                url: url.to_owned(),
                tool: tool.to_owned(),
                args: args.clone(),
                requests: opts.requests,
                concurrency,
                warmup: opts.warmup,
                sessions: opts.sessions,
                call_timeout: opts.call_timeout,
                connections: opts.connections,
            };
            eprintln!("mcp-load: {path} c={concurrency}: {tool} at {url} ...");
            let report = run::run(&spec)
                .await
                .with_context(|| format!("{path} at concurrency {concurrency}"))?;
            cases.push(Case { path, report });
        }
    }
    Ok(cases)
}

pub(crate) fn object(value: serde_json::Value) -> Result<JsonObject> {
    match value {
        serde_json::Value::Object(map) => Ok(map),
        other => bail!("expected a JSON object, got {other}"),
    }
}

/// Starts `mcp-fixture --http 127.0.0.1:0` and reads its URL from stdout.
pub(crate) async fn start_fixture(binary: &Path) -> Result<(Child, String)> {
    let mut child = Command::new(binary)
        .args(["--http", "127.0.0.1:0"])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", binary.display()))?;
    let stdout = child.stdout.take().context("no stdout pipe")?;
    if let Some(stderr) = child.stderr.take() {
        drain(BufReader::new(stderr).lines());
    }
    let mut lines = BufReader::new(stdout).lines();
    let url = wait_for(&mut lines, "mcp-fixture", |line| {
        line.strip_prefix("MCP_FIXTURE_LISTENING ")
            .map(|url| Ok(url.trim().to_owned()))
    })
    .await?;
    drain(lines);
    Ok((child, url))
}

/// Starts `mcpproxy serve` in front of the fixture (with `--plugins DIR` when
/// `plugins` is given); returns once the upstream is ready, with the proxy's URL
/// read from its stderr.
pub(crate) async fn start_proxy(
    binary: &Path,
    fixture_url: &str,
    extra: &JsonObject,
    plugins: Option<&Path>,
    dir: &Path,
) -> Result<(Child, String)> {
    if extra.contains_key("mcpServers") {
        bail!(
            "--proxy-config must not set mcpServers: the scenario points mcpproxy at its fixture"
        );
    }
    let mut body = extra.clone();
    body.insert(
        "mcpServers".into(),
        json!([{"name": SERVER, "url": fixture_url}]),
    );
    start_proxy_with(binary, &serde_json::Value::Object(body), plugins, dir).await
}

/// Starts `mcpproxy serve` with `body` as its config (whose servers include [`SERVER`]);
/// returns once that upstream is ready, with the proxy's URL read from its stderr.
pub(crate) async fn start_proxy_with(
    binary: &Path,
    body: &serde_json::Value,
    plugins: Option<&Path>,
    dir: &Path,
) -> Result<(Child, String)> {
    let config = dir.join("mcp_config.json");
    let data = dir.join("data");
    std::fs::write(&config, body.to_string())
        .with_context(|| format!("cannot write {}", config.display()))?;

    let mut command = Command::new(binary);
    command
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .args(["--listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(&data);
    if let Some(plugins) = plugins {
        command.arg("--plugins").arg(plugins);
    }
    let mut child = command
        // Keep the user's ~/.mcpproxy and environment out of the measurement.
        .env("HOME", dir)
        .env_remove("MCPPROXY_CONFIG")
        .env_remove("MCPPROXY_DATA_DIR")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", binary.display()))?;
    let stderr = child.stderr.take().context("no stderr pipe")?;
    let mut lines = BufReader::new(stderr).lines();

    let url = wait_for(&mut lines, "mcpproxy", |line| {
        line.split_once(" listening on ")
            .filter(|(head, _)| head.starts_with("mcpproxy "))
            .map(|(_, url)| Ok(url.trim().to_owned()))
    })
    .await?;
    let prefix = format!("upstream {SERVER} (");
    wait_for(&mut lines, "mcpproxy", |line| {
        let rest = line.strip_prefix(&prefix)?;
        Some(if rest.contains("): ready") {
            Ok(())
        } else {
            Err(anyhow::anyhow!("the upstream did not become ready: {line}"))
        })
    })
    .await?;
    drain(lines);
    Ok((child, url))
}

/// Reads lines until `check` recognises one (returning its verdict), the stream
/// ends, or [`START_TIMEOUT`] passes. Errors quote the last lines read.
async fn wait_for<R, T>(
    lines: &mut Lines<BufReader<R>>,
    what: &str,
    mut check: impl FnMut(&str) -> Option<Result<T>>,
) -> Result<T>
where
    R: AsyncRead + Unpin,
{
    let mut seen: Vec<String> = Vec::new();
    let outcome = tokio::time::timeout(START_TIMEOUT, async {
        while let Some(line) = lines.next_line().await? {
            if let Some(verdict) = check(&line) {
                return verdict.map(Some);
            }
            seen.push(line);
        }
        Ok(None)
    })
    .await;
    let tail = || {
        let start = seen.len().saturating_sub(20);
        seen[start..].join("\n")
    };
    match outcome {
        Ok(Ok(Some(value))) => Ok(value),
        Ok(Ok(None)) => bail!("{what} exited before it was ready; its output:\n{}", tail()),
        Ok(Err(e)) => Err(e.context(format!("{what} failed to start; its output:\n{}", tail()))),
        Err(_) => bail!(
            "{what} was not ready within {START_TIMEOUT:?}; its output:\n{}",
            tail()
        ),
    }
}

/// Reads and discards the rest of a child's output so its pipe never fills.
fn drain<R>(mut lines: Lines<BufReader<R>>)
where
    R: AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
}

/// The scenario as a table, one row per case, plus the proxy's added p50 latency.
pub fn table(summary: &Summary) -> String {
    let mut out = String::new();
    if !summary.proxy_config.is_empty() {
        let extra = serde_json::Value::Object(summary.proxy_config.clone());
        out.push_str(&format!("mcpproxy config extra: {extra}\n"));
    }
    out.push_str(&format!(
        "{:<7} {:>4} {:>7} {:>7} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8}\n",
        "path", "c", "calls", "errors", "calls/s", "min µs", "p50 µs", "p90 µs", "p99 µs", "max µs"
    ));
    for case in &summary.cases {
        let r = &case.report;
        let l = r.latency;
        let cell = |f: fn(&crate::stats::Latency) -> u64| {
            l.as_ref()
                .map_or_else(|| "-".to_owned(), |l| f(l).to_string())
        };
        out.push_str(&format!(
            "{:<7} {:>4} {:>7} {:>7} {:>10.0} {:>8} {:>8} {:>8} {:>8} {:>8}\n",
            case.path,
            r.concurrency,
            r.requests,
            r.errors,
            r.calls_per_sec,
            cell(|l| l.min_us),
            cell(|l| l.p50_us),
            cell(|l| l.p90_us),
            cell(|l| l.p99_us),
            cell(|l| l.max_us),
        ));
    }
    for concurrency in CONCURRENCY {
        let find = |path: &str| {
            summary
                .cases
                .iter()
                .find(|c| c.path == path && c.report.concurrency == concurrency)
                .and_then(|c| c.report.latency.map(|l| (l.p50_us, c.report.calls_per_sec)))
        };
        if let (Some((direct_p50, direct_rate)), Some((proxy_p50, proxy_rate))) =
            (find("direct"), find("proxy"))
        {
            out.push_str(&format!(
                "c={concurrency}: the proxy adds {} µs at p50; throughput {:.0}% of direct\n",
                proxy_p50 as i64 - direct_p50 as i64,
                if direct_rate > 0.0 {
                    100.0 * proxy_rate / direct_rate
                } else {
                    0.0
                },
            ));
        }
    }
    out
}
