//! The stdio front-end: an IDE's `serve --stdio` session carried to the data dir's owner
//! over its control socket, line for line, so every IDE window shares the owner's
//! upstreams, journal and policy.
//!
//! The bridge remembers the session's `initialize` request and `initialized` notification.
//! When the owner goes away, every request waiting for an answer, and every request made
//! while no owner runs, is answered at once with an error that says so (never a hang); the
//! bridge tries the socket again every [`RECONNECT_EVERY`], and when an owner answers it
//! replays the handshake (swallowing the owner's answer to it) so the IDE's session goes on
//! as if nothing happened.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, Lines};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::sync::CancellationToken;

/// How often a bridge without an owner tries the socket again.
pub(crate) const RECONNECT_EVERY: Duration = Duration::from_millis(500);

/// JSON-RPC error code of a request no owner could take.
const NO_OWNER: i64 = -32000;

struct Connection {
    lines: Lines<BufReader<OwnedReadHalf>>,
    write: OwnedWriteHalf,
}

impl Connection {
    fn new(stream: UnixStream) -> Self {
        let (read, write) = stream.into_split();
        Self {
            lines: BufReader::new(read).lines(),
            write,
        }
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
}

/// Carries the session on `input`/`output` (the IDE's stdin and stdout) to the owner,
/// starting on `owner`, until the IDE closes `input` or `shutdown` fires.
pub(crate) async fn run<R, W>(
    data_dir: &Path,
    owner: UnixStream,
    input: R,
    mut output: W,
    shutdown: CancellationToken,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let data_dir = data_dir.to_owned();
    let mut ide = BufReader::new(input).lines();
    let mut owner = Some(Connection::new(owner));
    let mut session = Session::default();
    let mut retry = tokio::time::interval(RECONNECT_EVERY);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            line = ide.next_line() => {
                let Some(line) = line? else { return Ok(()) };
                if !session.forward_from_ide(line, &mut owner, &mut output, &data_dir).await? {
                    lost(&mut owner, &mut session, &mut output, &data_dir).await?;
                }
            }
            line = next_line(&mut owner) => match line {
                Some(line) => session.forward_from_owner(line, &mut output).await?,
                None => lost(&mut owner, &mut session, &mut output, &data_dir).await?,
            },
            _ = retry.tick(), if owner.is_none() => {
                if let Some(stream) = super::connect(&data_dir).await {
                    let mut connection = Connection::new(stream);
                    if session.replay(&mut connection).await.is_ok() {
                        eprintln!(
                            "mcpproxy: an owner of {} runs again; this session goes on through it",
                            data_dir.display()
                        );
                        owner = Some(connection);
                    }
                }
            }
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

/// The owner went away: answer what waits for it, and say so once.
async fn lost<W: AsyncWrite + Unpin>(
    owner: &mut Option<Connection>,
    session: &mut Session,
    output: &mut W,
    data_dir: &Path,
) -> std::io::Result<()> {
    if owner.take().is_some() {
        eprintln!(
            "mcpproxy: the mcpproxy that owns {} stopped; requests fail until one runs there again, then this session goes on",
            data_dir.display()
        );
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
            if let Some(id) = request_id {
                write_line(output, &no_owner(&id, data_dir)).await?;
            }
            return Ok(true);
        };
        if let Some(id) = &request_id {
            self.waiting.insert(id.to_string());
        }
        Ok(connection.send(&line).await.is_ok())
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
        Ok(())
    }
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
