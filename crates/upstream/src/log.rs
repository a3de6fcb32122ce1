//! The recent stderr lines of a stdio server, for `upstream_servers tail_log` and
//! `mcpproxy upstream logs`: a ring of the last [`MAX_LINES`], each cut to
//! [`MAX_LINE_BYTES`], so a chatty or hostile server cannot grow mcpproxy's memory.
//!
//! A long stack trace (Python's `Traceback (most recent call last):`, the `    at ...`
//! frames of Node.js or Java) keeps its first [`TRACE_HEAD`] and last [`TRACE_TAIL`] lines,
//! with one line in between saying how many were left out: where the error entered and
//! what it was, without one 140-line traceback pushing every earlier line out of the ring.
//! Lines that report a refused path or a failed connection are also kept aside, so the
//! error of the call that caused them can say so however much the server writes after.

use std::collections::VecDeque;

/// Lines kept per server.
pub const MAX_LINES: usize = 500;
/// The longest line kept, in bytes (longer ones are cut at a character boundary).
pub const MAX_LINE_BYTES: usize = 2048;
/// The first lines of a stack trace kept whole.
pub const TRACE_HEAD: usize = 10;
/// The last lines of a stack trace kept whole.
pub const TRACE_TAIL: usize = 20;
/// Lines reporting a refusal kept aside (see [`Ring::notable_since`]).
const MAX_NOTABLE: usize = 32;

/// One line, its number among every line the server wrote, and when it arrived.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LogLine {
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    pub line: String,
    /// 1 for the server's first line; a follower prints the lines above the last it saw.
    /// The line standing for the left-out middle of a stack trace has the number of the
    /// first line it stands for.
    #[serde(default)]
    pub seq: u64,
}

/// The stack trace being written: how many lines it has so far (left-out ones included),
/// and the line standing for the left-out ones, once there are some, with their count.
#[derive(Debug)]
struct Trace {
    kind: TraceKind,
    lines: usize,
    elided: Option<usize>,
}

/// What kind of stack trace a line continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TraceKind {
    /// `Traceback (most recent call last):` and indented frames, until the exception's line.
    Python,
    /// A Python trace whose exception line came: the next line is not part of it.
    PythonEnded,
    /// Indented `at ...` frames (Node.js, Java, .NET).
    Frames,
}

#[derive(Debug, Default)]
pub struct Ring {
    lines: VecDeque<LogLine>,
    /// Lines ever pushed (so a follower knows what it missed).
    total: u64,
    trace: Option<Trace>,
    notable: VecDeque<LogLine>,
}

impl Ring {
    pub fn push(&mut self, line: &str, at_ms: u64) {
        let mut end = line.len().min(MAX_LINE_BYTES);
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        self.total += 1;
        let entry = LogLine {
            at_ms,
            line: line[..end].to_owned(),
            seq: self.total,
        };
        if crate::explain::is_notable(&entry.line) {
            if self.notable.len() == MAX_NOTABLE {
                self.notable.pop_front();
            }
            self.notable.push_back(entry.clone());
        }
        self.follow_trace(&entry.line);
        if self.lines.len() == MAX_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(entry);
        self.elide_trace_middle();
    }

    /// The last `n` lines, oldest first, and the count of lines ever pushed.
    pub fn tail(&self, n: usize) -> (Vec<LogLine>, u64) {
        let skip = self.lines.len().saturating_sub(n);
        (self.lines.iter().skip(skip).cloned().collect(), self.total)
    }

    /// The number of the last line pushed (0 before the first).
    pub fn last_seq(&self) -> u64 {
        self.total
    }

    /// The kept lines reporting a refused path or a failed connection that came after line
    /// `seq`, oldest first.
    pub fn notable_since(&self, seq: u64) -> Vec<LogLine> {
        self.notable
            .iter()
            .filter(|l| l.seq > seq)
            .cloned()
            .collect()
    }

    /// Starts, continues or ends the stack trace with `line`, which is about to be pushed.
    fn follow_trace(&mut self, line: &str) {
        let indented = line.starts_with([' ', '\t']);
        let frame = indented && line.trim_start().starts_with("at ");
        if line
            .trim_end()
            .ends_with("Traceback (most recent call last):")
        {
            self.trace = Some(Trace {
                kind: TraceKind::Python,
                lines: 1,
                elided: None,
            });
            return;
        }
        let next = match self.trace.as_ref().map(|t| t.kind) {
            Some(TraceKind::Python) if indented || line.is_empty() => Some(TraceKind::Python),
            // The first line that is not indented is the exception's, the trace's last.
            Some(TraceKind::Python) => Some(TraceKind::PythonEnded),
            Some(TraceKind::Frames)
                if frame || (indented && line.trim_start().starts_with("...")) =>
            {
                Some(TraceKind::Frames)
            }
            _ => None,
        };
        match (next, &mut self.trace) {
            (Some(kind), Some(trace)) => {
                trace.kind = kind;
                trace.lines += 1;
            }
            _ if frame => {
                self.trace = Some(Trace {
                    kind: TraceKind::Frames,
                    lines: 1,
                    elided: None,
                });
            }
            _ => self.trace = None,
        }
    }

