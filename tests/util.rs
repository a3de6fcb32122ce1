//! Shared test helpers: paths of the compiled test plugins and a runner for the binary.

#![allow(
    dead_code,
    reason = "shared helpers: each test module uses a different subset"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where host/build.rs put the compiled plugins (defaults and test fixtures).
pub(crate) fn artifact(crate_name: &str) -> PathBuf {
    Path::new(env!("MCPPROXY_PLUGIN_ARTIFACTS")).join(format!("{crate_name}.wasm"))
}

/// The bytes of a compiled plugin.
pub(crate) fn artifact_bytes(crate_name: &str) -> Vec<u8> {
    let path = artifact(crate_name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The `mcpproxy` binary with a private data dir, so tests never touch ~/.mcpproxy.
pub(crate) struct TestCommand {
    cmd: Command,
}

impl TestCommand {
    pub(crate) fn new(data_dir: &Path) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpproxy"));
        cmd.env("MCPPROXY_DATA_DIR", data_dir)
            .env("HOME", data_dir)
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1");
        Self { cmd }
    }

    pub(crate) fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.cmd.args(args);
        self
    }

    pub(crate) fn env(mut self, key: &str, value: &str) -> Self {
        self.cmd.env(key, value);
        self
    }

    pub(crate) fn output(mut self) -> CmdOutput {
        let output = self.cmd.output().expect("run mcpproxy");
        CmdOutput(output)
    }
}

/// The result of a run, with readable assertions.
pub(crate) struct CmdOutput(pub Output);

impl CmdOutput {
    pub(crate) fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }

    pub(crate) fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }

    pub(crate) fn code(&self) -> Option<i32> {
        self.0.status.code()
    }

    #[track_caller]
    pub(crate) fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code(),
            Some(code),
            "expected exit {code}, got {}\n--- stdout\n{}\n--- stderr\n{}",
            self.0.status,
            self.stdout(),
            self.stderr()
        );
        self
    }
}

/// Runs `script` with `python -c`, `input` on its stdin: its stdout, or its stderr as the
/// error when it exits unsuccessfully.
pub(crate) fn run_python(python: &Path, script: &str, input: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write to python");
    let out = child.wait_with_output().expect("wait for python");
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The Python of `tests/python/.venv` (made by `.ci/run` from `tests/python/requirements.txt`),
/// or `None` with a note when it is missing, unless `MCPPROXY_REQUIRE_PYTHON` is set (as in
/// CI), which makes a missing one a failure.
pub(crate) fn test_python() -> Option<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/.venv/bin/python");
    if python.exists() {
        return Some(python);
    }
    assert!(
        std::env::var_os("MCPPROXY_REQUIRE_PYTHON").is_none(),
        "{} is missing: python3 -m venv tests/python/.venv && tests/python/.venv/bin/pip install -r tests/python/requirements.txt",
        python.display()
    );
    eprintln!(
        "skipped: no {} (python3 -m venv tests/python/.venv && tests/python/.venv/bin/pip install -r tests/python/requirements.txt)",
        python.display()
    );
    None
}
