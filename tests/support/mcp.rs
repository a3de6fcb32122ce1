//! Helpers for end-to-end tests: the fixture upstream, a running `mcpproxy serve`, and an
//! MCP client (rmcp over streamable HTTP) to talk to it.

#![allow(
    dead_code,
    reason = "shared helpers: each test module uses a different subset"
)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ServiceError, ServiceExt};
use serde_json::{Value, json};

/// The `mcp-fixture` binary, built on first use if this test run did not build it.
pub(crate) fn fixture_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| workspace_bin("mcp-fixture")).clone()
}

/// The binary of the workspace package `package` (whose binary has the same name), built with
/// the profile of this test run, next to `mcpproxy`.
///
/// `cargo build -p PACKAGE` runs only when the binary is missing or older than a source it is
/// built from (the package's directory, `crates/support`, the workspace's `Cargo.toml` and
/// `Cargo.lock`): CI builds the fixtures before the tests start, and a runner that starts a
/// process per test (nextest) then starts no cargo at all. Where several test processes find
/// it stale at once, cargo's lock on the target dir makes one build and the others wait.
pub(crate) fn workspace_bin(package: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_BIN_EXE_mcpproxy"))
        .parent()
        .expect("binary dir")
        .to_path_buf();
    let bin = dir.join(package);
    let root = crate::support::repo_root();
    let package_dir = match package {
        "mcp-fixture" => "tests/fixture-server",
        "mcp-conformance-fixture" => "tests/conformance-server",
        other => panic!("{other} is not a workspace fixture (add its directory here)"),
    };
    let sources = [package_dir, "crates/support", "Cargo.toml", "Cargo.lock"];
    let built = bin.metadata().and_then(|m| m.modified()).ok();
    let fresh = built.is_some_and(|built| {
        sources
            .iter()
            .all(|s| crate::support::newest_mtime(&root.join(s)).is_some_and(|t| t <= built))
    });
    if fresh {
        return bin;
    }
    let status = Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", package])
        .args(if dir.ends_with("release") {
            vec!["--release"]
        } else {
            vec![]
        })
        .status()
        .unwrap_or_else(|e| panic!("run cargo build -p {package}: {e}"));
    assert!(status.success(), "cargo build -p {package} failed");
    assert!(bin.is_file(), "{} missing after build", bin.display());
    bin
}

/// Kills the child when dropped, so a failing test leaves no process behind.
pub(crate) struct Proc {
    pub child: Child,
    pub stderr_lines: std::sync::mpsc::Receiver<String>,
}

