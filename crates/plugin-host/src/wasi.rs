//! The WASI a validator, annotator or scanner gets: WASI 0.2 (wasmtime-wasi `p2`, sync)
//! with nothing in it, so that language runtimes which import WASI (Python, C with
//! wasi-libc) load and run, and can reach nothing outside their instance.
//!
//! - no preopened directories: every filesystem call fails (`/etc/passwd` cannot be opened);
//! - no environment variables, no arguments, an empty stdin;
//! - no sockets: TCP and UDP are off, name lookup is off, and every address is refused;
//! - stdout and stderr go to the proxy's log, tagged with the plugin's name, under the same
//!   per-call budget as `host.log` (`host::PluginLog`): past it, output is dropped, never a
//!   trap;
//! - wall and monotonic clocks and randomness work.
//!
//! The context is built on the first WASI call of an instance (`PluginWasi::view`), so a
//! plugin that never calls WASI pays nothing for it.

use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView};

use super::bindings::wit_host::LogLevel;
use super::host::{MAX_LOG_LINE_BYTES, PluginLog};

/// The WASI state of one instance: built on first use.
pub(crate) struct PluginWasi {
    ctx: Option<WasiCtx>,
    table: ResourceTable,
}

impl PluginWasi {
    pub(crate) fn new() -> Self {
        Self {
            ctx: None,
            table: ResourceTable::new(),
        }
    }

    /// The view wasmtime-wasi works through; builds the empty context the first time.
    pub(crate) fn view(&mut self, log: &Arc<PluginLog>) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: self.ctx.get_or_insert_with(|| deny_all(log)),
            table: &mut self.table,
        }
    }

    /// Whether the guest has called WASI yet (for tests).
    #[cfg(test)]
    fn is_built(&self) -> bool {
        self.ctx.is_some()
    }
}

/// A WASI context that grants nothing but clocks, randomness and a log-bound stdout/stderr.
fn deny_all(log: &Arc<PluginLog>) -> WasiCtx {
    WasiCtxBuilder::new()
        .stdout(LogOutput {
            log: log.clone(),
            level: LogLevel::Info,
        })
        .stderr(LogOutput {
            log: log.clone(),
            level: LogLevel::Warn,
        })
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .socket_addr_check(|_, _| Box::pin(async { false }))
        .build()
}

/// stdout or stderr of a plugin: each line becomes a log line at `level`.
struct LogOutput {
    log: Arc<PluginLog>,
    level: LogLevel,
}

impl IsTerminal for LogOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(LogStream {
            log: self.log.clone(),
            level: self.level,
            line: Vec::new(),
        })
    }

    /// Only WASI 0.3 guests ask for this, and the proxy links WASI 0.2 alone: discard.
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(tokio::io::sink())
    }
}

/// One handle on a plugin's stdout or stderr: splits what the guest writes into lines.
struct LogStream {
    log: Arc<PluginLog>,
    level: LogLevel,
    /// The line being written, at most [`MAX_LOG_LINE_BYTES`] (the rest is dropped).
    line: Vec<u8>,
}

impl LogStream {
    fn emit(&mut self) {
        let text = String::from_utf8_lossy(&self.line);
        self.log.write(self.level, text.trim_end_matches('\r'));
        self.line.clear();
    }
}

impl OutputStream for LogStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            if self.log.exhausted() {
                // Nothing more will be logged this call: accept and drop.
                self.line.clear();
                return Ok(());
            }
            let (part, ends_line) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (&rest[..i], Some(i + 1)),
                None => (rest, None),
            };
            let room = MAX_LOG_LINE_BYTES.saturating_sub(self.line.len());
            self.line.extend_from_slice(&part[..part.len().min(room)]);
            match ends_line {
                Some(next) => {
                    self.emit();
                    rest = &rest[next..];
                }
                None => break,
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        // A line is logged when it ends (or when the stream is dropped), not per flush.
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        // Always ready: whatever does not fit the budget is dropped, not waited for.
        Ok(1 << 20)
    }
}

impl Drop for LogStream {
    fn drop(&mut self) {
        if !self.line.is_empty() {
            self.emit();
        }
    }
}

impl Pollable for LogStream {
    fn ready<'a, 'b>(&'a mut self) -> Pin<Box<dyn Future<Output = ()> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(std::future::ready(()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::host::MAX_LOG_LINES_PER_CALL;
    use super::*;

    fn stream(log: &Arc<PluginLog>) -> LogStream {
        LogStream {
            log: log.clone(),
            level: LogLevel::Info,
            line: Vec::new(),
        }
    }

    #[test]
    fn output_is_split_into_lines_under_the_shared_budget() {
        let log = Arc::new(PluginLog::new("p".into()));
        let mut out = stream(&log);
        out.write(Bytes::from_static(b"one\ntw")).unwrap();
        assert_eq!(log.lines(), 1);
        out.write(Bytes::from_static(b"o\nthree")).unwrap();
        assert_eq!(log.lines(), 2);
        drop(out); // the unterminated "three" is logged at the end
        assert_eq!(log.lines(), 3);
        log.write(LogLevel::Debug, "from host.log");
        assert_eq!(log.lines(), 4);
    }

    #[test]
    fn past_the_budget_output_is_dropped_not_refused() {
        let log = Arc::new(PluginLog::new("p".into()));
        let mut out = stream(&log);
        let flood = Bytes::from("x\n".repeat(10_000));
        for _ in 0..10 {
            out.write(flood.clone()).unwrap();
            assert!(out.check_write().unwrap() > 0);
        }
        assert_eq!(log.lines(), MAX_LOG_LINES_PER_CALL);
        log.begin_call();
        out.write(Bytes::from_static(b"next call\n")).unwrap();
        assert_eq!(log.lines(), 1);
    }

    #[test]
    fn a_long_line_is_cut_and_kept_bounded() {
        let log = Arc::new(PluginLog::new("p".into()));
        let mut out = stream(&log);
        for _ in 0..100 {
            out.write(Bytes::from(vec![b'y'; 10_000])).unwrap();
        }
        assert_eq!(out.line.len(), MAX_LOG_LINE_BYTES);
        out.write(Bytes::from_static(b"\n")).unwrap();
        assert!(out.line.is_empty());
        assert_eq!(log.lines(), 1);
    }

    #[test]
    fn the_context_is_built_on_first_use_only() {
        let log = Arc::new(PluginLog::new("p".into()));
        let mut wasi = PluginWasi::new();
        assert!(!wasi.is_built());
        let _ = wasi.view(&log);
        assert!(wasi.is_built());
    }
}
