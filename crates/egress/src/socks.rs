//! The SOCKS5 side of the egress proxy (RFC 1928): no authentication, `CONNECT` only, to a
//! name (`socks5h://`, the proxy resolves it) or an address. `BIND` and `UDP ASSOCIATE` are
//! refused: the server has no UDP out.

use std::net::{Ipv4Addr, Ipv6Addr};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{RefusalKind, Request};

pub(super) const VERSION: u8 = 5;
const NO_AUTHENTICATION: u8 = 0;
const NO_ACCEPTABLE_METHOD: u8 = 0xff;
const CONNECT: u8 = 1;
const ATYP_IPV4: u8 = 1;
const ATYP_NAME: u8 = 3;
const ATYP_IPV6: u8 = 4;
// Replies.
const SUCCEEDED: u8 = 0;
const NOT_ALLOWED: u8 = 2;
const HOST_UNREACHABLE: u8 = 4;
const COMMAND_NOT_SUPPORTED: u8 = 7;
const ADDRESS_TYPE_NOT_SUPPORTED: u8 = 8;

/// The greeting and the request; a request the proxy does not serve is answered and refused.
pub(super) async fn handshake(client: &mut TcpStream) -> Result<Request, String> {
    let io = |e: std::io::Error| format!("reading the SOCKS5 request failed: {e}");
    let mut greeting = [0u8; 2];
    client.read_exact(&mut greeting).await.map_err(io)?;
    let mut methods = vec![0u8; usize::from(greeting[1])];
    client.read_exact(&mut methods).await.map_err(io)?;
    if !methods.contains(&NO_AUTHENTICATION) {
        let _ = client.write_all(&[VERSION, NO_ACCEPTABLE_METHOD]).await;
        return Err("the SOCKS5 client offered no method without authentication".to_owned());
    }
    client
        .write_all(&[VERSION, NO_AUTHENTICATION])
        .await
        .map_err(io)?;
    let mut head = [0u8; 4];
    client.read_exact(&mut head).await.map_err(io)?;
    let [version, command, _, address_type] = head;
    if version != VERSION {
        return Err(format!("SOCKS version {version} is not 5"));
    }
    let host = match address_type {
        ATYP_IPV4 => {
            let mut octets = [0u8; 4];
            client.read_exact(&mut octets).await.map_err(io)?;
            Ipv4Addr::from(octets).to_string()
        }
        ATYP_IPV6 => {
            let mut octets = [0u8; 16];
            client.read_exact(&mut octets).await.map_err(io)?;
            Ipv6Addr::from(octets).to_string()
        }
        ATYP_NAME => {
            let mut length = [0u8; 1];
            client.read_exact(&mut length).await.map_err(io)?;
            let mut name = vec![0u8; usize::from(length[0])];
            client.read_exact(&mut name).await.map_err(io)?;
            // Not UTF-8, or not a host name: the rules refuse it with the reason.
            String::from_utf8_lossy(&name).into_owned()
        }
        other => {
            let _ = reply(client, ADDRESS_TYPE_NOT_SUPPORTED).await;
            return Err(format!("SOCKS5 address type {other} is not supported"));
        }
    };
    let mut port = [0u8; 2];
    client.read_exact(&mut port).await.map_err(io)?;
    if command != CONNECT {
        let _ = reply(client, COMMAND_NOT_SUPPORTED).await;
        return Err(format!(
            "SOCKS5 command {command} is not supported (only CONNECT is)"
        ));
    }
    Ok(Request {
        host,
        port: u16::from_be_bytes(port),
        protocol: "socks5",
    })
}

/// Tells the client the connection is open.
pub(super) async fn connected(client: &mut TcpStream) -> std::io::Result<()> {
    reply(client, SUCCEEDED).await
}

/// Tells the client why not.
pub(super) async fn refused(client: &mut TcpStream, kind: RefusalKind) -> std::io::Result<()> {
    reply(
        client,
        match kind {
            RefusalKind::NotAllowed => NOT_ALLOWED,
            RefusalKind::Unresolved | RefusalKind::Unreachable => HOST_UNREACHABLE,
        },
    )
    .await?;
    client.shutdown().await
}

/// A reply with a zero bound address (the client has no use for mcpproxy's).
async fn reply(client: &mut TcpStream, code: u8) -> std::io::Result<()> {
    client
        .write_all(&[VERSION, code, 0, ATYP_IPV4, 0, 0, 0, 0, 0, 0])
        .await
}
