//! The call lane of a stdio upstream: requests written straight to the server's stdin by
//! the task that makes them, and their answers taken off its stdout before rmcp's session
//! reads the line, beside that session, which carries everything else (`initialize`,
//! listings, notifications, the server's own requests, and the answers to its requests).
//!
//! rmcp's client passes each request through its service loop and a task of its own, and
//! decodes each answer by trying every kind of result it knows in turn (an untagged enum:
//! the message buffered, an error built for each kind that does not fit). A tool call is the
//! one request on a proxy's hot path, so it takes this lane instead (see
//! `Upstream::call`); measured in `docs/benchmarks.md`.
//!
//! How the two share one pipe each way:
//!
//! - **Writing.** One permit ([`Semaphore`]) says whose line is being written. A lane
//!   request takes it, writes its whole line and gives it back; rmcp's writer
//!   ([`SessionWriter`]) takes it at the first byte of a line and gives it back after the
//!   newline, so lines never interleave. A lane line cut short (its task dropped mid-write)
//!   is finished by a task of its own, holding the permit.
//! - **Reading.** [`LaneReader`] sits between the server's stdout and rmcp. A line that
//!   begins while a lane request waits is held until its newline and, if it is the answer
//!   to one (a response whose id is a waiting lane id), handed to that request; every other
//!   line goes on to rmcp as it was. A line that begins while none waits cannot answer one
//!   (a server answers what it has read) and streams through.
//! - **Progress.** rmcp relays a server's progress notifications (the token of a lane
//!   request is its id), but the answer that follows them skips rmcp and could reach the
//!   client first. So the reader counts, per request, the progress notifications that went
//!   to rmcp ahead of its answer ([`Reply::progress_before`]), and the caller waits for that
//!   many to be relayed before it answers.
//!
//! Ids: lane requests are numbered from [`FIRST_ID`] (2^52) up, far above rmcp's counter
//! (from 0), and still exact as a JavaScript number. Depends on nothing else in the crate.

use std::collections::HashMap;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tokio_util::sync::PollSemaphore;

/// The first lane request id.
pub(super) const FIRST_ID: i64 = 1 << 52;