impl Proc {
    /// Stops the process as an operator would (SIGTERM) and waits for it to exit.
    pub(crate) fn terminate(&mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().expect("wait for the child")
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Reads stderr lines until one satisfies `pred`, or panics after `timeout`.
    pub(crate) fn wait_for_line(&self, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr_lines.recv_timeout(left) {
                Ok(line) if pred(&line) => return line,
                Ok(line) => seen.push(line),
                Err(_) => panic!(
                    "no matching line within {timeout:?}; saw:\n{}",
                    seen.join("\n")
                ),
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

pub(crate) fn pipe_lines(
    reader: impl std::io::Read + Send + 'static,
) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(reader).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Like [`pipe_lines`], with every line also kept in `log`, so a failure can show all of
/// them, those a test already took from the channel included.
pub(crate) fn pipe_lines_kept(
    reader: impl std::io::Read + Send + 'static,
    log: Arc<Mutex<Vec<String>>>,
) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(reader).lines() {
            let Ok(line) = line else { break };
            mcpproxy_support::lock(&log).push(line.clone());
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The fixture serving streamable HTTP on `addr` (use port 0 for any).
pub(crate) fn start_http_fixture(addr: &str, call_log: &Path) -> (Proc, String) {
    let mut child = Command::new(fixture_bin())
        .args(["--http", addr, "--call-log"])
        .arg(call_log)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mcp-fixture");
    let stdout = child.stdout.take().expect("stdout");
    let lines = pipe_lines(stdout);
    let proc = Proc {
        child,
        stderr_lines: lines,
    };
    let line = proc.wait_for_line(Duration::from_secs(30), |l| {
        l.starts_with("MCP_FIXTURE_LISTENING ")
    });
    let url = line.trim_start_matches("MCP_FIXTURE_LISTENING ").to_owned();
    (proc, url)
}

/// Compiled components shared by every proxy a test starts, and kept across test runs. An
/// entry is named by its component's SHA-256 and the engine's hash, so a changed plugin or
/// engine never meets a stale one. A debug build spends seconds compiling the six embedded
/// plugins on a start with an empty cache (a minute on a loaded machine, which made starts
/// miss their deadlines) and minutes on a 12 MB JavaScript or 18 MB Python component; a
/// cache hit takes milliseconds. The cache itself is tested where it is used on purpose
/// (`plugin_host`). Entries older than [`COMPILE_CACHE_DAYS`] are removed on first use in a
/// test process: those of plugins and engines since changed are never read again, and the
/// current ones are compiled anew once.
pub(crate) fn shared_compile_cache() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-compile-cache");
        let max_age = Duration::from_secs(COMPILE_CACHE_DAYS * 24 * 3600);
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > max_age));
            if old {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        dir
    })
    .clone()
}

/// How long a compiled component stays in the shared test cache.
const COMPILE_CACHE_DAYS: u64 = 14;

/// Copies the compiled components (`*.cwasm`) of `from` that `to` lacks. Each lands under a
/// temporary name and is renamed into place: other tests read these directories meanwhile.
pub(crate) fn copy_cwasm(from: &Path, to: &Path) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let Ok(entries) = std::fs::read_dir(from) else {
        return;
    };
    std::fs::create_dir_all(to).expect("create cache dir");
    for entry in entries.flatten() {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.extension().is_some_and(|e| e == "cwasm") && !target.exists() {
            // A hard link where both are on one file system: no bytes copied (a compiled
            // Python component is tens of MB). Entries are replaced by renames, never
            // rewritten in place, so a link never sees another's write.
            if std::fs::hard_link(&path, &target).is_ok() {
                continue;
            }
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let part = to.join(format!(".{}-{n}.part", std::process::id()));
            std::fs::copy(&path, &part).expect("copy compiled plugin");
            std::fs::rename(&part, &target).expect("rename compiled plugin into place");
        }
    }
}

/// A running `mcpproxy serve` on a free loopback port.
pub(crate) struct Proxy {
    pub proc: Proc,
    pub url: String,
    pub data_dir: tempfile::TempDir,
    /// Every line of its stderr so far: [`Proxy::stderr`].
    log: Arc<Mutex<Vec<String>>>,
}

/// How long a proxy may take to listen and then to answer ready: plugins compiled on a
/// cache miss, and upstreams that are npm or Python servers, on a loaded two-core machine.
/// A bound against a hang, not a measure of speed.
const START_WITHIN: Duration = Duration::from_secs(120);

/// A `mcpproxy serve` to start: [`Proxy::builder`], then what differs from the defaults
/// (a fresh data dir, the tests' environment, any loopback port, no extra arguments, and a
/// start that returns once `/readyz` answers ready).
#[must_use = "nothing runs until `start`"]
pub(crate) struct ProxyBuilder<'a> {
    config: &'a Value,
    data_dir: Option<tempfile::TempDir>,
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    listen: String,
    args: Vec<String>,
    until_ready: bool,
}

impl Proxy {
    /// `mcpproxy serve` with `config` (JSON), started by [`ProxyBuilder::start`].
    pub(crate) fn builder(config: &Value) -> ProxyBuilder<'_> {
        ProxyBuilder {
            config,
            data_dir: None,
            env: Vec::new(),
            listen: "127.0.0.1:0".to_owned(),
            args: Vec::new(),
            until_ready: true,
        }
    }
}

