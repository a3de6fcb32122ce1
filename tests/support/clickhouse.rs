//! A real ClickHouse server for tests, started and owned by the test that needs it.
//!
//! [`ClickHouse`] owns one `clickhouse-server` process listening only on 127.0.0.1, and
//! everything it writes: a private temp dir holding the generated `config.xml` and
//! `users.xml`, the data (`data/`) and the logs (`log/`). The OS picks the ports; the server
//! runs in the foreground as our direct child (clickhouse-server 18.16 neither forks nor
//! daemonizes when started with `--config-file`), so [`ClickHouse::stop`] and `Drop` kill
//! exactly that process. `stop` keeps the data dir and the ports, and
//! [`ClickHouse::start_again`] brings back the same server with everything written before,
//! for tests of what happens while ClickHouse is down.
//!
//! Without `clickhouse-server` installed, [`ClickHouse::start`] returns `None` and the
//! calling test should return early (skip), unless `MCPPROXY_REQUIRE_CLICKHOUSE` is set (CI
//! sets it): then a missing server is a panic, so CI cannot go green by skipping.
//!
//! The generated config is the minimum Debian's clickhouse-server 18.16.1 starts with (it
//! refuses to start without `mark_cache_size`), plus what isolates it from the host.

#![allow(
    dead_code,
    reason = "shared helpers: each test module uses a different subset"
)]

use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Set (to anything but empty or `0`) to make a missing ClickHouse a failure, not a skip.
pub(crate) const REQUIRE_ENV: &str = "MCPPROXY_REQUIRE_CLICKHOUSE";

/// How long a start may take before the test fails with the server's log.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `start_again` retries while its old ports are still held by someone else.
const REBIND_TIMEOUT: Duration = Duration::from_secs(20);
/// A first start whose freshly picked ports were taken in the meantime picks new ones.
const FRESH_PORT_ATTEMPTS: u32 = 5;
/// Each query's limit, so a wedged server fails the test instead of hanging it.
const QUERY_TIMEOUT: Duration = Duration::from_secs(60);
/// A macro only our server has: proves `/ping` was answered by our process and not by
/// another server that grabbed the port between our probe and its bind.
const IDENTITY_MACRO: &str = "mcpproxy_test_harness";

/// A clickhouse-server on loopback in its own temp dir; killed on drop.
pub(crate) struct ClickHouse {
    dir: tempfile::TempDir,
    binary: PathBuf,
    http_port: u16,
    tcp_port: u16,
    identity: String,
    child: Option<Child>,
    http: reqwest::Client,
}

enum Launch {
    Ready(Child),
    /// The server could not bind its ports (details for the final error message).
    PortTaken(String),
}

/// Where the log files were when a launch began, so its own lines can be told apart.
struct LogMark {
    server: u64,
    console: u64,
}