/// The server's stdin, as the lane and rmcp's writer share it.
type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// Why a lane request got no answer.
#[derive(Debug, thiserror::Error)]
pub(super) enum LaneError {
    #[error("the server's stdin is closed")]
    Closed,
    #[error("cannot write to the server's stdin: {0}")]
    Write(#[from] io::Error),
    #[error("the server closed its stdout before answering")]
    Ended,
    #[error("cannot encode the request: {0}")]
    Encode(#[from] serde_json::Error),
}

struct Shared {
    /// Locked only by the holder of `turn`'s permit, and only inside one poll.
    writer: Mutex<Option<Writer>>,
    turn: Arc<Semaphore>,
    answers: Mutex<HashMap<i64, Waiter>>,
    /// `answers.len()`, read without the lock for each line.
    waiting: AtomicUsize,
    next_id: AtomicI64,
}

/// A lane request waiting for its answer.
struct Waiter {
    answer: oneshot::Sender<Reply>,
    /// Progress notifications for it passed on to rmcp so far.
    progress: usize,
}

use mcpproxy_support::lock;

impl Shared {
    fn take_waiter(&self, id: i64) -> Option<Waiter> {
        let waiter = lock(&self.answers).remove(&id);
        if waiter.is_some() {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
        }
        waiter
    }

    /// Every waiting request learns that no answer will come.
    fn end(&self) {
        let mut answers = lock(&self.answers);
        self.waiting.fetch_sub(answers.len(), Ordering::AcqRel);
        answers.clear();
    }

    /// Writes as much of `line[*written..]` as the pipe takes, then flushes.
    fn poll_write_line(
        &self,
        cx: &mut Context<'_>,
        line: &[u8],
        written: &mut usize,
    ) -> Poll<io::Result<()>> {
        let mut writer = lock(&self.writer);
        let Some(writer) = writer.as_mut() else {
            return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
        };
        while *written < line.len() {
            let n = ready!(Pin::new(&mut *writer).poll_write(cx, &line[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        Pin::new(&mut *writer).poll_flush(cx)
    }
}

/// The lane of one stdio session; cheap to clone.
#[derive(Clone)]
pub(super) struct Lane(Arc<Shared>);

/// Splits a server's stdout and stdin into the lane and the transport rmcp's session runs
/// on.
pub(super) fn split<R, W>(stdout: R, stdin: W) -> (Lane, LaneReader<R>, SessionWriter)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let turn = Arc::new(Semaphore::new(1));
    let shared = Arc::new(Shared {
        writer: Mutex::new(Some(Box::new(stdin))),
        turn: turn.clone(),
        answers: Mutex::new(HashMap::new()),
        waiting: AtomicUsize::new(0),
        next_id: AtomicI64::new(FIRST_ID),
    });
    let reader = LaneReader {
        inner: stdout,
        shared: shared.clone(),
        line: Vec::new(),
        holding: false,
        at_line_start: true,
        out: Vec::new(),
        out_at: 0,
        chunk: vec![0; READ_CHUNK].into_boxed_slice(),
        eof: false,
    };
    let writer = SessionWriter {
        shared: shared.clone(),
        turn: PollSemaphore::new(turn),
        permit: None,
    };
    (Lane(shared), reader, writer)
}

impl Lane {
    /// A new request, waiting for its answer from now on (so it cannot be missed).
    pub(super) fn start(&self) -> LaneRequest {
        let id = self.0.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, answer) = oneshot::channel();
        lock(&self.0.answers).insert(
            id,
            Waiter {
                answer: sender,
                progress: 0,
            },
        );
        self.0.waiting.fetch_add(1, Ordering::AcqRel);
        LaneRequest {
            shared: self.0.clone(),
            id,
            answer,
        }
    }

    /// Writes `message` as one whole line (JSON and a newline). Dropped mid-line, the rest
    /// is still written, so the stream stays whole.
    async fn write_message(&self, message: &impl Serialize) -> Result<(), LaneError> {
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        let permit = self
            .0
            .turn
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| LaneError::Closed)?;
        let mut writing = Writing {
            shared: self.0.clone(),
            line,
            written: 0,
            permit: Some(permit),
        };
        poll_fn(|cx| {
            let Writing {
                shared,
                line,
                written,
                ..
            } = &mut writing;
            shared.poll_write_line(cx, line, written)
        })
        .await?;
        writing.permit = None;
        Ok(())
    }
}

/// A lane line being written; see [`Lane::write_message`].
struct Writing {
    shared: Arc<Shared>,
    line: Vec<u8>,
    written: usize,
    permit: Option<OwnedSemaphorePermit>,
}

impl Drop for Writing {
    fn drop(&mut self) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        if self.written == 0 || self.written >= self.line.len() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = self.shared.clone();
        let line = std::mem::take(&mut self.line);
        let mut written = self.written;
        runtime.spawn(async move {
            let _permit = permit;
            if let Err(e) = poll_fn(|cx| shared.poll_write_line(cx, &line, &mut written)).await {
                tracing::debug!("cannot finish a line to an upstream: {e}");
            }
        });
    }
}

/// The JSON-RPC request line of a lane request.
#[derive(Serialize)]
struct RequestLine<'a, P> {
    jsonrpc: &'static str,
    id: i64,
    method: &'a str,
    params: &'a P,
}

/// `notifications/cancelled` for a lane request.
#[derive(Serialize)]
struct CancelLine<'a> {
    jsonrpc: &'static str,
    method: &'static str,
    params: CancelParams<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CancelParams<'a> {
    request_id: i64,
    reason: &'a str,
}

/// One lane request, from its id to its answer; forgotten when dropped.
pub(super) struct LaneRequest {
    shared: Arc<Shared>,
    id: i64,
    answer: oneshot::Receiver<Reply>,
}

impl LaneRequest {
    /// The request's JSON-RPC id (also a fine progress token: no other request has it).
    pub(super) fn id(&self) -> i64 {
        self.id
    }