impl ProxyBuilder<'_> {
    /// The data dir, which may hold an earlier run's state (a fresh one otherwise).
    pub(crate) fn data_dir(mut self, dir: tempfile::TempDir) -> Self {
        self.data_dir = Some(dir);
        self
    }

    /// Variables added to the server's environment (after `HOME` and `RUST_LOG`, so they
    /// may replace them).
    pub(crate) fn env<K, V>(mut self, vars: &[(K, V)]) -> Self
    where
        K: AsRef<std::ffi::OsStr>,
        V: AsRef<std::ffi::OsStr>,
    {
        self.env.extend(
            vars.iter()
                .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned())),
        );
        self
    }

    /// A fixed address to listen on (a replica a load balancer knows, started again on the
    /// same port), instead of any free loopback port.
    pub(crate) fn listen(mut self, addr: &str) -> Self {
        addr.clone_into(&mut self.listen);
        self
    }

    /// More arguments to `serve` (`--plugins DIR`, `--sink NAME`, ...).
    pub(crate) fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|&a| a.to_owned()));
        self
    }

    /// Returns from [`start`](Self::start) once the proxy answers HTTP (`/healthz`), not
    /// once it is ready: for a test of what happens before (an upstream still connecting,
    /// a journal failing from the start, a login not yet made).
    pub(crate) fn listening(mut self) -> Self {
        self.until_ready = false;
        self
    }

    /// Starts the proxy and waits until `GET /readyz` answers 200 (its journal writes and
    /// no upstream is on its first connection attempt), or with
    /// [`listening`](Self::listening) until `GET /healthz` does: [`until_answering`]. A
    /// proxy that exits, or is not ready within [`START_WITHIN`], fails the test with its
    /// stderr. Its address is the one thing read from stderr: [`listening_url`].
    pub(crate) fn start(self) -> Proxy {
        let data_dir = self
            .data_dir
            .unwrap_or_else(|| tempfile::tempdir().expect("tempdir"));
        let config_path = data_dir.path().join("mcp_config.json");
        let config = grant_fixture_files(self.config);
        std::fs::write(&config_path, config.to_string()).expect("write config");
        let compiled = data_dir.path().join("cache/plugins");
        copy_cwasm(&shared_compile_cache(), &compiled);
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcpproxy"));
        command
            .args(["serve", "--listen", &self.listen, "--config"])
            .arg(&config_path)
            .arg("--data-dir")
            .arg(data_dir.path())
            .args(&self.args)
            .env("HOME", data_dir.path())
            .env("RUST_LOG", "info,rmcp=warn")
            .envs(self.env)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("start mcpproxy");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut proc = Proc {
            child,
            stderr_lines: pipe_lines_kept(stderr, log.clone()),
        };
        let url = listening_url(&proc);
        until_answering(&mut proc, &url, self.until_ready, &log);
        // The plugins are loaded (and compiled on a miss) before the proxy listens.
        copy_cwasm(&compiled, &shared_compile_cache());
        Proxy {
            proc,
            url,
            data_dir,
            log,
        }
    }
}

/// The URL of `/mcp` a starting `mcpproxy serve` says it listens on: the one thing read from
/// its stderr, as the port is the kernel's pick and the proxy says it nowhere else.
pub(crate) fn listening_url(proc: &Proc) -> String {
    let line = proc.wait_for_line(START_WITHIN, |l| l.contains(" listening on http://"));
    let url = line.split("listening on ").nth(1).expect("url");
    url.trim().to_owned()
}

