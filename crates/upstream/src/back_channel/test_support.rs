//! What the back channel's tests share: real client sessions over in-memory pipes, and the
//! origin of a call from one.

use rmcp::model::{ProgressToken, RequestId};
use rmcp::service::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use super::{CallOrigin, SessionKey};

/// A real client session's server-side peer (an rmcp server and client over an
/// in-memory pipe), to register in the back channel.
pub(super) struct Quiet;
impl rmcp::ServerHandler for Quiet {}

pub(super) async fn session() -> (
    Peer<RoleServer>,
    rmcp::service::RunningService<RoleServer, Quiet>,
    rmcp::service::RunningService<rmcp::RoleClient, ()>,
) {
    use rmcp::ServiceExt;
    let (server_io, client_io) = tokio::io::duplex(64 << 10);
    let server = tokio::spawn(async move { Quiet.serve(server_io).await });
    let client = ().serve(client_io).await.expect("client session");
    let server = server.await.expect("join").expect("server session");
    (server.peer().clone(), server, client)
}

pub(super) fn origin(session: SessionKey, peer: &Peer<RoleServer>, request: i64) -> CallOrigin {
    CallOrigin {
        session,
        peer: peer.clone(),
        request_id: RequestId::Number(request),
        progress_token: Some(ProgressToken(rmcp::model::NumberOrString::Number(request))),
        capabilities: None,
        meta: None,
        cancelled: CancellationToken::new(),
        client: None,
        session_id: None,
        input_responses: None,
        request_state: None,
        protocol: None,
        stateless: false,
    }
}

pub(super) fn token(n: i64) -> ProgressToken {
    ProgressToken(rmcp::model::NumberOrString::Number(n))
}

/// A server session whose client is the test itself, byte by byte, over a pipe of
/// `pipe` bytes: nothing is read from it until the test reads its lines.
pub(super) async fn unread_session(
    pipe: usize,
) -> (
    Peer<RoleServer>,
    rmcp::service::RunningService<RoleServer, Quiet>,
    tokio::io::Lines<tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    tokio::io::WriteHalf<tokio::io::DuplexStream>,
) {
    use rmcp::ServiceExt;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let (server_io, client_io) = tokio::io::duplex(pipe);
    let (read, mut write) = tokio::io::split(client_io);
    let server = tokio::spawn(async move { Quiet.serve(server_io).await });
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "slow", "version": "1"}}
    });
    write
        .write_all(format!("{initialize}\n").as_bytes())
        .await
        .unwrap();
    let mut lines = tokio::io::BufReader::new(read).lines();
    let answer = lines.next_line().await.unwrap().unwrap();
    assert!(answer.contains("\"result\""), "{answer}");
    write
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();
    let server = server.await.expect("join").expect("server session");
    (server.peer().clone(), server, lines, write)
}

pub(super) fn message(line: &str) -> serde_json::Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
}