impl ClickHouse {
    /// Starts a fresh server with an empty data dir and waits until it answers.
    ///
    /// `None` (with a note on stderr) if clickhouse-server is not installed and
    /// `MCPPROXY_REQUIRE_CLICKHOUSE` is unset; panics if it is set.
    pub(crate) async fn start() -> Option<Self> {
        let Some(binary) = find_server() else {
            if required() {
                panic!(
                    "{REQUIRE_ENV} is set but clickhouse-server is not installed (looked in PATH, \
                     /usr/sbin, /usr/local/sbin); install it, e.g. `apt-get install \
                     clickhouse-server` (.ci/run does)"
                );
            }
            eprintln!(
                "note: clickhouse-server is not installed; skipping this ClickHouse test \
                 (set {REQUIRE_ENV}=1 to make that a failure)"
            );
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("mcpproxy-clickhouse-")
            .tempdir()
            .expect("create a temp dir for ClickHouse");
        let identity = format!(
            "{}-{}",
            std::process::id(),
            dir.path()
                .file_name()
                .and_then(OsStr::to_str)
                .unwrap_or("x")
        );
        let http = reqwest::Client::builder()
            // Loopback only: never through an HTTP(S)_PROXY from the environment.
            .no_proxy()
            // No pooled connections: they would be stale after a stop/start.
            .pool_max_idle_per_host(0)
            .timeout(QUERY_TIMEOUT)
            .build()
            .expect("build the HTTP client for ClickHouse");
        let mut ch = Self {
            dir,
            binary,
            http_port: 0,
            tcp_port: 0,
            identity,
            child: None,
            http,
        };
        let mut last = String::new();
        for _ in 0..FRESH_PORT_ATTEMPTS {
            (ch.http_port, ch.tcp_port) = free_ports();
            ch.write_config();
            match ch.launch().await {
                Launch::Ready(child) => {
                    ch.child = Some(child);
                    return Some(ch);
                }
                Launch::PortTaken(why) => last = why,
            }
        }
        panic!("ClickHouse found no free ports in {FRESH_PORT_ATTEMPTS} attempts; last: {last}");
    }

    /// Kills the server (SIGKILL, like a crash or an outage) and waits for it to exit. The
    /// data dir, the ports and the logs stay for [`Self::start_again`]. No-op if stopped.
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_and_reap(&mut child);
        }
    }

    /// Starts the stopped server again on the same ports and data dir, and waits until it
    /// answers. Panics if it is still running (call [`Self::stop`] first, or [`Self::restart`]).
    pub(crate) async fn start_again(&mut self) {
        assert!(
            self.child.is_none(),
            "ClickHouse::start_again while it is running"
        );
        let deadline = Instant::now() + REBIND_TIMEOUT;
        loop {
            match self.launch().await {
                Launch::Ready(child) => {
                    self.child = Some(child);
                    return;
                }
                Launch::PortTaken(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Launch::PortTaken(why) => panic!(
                    "ClickHouse could not get its ports {} and {} back within {:?}: {why}",
                    self.http_port, self.tcp_port, REBIND_TIMEOUT
                ),
            }
        }
    }

    /// [`Self::stop`] then [`Self::start_again`].
    pub(crate) async fn restart(&mut self) {
        self.stop();
        self.start_again().await;
    }

    /// Whether the server process is up (started and not stopped, and has not died).
    pub(crate) fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// The HTTP interface, e.g. `http://127.0.0.1:41234` (no trailing slash).
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    pub(crate) fn http_port(&self) -> u16 {
        self.http_port
    }

    /// The native-protocol port (for `clickhouse-client --port`).
    pub(crate) fn tcp_port(&self) -> u16 {
        self.tcp_port
    }

    /// The server's temp dir (config, `data/`, `log/`).
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs one SQL statement over HTTP (the statement is the POST body; for
    /// `INSERT ... FORMAT JSONEachRow` the rows follow it after a newline) and returns the
    /// response text. Panics with ClickHouse's error text if it is not a 200.
    pub(crate) async fn query(&self, sql: &str) -> String {
        self.try_query(sql).await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Self::query`] that returns the failure (unreachable server, or ClickHouse's error
    /// with its status) instead of panicking.
    pub(crate) async fn try_query(&self, sql: &str) -> Result<String, String> {
        let response = self
            .http
            .post(format!("{}/", self.url()))
            // Buffer the whole result server-side, so an error part-way through is a
            // non-200 status rather than a 200 with the error appended to the data.
            .query(&[("wait_end_of_query", "1")])
            .body(sql.to_owned())
            .send()
            .await
            .map_err(|e| format!("ClickHouse at {} unreachable: {e}", self.url()))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| format!("reading ClickHouse's answer ({status}): {e}"))?;
        if status.is_success() {
            Ok(text)
        } else {
            Err(format!(
                "ClickHouse answered {status} to {:?}: {}",
                truncate(sql, 300),
                text.trim_end()
            ))
        }
    }

    /// The last lines of the server's log and console output, for failure messages.
    pub(crate) fn log_tail(&self) -> String {
        let zero = LogMark {
            server: 0,
            console: 0,
        };
        let (server, console) = self.logs_since(&zero);
        format!(
            "--- {} (tail)\n{}\n--- {} (tail)\n{}",
            self.server_log().display(),
            last_lines(&server, 40),
            self.console_log().display(),
            last_lines(&console, 20)
        )
    }

    fn config_path(&self) -> PathBuf {
        self.dir.path().join("config.xml")
    }

    fn server_log(&self) -> PathBuf {
        self.dir.path().join("log").join("server.log")
    }

    fn console_log(&self) -> PathBuf {
        self.dir.path().join("log").join("console.log")
    }

    fn write_config(&self) {
        let root = self.dir.path();
        let dir = xml_escape(&root.display().to_string());
        let users = root.join("users.xml");
        let config = format!(
            r#"<?xml version="1.0"?>
<!-- Generated by mcpproxy's tests/support/clickhouse.rs: a throwaway server for one test. -->
<yandex>
    <logger>
        <level>warning</level>
        <log>{dir}/log/server.log</log>
        <errorlog>{dir}/log/server.err.log</errorlog>
        <size>10M</size>
        <count>1</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <http_port>{http}</http_port>
    <tcp_port>{tcp}</tcp_port>
    <path>{dir}/data/</path>
    <tmp_path>{dir}/data/tmp/</tmp_path>
    <user_files_path>{dir}/data/user_files/</user_files_path>
    <format_schema_path>{dir}/data/format_schemas/</format_schema_path>
    <users_config>{dir}/users.xml</users_config>
    <!-- 18.16.1 exits with "Not found: mark_cache_size" without it. -->
    <mark_cache_size>67108864</mark_cache_size>
    <timezone>UTC</timezone>
    <macros>
        <{IDENTITY_MACRO}>{identity}</{IDENTITY_MACRO}>
    </macros>
</yandex>
"#,
            http = self.http_port,
            tcp = self.tcp_port,
            identity = xml_escape(&self.identity),
        );
        let users_xml = r#"<?xml version="1.0"?>
<!-- Generated by mcpproxy's tests/support/clickhouse.rs. -->
<yandex>
    <profiles>
        <default></default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks>
                <ip>::1</ip>
                <ip>127.0.0.1</ip>
            </networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas>
        <default></default>
    </quotas>
</yandex>
"#;
        fs::create_dir_all(root.join("log")).expect("create ClickHouse's log dir");
        fs::write(self.config_path(), config).expect("write ClickHouse's config.xml");
        fs::write(&users, users_xml).expect("write ClickHouse's users.xml");
    }

    /// Spawns the server and waits until *it* answers `/ping`, or until it exits.
    async fn launch(&self) -> Launch {
        let mark = LogMark {
            server: file_len(&self.server_log()),
            console: file_len(&self.console_log()),
        };
        let console = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.console_log())
            .expect("open ClickHouse's console log");
        let console_err = console
            .try_clone()
            .expect("duplicate ClickHouse's console log handle");
        let started = Instant::now();
        let mut child = Command::new(&self.binary)
            .arg(format!("--config-file={}", self.config_path().display()))
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(console)
            .stderr(console_err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.binary.display()));
        loop {
            match child.try_wait() {
                Ok(None) => {}
                Ok(Some(status)) => {
                    let (server, console) = self.logs_since(&mark);
                    let new = format!("{server}\n{console}");
                    if new.contains("Address already in use") {
                        return Launch::PortTaken(last_lines(&new, 5));
                    }
                    panic!(
                        "clickhouse-server exited ({status}) before it was ready\n{}",
                        self.log_tail()
                    );
                }
                Err(e) => {
                    kill_and_reap(&mut child);
                    panic!("cannot poll clickhouse-server: {e}");
                }
            }
            if self.ping().await {
                if self.answers_as_us().await {
                    eprintln!(
                        "ClickHouse ready at {} in {} ms",
                        self.url(),
                        started.elapsed().as_millis()
                    );
                    return Launch::Ready(child);
                }
                kill_and_reap(&mut child);
                return Launch::PortTaken(format!(
                    "another server answers on 127.0.0.1:{}",
                    self.http_port
                ));
            }
            if started.elapsed() > READY_TIMEOUT {
                kill_and_reap(&mut child);
                panic!(
                    "clickhouse-server did not answer /ping on {} within {READY_TIMEOUT:?}\n{}",
                    self.url(),
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn ping(&self) -> bool {
        let Ok(response) = self
            .http
            .get(format!("{}/ping", self.url()))
            .timeout(Duration::from_secs(2))
            .send()
            .await
        else {
            return false;
        };
        response.status().is_success()
            && response
                .text()
                .await
                .is_ok_and(|body| body.trim_end() == "Ok.")
    }

    async fn answers_as_us(&self) -> bool {
        let sql =
            format!("SELECT substitution FROM system.macros WHERE macro = '{IDENTITY_MACRO}'");
        self.try_query(&sql)
            .await
            .is_ok_and(|out| out.trim_end() == self.identity)
    }

    fn logs_since(&self, mark: &LogMark) -> (String, String) {
        (
            read_from(&self.server_log(), mark.server),
            read_from(&self.console_log(), mark.console),
        )
    }
}

impl Drop for ClickHouse {
    fn drop(&mut self) {
        self.stop();
    }
}

fn required() -> bool {
    std::env::var_os(REQUIRE_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// `clickhouse-server` from PATH, or from the sbin dirs a non-root PATH often lacks.
fn find_server() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/usr/bin"].map(PathBuf::from))
        .map(|dir| dir.join("clickhouse-server"))
        .find(|candidate| candidate.is_file())
}

/// Two distinct ports that were free a moment ago (both held while picking).
fn free_ports() -> (u16, u16) {
    let bind = || TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0 to pick a free port");
    let (a, b) = (bind(), bind());
    let port = |l: &TcpListener| {
        l.local_addr()
            .expect("local address of a bound socket")
            .port()
    };
    (port(&a), port(&b))
}

fn kill_and_reap(child: &mut Child) {
    // An error here means it has already exited; `wait` reaps it either way.
    let _ = child.kill();
    if let Err(e) = child.wait() {
        eprintln!(
            "warning: waiting for clickhouse-server (pid {}): {e}",
            child.id()
        );
    }
}

fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

fn read_from(path: &Path, offset: u64) -> String {
    let Ok(mut file) = fs::File::open(path) else {
        return String::new();
    };
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(offset)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The harness itself: a MergeTree table written before a stop is all there after a start,
/// including non-ASCII text, `\u` escapes and the MATERIALIZED timestamp column.
#[tokio::test]
async fn clickhouse_harness_starts_stops_and_keeps_data() {
    let started = Instant::now();
    let Some(mut ch) = ClickHouse::start().await else {
        return;
    };
    eprintln!("first start: {} ms", started.elapsed().as_millis());
    let port = ch.http_port();

    ch.query(
        "CREATE TABLE t (
            id String,
            timestamp_ms UInt64,
            timestamp DateTime MATERIALIZED toDateTime(intDiv(timestamp_ms, 1000)),
            text String
        ) ENGINE = MergeTree() PARTITION BY toYYYYMM(timestamp) ORDER BY (timestamp, id)",
    )
    .await;
    // Two rows as serde_json writes them (raw UTF-8), one hand-written with `\u` escapes,
    // including a surrogate pair, a quote and a control character.
    let serialized = [
        serde_json::json!({"id": "a", "timestamp_ms": 1_700_000_000_123_u64, "text": "plain"}),
        serde_json::json!({"id": "b", "timestamp_ms": 1_700_000_001_000_u64, "text": "héllo ✓ 😀 \"q\"\n"}),
    ]
    .map(|row| row.to_string())
    .join("\n");
    let escaped =
        r#"{"id":"c","timestamp_ms":1700000002999,"text":"caf\u00e9 \ud83d\ude00 \u0001 \"q\""}"#;
    ch.query(&format!(
        "INSERT INTO t FORMAT JSONEachRow\n{serialized}\n{escaped}\n"
    ))
    .await;
    assert_eq!(ch.query("SELECT count() FROM t").await.trim(), "3");

    let stopping = Instant::now();
    ch.stop();
    eprintln!("stop: {} ms", stopping.elapsed().as_millis());
    assert!(!ch.is_running(), "stopped server still running");
    let down = ch.try_query("SELECT 1").await;
    assert!(down.is_err(), "stopped server still answers: {down:?}");

    let starting = Instant::now();
    ch.start_again().await;
    eprintln!("start again: {} ms", starting.elapsed().as_millis());
    assert_eq!(ch.http_port(), port, "start_again must keep the port");

    let out = ch
        .query("SELECT id, timestamp_ms, timestamp, text FROM t ORDER BY id FORMAT JSONEachRow")
        .await;
    let rows: Vec<serde_json::Value> = out
        .lines()
        .map(|line| serde_json::from_str(line).expect("ClickHouse wrote a JSON row"))
        .collect();
    assert_eq!(rows.len(), 3, "rows after restart:\n{out}");
    // UInt64 comes back quoted (output_format_json_quote_64bit_integers); DateTime in UTC.
    assert_eq!(
        rows[0],
        serde_json::json!({"id": "a", "timestamp_ms": "1700000000123",
                           "timestamp": "2023-11-14 22:13:20", "text": "plain"})
    );
    assert_eq!(rows[1]["text"], "héllo ✓ 😀 \"q\"\n");
    assert_eq!(rows[2]["text"], "café 😀 \u{1} \"q\"");
    assert_eq!(rows[2]["timestamp"], "2023-11-14 22:13:22");
    // `SELECT *` leaves the MATERIALIZED column out.
    let star = ch
        .query("SELECT * FROM t WHERE id = 'a' FORMAT JSONEachRow")
        .await;
    let star: serde_json::Value = serde_json::from_str(star.trim()).expect("JSON row");
    assert!(star.get("timestamp").is_none(), "SELECT * returned {star}");

    let restarting = Instant::now();
    ch.restart().await;
    eprintln!("restart: {} ms", restarting.elapsed().as_millis());
    assert_eq!(ch.query("SELECT count() FROM t").await.trim(), "3");
}