/// Waits until the proxy at `url` answers `GET /readyz` with 200 (its journal writes and no
/// upstream is on its first connection attempt), or with `ready` false `GET /healthz`. A
/// proxy that exits first, or is not there within [`START_WITHIN`], fails the test with
/// its stderr so far (`log`, from [`pipe_lines_kept`]).
pub(crate) fn until_answering(proc: &mut Proc, url: &str, ready: bool, log: &Mutex<Vec<String>>) {
    let base = url.trim_end_matches("/mcp");
    let (probe, answer) = if ready {
        (format!("{base}/readyz"), "ready")
    } else {
        (format!("{base}/healthz"), "answering")
    };
    let stderr_so_far = || mcpproxy_support::lock(log).join("\n");
    block_on(crate::support::poll::until(
        &format!("mcpproxy {answer} at {probe}"),
        START_WITHIN,
        || {
            let exited = proc.child.try_wait().expect("wait for mcpproxy");
            let probe = probe.clone();
            let stderr = stderr_so_far();
            async move {
                if let Some(status) = exited {
                    panic!(
                        "mcpproxy exited ({status}) before it was {answer}; its stderr:\n{stderr}"
                    );
                }
                let why = match reqwest::get(&probe).await {
                    Ok(r) if r.status().is_success() => return Ok(()),
                    Ok(r) => format!("{} {}", r.status(), r.text().await.unwrap_or_default()),
                    Err(e) => e.to_string(),
                };
                Err(format!("{why}; its stderr so far:\n{stderr}"))
            }
        },
    ));
}

