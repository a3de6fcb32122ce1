//! The `mcpproxy` binary run as a user would, with a private data dir, and its output
//! with readable assertions.

#![allow(
    dead_code,
    reason = "shared helpers: each test module uses a different subset"
)]

use std::path::Path;
use std::process::{Command, Output};

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

    pub(crate) fn arg_path(mut self, path: &Path) -> Self {
        self.cmd.arg(path);
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
