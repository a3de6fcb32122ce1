//! `--scenario compare` (issue 17): the same upstream (`mcp-fixture`'s `echo`) reached
//! directly over HTTP, through mcpproxy, and through a peer proxy when one is installed
//! (the Python `mcp-proxy` from PyPI), each proxy running the fixture over stdio as IDEs
//! run their servers, and through a second mcpproxy that reaches the same fixture over
//! HTTP (the path a remote MCP server takes; `mcpproxy (HTTP up)`). Rounds are interleaved (direct, mcpproxy, peer, direct, ...) so that
//! a machine that gets busier or quieter affects every path alike; each number reported is
//! the median over the rounds: p50 and p99 at concurrency 1, calls/s at concurrency 16,
//! and the ratios between the paths.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use rmcp::model::JsonObject;
use serde::Serialize;
use serde_json::json;
use tokio::process::{Child, Command};

use crate::run::{self, LoadSpec, Report};
use crate::scenario::{SERVER, object, start_fixture};

/// The path name of mcpproxy with the fixture as an HTTP upstream.
const HTTP_UPSTREAM_PATH: &str = "mcpproxy (HTTP up)";
/// The path name of the `--baseline` mcpproxy build (the fixture over stdio).
const BASELINE_PATH: &str = "mcpproxy (baseline)";

/// How long the peer proxy may take to listen.
const PEER_START_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct Options {
    pub fixture: PathBuf,
    pub mcpproxy: PathBuf,
    /// The peer proxy's executable (`mcp-proxy`), if one is to be measured.
    pub peer: Option<PathBuf>,
    /// Another mcpproxy build, measured as `--mcpproxy` is (a before-and-after).
    pub baseline: Option<PathBuf>,
    pub requests: usize,
    pub warmup: usize,
    pub rounds: usize,
    pub call_timeout: Duration,
    pub connections: run::Connections,
    /// Extra top-level keys for mcpproxy's config (e.g. `activity`).
    pub proxy_config: JsonObject,
}

/// The medians of one path over the rounds.
#[derive(Debug, Clone, Serialize)]
pub struct PathResult {
    pub path: String,
    pub url: String,
    pub c1_p50_us: u64,
    pub c1_p99_us: u64,
    pub c16_calls_per_sec: f64,
    pub errors: usize,
    /// Every round's reports, in order (c=1 then c=16 per round).
    pub rounds: Vec<Report>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub scenario: &'static str,
    pub rounds: usize,
    pub requests: usize,
    pub connections: run::Connections,
    pub proxy_config: JsonObject,
    pub paths: Vec<PathResult>,
    /// Why the peer was not measured, when it was not.
    pub peer_skipped: Option<String>,
}

impl Summary {
    pub fn errors(&self) -> usize {
        self.paths.iter().map(|p| p.errors).sum()
    }
}

/// One path to measure: where, which tool, which arguments.
struct Target {
    path: String,
    url: String,
    tool: &'static str,
    args: JsonObject,
}