/// Runs `future` to its end on a runtime of its own, in a thread of its own: callable from
/// a test's async body (whose runtime it must not block on) and from a plain `#[test]`. A
/// panic in it is the caller's panic.
fn block_on<F: Future + Send>(future: F) -> F::Output
where
    F::Output: Send,
{
    std::thread::scope(|scope| {
        let run = scope.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(future)
        });
        run.join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

impl Proxy {
    /// Every line the proxy has written on stderr so far, from its first, those a test took
    /// from `proc.stderr_lines` included.
    pub(crate) fn stderr(&self) -> Vec<String> {
        mcpproxy_support::lock(&self.log).clone()
    }

    /// Stops the server as an operator would (SIGTERM) and checks that it exited cleanly
    /// (its journal flushed, its trace export sent).
    pub(crate) fn stop(&mut self) {
        let status = self.proc.terminate();
        assert!(
            status.success(),
            "mcpproxy did not exit cleanly: {status:?}"
        );
    }

    /// The API key the server generated in its data dir.
    pub(crate) fn api_key(&self) -> String {
        std::fs::read_to_string(self.data_dir.path().join("api_key"))
            .expect("the API key file exists after start")
            .trim()
            .to_owned()
    }

    /// The answer of `GET /api/v1/activity?QUERY`, with the API key.
    pub(crate) async fn activity(&self, query: &str) -> Value {
        reqwest::Client::new()
            .get(format!("{}/api/v1/activity?{query}", self.base()))
            .header("X-API-Key", self.api_key())
            .send()
            .await
            .expect("GET /api/v1/activity")
            .json()
            .await
            .expect("a JSON answer")
    }

    /// The records of `record_type` from `GET /api/v1/activity?type=...`, newest first, once
    /// there are at least `want` of them that are no longer pending (the journal's writer
    /// commits in the background).
    pub(crate) async fn finished_records(&self, record_type: &str, want: usize) -> Vec<Value> {
        let query = format!("type={record_type}");
        crate::support::poll::until_value(
            &format!("{want} finished {record_type} records"),
            Duration::from_secs(30),
            || async {
                let body = self.activity(&query).await;
                assert_eq!(body["success"], true, "{body}");
                let records = body["data"]["records"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if records.len() >= want && records.iter().all(|r| r["status"] != "pending") {
                    Ok(records)
                } else {
                    Err(format!("the last answer: {body}"))
                }
            },
        )
        .await
    }

    /// Approves `server` with `mcpproxy upstream approve` (its config file in the data dir),
    /// retrying within `within` until it has listed its tools: a person's one approval of
    /// a server that was just added or imported.
    pub(crate) async fn approve_when_listed(&self, server: &str, within: Duration) {
        let config = self.data_dir.path().join("mcp_config.json");
        crate::support::poll::until(&format!("{server} is approved"), within, || async {
            let approve = crate::support::TestCommand::new(self.data_dir.path())
                .args(["upstream", "approve", server, "--config"])
                .args([&config])
                .output();
            match approve.code() {
                Some(0) => Ok(()),
                _ => Err(approve.stderr()),
            }
        })
        .await;
    }

    /// `GET path` (`/api/v1/...`, `/metrics`) with the API key: the body as text.
    pub(crate) async fn get_text(&self, path: &str) -> String {
        reqwest::Client::new()
            .get(format!("{}{path}", self.base()))
            .header("X-API-Key", self.api_key())
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
            .text()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// `GET path` with the API key: the body as JSON.
    pub(crate) async fn get_json(&self, path: &str) -> Value {
        let body = self.get_text(path).await;
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
    }

    /// `POST` of the JSON `body` to `path` of the REST API, with the API key; the answer.
    pub(crate) async fn post_json(&self, path: &str, body: &Value) -> Value {
        let answer = reqwest::Client::new()
            .post(format!("{}{path}", self.base()))
            .header("X-API-Key", self.api_key())
            .json(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        let text = answer.text().await.unwrap_or_default();
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("POST {path}: {e}: {text}"))
    }

    /// `http://ADDR`, where `/api/v1`, `/metrics` and the page are.
    pub(crate) fn base(&self) -> String {
        self.url.trim_end_matches("/mcp").to_owned()
    }

    /// A config for the CLI with a stdio fixture `fx` (logging to `log`) and `listen` set to
    /// this server's address, so `mcpproxy activity ...` finds the server; written in the
    /// data dir.
    pub(crate) fn cli_config(&self, log: &Path) -> PathBuf {
        let mut config = config_with(vec![stdio_fixture("fx", log)]);
        config["listen"] = serde_json::json!(self.base().trim_start_matches("http://"));
        let path = self.data_dir.path().join("cli_config.json");
        std::fs::write(&path, config.to_string()).expect("write the CLI config");
        path
    }
}

/// `config` with the files its stdio servers are pointed at granted to them: a fixture's
/// call log, pid file or tool overrides (any argument that is an absolute path to a file, or
/// to a file not made yet in an existing directory, which is made empty). The sandbox every
/// stdio server runs in by default would refuse them, as it refuses what a user does not
/// grant; tests of the sandbox itself write their own `isolation`.
pub(crate) fn grant_fixture_files(config: &Value) -> Value {
    let mut config = config.clone();
    let servers: Vec<&mut Value> = match config.get_mut("mcpServers") {
        Some(Value::Array(list)) => list.iter_mut().collect(),
        Some(Value::Object(map)) => map.values_mut().collect(),
        _ => Vec::new(),
    };
    for server in servers {
        if server.get("command").is_none() || server.get("isolation").is_some() {
            continue;
        }
        let files: Vec<Value> = server["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(Path::new)
            .filter(|path| path.is_absolute() && !path.is_dir())
            .filter(|path| {
                path.is_file()
                    || (path.parent().is_some_and(Path::is_dir)
                        && std::fs::write(path, b"").is_ok())
            })
            .map(|path| Value::from(path.display().to_string()))
            .collect();
        if !files.is_empty() {
            server["isolation"] = serde_json::json!({"write": files});
        }
    }
    config
}

/// A config with the given upstream servers, and plugin deadlines no loaded test machine
/// reaches ([`PLUGIN_TIMEOUT_MS`]): the tests that start from it expect calls to be judged,
/// not stopped. A test of a deadline sets its own.
pub(crate) fn config_with(servers: Vec<Value>) -> Value {
    serde_json::json!({
        "mcpServers": servers,
        "plugins": {"limits": {"timeout_ms": PLUGIN_TIMEOUT_MS}},
    })
}

/// The deadline of each validator and annotator call in [`config_with`]'s config. The
/// default (50 ms) is for a release build on an idle machine: a debug build on a loaded
/// two-core runner can keep an instance off the CPU for longer, and the call fails closed.
pub(crate) const PLUGIN_TIMEOUT_MS: u64 = 10_000;

/// The fixture as a stdio upstream named `name`, logging calls to `call_log`, which its
/// sandbox may write (made empty here, so there is a file to grant).
pub(crate) fn stdio_fixture(name: &str, call_log: &Path) -> Value {
    if !call_log.exists() {
        let _ = std::fs::write(call_log, b"");
    }
    serde_json::json!({
        "name": name,
        "command": fixture_bin(),
        "args": ["--call-log", call_log, "--name", name],
        "isolation": {"write": [call_log]},
    })
}

pub(crate) type Client = RunningService<RoleClient, ()>;

/// An MCP client session over streamable HTTP.
pub(crate) async fn connect(url: &str) -> Client {
    ().serve(StreamableHttpClientTransport::from_uri(url.to_owned()))
        .await
        .expect("connect to mcpproxy")
}

/// Calls a tool and returns its result (tool-level errors included), or the JSON-RPC error.
pub(crate) async fn call(
    client: &Client,
    tool: &str,
    arguments: Value,
) -> Result<CallToolResult, String> {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    if let Value::Object(map) = arguments {
        params = params.with_arguments(map);
    }
    match client.peer().call_tool_once(params).await {
        Ok(CallToolResponse::Complete(result)) => Ok(result),
        Ok(other) => Err(format!("unexpected response {other:?}")),
        Err(ServiceError::McpError(e)) => Err(e.message.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// Calls `tool` with `arguments` until the call succeeds, within `within`: for a server just
/// approved, which may still be starting (`what` names the wait in a timeout's message).
pub(crate) async fn call_until_ok(
    client: &Client,
    what: &str,
    tool: &str,
    arguments: Value,
    within: Duration,
) {
    crate::support::poll::until(what, within, || async {
        let result = call(client, tool, arguments.clone()).await?;
        if is_error(&result) {
            Err(text(&result))
        } else {
            Ok(())
        }
    })
    .await;
}

/// The text of a result's first text content.
pub(crate) fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.clone()))
        .unwrap_or_default()
}

pub(crate) fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

/// The lines of a fixture call log.
pub(crate) fn call_log_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// `tests/npm`, where `.ci/run` installs the official MCP servers (`npm ci --prefix tests/npm`).
pub(crate) fn npm_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/npm")
}

/// Whether the npm package that provides `bin` is installed in [`npm_dir`]; with
/// `MCPPROXY_REQUIRE_NPM` set (as in CI) its absence is a failure, elsewhere the test skips
/// with a note.
pub(crate) fn npm_bin_installed(bin: &str) -> bool {
    let path = npm_dir().join("node_modules/.bin").join(bin);
    if path.exists() {
        return true;
    }
    assert!(
        std::env::var_os("MCPPROXY_REQUIRE_NPM").is_none(),
        "{} is missing: CI must run `npm ci --prefix tests/npm`",
        path.display()
    );
    eprintln!("SKIPPED: {bin} is not installed; run `npm ci --prefix tests/npm` to run this test");
    false
}

/// `n` calls through `proxy` with the fixture as `fx`: reads (`fx:get_status`) that
/// succeed, and every `blocked_every`-th a delete through `call_tool_read`, which the
/// policy blocks (blocked calls are audited too).
pub(crate) async fn reads_and_blocked(proxy: &Proxy, n: usize, blocked_every: usize) {
    let client = connect(&proxy.url).await;
    for i in 0..n {
        if i % blocked_every == blocked_every - 1 {
            let r = call(
                &client,
                "call_tool_read",
                json!({"name": "fx:delete_note", "args": {"id": "x"}}),
            )
            .await
            .expect("a rejection is a tool result");
            assert!(is_error(&r), "the delete must be blocked: {r:?}");
        } else {
            let r = call(&client, "call_tool_read", json!({"name": "fx:get_status"}))
                .await
                .expect("call");
            assert!(!is_error(&r), "read {i} failed: {r:?}");
        }
    }
    client.cancel().await.ok();
}

/// The JSON-RPC response of a streamable-HTTP POST: a JSON body, or an event stream whose
/// last `data:` line with an `id` is the response.
pub(crate) fn rpc_response(text: &str) -> Value {
    let json_text = if text.trim_start().starts_with('{') {
        text.to_owned()
    } else {
        text.lines()
            .rev()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .find(|l| l.contains("\"id\""))
            .unwrap_or_default()
            .to_owned()
    };
    serde_json::from_str(&json_text).unwrap_or_else(|e| panic!("{e}: {text}"))
}
