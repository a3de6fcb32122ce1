//! Package registries on loopback for the launcher tests, each started and owned by the test
//! that needs it: an npm registry (verdaccio, from `tests/registry`) holding a copy of
//! `@modelcontextprotocol/server-everything` with its whole dependency tree bundled, and a
//! PyPI index (pypiserver, from `tests/python/.venv`) holding a small MCP server built here
//! from `tests/fixtures/pypkg`. Neither has an upstream: verdaccio has no uplinks and
//! pypiserver's redirect to PyPI is off, so nothing a test runs can reach beyond loopback.
//!
//! Without the tools, [`NpmRegistry::start`] and [`PypiIndex::start`] return `None` with a
//! note and the calling test returns early (skip), unless `MCPPROXY_REQUIRE_REGISTRIES` is
//! set (CI sets it): then a missing tool is a panic, so CI cannot go green by skipping.
//! `Drop` stops the server and removes its temp dir.

#![allow(
    dead_code,
    reason = "shared helpers: each test module uses a different subset"
)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

/// Set (to anything but empty or `0`) to make a missing registry tool a failure, not a skip.
pub(crate) const REQUIRE_ENV: &str = "MCPPROXY_REQUIRE_REGISTRIES";

/// The npm package the registry serves.
pub(crate) const NPM_PACKAGE: &str = "@modelcontextprotocol/server-everything";
/// The Python package the index serves, its version and its console script.
pub(crate) const PY_PACKAGE: &str = "mcpproxy-echo-server";
pub(crate) const PY_VERSION: &str = "1.0.0";

/// How long a registry may take to answer its first request.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// A start whose freshly picked port was taken in the meantime picks another.
const PORT_ATTEMPTS: u32 = 5;

fn required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `None` with a note (or a panic when required) for a missing tool.
fn missing(what: &str, fix: &str) -> Option<std::convert::Infallible> {
    assert!(
        !required(),
        "{REQUIRE_ENV} is set but {what} is missing: {fix}"
    );
    eprintln!("SKIPPED: {what} is missing ({fix}); set {REQUIRE_ENV}=1 to make that a failure");
    None
}

/// The version of server-everything in `tests/npm` (pinned in tests/npm/package.json).
pub(crate) fn npm_version() -> String {
    let manifest = crate::support::repo_root()
        .join("tests/npm/node_modules")
        .join(NPM_PACKAGE)
        .join("package.json");
    let text = std::fs::read_to_string(&manifest)
        .unwrap_or_else(|e| panic!("read {}: {e}", manifest.display()));
    let value: Value = serde_json::from_str(&text).expect("package.json is JSON");
    value["version"]
        .as_str()
        .expect("package.json has a version")
        .to_owned()
}

/// `@modelcontextprotocol/server-everything@VERSION`, as a launcher is given it.
pub(crate) fn npm_spec() -> String {
    format!("{NPM_PACKAGE}@{}", npm_version())
}

/// A running verdaccio on 127.0.0.1 with the bundled server-everything published.
pub(crate) struct NpmRegistry {
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
}

impl NpmRegistry {
    /// Starts verdaccio and publishes the package; `None` (with a note) when verdaccio or
    /// server-everything is not installed and `MCPPROXY_REQUIRE_REGISTRIES` is unset.
    pub(crate) fn start() -> Option<Self> {
        let verdaccio =
            crate::support::repo_root().join("tests/registry/node_modules/verdaccio/bin/verdaccio");
        if !verdaccio.exists() {
            missing(
                "verdaccio",
                "run `npm ci --prefix tests/registry` (.ci/run does)",
            )?;
        }
        if !crate::support::repo_root()
            .join("tests/npm/node_modules")
            .join(NPM_PACKAGE)
            .exists()
        {
            missing(
                NPM_PACKAGE,
                "run `npm ci --prefix tests/npm` (.ci/run does)",
            )?;
        }
        let dir = tempfile::Builder::new()
            .prefix("mcpproxy-verdaccio-")
            .tempdir()
            .expect("create a temp dir for verdaccio");
        std::fs::create_dir(dir.path().join("storage")).expect("storage dir");
        // No uplinks: a package that is not published here does not exist. Anyone may publish
        // (the tests publish without a user).
        let config = format!(
            "storage: {storage}\n\
             uplinks: {{}}\n\
             packages:\n  '**':\n    access: $all\n    publish: $anonymous\n    unpublish: $anonymous\n\
             log: {{ type: stdout, format: pretty, level: warn }}\n",
            storage = dir.path().join("storage").display()
        );
        std::fs::write(dir.path().join("config.yaml"), config).expect("write verdaccio config");
        let mut registry = Self {
            dir,
            port: 0,
            child: None,
        };
        for _ in 0..PORT_ATTEMPTS {
            registry.port = free_port();
            let log = std::fs::File::create(registry.dir.path().join("verdaccio.log"))
                .expect("verdaccio log");
            let child = Command::new("node")
                .arg(&verdaccio)
                .arg("--config")
                .arg(registry.dir.path().join("config.yaml"))
                .arg("--listen")
                .arg(format!("127.0.0.1:{}", registry.port))
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log handle"))
                .stderr(log)
                .spawn()
                .expect("start verdaccio (is node installed?)");
            if let Some(child) = wait_ready(child, registry.port, "/-/ping", &registry.log()) {
                registry.child = Some(child);
                registry.publish(bundled_tarball());
                return Some(registry);
            }
        }
        panic!(
            "verdaccio found no free port in {PORT_ATTEMPTS} attempts:\n{}",
            registry.log()
        );
    }

