//! The recent stderr lines of a stdio server, for `upstream_servers tail_log` and
//! `mcpproxy upstream logs`: a ring of the last [`MAX_LINES`], each cut to
//! [`MAX_LINE_BYTES`], so a chatty or hostile server cannot grow mcpproxy's memory.

use std::collections::VecDeque;

/// Lines kept per server.
pub const MAX_LINES: usize = 500;
/// The longest line kept, in bytes (longer ones are cut at a character boundary).
pub const MAX_LINE_BYTES: usize = 2048;

/// One line and when it arrived.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LogLine {
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    pub line: String,
}

#[derive(Debug, Default)]
pub struct Ring {
    lines: VecDeque<LogLine>,
    /// Lines ever pushed (so a follower knows what it missed).
    total: u64,
}

impl Ring {
    pub fn push(&mut self, line: &str, at_ms: u64) {
        let mut end = line.len().min(MAX_LINE_BYTES);
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        if self.lines.len() == MAX_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(LogLine {
            at_ms,
            line: line[..end].to_owned(),
        });
        self.total += 1;
    }

    /// The last `n` lines, oldest first, and the count of lines ever pushed.
    pub fn tail(&self, n: usize) -> (Vec<LogLine>, u64) {
        let skip = self.lines.len().saturating_sub(n);
        (self.lines.iter().skip(skip).cloned().collect(), self.total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_lines_each_cut_to_the_bound() {
        let mut ring = Ring::default();
        for i in 0..(MAX_LINES + 10) {
            ring.push(&format!("line {i}"), i as u64);
        }
        let (tail, total) = ring.tail(3);
        assert_eq!(total, (MAX_LINES + 10) as u64);
        assert_eq!(
            tail.iter().map(|l| l.line.as_str()).collect::<Vec<_>>(),
            [
                format!("line {}", MAX_LINES + 7),
                format!("line {}", MAX_LINES + 8),
                format!("line {}", MAX_LINES + 9)
            ]
        );
        assert_eq!(ring.tail(usize::MAX).0.len(), MAX_LINES);
        ring.push(&"é".repeat(MAX_LINE_BYTES), 0);
        let (tail, _) = ring.tail(1);
        assert!(tail[0].line.len() <= MAX_LINE_BYTES);
        assert!(tail[0].line.chars().all(|c| c == 'é'));
    }
}
