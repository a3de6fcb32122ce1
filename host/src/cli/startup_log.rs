//! The log of a starting `serve`, held back until its banner and start-up summary are
//! printed: a person sees `listening on ...` and the summary first, then the INFO lines that
//! came meanwhile (an approval at the first start, each upstream ready), not the summary cut
//! by them. Warnings and errors are never held. A start that never gets as far as its summary
//! (an error, a hang) still shows what was held: at the end of `serve`, or after
//! [`HOLD_AT_MOST`].

use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use mcpproxy_auth::masking::MaskingWriter;
use tracing_subscriber::fmt::MakeWriter;

/// The most held back; lines beyond it are written at once.
const MAX_HELD_BYTES: usize = 1 << 20;
/// A start whose summary has not come by then shows what was held.
const HOLD_AT_MOST: Duration = Duration::from_secs(60);

/// The lines held back (masked already), or `None` when nothing is held.
static HELD: Mutex<Option<Vec<u8>>> = Mutex::new(None);

/// Holds the log's INFO and finer lines from now until [`release`].
pub(super) fn hold() {
    *mcpproxy_support::lock(&HELD) = Some(Vec::new());
    // Ends after the bound, or with the process.
    let _ = std::thread::Builder::new()
        .name("startup-log".to_owned())
        .spawn(|| {
            std::thread::sleep(HOLD_AT_MOST);
            release();
        });
}

/// Writes what was held and stops holding.
pub(super) fn release() {
    let held = mcpproxy_support::lock(&HELD).take();
    if let Some(lines) = held {
        let _ = std::io::stderr().write_all(&lines);
    }
}

/// The log's writer: stderr through the masking of secrets, with the lines a start holds
/// back kept aside.
pub(super) struct StartupLog;

impl<'a> MakeWriter<'a> for StartupLog {
    type Writer = MaskingWriter<Line>;

    fn make_writer(&'a self) -> Self::Writer {
        MaskingWriter(Line { holdable: false })
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        MaskingWriter(Line {
            holdable: *meta.level() >= tracing::Level::INFO,
        })
    }
}

/// One log line: held while a start holds lines of its level, else stderr.
pub(super) struct Line {
    holdable: bool,
}

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.holdable {
            let mut held = mcpproxy_support::lock(&HELD);
            if let Some(lines) = held.as_mut()
                && lines.len() + buf.len() <= MAX_HELD_BYTES
            {
                lines.extend_from_slice(buf);
                return Ok(buf.len());
            }
        }
        std::io::stderr().write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_lines_wait_and_warnings_do_not() {
        *mcpproxy_support::lock(&HELD) = Some(Vec::new());
        let mut info = Line { holdable: true };
        info.write_all(b"INFO held\n").unwrap();
        let mut warn = Line { holdable: false };
        warn.write_all(b"").unwrap();
        assert_eq!(
            mcpproxy_support::lock(&HELD).as_deref(),
            Some(&b"INFO held\n"[..])
        );
        release();
        assert!(mcpproxy_support::lock(&HELD).is_none());
        // Nothing held: written at once (to stderr), not kept.
        info.write_all(b"INFO after\n").unwrap();
        assert!(mcpproxy_support::lock(&HELD).is_none());
    }
}
