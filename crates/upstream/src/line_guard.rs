//! A guard on newline-delimited JSON-RPC read from a pipe (a stdio upstream's stdout, or
//! the client's stdin with `serve --stdio`). The MCP library drops a line over 16 MiB
//! without telling anyone, so the request it answered (or that it was) waits until its
//! timeout. The guard stops passing a line on once it reaches [`MAX_LINE_BYTES`] (a little
//! under the library's limit), ends it there (the library drops the cut line as unparsable)
//! and passes on, in its place, a short line of the guard's choosing made from the cut
//! line's id: an error response, so the call fails at once saying why, or a request the
//! proxy answers with that error. A line with no id it can read is just dropped.
//!
//! The id is read from the line's first bytes (`{"jsonrpc":"2.0","id":7,...`, as every MCP
//! SDK writes it). Depends on nothing else in the crate.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// The longest line passed on: 1 KiB under the MCP library's 16 MiB.
pub const MAX_LINE_BYTES: usize = (16 << 20) - 1024;
/// How much of a line's start is kept to find its id.
const HEAD_BYTES: usize = 512;

/// What goes in place of a cut line, given its id (JSON text: a number or a string) and
/// whether the line was a request (it had a `method`); `None` passes nothing.
pub type Replacement = fn(id: &str, request: bool) -> Option<String>;

/// An [`AsyncRead`] that cuts lines over [`MAX_LINE_BYTES`] (see the module docs).
pub struct LineGuard<R> {
    inner: R,
    max: usize,
    replace: Replacement,
    /// Bytes of the current line passed on so far.
    line: usize,
    /// The current line's first bytes.
    head: Vec<u8>,
    /// Inside a cut line: bytes are dropped until its newline.
    cutting: bool,
    /// Bytes waiting to be handed to the reader (a replacement line).
    queued: Vec<u8>,
    /// Read from `inner`, not yet looked at.
    pending: Vec<u8>,
}

impl<R> LineGuard<R> {
    pub fn new(inner: R, replace: Replacement) -> Self {
        Self::with_max(inner, replace, MAX_LINE_BYTES)
    }

    fn with_max(inner: R, replace: Replacement, max: usize) -> Self {
        Self {
            inner,
            max,
            replace,
            line: 0,
            head: Vec::with_capacity(HEAD_BYTES),
            cutting: false,
            queued: Vec::new(),
            pending: Vec::new(),
        }
    }

    /// Moves what may be passed on from `pending` into `out` (and `queued`).
    fn process(&mut self, out: &mut ReadBuf<'_>) {
        let mut taken = 0;
        while taken < self.pending.len() && out.remaining() > 0 && self.queued.is_empty() {
            let rest = &self.pending[taken..];
            let newline = rest.iter().position(|b| *b == b'\n');
            let segment = newline.map_or(rest.len(), |i| i + 1);
            if self.cutting {
                taken += segment;
                if newline.is_some() {
                    self.end_line();
                }
                continue;
            }
            let content = newline.map_or(segment, |i| i);
            if self.line + content > self.max {
                // Pass on what still fits, then end the line and queue the replacement.
                let fits = self.max - self.line;
                let n = fits.min(out.remaining());
                remember(&mut self.head, &rest[..n]);
                out.put_slice(&rest[..n]);
                taken += n;
                self.line += n;
                if self.line < self.max {
                    continue;
                }
                self.queued.push(b'\n');
                if let Some(line) = replacement(&self.head, self.replace) {
                    self.queued.extend_from_slice(line.as_bytes());
                    self.queued.push(b'\n');
                }
                self.cutting = true;
                continue;
            }
            let n = segment.min(out.remaining());
            remember(&mut self.head, &rest[..n]);
            out.put_slice(&rest[..n]);
            taken += n;
            self.line += n;
            if n == segment && newline.is_some() {
                self.end_line();
            }
        }
        self.pending.drain(..taken);
    }

    fn end_line(&mut self) {
        self.line = 0;
        self.head.clear();
        self.cutting = false;
    }

    fn drain_queued(&mut self, out: &mut ReadBuf<'_>) {
        let n = self.queued.len().min(out.remaining());
        out.put_slice(&self.queued[..n]);
        self.queued.drain(..n);
    }
}

/// Keeps the first [`HEAD_BYTES`] of a line in `head`.
fn remember(head: &mut Vec<u8>, bytes: &[u8]) {
    let room = HEAD_BYTES.saturating_sub(head.len());
    head.extend_from_slice(&bytes[..room.min(bytes.len())]);
}

/// The replacement for a cut line whose first bytes are `head`.
fn replacement(head: &[u8], replace: Replacement) -> Option<String> {
    let head = String::from_utf8_lossy(head);
    let request = head.contains("\"method\"");
    let id = read_id(&head)?;
    replace(&id, request)
}