pub async fn compare(opts: &Options) -> Result<Summary> {
    if opts.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    let dir = tempfile::Builder::new()
        .prefix("mcp-load-compare-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let (mut fixture, fixture_url) = start_fixture(&opts.fixture).await?;
    let stdio_dir = dir.path().join("stdio");
    let http_dir = dir.path().join("http");
    for sub in [&stdio_dir, &http_dir] {
        std::fs::create_dir(sub).with_context(|| format!("cannot create {}", sub.display()))?;
    }
    let (mut proxy, proxy_url) = start_mcpproxy(opts, &opts.mcpproxy, &stdio_dir).await?;
    let mut baseline = None;
    if let Some(binary) = &opts.baseline {
        let baseline_dir = dir.path().join("baseline");
        std::fs::create_dir(&baseline_dir)
            .with_context(|| format!("cannot create {}", baseline_dir.display()))?;
        baseline = Some(start_mcpproxy(opts, binary, &baseline_dir).await?);
    }
    let (mut http_proxy, http_proxy_url) = crate::scenario::start_proxy(
        &opts.mcpproxy,
        &fixture_url,
        &opts.proxy_config,
        None,
        &http_dir,
    )
    .await?;
    let mut peer_skipped = None;
    let mut peer = None;
    match &opts.peer {
        Some(binary) => match start_peer(binary, &opts.fixture).await {
            Ok(started) => peer = Some(started),
            Err(e) => peer_skipped = Some(format!("{e:#}")),
        },
        None => {
            peer_skipped = Some(
                "no peer proxy: install `mcp-proxy` (pip install mcp-proxy) or pass --peer PATH"
                    .into(),
            );
        }
    }
    let echo = object(json!({"text": "hi"}))?;
    let proxied = object(json!({"name": format!("{SERVER}:echo"), "args": {"text": "hi"}}))?;
    let mut targets = vec![
        Target {
            path: "direct".into(),
            url: fixture_url,
            tool: "echo",
            args: echo.clone(),
        },
        Target {
            path: "mcpproxy".into(),
            url: proxy_url,
            tool: "call_tool_read",
            args: proxied.clone(),
        },
        Target {
            path: HTTP_UPSTREAM_PATH.into(),
            url: http_proxy_url,
            tool: "call_tool_read",
            args: proxied.clone(),
        },
    ];
    if let Some((_, url)) = &baseline {
        targets.push(Target {
            path: BASELINE_PATH.into(),
            url: url.clone(),
            tool: "call_tool_read",
            args: proxied,
        });
    }
    if let Some((_, url)) = &peer {
        targets.push(Target {
            path: "mcp-proxy (Python)".into(),
            url: url.clone(),
            tool: "echo",
            args: echo,
        });
    }
    let result = measure(opts, &targets).await;
    if let Some((mut child, _)) = peer {
        let _ = child.kill().await;
    }
    if let Some((mut child, _)) = baseline {
        let _ = child.kill().await;
    }
    let _ = proxy.kill().await;
    let _ = http_proxy.kill().await;
    let _ = fixture.kill().await;
    let paths = result?;
    Ok(Summary {
        scenario: "compare",
        rounds: opts.rounds,
        requests: opts.requests,
        connections: opts.connections,
        proxy_config: opts.proxy_config.clone(),
        paths,
        peer_skipped,
    })
}

async fn measure(opts: &Options, targets: &[Target]) -> Result<Vec<PathResult>> {
    let mut reports: Vec<Vec<Report>> = vec![Vec::new(); targets.len()];
    for round in 1..=opts.rounds {
        for (i, target) in targets.iter().enumerate() {
            for concurrency in [1, 16] {
                eprintln!(
                    "mcp-load: round {round}/{}: {} c={concurrency} ...",
                    opts.rounds, target.path
                );
                let spec = LoadSpec {
                    url: target.url.clone(),
                    tool: target.tool.to_owned(),
                    args: target.args.clone(),
                    requests: opts.requests,
                    concurrency,
                    warmup: opts.warmup,
                    sessions: 1,
                    call_timeout: opts.call_timeout,
                    connections: opts.connections,
                };
                let report = run::run(&spec)
                    .await
                    .with_context(|| format!("{} at concurrency {concurrency}", target.path))?;
                reports[i].push(report);
            }
        }
    }
    Ok(targets
        .iter()
        .zip(reports)
        .map(|(target, rounds)| {
            let at = |c: usize| rounds.iter().filter(move |r| r.concurrency == c);
            PathResult {
                path: target.path.clone(),
                url: target.url.clone(),
                c1_p50_us: median_u64(at(1).filter_map(|r| r.latency.map(|l| l.p50_us))),
                c1_p99_us: median_u64(at(1).filter_map(|r| r.latency.map(|l| l.p99_us))),
                c16_calls_per_sec: median_f64(at(16).map(|r| r.calls_per_sec)),
                errors: rounds.iter().map(|r| r.errors).sum(),
                rounds,
            }
        })
        .collect())
}

fn median_u64(values: impl Iterator<Item = u64>) -> u64 {
    let mut values: Vec<u64> = values.collect();
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0)
}