    /// Writes the request.
    pub(super) async fn send(
        &self,
        method: &str,
        params: &impl Serialize,
    ) -> Result<(), LaneError> {
        let request = RequestLine {
            jsonrpc: "2.0",
            id: self.id,
            method,
            params,
        };
        Lane(self.shared.clone()).write_message(&request).await
    }

    /// The answer, when it comes.
    pub(super) async fn answer(&mut self) -> Result<Reply, LaneError> {
        (&mut self.answer).await.map_err(|_| LaneError::Ended)
    }

    /// Tells the server the request is cancelled (`notifications/cancelled`).
    pub(super) async fn cancel(&self, reason: &str) -> Result<(), LaneError> {
        let cancel = CancelLine {
            jsonrpc: "2.0",
            method: "notifications/cancelled",
            params: CancelParams {
                request_id: self.id,
                reason,
            },
        };
        Lane(self.shared.clone()).write_message(&cancel).await
    }
}

impl Drop for LaneRequest {
    fn drop(&mut self) {
        drop(self.shared.take_waiter(self.id));
    }
}

/// A lane request's answer: the server's response line.
pub(super) struct Reply {
    line: Vec<u8>,
    progress_before: usize,
}

#[derive(Deserialize)]
struct ReplyFields<'a> {
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<rmcp::ErrorData>,
}

/// What a response says.
pub(super) enum ReplyContent<'a> {
    Result(&'a RawValue),
    Error(rmcp::ErrorData),
}

impl Reply {
    /// The response's result or error; an error message when it has neither or cannot be
    /// read.
    pub(super) fn outcome(&self) -> Result<ReplyContent<'_>, String> {
        let fields: ReplyFields<'_> =
            serde_json::from_slice(&self.line).map_err(|e| e.to_string())?;
        match (fields.result, fields.error) {
            (_, Some(error)) => Ok(ReplyContent::Error(error)),
            (Some(result), None) => Ok(ReplyContent::Result(result)),
            (None, None) => Err("the response has neither a result nor an error".into()),
        }
    }

    /// How many progress notifications for the request the server sent before its answer
    /// (passed on to rmcp to relay).
    pub(super) fn progress_before(&self) -> usize {
        self.progress_before
    }
}

/// What a held line is to the lane.
#[derive(Debug, PartialEq, Eq)]
enum LineKind {
    /// A response (no `method`) whose id is a number in the lane's range.
    Answer(i64),
    /// `notifications/progress` whose token is a number in the lane's range.
    Progress(i64),
    /// Anything else: rmcp's.
    Other,
}

/// A lane id written as JSON text, when it is one.
fn lane_id(text: &RawValue) -> Option<i64> {
    text.get().parse::<i64>().ok().filter(|id| *id >= FIRST_ID)
}

fn classify(line: &[u8]) -> LineKind {
    #[derive(Deserialize)]
    struct Head<'a> {
        #[serde(borrow, default)]
        id: Option<&'a RawValue>,
        #[serde(borrow, default)]
        method: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow, default)]
        params: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct ProgressParams<'a> {
        #[serde(borrow)]
        progress_token: &'a RawValue,
    }
    let Ok(head) = serde_json::from_slice::<Head<'_>>(line) else {
        return LineKind::Other;
    };
    match head.method.as_deref() {
        None => head
            .id
            .and_then(lane_id)
            .map_or(LineKind::Other, LineKind::Answer),
        Some("notifications/progress") if head.id.is_none() => head
            .params
            .and_then(|params| serde_json::from_str::<ProgressParams<'_>>(params.get()).ok())
            .and_then(|params| lane_id(params.progress_token))
            .map_or(LineKind::Other, LineKind::Progress),
        Some(_) => LineKind::Other,
    }
}

/// The server's stdout as rmcp reads it, less the lane's answers (see the module docs).
pub(super) struct LaneReader<R> {
    inner: R,
    shared: Arc<Shared>,
    /// The current line, while it is held.
    line: Vec<u8>,
    /// The current line is held (it began while a lane request waited).
    holding: bool,
    at_line_start: bool,
    /// Bytes for rmcp, from `out_at`.
    out: Vec<u8>,
    out_at: usize,
    /// Where the server's output is read to ([`READ_CHUNK`] bytes, made once).
    chunk: Box<[u8]>,
    eof: bool,
}

