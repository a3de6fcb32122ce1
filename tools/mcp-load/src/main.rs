//! `mcp-load`: a load generator for MCP servers over streamable HTTP.
//!
//! ```text
//! mcp-load --url http://127.0.0.1:PORT/mcp --tool echo --args '{"text":"hi"}' \
//!     [--requests 2000] [--concurrency 1] [--warmup 200] [--sessions 1] [-o text|json]
//!     [--connections per-request|keep-alive]
//! mcp-load --scenario proxy-overhead --fixture target/dist/mcp-fixture \
//!     --mcpproxy target/dist/mcpproxy [--requests 3000] [--proxy-config JSON]
//! mcp-load --scenario soak --fixture target/dist/mcp-fixture \
//!     --mcpproxy target/dist/mcpproxy --plugins DIR-WITH-trap.wasm \
//!     [--faulting-calls 10000] [--churn-sessions 20000] [-c 8] [--idle 2]
//! mcp-load --scenario compare --fixture target/dist/mcp-fixture \
//!     --mcpproxy target/dist/mcpproxy [--peer PATH-TO-mcp-proxy] [--rounds 3] \
//!     [--baseline PATH-TO-AN-EARLIER-mcpproxy]
//! ```
//!
//! The first form calls one tool N times with C calls in flight and reports
//! throughput and latency percentiles. The second starts `mcp-fixture` and
//! `mcpproxy` on loopback and compares a direct call with a proxied one; the
//! third starts them with a faulting validator and reports the proxy's memory
//! after faulting calls and session churn; the fourth measures direct, mcpproxy and a peer
//! proxy (the Python `mcp-proxy`), and optionally a second mcpproxy build, in interleaved
//! rounds (see `docs/benchmarks.md`). Exits 1
//! if any measured call failed, 2 if the run could not be made at all.

mod compare;
mod run;
mod scenario;
mod soak;
mod stats;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use rmcp::model::JsonObject;

use crate::run::{LoadSpec, Report};

/// A load generator for MCP servers: calls one tool N times at a given
/// concurrency and reports latency percentiles.
#[derive(Debug, Parser)]
#[command(name = "mcp-load", version)]
struct Cli {
    /// The server's MCP streamable-HTTP endpoint, e.g. http://127.0.0.1:8080/mcp.
    #[arg(long, required_unless_present = "scenario")]
    url: Option<String>,

    /// The tool to call.
    #[arg(long, required_unless_present = "scenario")]
    tool: Option<String>,

    /// The tool's arguments, as a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    args: String,

    /// Measured calls (per case, with --scenario).
    #[arg(long, short = 'n', value_name = "N", default_value_t = 2000)]
    requests: usize,

    /// Calls in flight at once [default: 1; soak: 8] (proxy-overhead ignores it
    /// and uses 1 and 16).
    #[arg(long, short = 'c', value_name = "C", value_parser = clap::value_parser!(u32).range(1..))]
    concurrency: Option<u32>,

    /// Unmeasured calls made first; any failure among them stops the run.
    #[arg(long, value_name = "W", default_value_t = 200)]
    warmup: usize,

    /// Client sessions to open; calls are spread over them round-robin.
    #[arg(long, value_name = "S", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    sessions: u32,

    /// Seconds one call may take before it counts as an error.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    timeout: u64,