fn median_f64(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// mcpproxy (the build at `binary`) with the fixture as a stdio upstream.
async fn start_mcpproxy(opts: &Options, binary: &Path, dir: &Path) -> Result<(Child, String)> {
    if opts.proxy_config.contains_key("mcpServers") {
        bail!(
            "--proxy-config must not set mcpServers: the scenario points mcpproxy at its fixture"
        );
    }
    let mut body = opts.proxy_config.clone();
    body.insert(
        "mcpServers".into(),
        json!([{"name": SERVER, "command": opts.fixture}]),
    );
    crate::scenario::start_proxy_with(binary, &serde_json::Value::Object(body), None, dir).await
}

/// The Python `mcp-proxy` serving the fixture (over stdio) on a free loopback port.
async fn start_peer(binary: &Path, fixture: &Path) -> Result<(Child, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .context("cannot find a free port")?
        .port();
    let child = Command::new(binary)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--log-level", "WARNING"])
        .arg(fixture)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", binary.display()))?;
    let deadline = tokio::time::Instant::now() + PEER_START_TIMEOUT;
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "{} did not listen on 127.0.0.1:{port} within {PEER_START_TIMEOUT:?}",
                binary.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok((child, format!("http://127.0.0.1:{port}/mcp")))
}

/// The peer proxy to use: `explicit`, else `mcp-proxy` on the PATH.
pub fn find_peer(explicit: Option<PathBuf>) -> Option<PathBuf> {
    explicit.or_else(|| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("mcp-proxy"))
                .find(|candidate| candidate.is_file())
        })
    })
}

/// The summary as a table, with the ratios.
pub fn table(summary: &Summary) -> String {
    let mut out = format!(
        "{} interleaved rounds of {} calls, {} connections; medians over the rounds\n",
        summary.rounds,
        summary.requests,
        match summary.connections {
            run::Connections::PerRequest => "per-request",
            run::Connections::KeepAlive => "keep-alive",
        }
    );
    out.push_str(&format!(
        "{:<20} {:>12} {:>12} {:>16} {:>7}\n",
        "path", "c=1 p50 µs", "c=1 p99 µs", "c=16 calls/s", "errors"
    ));
    for p in &summary.paths {
        out.push_str(&format!(
            "{:<20} {:>12} {:>12} {:>16.0} {:>7}\n",
            p.path, p.c1_p50_us, p.c1_p99_us, p.c16_calls_per_sec, p.errors
        ));
    }
    let direct = summary.paths.iter().find(|p| p.path == "direct");
    let ours = summary.paths.iter().find(|p| p.path == "mcpproxy");
    if let (Some(direct), Some(ours)) = (direct, ours) {
        out.push_str(&format!(
            "mcpproxy adds {} µs at p50 (c=1) over direct\n",
            ours.c1_p50_us as i64 - direct.c1_p50_us as i64
        ));
        for other in summary
            .paths
            .iter()
            .filter(|p| [HTTP_UPSTREAM_PATH, BASELINE_PATH].contains(&p.path.as_str()))
        {
            out.push_str(&format!(
                "{} adds {} µs at p50 (c=1) over direct\n",
                other.path,
                other.c1_p50_us as i64 - direct.c1_p50_us as i64
            ));
        }
        for peer in summary.paths.iter().filter(|p| {
            !["direct", "mcpproxy", HTTP_UPSTREAM_PATH, BASELINE_PATH].contains(&p.path.as_str())
        }) {
            out.push_str(&format!(
                "{} adds {} µs at p50 (c=1) over direct; mcpproxy's calls/s at c=16 are {:.2}x its\n",
                peer.path,
                peer.c1_p50_us as i64 - direct.c1_p50_us as i64,
                if peer.c16_calls_per_sec > 0.0 {
                    ours.c16_calls_per_sec / peer.c16_calls_per_sec
                } else {
                    0.0
                }
            ));
        }
    }
    if let Some(why) = &summary.peer_skipped {
        out.push_str(&format!("peer proxy not measured: {why}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median_u64([5, 1, 3].into_iter()), 3);
        assert_eq!(median_u64([4, 1, 3, 2].into_iter()), 3);
        assert_eq!(median_u64(std::iter::empty()), 0);
        assert_eq!(median_f64([2.0, 9.0, 1.0].into_iter()), 2.0);
    }

    #[test]
    fn an_explicit_peer_wins() {
        assert_eq!(
            find_peer(Some(PathBuf::from("/x/mcp-proxy"))),
            Some(PathBuf::from("/x/mcp-proxy"))
        );
    }
}
