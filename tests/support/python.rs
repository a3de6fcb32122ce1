//! The Python of `tests/python/.venv` and a runner for scripts in it.

#![allow(
    dead_code,
    reason = "shared helpers: each test module uses a different subset"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

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