    /// Leaves out the oldest line after the head of a stack trace whose tail outgrew
    /// [`TRACE_TAIL`]: the first such line becomes the one saying how many are left out.
    fn elide_trace_middle(&mut self) {
        let Some(trace) = &mut self.trace else {
            return;
        };
        let elided = trace.elided.unwrap_or(0);
        let tail = trace.lines - TRACE_HEAD.min(trace.lines) - elided;
        if tail <= TRACE_TAIL || self.lines.len() < tail + 1 {
            return;
        }
        let first_of_tail = self.lines.len() - tail;
        let marker = if elided == 0 {
            first_of_tail
        } else {
            self.lines.remove(first_of_tail);
            first_of_tail - 1
        };
        trace.elided = Some(elided + 1);
        if let Some(entry) = self.lines.get_mut(marker) {
            entry.line = format!(
                "[mcpproxy: {} line(s) of this stack trace left out; its first {TRACE_HEAD} and last {TRACE_TAIL} are kept]",
                elided + 1
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lines: &[LogLine]) -> Vec<&str> {
        lines.iter().map(|l| l.line.as_str()).collect()
    }

    #[test]
    fn keeps_the_last_lines_each_cut_to_the_bound() {
        let mut ring = Ring::default();
        for i in 0..(MAX_LINES + 10) {
            ring.push(&format!("line {i}"), i as u64);
        }
        let (tail, total) = ring.tail(3);
        assert_eq!(total, (MAX_LINES + 10) as u64);
        assert_eq!(
            texts(&tail),
            [
                format!("line {}", MAX_LINES + 7),
                format!("line {}", MAX_LINES + 8),
                format!("line {}", MAX_LINES + 9)
            ]
        );
        assert_eq!(tail[2].seq, total);
        assert_eq!(ring.tail(usize::MAX).0.len(), MAX_LINES);
        ring.push(&"é".repeat(MAX_LINE_BYTES), 0);
        let (tail, _) = ring.tail(1);
        assert!(tail[0].line.len() <= MAX_LINE_BYTES);
        assert!(tail[0].line.chars().all(|c| c == 'é'));
    }

    /// A 138-line Python traceback (as a server's `logger.exception` writes one) keeps the
    /// lines that say where it entered and what went wrong, and the lines before it.
    #[test]
    fn a_long_traceback_keeps_its_head_and_its_tail() {
        let mut ring = Ring::default();
        ring.push("INFO starting", 0);
        ring.push("ERROR Tool 'read_file' raised an unexpected exception", 0);
        ring.push("Traceback (most recent call last):", 0);
        for frame in 0..67 {
            ring.push(
                &format!("  File \"/srv/app/mod{frame}.py\", line {frame}, in f{frame}"),
                0,
            );
            ring.push(&format!("    call_{frame}()"), 0);
        }
        ring.push(
            "PermissionError: [Errno 13] Permission denied: '/srv/secret.txt'",
            0,
        );
        ring.push("INFO next request", 0);
        let (lines, total) = ring.tail(MAX_LINES);
        assert_eq!(total, 2 + 1 + 134 + 1 + 1);
        let kept = texts(&lines);
        assert_eq!(
            lines.len(),
            2 + TRACE_HEAD + 1 + TRACE_TAIL + 1,
            "{kept:#?}"
        );
        assert_eq!(kept[2], "Traceback (most recent call last):");
        assert_eq!(kept[3], "  File \"/srv/app/mod0.py\", line 0, in f0");
        let marker = kept[2 + TRACE_HEAD];
        assert!(
            marker.contains("106 line(s) of this stack trace left out"),
            "{marker}"
        );
        assert_eq!(
            kept[kept.len() - 2],
            "PermissionError: [Errno 13] Permission denied: '/srv/secret.txt'"
        );
        assert_eq!(kept[kept.len() - 1], "INFO next request");
        // Numbers still rise, so a follower can tell which lines it has seen.
        assert!(lines.windows(2).all(|w| w[0].seq < w[1].seq));
        // The refusal is also kept aside, for the error of the call that caused it.
        assert_eq!(
            texts_of_notable(&ring, 0),
            ["PermissionError: [Errno 13] Permission denied: '/srv/secret.txt'"]
        );
        assert!(texts_of_notable(&ring, total).is_empty());
    }

    fn texts_of_notable(ring: &Ring, seq: u64) -> Vec<String> {
        ring.notable_since(seq)
            .into_iter()
            .map(|l| l.line)
            .collect()
    }

    #[test]
    fn chained_tracebacks_and_node_frames_are_each_cut_on_their_own() {
        let mut ring = Ring::default();
        for round in 0..2 {
            if round == 1 {
                ring.push("", 0);
                ring.push(
                    "The above exception was the direct cause of the following exception:",
                    0,
                );
                ring.push("", 0);
            }
            ring.push("Traceback (most recent call last):", 0);
            for frame in 0..40 {
                ring.push(&format!("  File \"x.py\", line {frame}, in f"), 0);
            }
            ring.push(&format!("Error{round}: boom"), 0);
        }
        ring.push("Error: EACCES: permission denied, open '/home/u/a.md'", 0);
        for frame in 0..50 {
            ring.push(&format!("    at f{frame} (file:///srv/x.js:{frame}:1)"), 0);
        }
        ring.push("done", 0);
        let (lines, _) = ring.tail(MAX_LINES);
        let kept_lines = texts(&lines);
        for kept in [
            "Error0: boom",
            "Error1: boom",
            "    at f0 (file:///srv/x.js:0:1)",
            "    at f49 (file:///srv/x.js:49:1)",
            "done",
        ] {
            assert!(
                kept_lines.contains(&kept),
                "{kept} missing: {kept_lines:#?}"
            );
        }
        let markers = kept_lines.iter().filter(|t| t.contains("left out")).count();
        assert_eq!(markers, 3, "{kept_lines:#?}");
        // Short traces are kept whole.
        let mut short = Ring::default();
        short.push("Traceback (most recent call last):", 0);
        short.push("  File \"x.py\", line 1, in f", 0);
        short.push("ValueError: no", 0);
        assert!(
            !texts(&short.tail(10).0)
                .iter()
                .any(|t| t.contains("left out"))
        );
    }
}
