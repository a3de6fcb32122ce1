//! `cargo xtask`: the project's own commands (the alias is in `.cargo/config.toml`).
//!
//! `cargo xtask test [NEXTEST ARGS...]` runs every test of the workspace the way CI does:
//!
//! 1. installs cargo-nextest from crates.io (`cargo install --locked`, pinned) when it is
//!    missing or older than the configuration needs;
//! 2. builds the fixture servers the integration tests start (so no test waits on a build);
//! 3. runs every test with `cargo nextest run --workspace` (`.config/nextest.toml`: a process
//!    per test, the heavy end-to-end tests in a group of their own, the longest first);
//! 4. runs the documentation examples with `cargo test --workspace --doc` (nextest does not
//!    run them);
//! 5. prints the 20 slowest tests and the time of each step.
//!
//! It exits non-zero when any step fails; the later steps still run, so one failure does not
//! hide another. `cargo test --workspace` runs the same tests, one binary after another.
//!
//! `cargo xtask stress [RUNS] [CPUS]` runs the integration tests RUNS times in a row (5) while
//! `stress --cpu CPUS` (2; Debian's `stress`) keeps the cores busy, and says how each run
//! ended: a test whose timing holds only on a quiet machine fails here.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// The cargo-nextest that `cargo xtask test` installs when none (or an older one) is there.
const NEXTEST_VERSION: &str = "0.9.143";
/// The oldest cargo-nextest `.config/nextest.toml` works with (`priority` in overrides).
const NEXTEST_MINIMUM: (u32, u32, u32) = (0, 9, 98);
/// The fixture servers the integration tests start (`tests/support/mcp.rs`).
const FIXTURES: &[&str] = &["mcp-fixture", "mcp-conformance-fixture"];
/// How many of the slowest tests the summary lists.
const SLOWEST: usize = 20;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = args.first().map(String::as_str);
    let outcome = match command {
        Some("test") => test(&args[1..]),
        Some("stress") => stress(&args[1..]),
        Some("help" | "--help" | "-h") | None => {
            println!("{}", usage());
            return ExitCode::SUCCESS;
        }
        Some(other) => {
            eprintln!("cargo xtask: unknown command '{other}'\n\n{}", usage());
            return ExitCode::from(2);
        }
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("cargo xtask {}: {e:#}", command.unwrap_or_default());
            ExitCode::FAILURE
        }
    }
}

fn usage() -> &'static str {
    "usage: cargo xtask test [ARGS...]\n       cargo xtask stress [RUNS] [CPUS]\n\n  \
     test     every test, as CI runs them: cargo nextest run --workspace [ARGS...] (nextest\n           \
     installed if missing), then the documentation examples, then the slowest tests\n  \
     stress   the integration tests RUNS times in a row (5) while `stress --cpu CPUS` (2)\n           \
     keeps the cores busy: timing that only holds on a quiet machine shows up here"
}

/// One step's name, how long it took and whether it passed.
struct Step {
    name: String,
    took: Duration,
    passed: bool,
}

