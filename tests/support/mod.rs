//! Helpers the test modules share: the binary run as a user would, the compiled test
//! plugins, a running proxy with the fixture upstream and an MCP client, a real ClickHouse,
//! and the tests' Python.

/// The approval tests' calls, records, `mcpproxy approvals` and stateless retries.
pub(crate) mod approvals;
/// A real ClickHouse on loopback for the sink tests (started by the test; skipped with a
/// note when it is not installed, unless `MCPPROXY_REQUIRE_CLICKHOUSE` is set, as in CI).
pub(crate) mod clickhouse;
/// The `mcpproxy` binary with a private data dir.
mod command;
/// A real HAProxy in front of `mcpproxy serve` replicas (skipped unless installed, or
/// required by `MCPPROXY_REQUIRE_HAPROXY`, as in CI).
pub(crate) mod haproxy;
/// An IDE's `serve --stdio` session driven line by line.
pub(crate) mod ide;
/// A real OAuth authorization server issuing tokens to two clients (oidc-provider).
pub(crate) mod issuer;
/// The fixture upstream, a running `mcpproxy serve`, and an MCP client (rmcp).
pub(crate) mod mcp;
/// Node 22 and the npm tools run with it (the conformance suite, the OAuth servers).
pub(crate) mod node;
/// Polling until a check holds, with a deadline against hangs.
pub(crate) mod poll;
/// A real PostgreSQL on loopback for the cluster tests (started by the test; skipped with a
/// note when it is not installed, unless `MCPPROXY_REQUIRE_POSTGRES` is set, as in CI).
pub(crate) mod postgres;
/// The Python of `tests/python/.venv`.
mod python;
/// Package registries on loopback for the launcher tests: verdaccio (npm) and pypiserver
/// (PyPI), skipped unless installed, or required by `MCPPROXY_REQUIRE_REGISTRIES`, as in CI.
pub(crate) mod registries;
/// The shared, locked project directories where the tests build `plugins new` projects.
pub(crate) mod templates;
/// Waits in which time itself must pass, each with its reason; and the check that no test
/// module sleeps outside `support`.
pub(crate) mod time;

/// The compiled test plugins, built from source by the `plugin-artifacts` crate.
pub(crate) use plugin_artifacts::{artifact, artifact_bytes};

/// The cargo target directory of this test build (the parent of `CARGO_TARGET_TMPDIR`), where
/// tests keep what is slow to make and the same every run (template projects with their
/// installed toolchains, the C tools): CI points `CARGO_TARGET_DIR` at a directory that
/// survives between runs, so those survive with it.
pub(crate) fn target_dir() -> std::path::PathBuf {
    let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().unwrap_or(tmp).to_path_buf()
}

/// Whether this kernel has every part of the stdio servers' sandbox (as the sandbox crate
/// probes it); without one a test skips with a note, unless `MCPPROXY_REQUIRE_SANDBOX` is
/// set (as in CI), which makes it a failure.
pub(crate) fn sandbox_supported() -> bool {
    let support = mcpproxy_sandbox::Support::get();
    if support.landlock_abi >= 6 && support.network_namespace && support.seccomp {
        return true;
    }
    assert!(
        std::env::var_os("MCPPROXY_REQUIRE_SANDBOX").is_none(),
        "this kernel lacks a part of the sandbox, which CI requires: {support:?}"
    );
    eprintln!("SKIPPED: this kernel lacks a part of the sandbox: {support:?}");
    false
}
pub(crate) use command::{CmdOutput, TestCommand};

/// The host's processes with their command lines (arguments joined by spaces), for tests
/// that find a process by what it was started with.
pub(crate) fn command_lines() -> Vec<(u32, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let line = std::fs::read(entry.path().join("cmdline")).ok()?;
            Some((pid, String::from_utf8_lossy(&line).replace('\0', " ")))
        })
        .collect()
}
/// The repository's root (the integration tests are the `host` package's, one level down).
pub(crate) fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ lives in the repository root")
        .to_path_buf()
}

/// The newest modification time of `path` or, for a directory, of anything in it (`None` when
/// something cannot be read): a test's cheap "is this build output older than its sources".
pub(crate) fn newest_mtime(path: &std::path::Path) -> Option<std::time::SystemTime> {
    let meta = path.metadata().ok()?;
    if !meta.is_dir() {
        return meta.modified().ok();
    }
    std::fs::read_dir(path)
        .ok()?
        .map(|entry| entry.ok().and_then(|e| newest_mtime(&e.path())))
        .try_fold(meta.modified().ok()?, |acc, t| Some(acc.max(t?)))
}

/// Whether a line of [`command_lines`] is an `mcpproxy` process (its program's file name is
/// `mcpproxy`): a test that looks for an upstream by its arguments skips the proxy, and the
/// sandbox launcher it runs, which carry the same arguments. The program's directory is not
/// looked at: CI's target dir is under `~/.cache/mcpproxy/`, so a fixture's path contains the
/// word too.
pub(crate) fn runs_mcpproxy(command_line: &str) -> bool {
    let program = command_line.split(' ').next().unwrap_or_default();
    std::path::Path::new(program).file_name() == Some(std::ffi::OsStr::new("mcpproxy"))
}
pub(crate) use python::{run_python, test_python};
