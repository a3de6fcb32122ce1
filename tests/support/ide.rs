//! An IDE's `serve --stdio` session driven line by line, as an IDE drives it.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

/// `serve --stdio` driven line by line, as an IDE drives it.
pub(crate) struct StdioSession {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: std::sync::mpsc::Receiver<String>,
    next_id: u64,
}

impl StdioSession {
    pub(crate) fn start(config: &Path, data_dir: &Path) -> Self {
        Self::start_with(config, data_dir, &[])
    }

    /// [`Self::start`] with more arguments for `serve --stdio` (`--server NAME`).
    pub(crate) fn start_with(config: &Path, data_dir: &Path, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpproxy"))
            .args(["serve", "--stdio", "--config"])
            .arg(config)
            .arg("--data-dir")
            .arg(data_dir)
            .args(extra)
            .env("HOME", data_dir)
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve --stdio");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let stderr = super::mcp::pipe_lines(child.stderr.take().unwrap());
        let mut session = Self {
            child,
            stdin,
            stdout,
            stderr,
            next_id: 0,
        };
        let init = session.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw-ide", "version": "1"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "mcpproxy", "{init}");
        session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        session
    }

    pub(crate) fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and returns the answer with its id (notifications before it are
    /// passed over; any other line is a failure).
    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        self.request_seeing(method, params).0
    }

    /// [`Self::request`], with the notifications that came before the answer.
    pub(crate) fn request_seeing(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut notifications = Vec::new();
        loop {
            let mut line = String::new();
            self.stdout.read_line(&mut line).unwrap();
            let answer: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            if answer.get("method").is_some() && answer.get("id").is_none() {
                notifications.push(answer);
                continue;
            }
            assert_eq!(answer["id"], id, "an answer to another request: {answer}");
            return (answer, notifications);
        }
    }

    /// What the process wrote to stderr since the last call (for a failure's message).
    pub(crate) fn stderr(&self) -> String {
        self.stderr.try_iter().collect::<Vec<_>>().join("\n")
    }

    /// Stops the process at once (SIGKILL), as a crash or a force-quit IDE does.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(crate) fn echo(&mut self, text: &str) -> Value {
        self.request(
            "tools/call",
            json!({"name": "call_tool_read",
                   "arguments": {"name": "fx:echo", "args_json": json!({"text": text}).to_string()}}),
        )
    }
}

impl Drop for StdioSession {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn echo_text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("not a tool result: {answer}"))
}