    /// `http://127.0.0.1:PORT/`.
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// `127.0.0.1:PORT`.
    pub(crate) fn host_port(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// verdaccio's log so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("verdaccio.log")).unwrap_or_default()
    }

    /// The environment of a server launched with npx against this registry, every cache
    /// under `cache` (the user's own npm config is not read).
    pub(crate) fn server_env(&self, cache: &Path) -> Map<String, Value> {
        npm_env(&self.url(), cache)
    }

    fn publish(&self, tarball: &Path) {
        // npm refuses to publish without a token for the registry; verdaccio lets anonymous
        // publishes through whatever the token says.
        let npmrc = self.dir.path().join("npmrc");
        std::fs::write(
            &npmrc,
            format!("//127.0.0.1:{}/:_authToken=anonymous\n", self.port),
        )
        .expect("write npmrc");
        let out = npm_command(&self.url(), &self.dir.path().join("npm-cache"))
            .arg("publish")
            .arg(tarball)
            .env("npm_config_userconfig", &npmrc)
            .output()
            .expect("run npm publish");
        assert!(
            out.status.success(),
            "npm publish failed:\n{}{}\nverdaccio:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
    }

    /// Stops verdaccio (a second start of a server then has only its cache).
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for NpmRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// npm's environment for a test: `registry`, caches under `cache`, no user config, and no
/// request anywhere else (npm's update check would ask registry.npmjs.org).
pub(crate) fn npm_env(registry: &str, cache: &Path) -> Map<String, Value> {
    let mut env = Map::new();
    for (k, v) in [
        ("npm_config_registry", registry.to_owned()),
        ("npm_config_cache", cache.join("npm").display().to_string()),
        ("npm_config_userconfig", "/dev/null".to_owned()),
        ("npm_config_update_notifier", "false".to_owned()),
        ("npm_config_audit", "false".to_owned()),
        ("npm_config_fund", "false".to_owned()),
    ] {
        env.insert(k.to_owned(), json!(v));
    }
    env
}

fn npm_command(registry: &str, cache: &Path) -> Command {
    let mut command = Command::new("npm");
    for (k, v) in npm_env(registry, cache) {
        command.env(k, v.as_str().unwrap_or_default());
    }
    command.stdin(Stdio::null());
    command
}

/// The tarball of server-everything with its dependencies bundled. Staging and packing
/// 100-odd packages takes a while, and nextest runs each test in a process of its own, so the
/// tarball is made once per version of the package, of its dependencies (the lockfile of
/// `tests/npm`, whose `node_modules` it bundles) and of the staging script, and kept under
/// the build's tmp dir (a temp dir per process leaked 39 MB into /tmp for each test). It is
/// made in a temp dir beside its place and renamed into it: tests in other processes read the
/// place meanwhile, and a loser of the race uses the winner's.
fn bundled_tarball() -> &'static Path {
    static TARBALL: OnceLock<PathBuf> = OnceLock::new();
    TARBALL.get_or_init(|| {
        let root = crate::support::repo_root();
        let script = root.join("tests/registry/stage-bundled.js");
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for input in [&script, &root.join("tests/npm/package-lock.json")] {
            let text =
                std::fs::read(input).unwrap_or_else(|e| panic!("read {}: {e}", input.display()));
            std::hash::Hash::hash(&text, &mut hasher);
        }
        let key = format!(
            "{}-{:016x}",
            npm_version(),
            std::hash::Hasher::finish(&hasher)
        );
        let parent = Path::new(env!("CARGO_TARGET_TMPDIR")).join("npm-bundle");
        let place = parent.join(&key);
        if let Some(found) = packed_tarball(&place) {
            return found;
        }
        std::fs::create_dir_all(&parent).expect("create the bundle cache dir");
        let dir = tempfile::Builder::new()
            .prefix(".making-")
            .tempdir_in(&parent)
            .expect("temp dir for the bundle");
        let stage = dir.path().join("stage");
        let modules = root.join("tests/npm/node_modules");
        let out = Command::new("node")
            .arg(&script)
            .arg(modules.join(NPM_PACKAGE))
            .arg(&modules)
            .arg(&stage)
            .output()
            .expect("run node stage-bundled.js");
        assert!(
            out.status.success(),
            "staging the bundle failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // A registry no test runs: `npm pack` of a directory needs none, and must not ask
        // the public one anything.
        let out = npm_command("http://127.0.0.1:9/", &dir.path().join("npm-cache"))
            .arg("pack")
            .arg(&stage)
            .arg("--pack-destination")
            .arg(dir.path())
            .arg("--json")
            .output()
            .expect("run npm pack");
        assert!(
            out.status.success(),
            "npm pack failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Only the tarball is kept: the stage and npm's cache are ten times its size.
        let _ = std::fs::remove_dir_all(&stage);
        let _ = std::fs::remove_dir_all(dir.path().join("npm-cache"));
        let made = dir.keep();
        if std::fs::rename(&made, &place).is_err() {
            // Another process put its bundle there first.
            let _ = std::fs::remove_dir_all(&made);
        }
        packed_tarball(&place).expect("the packed bundle in its cache dir")
    })
}

/// The one `.tgz` in a bundle's cache dir, if the dir is there.
fn packed_tarball(place: &Path) -> Option<PathBuf> {
    std::fs::read_dir(place)
        .ok()?
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|e| e == "tgz"))
}

/// A running pypiserver on 127.0.0.1 serving the echo server's wheel.
pub(crate) struct PypiIndex {
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
}

impl PypiIndex {
    /// Builds the wheel and starts pypiserver on it; `None` (with a note) when pypiserver or
    /// uv is not in `tests/python/.venv` and `MCPPROXY_REQUIRE_REGISTRIES` is unset.
    pub(crate) fn start() -> Option<Self> {
        let bin = crate::support::repo_root().join("tests/python/.venv/bin");
        for tool in ["pypi-server", "uvx", "python"] {
            if !bin.join(tool).exists() {
                missing(
                    &bin.join(tool).display().to_string(),
                    "tests/python/.venv/bin/pip install -r tests/python/requirements.txt (.ci/run does)",
                )?;
            }
        }
        let dir = tempfile::Builder::new()
            .prefix("mcpproxy-pypiserver-")
            .tempdir()
            .expect("create a temp dir for pypiserver");
        let packages = dir.path().join("packages");
        let out = Command::new(bin.join("python"))
            .arg(crate::support::repo_root().join("tests/fixtures/pypkg/build_wheel.py"))
            .arg(&packages)
            .arg(PY_VERSION)
            .output()
            .expect("run build_wheel.py");
        assert!(
            out.status.success(),
            "building the wheel failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut index = Self {
            dir,
            port: 0,
            child: None,
        };
        for _ in 0..PORT_ATTEMPTS {
            index.port = free_port();
            let log = std::fs::File::create(index.dir.path().join("pypiserver.log"))
                .expect("pypiserver log");
            let child = Command::new(bin.join("pypi-server"))
                .args(["run", "-i", "127.0.0.1", "-p"])
                .arg(index.port.to_string())
                // Never redirect a missing package to PyPI.
                .arg("--disable-fallback")
                .arg(&packages)
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log handle"))
                .stderr(log)
                .spawn()
                .expect("start pypi-server");
            if let Some(child) = wait_ready(child, index.port, "/simple/", &index.log()) {
                index.child = Some(child);
                return Some(index);
            }
        }
        panic!(
            "pypiserver found no free port in {PORT_ATTEMPTS} attempts:\n{}",
            index.log()
        );
    }

