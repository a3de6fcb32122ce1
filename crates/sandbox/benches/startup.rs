//! What the sandbox adds to a server's start: a program that exits at once (`/bin/true`),
//! and an MCP server from start to its answer to `initialize` (the workspace's Rust fixture,
//! and the official Node.js filesystem server when `tests/npm` has it), each without and
//! with the default sandbox (preparing it included).
//!
//! `cargo bench -p mcpproxy-sandbox` (build the fixture first: `cargo build --profile dist -p
//! mcp-fixture`).

#![allow(
    unsafe_code,
    reason = "Command::pre_exec is unsafe; the setup is async-signal-safe"
)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use criterion::{Criterion, criterion_group, criterion_main};
use mcpproxy_sandbox::{ForbiddenPath, Launch, Network, ResourceLimits, SandboxSpec, Support};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;

fn spec(write: Vec<PathBuf>) -> SandboxSpec {
    SandboxSpec {
        network: Network::None,
        read: vec![],
        write,
        env_passthrough: vec![],
        env: Default::default(),
        limits: ResourceLimits::DEFAULT,
        required: false,
        forbidden: vec![ForbiddenPath {
            what: "the data dir",
            path: std::env::temp_dir().join("mcpproxy-bench-data"),
        }],
        launcher_cache: None,
    }
}

/// Starts `program args`, sandboxed when `sandbox` is given; with `initialize`, sends it
/// and waits for the answer line, else waits for the exit.
fn run(program: &str, args: &[String], sandbox: Option<&SandboxSpec>, initialize: bool) {
    let prepared = sandbox.map(|spec| {
        mcpproxy_sandbox::prepare(
            spec,
            Launch {
                command: program,
                args,
                working_dir: None,
                label: "bench",
            },
            Support::get(),
        )
        .expect("prepare")
    });
    let mut command = Command::new(program);
    command.args(args);
    if let Some(prepared) = &prepared {
        let setup = prepared.setup.clone();
        command
            .env_clear()
            .envs(prepared.environment.iter().cloned());
        // SAFETY: `enter` is async-signal-safe.
        unsafe {
            command.pre_exec(move || setup.enter());
        }
    }
    if !initialize {
        let status = command.status().expect("run");
        assert!(status.success());
        return;
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{INITIALIZE}").expect("write initialize");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the answer");
    assert!(line.contains("\"result\""), "{line}");
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn startup(c: &mut Criterion) {
    let mut group = c.benchmark_group("start");
    group.sample_size(20);
    let none: Vec<String> = Vec::new();
    group.bench_function("true/plain", |b| {
        b.iter(|| run("/bin/true", &none, None, false))
    });
    let default = spec(vec![]);
    group.bench_function("true/sandboxed", |b| {
        b.iter(|| run("/bin/true", &none, Some(&default), false))
    });
    let fixture = workspace().join("target/dist/mcp-fixture");
    if fixture.is_file() {
        let fixture = fixture.display().to_string();
        group.bench_function("rust-fixture-initialize/plain", |b| {
            b.iter(|| run(&fixture, &none, None, true))
        });
        group.bench_function("rust-fixture-initialize/sandboxed", |b| {
            b.iter(|| run(&fixture, &none, Some(&default), true))
        });
        let mut all = default.clone();
        all.network = Network::All;
        group.bench_function("rust-fixture-initialize/sandboxed-network-all", |b| {
            b.iter(|| run(&fixture, &none, Some(&all), true))
        });
    } else {
        eprintln!("skipped the fixture: build it with cargo build --profile dist -p mcp-fixture");
    }
    let filesystem = workspace().join("tests/npm/node_modules/.bin/mcp-server-filesystem");
    if filesystem.exists() {
        let root = tempfile::tempdir().expect("tempdir");
        let args = vec![root.path().display().to_string()];
        let server = filesystem.display().to_string();
        let granted = spec(vec![root.path().to_path_buf()]);
        group.sample_size(10);
        group.bench_function("node-filesystem-initialize/plain", |b| {
            b.iter(|| run(&server, &args, None, true))
        });
        group.bench_function("node-filesystem-initialize/sandboxed", |b| {
            b.iter(|| run(&server, &args, Some(&granted), true))
        });
    } else {
        eprintln!("skipped the Node.js server: npm ci --prefix tests/npm");
    }
    group.finish();
}

criterion_group!(benches, startup);
criterion_main!(benches);