/// Runs the steps; `Ok(false)` when a step failed.
fn test(nextest_args: &[String]) -> Result<bool> {
    let root = workspace_root()?;
    let mut steps = Vec::new();

    let mut step = |name: &str, run: &mut dyn FnMut() -> Result<bool>| -> Result<bool> {
        println!("\n==> {name}");
        let started = Instant::now();
        let passed = run()?;
        steps.push(Step {
            name: name.to_owned(),
            took: started.elapsed(),
            passed,
        });
        Ok(passed)
    };

    if !step("cargo-nextest", &mut || ensure_nextest(&root))? {
        bail!("cargo-nextest is missing and could not be installed (see above)");
    }
    let mut all_passed = true;
    all_passed &= step("the fixture servers", &mut || {
        let mut build = cargo(&root);
        build.arg("build");
        for fixture in FIXTURES {
            build.args(["-p", fixture]);
        }
        run(build)
    })?;
    all_passed &= step("tests: cargo nextest run --workspace", &mut || {
        let mut nextest = cargo(&root);
        nextest
            .args(["nextest", "run", "--workspace"])
            .args(nextest_args);
        run(nextest)
    })?;
    all_passed &= step(
        "documentation examples: cargo test --workspace --doc",
        &mut || {
            let mut doc = cargo(&root);
            doc.args(["test", "--workspace", "--doc"]);
            run(doc)
        },
    )?;

    let junit = root.join("target/nextest/default/junit.xml");
    match std::fs::read_to_string(&junit) {
        Ok(xml) => {
            println!("\nslowest tests:");
            for case in slowest(&xml, SLOWEST) {
                println!("{:>8.1} s  {} {}", case.seconds, case.binary, case.name);
            }
        }
        Err(e) => println!("\nno test times ({}: {e})", junit.display()),
    }
    println!("\nsteps:");
    for s in &steps {
        println!(
            "{:>6} s  {} {}",
            s.took.as_secs(),
            if s.passed { "ok    " } else { "FAILED" },
            s.name
        );
    }
    Ok(all_passed)
}

/// Runs the integration tests `RUNS` times in a row under `stress --cpu CPUS` (the Debian
/// package `stress`); `Ok(false)` when a run failed. Each run's summary line is printed as
/// it ends, and all of them at the end.
fn stress(args: &[String]) -> Result<bool> {
    let number = |at: usize, default: u32, what: &str| -> Result<u32> {
        match args.get(at) {
            None => Ok(default),
            Some(text) => text
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=100).contains(n))
                .with_context(|| {
                    format!("{what} must be a whole number from 1 to 100, not '{text}'")
                }),
        }
    };
    let runs = number(0, 5, "RUNS")?;
    let cpus = number(1, 2, "CPUS")?;
    let root = workspace_root()?;
    // In a process group of its own, so its workers can be stopped with it.
    let load = Command::new("stress")
        .args(["--cpu", &cpus.to_string()])
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("cannot start `stress` (Debian's package: apt-get install stress)")?;
    // The load stops with this task, however it ends.
    struct StopOnDrop(std::process::Child);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            // `stress` forks its workers into its process group; a signal to the parent
            // alone would leave them spinning.
            let _ = Command::new("kill")
                .args(["-TERM", "--", &format!("-{}", self.0.id())])
                .status();
            let _ = self.0.wait();
        }
    }
    let _load = StopOnDrop(load);
    let mut results = Vec::new();
    for round in 1..=runs {
        println!("\n==> run {round} of {runs} under stress --cpu {cpus}");
        let started = Instant::now();
        let mut nextest = cargo(&root);
        nextest.args([
            "nextest",
            "run",
            "--workspace",
            "-E",
            "binary_id(mcpproxy::integration)",
        ]);
        let passed = run(nextest)?;
        let line = format!(
            "run {round}: {} in {} s",
            if passed { "passed" } else { "FAILED" },
            started.elapsed().as_secs()
        );
        println!("{line}");
        results.push((passed, line));
    }
    println!("\nunder stress --cpu {cpus}:");
    for (_, line) in &results {
        println!("  {line}");
    }
    Ok(results.iter().all(|(passed, _)| *passed))
}

/// The workspace's root: where this crate's manifest says it is (`tools/xtask`, two up).
fn workspace_root() -> Result<PathBuf> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .context("tools/xtask has no workspace root two directories up")
}

/// A `cargo` command (the one running this task) in `root`.
fn cargo(root: &Path) -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(root);
    command
}

/// Runs `command`, its output going straight to ours; whether it succeeded.
fn run(mut command: Command) -> Result<bool> {
    let status = command
        .status()
        .with_context(|| format!("could not start {command:?}"))?;
    Ok(status.success())
}