    /// `http://127.0.0.1:PORT/simple/`.
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/simple/", self.port)
    }

    /// `127.0.0.1:PORT`.
    pub(crate) fn host_port(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// pypiserver's log so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pypiserver.log")).unwrap_or_default()
    }

    /// Stops pypiserver.
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PypiIndex {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `uvx` of `tests/python/.venv`.
pub(crate) fn uvx() -> PathBuf {
    crate::support::repo_root().join("tests/python/.venv/bin/uvx")
}

/// uv's environment for a test: every cache and tool dir under `cache`, the venv's own
/// interpreter (never a download), no user config.
pub(crate) fn uv_env(cache: &Path) -> Map<String, Value> {
    let python = crate::support::repo_root().join("tests/python/.venv/bin/python");
    // The interpreter the venv was made from (uv refuses a venv's python as a base).
    let python = std::fs::canonicalize(&python).unwrap_or(python);
    let mut env = Map::new();
    for (k, v) in [
        ("UV_CACHE_DIR", cache.join("uv/cache").display().to_string()),
        ("UV_TOOL_DIR", cache.join("uv/tools").display().to_string()),
        (
            "UV_PYTHON_INSTALL_DIR",
            cache.join("uv/python").display().to_string(),
        ),
        ("UV_PYTHON", python.display().to_string()),
        ("UV_PYTHON_DOWNLOADS", "never".to_owned()),
        ("UV_NO_CONFIG", "1".to_owned()),
    ] {
        env.insert(k.to_owned(), json!(v));
    }
    env
}

/// Waits until `GET path` on the port answers 200; `None` when the server exited first (its
/// port was taken); panics with the log on a timeout or another exit.
fn wait_ready(mut child: Child, port: u16, path: &str, log_so_far: &str) -> Option<Child> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if http_ok(port, path) {
            return Some(child);
        }
        if let Ok(Some(status)) = child.try_wait() {
            eprintln!("registry on port {port} exited ({status}): {log_so_far}");
            return None;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the registry on port {port} was not ready within {READY_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether `GET path` on 127.0.0.1:port answers 200.
fn http_ok(port: u16, path: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.ends_with(b"200")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}
