//! The stdio front-end: an IDE's `serve --stdio` session carried to the data dir's owner
//! over its control socket, line for line, so every IDE window shares the owner's
//! upstreams, journal and policy.
//!
//! The bridge remembers the session's `initialize` request and `initialized` notification.
//! When the owner goes away, every request waiting for an answer is answered at once with
//! an error that says so (its outcome is unknown: the call may have run), and the bridge
//! tells its process ([`Hooks::gone`]), which tries to take the data dir over. What the IDE
//! sends meanwhile is held for up to [`HOLD_FOR`]; the bridge tries the socket again every
//! [`RECONNECT_EVERY`] (at once when [`Hooks::retry`] is notified), and when an owner
//! answers (this process, or another front-end that won) it replays the handshake
//! (swallowing the owner's answer to it) and sends what it held, so the IDE's session goes
//! on as if nothing happened. Past [`HOLD_FOR`] without an owner, requests are answered
//! with an error that says so, never left hanging.
//!
//! With `--server NAME` the bridge starts each connection with `@server NAME`
//! ([`Preamble::Server`]), so the owner serves that upstream's direct endpoint.

use std::collections::{HashSet, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::attach::{self, Preamble};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, Lines};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::sync::CancellationToken;

/// How often a bridge without an owner tries the socket again.
pub const RECONNECT_EVERY: Duration = Duration::from_millis(500);

/// How long what the IDE sends without an owner is held for the next one.
pub const HOLD_FOR: Duration = Duration::from_secs(10);
/// The most lines held without an owner; past it, requests are answered with an error.
const HOLD_LINES: usize = 256;

/// JSON-RPC error code of a request no owner could take.
const NO_OWNER: i64 = -32000;

/// How the bridge and its process work together on a hand-off.
#[derive(Clone, Default)]
pub struct Hooks {
    /// Notified when the owner went away (the process may take the data dir over).
    pub gone: Arc<Notify>,
    /// Notified by the process when an owner may answer now (it became one).
    pub retry: Arc<Notify>,
}

struct Connection {
    lines: Lines<BufReader<OwnedReadHalf>>,
    write: OwnedWriteHalf,
}

impl Connection {
    /// A connection to the owner, its preamble sent and answered.
    async fn open(stream: UnixStream, preamble: Option<&Preamble>) -> Result<Self, String> {
        let mut stream = BufReader::new(stream);
        if let Some(preamble) = preamble {
            attach::send(&mut stream, preamble).await?;
        }
        // Nothing past the answer was sent yet: the buffer is empty.
        let (read, write) = stream.into_inner().into_split();
        Ok(Self {
            lines: BufReader::new(read).lines(),
            write,
        })
    }

    async fn send(&mut self, line: &str) -> std::io::Result<()> {
        self.write.write_all(line.as_bytes()).await?;
        self.write.write_all(b"\n").await?;
        self.write.flush().await
    }
}

/// What the bridge knows of the IDE's session.
#[derive(Default)]
struct Session {
    /// The `initialize` request, replayed to a new owner.
    initialize: Option<Value>,
    /// The `notifications/initialized` line, replayed after it.
    initialized: Option<String>,
    /// Ids (as JSON text) of requests sent to the owner and not answered yet.
    waiting: HashSet<String>,
    /// Ids of replayed requests whose answers the IDE must not see.
    swallow: HashSet<String>,
    replays: u64,
    /// Lines the IDE sent while no owner ran, for the next one.
    held: VecDeque<String>,
    /// Until when lines are held (set when the owner went away).
    hold_until: Option<Instant>,
}

/// Carries the session on `input`/`output` (the IDE's stdin and stdout) to the owner,
/// starting on `owner` (already attached with `preamble`, when there is one), until the IDE
/// closes `input` or `shutdown` fires.
pub async fn run<R, W>(
    data_dir: &Path,
    owner: UnixStream,
    preamble: Option<Preamble>,
    input: R,
    mut output: W,
    hooks: Hooks,
    shutdown: CancellationToken,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let data_dir = data_dir.to_owned();
    let mut ide = BufReader::new(input).lines();
    let mut session = Session::default();
    let mut owner = match Connection::open(owner, preamble.as_ref()).await {
        Ok(connection) => Some(connection),
        Err(why) => {
            return Err(std::io::Error::other(format!(
                "the mcpproxy that owns {} refused this session: {why}",
                data_dir.display()
            )));
        }
    };
    let mut retry = tokio::time::interval(RECONNECT_EVERY);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let attach_now = tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            line = ide.next_line() => {
                let Some(line) = line? else { return Ok(()) };
                if !session.forward_from_ide(line, &mut owner, &mut output, &data_dir).await? {
                    lost(&mut owner, &mut session, &mut output, &data_dir, &hooks).await?;
                }
                false
            }
            line = next_line(&mut owner) => {
                match line {
                    Some(line) => session.forward_from_owner(line, &mut output).await?,
                    None => lost(&mut owner, &mut session, &mut output, &data_dir, &hooks).await?,
                }
                false
            }
            _ = retry.tick(), if owner.is_none() => true,
            _ = hooks.retry.notified(), if owner.is_none() => true,
        };
        if !attach_now {
            continue;
        }
        if session.hold_expired() {
            session.fail_held(&mut output, &data_dir).await?;
        }
        let Some(stream) = super::connect(&data_dir).await else {
            continue;
        };
        let Ok(mut connection) = Connection::open(stream, preamble.as_ref()).await else {
            continue;
        };
        if session.replay(&mut connection).await.is_ok() {
            eprintln!(
                "mcpproxy: an owner of {} runs again; this session goes on through it",
                data_dir.display()
            );
            owner = Some(connection);
        }
    }
}