    /// How the client uses HTTP connections: `per-request` opens a new one for every
    /// request (rmcp's client); `keep-alive` reuses them (the official TypeScript and
    /// Python SDK clients).
    #[arg(long, value_enum, default_value_t = run::Connections::PerRequest)]
    connections: run::Connections,

    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Text)]
    output: Format,

    /// Run a built-in measurement instead of calling --url.
    #[arg(long, value_enum, requires_all = ["fixture", "mcpproxy"], conflicts_with_all = ["url", "tool"])]
    scenario: Option<Scenario>,

    /// The `mcp-fixture` binary (for --scenario).
    #[arg(long, value_name = "PATH")]
    fixture: Option<PathBuf>,

    /// The `mcpproxy` binary (for --scenario).
    #[arg(long, value_name = "PATH")]
    mcpproxy: Option<PathBuf>,

    /// Extra top-level keys for mcpproxy's config (for --scenario), as a JSON
    /// object, e.g. '{"activity":{"durability":"async"}}'.
    #[arg(long, value_name = "JSON", default_value = "{}", requires = "scenario")]
    proxy_config: String,

    /// A directory of extra plugins, passed to `mcpproxy serve --plugins` (for
    /// --scenario; soak needs one holding a faulting validator such as trap.wasm).
    #[arg(
        long,
        value_name = "DIR",
        requires = "scenario",
        required_if_eq("scenario", "soak")
    )]
    plugins: Option<PathBuf>,

    /// Faulting calls the soak makes (after --warmup).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    faulting_calls: usize,

    /// Sessions the soak opens and closes.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    churn_sessions: usize,

    /// Seconds the soak idles before its last memory reading.
    #[arg(long, value_name = "SECS", default_value_t = 2)]
    idle: u64,

    /// The peer proxy compare measures [default: `mcp-proxy` on the PATH].
    #[arg(long, value_name = "PATH")]
    peer: Option<PathBuf>,

    /// Interleaved rounds compare makes; it reports the medians.
    #[arg(long, value_name = "N", default_value_t = 3)]
    rounds: usize,

    /// A second mcpproxy build compare measures beside --mcpproxy, the same way (an
    /// earlier commit's, for a before-and-after in one run).
    #[arg(long, value_name = "PATH")]
    baseline: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    /// Direct to mcp-fixture vs through mcpproxy, at concurrency 1 and 16.
    ProxyOverhead,
    /// mcpproxy's memory before and after faulting plugin calls and session churn.
    Soak,
    /// Direct, mcpproxy and a peer proxy (Python `mcp-proxy`) in interleaved rounds.
    Compare,
}