/// Makes sure `cargo nextest` is there and new enough, installing the pinned version from
/// crates.io when it is not.
fn ensure_nextest(root: &Path) -> Result<bool> {
    let installed = cargo(root)
        .args(["nextest", "--version"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| parse_nextest_version(&String::from_utf8_lossy(&out.stdout)));
    match installed {
        Some(version) if version >= NEXTEST_MINIMUM => {
            println!("cargo-nextest {}.{}.{}", version.0, version.1, version.2);
            return Ok(true);
        }
        Some((major, minor, patch)) => println!(
            "cargo-nextest {major}.{minor}.{patch} is older than {}.{}.{}, which \
             .config/nextest.toml needs: installing {NEXTEST_VERSION}",
            NEXTEST_MINIMUM.0, NEXTEST_MINIMUM.1, NEXTEST_MINIMUM.2
        ),
        None => println!(
            "cargo-nextest is not installed: installing {NEXTEST_VERSION} from crates.io \
             (cargo install --locked; a few minutes, once)"
        ),
    }
    let mut install = cargo(root);
    install.args([
        "install",
        "--locked",
        "cargo-nextest",
        "--version",
        NEXTEST_VERSION,
    ]);
    run(install)
}

/// The version in `cargo nextest --version`'s first line (`cargo-nextest 0.9.143 (...)`).
fn parse_nextest_version(text: &str) -> Option<(u32, u32, u32)> {
    let word = text.lines().next()?.split_whitespace().nth(1)?;
    let mut parts = word.split('.').map(|p| p.parse::<u32>().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}

/// One test's time in a JUnit report.
#[derive(Debug, PartialEq)]
struct Timed {
    seconds: f64,
    binary: String,
    name: String,
}

/// The `n` slowest `<testcase>`s of a JUnit report (nextest's), slowest first. A case whose
/// attributes cannot be read is left out.
fn slowest(junit: &str, n: usize) -> Vec<Timed> {
    let mut cases: Vec<Timed> = junit
        .split("<testcase ")
        .skip(1)
        .filter_map(|case| {
            // The tag's attributes, with the space before the first one back.
            let tag = format!(" {}", case.split('>').next()?);
            Some(Timed {
                seconds: attribute(&tag, "time")?.parse().ok()?,
                binary: unescape(attribute(&tag, "classname")?),
                name: unescape(attribute(&tag, "name")?),
            })
        })
        .collect();
    cases.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    cases.truncate(n);
    cases
}

/// The value of `name="..."` in a tag's text.
fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = tag[start..].find('"')?;
    Some(&tag[start..start + len])
}

/// XML's five predefined entities, decoded.
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slowest_cases_come_first_and_unreadable_ones_are_left_out() {
        let junit = r#"<testsuites><testsuite name="mcpproxy::integration">
            <testcase name="a::fast" classname="mcpproxy::integration" timestamp="x" time="0.5"></testcase>
            <testcase name="b::slow &amp; steady" classname="mcpproxy::integration" time="12.25"/>
            <testcase name="c::no_time" classname="mcpproxy::integration"/>
            <testcase name="d::middle" classname="mcpproxy-activity" time="3"><system-out/></testcase>
        </testsuite></testsuites>"#;
        let top = slowest(junit, 2);
        assert_eq!(
            top,
            vec![
                Timed {
                    seconds: 12.25,
                    binary: "mcpproxy::integration".into(),
                    name: "b::slow & steady".into()
                },
                Timed {
                    seconds: 3.0,
                    binary: "mcpproxy-activity".into(),
                    name: "d::middle".into()
                },
            ]
        );
        assert_eq!(slowest(junit, 10).len(), 3);
        assert!(slowest("not xml", 5).is_empty());
    }

    #[test]
    fn the_nextest_version_is_read_from_its_first_line() {
        assert_eq!(
            parse_nextest_version("cargo-nextest 0.9.143 (60fa45f63 2026-08-04)\nrelease: 0.9.143"),
            Some((0, 9, 143))
        );
        assert_eq!(parse_nextest_version("cargo-nextest x.y"), None);
        assert_eq!(parse_nextest_version(""), None);
        assert!((0, 9, 143) >= NEXTEST_MINIMUM && (0, 9, 97) < NEXTEST_MINIMUM);
    }
}