impl<R> LaneReader<R> {
    /// Sorts newly read bytes into lines for rmcp and answers for the lane.
    fn sort(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.at_line_start {
                self.holding = self.shared.waiting.load(Ordering::Acquire) > 0;
                self.at_line_start = false;
            }
            let newline = bytes.iter().position(|b| *b == b'\n');
            let end = newline.map_or(bytes.len(), |at| at + 1);
            let (segment, rest) = bytes.split_at(end);
            bytes = rest;
            if self.holding {
                self.line.extend_from_slice(segment);
            } else {
                self.out.extend_from_slice(segment);
            }
            if newline.is_some() {
                self.at_line_start = true;
                if self.holding {
                    self.route_held_line();
                }
            }
        }
    }

    fn route_held_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        match classify(&line) {
            LineKind::Answer(id) => {
                if let Some(waiter) = self.shared.take_waiter(id) {
                    // The request may have given up meanwhile; then the answer is dropped.
                    let _ = waiter.answer.send(Reply {
                        line,
                        progress_before: waiter.progress,
                    });
                    return;
                }
            }
            LineKind::Progress(id) => {
                if let Some(waiter) = lock(&self.shared.answers).get_mut(&id) {
                    waiter.progress += 1;
                }
            }
            LineKind::Other => {}
        }
        if self.out.len() == self.out_at {
            self.out = line;
            self.out_at = 0;
        } else {
            self.out.extend_from_slice(&line);
        }
    }
}

/// How much is read from the server at a time.
const READ_CHUNK: usize = 16 << 10;

impl<R: AsyncRead + Unpin> AsyncRead for LaneReader<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.out_at < this.out.len() {
                let n = (this.out.len() - this.out_at).min(buf.remaining());
                buf.put_slice(&this.out[this.out_at..this.out_at + n]);
                this.out_at += n;
                if this.out_at == this.out.len() {
                    this.out.clear();
                    this.out_at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = std::mem::take(&mut this.chunk);
            let read = {
                let mut read = ReadBuf::new(&mut chunk);
                Pin::new(&mut this.inner)
                    .poll_read(cx, &mut read)
                    .map_ok(|()| read.filled().len())
            };
            if let Poll::Ready(Ok(n)) = read {
                this.sort(&chunk[..n]);
            }
            this.chunk = chunk;
            if ready!(read)? == 0 {
                // What is left of an unfinished line goes to rmcp, which drops it.
                this.eof = true;
                let rest = std::mem::take(&mut this.line);
                this.out.extend_from_slice(&rest);
                this.shared.end();
            }
        }
    }
}

impl<R> Drop for LaneReader<R> {
    fn drop(&mut self) {
        self.shared.end();
    }
}

/// The server's stdin as rmcp's session writes it: a line at a time, between the lane's.
pub(super) struct SessionWriter {
    shared: Arc<Shared>,
    turn: PollSemaphore,
    /// Held from a line's first byte to its newline.
    permit: Option<OwnedSemaphorePermit>,
}

impl AsyncWrite for SessionWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let this = &mut *self;
        if this.permit.is_none() {
            match ready!(this.turn.poll_acquire(cx)) {
                Some(permit) => this.permit = Some(permit),
                None => return Poll::Ready(Err(io::ErrorKind::NotConnected.into())),
            }
        }
        let n = {
            let mut writer = lock(&this.shared.writer);
            let Some(writer) = writer.as_mut() else {
                return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
            };
            ready!(Pin::new(&mut **writer).poll_write(cx, buf))?
        };
        if n > 0 && buf[n - 1] == b'\n' {
            this.permit = None;
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut writer = lock(&self.shared.writer);
        match writer.as_mut() {
            Some(writer) => Pin::new(&mut **writer).poll_flush(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

impl Drop for SessionWriter {
    /// rmcp's session is over: the server's stdin closes (it sees end of input), and lane
    /// requests fail at once instead of waiting for answers that cannot come.
    fn drop(&mut self) {
        self.shared.turn.close();
        drop(lock(&self.shared.writer).take());
        self.shared.end();
    }
}

#[cfg(test)]
mod tests;