/// ring as rustls's provider, once: reqwest is built without one of its own in this
/// workspace (rmcp's `reqwest-tls-no-provider`) and panics when it builds a client before one
/// is installed. Called before every client is built (the tests build theirs too).
pub(crate) fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[tokio::main]
async fn main() -> ExitCode {
    install_crypto_provider();
    let cli = Cli::parse();
    match run_cli(cli).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("mcp-load: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// A scenario's summary: the table (for `-o text`), then the JSON.
fn print_summary(output: Format, table: &str, summary: &impl serde::Serialize) -> Result<()> {
    let json = serde_json::to_string_pretty(summary).context("cannot encode the summary")?;
    if output == Format::Text {
        print!("{table}");
        println!();
    }
    println!("{json}");
    Ok(())
}

/// Runs what the command line asks for; `Ok(false)` when some call failed.
async fn run_cli(cli: Cli) -> Result<bool> {
    let call_timeout = Duration::from_secs(cli.timeout.max(1));
    if let Some(Scenario::ProxyOverhead) = cli.scenario {
        let (Some(fixture), Some(mcpproxy)) = (cli.fixture, cli.mcpproxy) else {
            bail!("--scenario proxy-overhead needs --fixture PATH and --mcpproxy PATH");
        };
        let opts = scenario::Options {
            fixture,
            mcpproxy,
            requests: cli.requests,
            warmup: cli.warmup,
            sessions: cli.sessions as usize,
            call_timeout,
            connections: cli.connections,
            proxy_config: parse_object("--proxy-config", &cli.proxy_config)?,
            plugins: cli.plugins,
        };
        let summary = scenario::proxy_overhead(&opts).await?;
        print_summary(cli.output, &scenario::table(&summary), &summary)?;
        for case in summary.cases.iter().filter(|c| c.report.errors > 0) {
            eprintln!(
                "mcp-load: {} c={}: {} errors; first: {}",
                case.path,
                case.report.concurrency,
                case.report.errors,
                case.report.first_error.as_deref().unwrap_or("?")
            );
        }
        return Ok(summary.errors() == 0);
    }

    if let Some(Scenario::Compare) = cli.scenario {
        let (Some(fixture), Some(mcpproxy)) = (cli.fixture, cli.mcpproxy) else {
            bail!("--scenario compare needs --fixture PATH and --mcpproxy PATH");
        };
        let opts = compare::Options {
            fixture,
            mcpproxy,
            peer: compare::find_peer(cli.peer),
            baseline: cli.baseline,
            requests: cli.requests,
            warmup: cli.warmup,
            rounds: cli.rounds,
            call_timeout,
            connections: cli.connections,
            proxy_config: parse_object("--proxy-config", &cli.proxy_config)?,
        };
        let summary = compare::compare(&opts).await?;
        print_summary(cli.output, &compare::table(&summary), &summary)?;
        return Ok(summary.errors() == 0);
    }

    if let Some(Scenario::Soak) = cli.scenario {
        let (Some(fixture), Some(mcpproxy), Some(plugins)) =
            (cli.fixture, cli.mcpproxy, cli.plugins)
        else {
            bail!("--scenario soak needs --fixture PATH, --mcpproxy PATH and --plugins DIR");
        };
        let opts = soak::Options {
            fixture,
            mcpproxy,
            plugins,
            proxy_config: parse_object("--proxy-config", &cli.proxy_config)?,
            warmup: cli.warmup,
            calls: cli.faulting_calls,
            sessions: cli.churn_sessions,
            concurrency: cli.concurrency.unwrap_or(8) as usize,
            idle: Duration::from_secs(cli.idle),
            call_timeout,
        };
        let summary = soak::soak(&opts).await?;
        print_summary(cli.output, &soak::table(&summary), &summary)?;
        for phase in summary.phases.iter().filter(|p| p.errors > 0) {
            eprintln!(
                "mcp-load: soak {}: {} errors; first: {}",
                phase.phase,
                phase.errors,
                phase.first_error.as_deref().unwrap_or("?")
            );
        }
        return Ok(summary.errors() == 0);
    }

    let (Some(url), Some(tool)) = (cli.url, cli.tool) else {
        bail!("--url and --tool are required");
    };
    let spec = LoadSpec {
        url,
        tool,
        args: parse_object("--args", &cli.args)?,
        requests: cli.requests,
        concurrency: cli.concurrency.unwrap_or(1) as usize,
        warmup: cli.warmup,
        sessions: cli.sessions as usize,
        call_timeout,
        connections: cli.connections,
    };
    let report = run::run(&spec).await?;
    match cli.output {
        Format::Text => print!("{}", text(&report)),
        Format::Json => println!(
            "{}",
            serde_json::to_string(&report).context("cannot encode the report")?
        ),
    }
    if let Some(first) = &report.first_error {
        eprintln!("mcp-load: {} errors; first: {first}", report.errors);
    }
    Ok(report.errors == 0)
}

/// A JSON-object option such as `--args`.
fn parse_object(flag: &str, raw: &str) -> Result<JsonObject> {
    match serde_json::from_str(raw).with_context(|| format!("{flag} is not valid JSON"))? {
        serde_json::Value::Object(map) => Ok(map),
        other => bail!("{flag} must be a JSON object, not {other}"),
    }
}

/// A human-readable report.
fn text(r: &Report) -> String {
    let mut out = format!(
        "url          {}\ntool         {}\nrequests     {} ({} errors)\nconcurrency  {} over {} session(s)\nwall time    {:.3} s\nthroughput   {:.1} calls/s\n",
        r.url,
        r.tool,
        r.requests,
        r.errors,
        r.concurrency,
        r.sessions,
        r.wall_ms / 1e3,
        r.calls_per_sec,
    );
    match r.latency {
        Some(l) => out.push_str(&format!(
            "latency µs   min {}  p50 {}  p90 {}  p99 {}  max {}\n",
            l.min_us, l.p50_us, l.p90_us, l.p99_us, l.max_us
        )),
        None => out.push_str("latency µs   - (no call succeeded)\n"),
    }
    if let Some(first) = &r.first_error {
        out.push_str(&format!("first error  {first}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_must_be_an_object() {
        assert!(parse_object("--args", r#"{"text":"hi"}"#).is_ok());
        assert!(parse_object("--args", "{}").is_ok_and(|m| m.is_empty()));
        assert!(parse_object("--args", "[1]").is_err());
        assert!(parse_object("--args", "not json").is_err());
    }

    #[test]
    fn cli_parses() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from(["mcp-load", "--url", "http://x/mcp", "--tool", "echo"]);
        assert!(cli.is_ok());
        // --scenario needs both binaries and conflicts with --url.
        assert!(Cli::try_parse_from(["mcp-load", "--scenario", "proxy-overhead"]).is_err());
        assert!(
            Cli::try_parse_from([
                "mcp-load",
                "--scenario",
                "proxy-overhead",
                "--fixture",
                "f",
                "--mcpproxy",
                "m",
            ])
            .is_ok()
        );
        assert!(Cli::try_parse_from(["mcp-load", "--tool", "echo"]).is_err());
        // soak also needs --plugins; its own options are accepted.
        let soak = [
            "mcp-load",
            "--scenario",
            "soak",
            "--fixture",
            "f",
            "--mcpproxy",
            "m",
        ];
        assert!(Cli::try_parse_from(soak).is_err());
        let cli = Cli::try_parse_from(soak.into_iter().chain([
            "--plugins",
            "dir",
            "--faulting-calls",
            "100",
            "--churn-sessions",
            "50",
            "-c",
            "4",
            "--idle",
            "0",
            "-o",
            "json",
        ]));
        let cli = cli.unwrap();
        assert_eq!(cli.scenario, Some(Scenario::Soak));
        assert_eq!(cli.plugins, Some(PathBuf::from("dir")));
        assert_eq!(
            (cli.faulting_calls, cli.churn_sessions, cli.idle),
            (100, 50, 0)
        );
        assert_eq!(cli.concurrency, Some(4));
        let cli = Cli::try_parse_from(soak.into_iter().chain(["--plugins", "d"])).unwrap();
        assert_eq!(
            (cli.faulting_calls, cli.churn_sessions, cli.idle),
            (10_000, 20_000, 2)
        );
        assert_eq!(cli.concurrency, None);
        // --plugins is for scenarios only.
        assert!(
            Cli::try_parse_from(["mcp-load", "--url", "u", "--tool", "t", "--plugins", "d"])
                .is_err()
        );
        assert!(Cli::try_parse_from(["mcp-load", "--url", "u", "--tool", "t", "-c", "0"]).is_err());
    }

    #[test]
    fn compare_takes_a_peer_and_rounds() {
        let cli = Cli::try_parse_from([
            "mcp-load",
            "--scenario",
            "compare",
            "--fixture",
            "f",
            "--mcpproxy",
            "m",
            "--peer",
            "/venv/bin/mcp-proxy",
            "--rounds",
            "5",
            "--baseline",
            "/tmp/mcpproxy-before",
        ])
        .unwrap();
        assert_eq!(cli.scenario, Some(Scenario::Compare));
        assert_eq!(cli.peer, Some(PathBuf::from("/venv/bin/mcp-proxy")));
        assert_eq!(cli.rounds, 5);
        assert_eq!(cli.baseline, Some(PathBuf::from("/tmp/mcpproxy-before")));
        let defaults = Cli::try_parse_from([
            "mcp-load",
            "--scenario",
            "compare",
            "--fixture",
            "f",
            "--mcpproxy",
            "m",
        ])
        .unwrap();
        assert_eq!((defaults.peer, defaults.rounds), (None, 3));
        assert_eq!(defaults.baseline, None);
        assert_eq!(defaults.connections, run::Connections::PerRequest);
    }

    #[test]
    fn connections_are_per_request_unless_kept_alive() {
        let base = ["mcp-load", "--url", "u", "--tool", "t"];
        let cli = Cli::try_parse_from(base).unwrap();
        assert_eq!(cli.connections, run::Connections::PerRequest);
        let cli = Cli::try_parse_from(base.iter().chain(&["--connections", "keep-alive"])).unwrap();
        assert_eq!(cli.connections, run::Connections::KeepAlive);
        assert!(Cli::try_parse_from(base.iter().chain(&["--connections", "pooled"])).is_err());
    }
}