/// The owner's next line; `None` when it closed; waits forever without an owner.
async fn next_line(owner: &mut Option<Connection>) -> Option<String> {
    match owner {
        Some(connection) => connection.lines.next_line().await.ok().flatten(),
        None => std::future::pending().await,
    }
}

/// The owner went away: answer what waits for it, say so once, and tell the process.
async fn lost<W: AsyncWrite + Unpin>(
    owner: &mut Option<Connection>,
    session: &mut Session,
    output: &mut W,
    data_dir: &Path,
    hooks: &Hooks,
) -> std::io::Result<()> {
    if owner.take().is_some() {
        eprintln!(
            "mcpproxy: the mcpproxy that owns {} stopped; taking over or waiting for the one that does, then this session goes on",
            data_dir.display()
        );
        session.hold_until = Some(Instant::now() + HOLD_FOR);
        hooks.gone.notify_one();
    }
    for id in std::mem::take(&mut session.waiting) {
        let id: Value = serde_json::from_str(&id).unwrap_or(Value::Null);
        write_line(output, &no_owner(&id, data_dir)).await?;
    }
    Ok(())
}

impl Session {
    /// Forwards one line from the IDE, or answers it when no owner runs. Returns false if
    /// the owner could not take it (it went away).
    async fn forward_from_ide<W: AsyncWrite + Unpin>(
        &mut self,
        line: String,
        owner: &mut Option<Connection>,
        output: &mut W,
        data_dir: &Path,
    ) -> std::io::Result<bool> {
        let message: Option<Value> = serde_json::from_str(&line).ok();
        let method = message
            .as_ref()
            .and_then(|m| m.get("method"))
            .and_then(Value::as_str);
        let request_id = message
            .as_ref()
            .filter(|_| method.is_some())
            .and_then(|m| m.get("id"))
            .cloned();
        match method {
            Some("initialize") => self.initialize = message.clone(),
            Some("notifications/initialized") => self.initialized = Some(line.clone()),
            _ => {}
        }
        let Some(connection) = owner else {
            if !self.hold_expired() && self.held.len() < HOLD_LINES {
                self.held.push_back(line);
            } else if let Some(id) = request_id {
                write_line(output, &no_owner(&id, data_dir)).await?;
            }
            return Ok(true);
        };
        if let Some(id) = &request_id {
            self.waiting.insert(id.to_string());
        }
        if connection.send(&line).await.is_ok() {
            return Ok(true);
        }
        // The owner was gone before the line went out: it was not carried out, so it waits
        // for the next owner like any line sent without one.
        if let Some(id) = &request_id {
            self.waiting.remove(&id.to_string());
        }
        self.held.push_back(line);
        Ok(false)
    }

    /// Passes one line from the owner to the IDE, unless it answers a replayed request.
    async fn forward_from_owner<W: AsyncWrite + Unpin>(
        &mut self,
        line: String,
        output: &mut W,
    ) -> std::io::Result<()> {
        if let Ok(message) = serde_json::from_str::<Value>(&line)
            && message.get("method").is_none()
            && let Some(id) = message.get("id")
        {
            let id = id.to_string();
            if self.swallow.remove(&id) {
                return Ok(());
            }
            self.waiting.remove(&id);
        }
        write_line(output, &line).await
    }

    /// Sends the session's handshake to a new owner.
    async fn replay(&mut self, connection: &mut Connection) -> std::io::Result<()> {
        if let Some(mut initialize) = self.initialize.clone() {
            self.replays += 1;
            let id = Value::String(format!("mcpproxy-bridge-replay-{}", self.replays));
            initialize["id"] = id.clone();
            connection.send(&initialize.to_string()).await?;
            self.swallow.insert(id.to_string());
            if let Some(initialized) = &self.initialized {
                connection.send(initialized).await?;
            }
        }
        // What the IDE sent meanwhile, in its order (a held `initialize` is the IDE's own,
        // its answer not swallowed).
        while let Some(line) = self.held.pop_front() {
            if let Some(id) = request_id_of(&line) {
                self.waiting.insert(id.to_string());
            }
            if let Err(e) = connection.send(&line).await {
                self.held.push_front(line);
                return Err(e);
            }
        }
        self.hold_until = None;
        Ok(())
    }

    /// Whether lines are no longer held: no owner for longer than [`HOLD_FOR`].
    fn hold_expired(&self) -> bool {
        self.hold_until.is_some_and(|until| Instant::now() >= until)
    }

    /// Answers every held request with an error: no owner came in time.
    async fn fail_held<W: AsyncWrite + Unpin>(
        &mut self,
        output: &mut W,
        data_dir: &Path,
    ) -> std::io::Result<()> {
        for line in std::mem::take(&mut self.held) {
            if let Some(id) = request_id_of(&line) {
                write_line(output, &no_owner(&id, data_dir)).await?;
            }
        }
        Ok(())
    }
}

/// The id of a request line (a message with a method and an id).
fn request_id_of(line: &str) -> Option<Value> {
    let message: Value = serde_json::from_str(line).ok()?;
    message.get("method")?;
    message.get("id").cloned()
}

fn no_owner(id: &Value, data_dir: &Path) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": NO_OWNER,
            "message": format!(
                "mcpproxy is not running for {}: the process this session was forwarded to stopped, so this request was not carried out. Start `mcpproxy serve` (or reopen the IDE window); this session reconnects by itself.",
                data_dir.display()
            ),
        },
    })
    .to_string()
}

async fn write_line<W: AsyncWrite + Unpin>(output: &mut W, line: &str) -> std::io::Result<()> {
    output.write_all(line.as_bytes()).await?;
    output.write_all(b"\n").await?;
    output.flush().await
}