/// The JSON text of the `"id"` member in `head`: a number or a string without escapes.
fn read_id(head: &str) -> Option<String> {
    let at = head.find("\"id\"")? + 4;
    let rest = head[at..].trim_start().strip_prefix(':')?.trim_start();
    if let Some(string) = rest.strip_prefix('"') {
        let end = string.find('"')?;
        let id = &string[..end];
        return (!id.contains('\\')).then(|| format!("\"{id}\""));
    }
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '-'))
        .unwrap_or(rest.len());
    let number = &rest[..end];
    (!number.is_empty() && end < rest.len()).then(|| number.to_owned())
}

impl<R: AsyncRead + Unpin> AsyncRead for LineGuard<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            let before = out.filled().len();
            if !this.queued.is_empty() {
                this.drain_queued(out);
                return Poll::Ready(Ok(()));
            }
            if !this.pending.is_empty() {
                this.process(out);
                if out.filled().len() > before || !this.queued.is_empty() {
                    if !this.queued.is_empty() && out.remaining() > 0 {
                        this.drain_queued(out);
                    }
                    return Poll::Ready(Ok(()));
                }
                if !this.pending.is_empty() {
                    continue;
                }
            }
            let mut chunk = [0u8; 64 << 10];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {
                    if read.filled().is_empty() {
                        return Poll::Ready(Ok(())); // end of stream
                    }
                    this.pending.extend_from_slice(read.filled());
                }
            }
        }
    }
}

/// For an upstream's stdout: a cut response becomes an error response to the same id.
pub fn error_response(id: &str, request: bool) -> Option<String> {
    (!request).then(|| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32603,\"message\":\"the server's reply was larger than {} MiB, the most mcpproxy reads from a stdio server; ask for less (a narrower query, a smaller page)\"}}}}",
            (MAX_LINE_BYTES >> 20) + 1
        )
    })
}

/// The tool name a cut client request is replaced with a call of (see [`oversized_request`]).
pub const OVERSIZED_REQUEST_TOOL: &str = "mcpproxy/oversized-request";

/// For a client's stdin (`serve --stdio`): a cut request becomes a `tools/call` of
/// [`OVERSIZED_REQUEST_TOOL`] with the same id, which the proxy answers with an error
/// saying the request was too large; the client's request is answered, not left waiting.
pub fn oversized_request(id: &str, request: bool) -> Option<String> {
    request.then(|| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"{OVERSIZED_REQUEST_TOOL}\"}}}}"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn through(input: Vec<u8>, max: usize) -> String {
        let mut guard = LineGuard::with_max(&input[..], error_response, max);
        let mut out = Vec::new();
        guard.read_to_end(&mut out).await.unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn ids_are_read_from_the_start_of_a_line() {
        assert_eq!(
            read_id(r#"{"jsonrpc":"2.0","id":7,"result":"#).as_deref(),
            Some("7")
        );
        assert_eq!(
            read_id(r#"{"id" : "a-1", "result""#).as_deref(),
            Some("\"a-1\"")
        );
        assert_eq!(read_id(r#"{"jsonrpc":"2.0","result":"#), None);
        assert_eq!(read_id(r#"{"id":"a\"b","#), None);
        assert_eq!(read_id(r#"{"id":12"#), None, "the number may go on");
    }

    #[tokio::test]
    async fn short_lines_pass_unchanged() {
        let input = b"{\"id\":1,\"result\":{}}\n{\"id\":2,\"result\":{}}\n".to_vec();
        assert_eq!(
            through(input.clone(), 100).await,
            String::from_utf8(input).unwrap()
        );
    }

    #[tokio::test]
    async fn a_long_response_is_cut_and_answered_with_an_error_for_its_id() {
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":42,\"result\":\"{}\"}}\n",
            "x".repeat(500)
        );
        let input = format!("{long}{{\"id\":43,\"result\":{{}}}}\n");
        let out = through(input.into_bytes(), 100).await;
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert_eq!(
            lines[0].len(),
            100,
            "the cut line, dropped downstream as unparsable"
        );
        let error: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(error["id"], 42);
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains("larger than 16 MiB")
        );
        assert_eq!(
            lines[2], "{\"id\":43,\"result\":{}}",
            "the next line is whole"
        );
    }

    #[tokio::test]
    async fn a_long_request_or_a_line_without_an_id_is_only_dropped() {
        let request = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"x\",\"params\":\"{}\"}}\n",
            "y".repeat(500)
        );
        let out = through(request.into_bytes(), 100).await;
        assert_eq!(out.lines().count(), 1, "only the cut line: {out}");
        let no_id = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":\"{}\"}}\n",
            "y".repeat(500)
        );
        let out = through(no_id.into_bytes(), 100).await;
        assert_eq!(out.lines().count(), 1, "{out}");
    }
}
