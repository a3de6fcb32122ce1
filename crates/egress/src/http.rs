//! The HTTP side of the egress proxy: `CONNECT host:port` opens a tunnel (what HTTPS clients
//! send to `HTTPS_PROXY`); a request in absolute form (`GET http://host/path`, what clients
//! send to `HTTP_PROXY`) is forwarded once, in origin form, with `Connection: close` (a client
//! opens a new connection for its next request, which is judged on its own). `https://` in
//! absolute form is refused: a client must tunnel it.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{RefusalKind, Request};

/// The longest request head the proxy reads.
const MAX_HEAD: usize = 16 * 1024;
/// The most header lines it parses.
const MAX_HEADERS: usize = 100;

/// What to send once the destination is open.
pub(super) enum HttpAnswer {
    /// `200 Connection established` to the client, then what it sent past its head.
    Tunnel { leftover: Vec<u8> },
    /// The rewritten request to the destination (head and what followed it).
    Forward { request: Vec<u8> },
}

impl HttpAnswer {
    /// Answers the client or sends its request on; returns the bytes sent to `upstream`.
    pub(super) async fn connected(
        self,
        client: &mut TcpStream,
        upstream: &mut TcpStream,
    ) -> std::io::Result<u64> {
        match self {
            HttpAnswer::Tunnel { leftover } => {
                client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await?;
                upstream.write_all(&leftover).await?;
                Ok(leftover.len() as u64)
            }
            HttpAnswer::Forward { request } => {
                upstream.write_all(&request).await?;
                Ok(request.len() as u64)
            }
        }
    }
}

/// Reads the request head; a request the proxy cannot serve is answered (400) and refused.
pub(super) async fn handshake(client: &mut TcpStream) -> Result<(Request, HttpAnswer), String> {
    match read_request(client).await {
        Ok(found) => Ok(found),
        Err(why) => {
            let _ = respond(
                client,
                400,
                "Bad Request",
                &format!("mcpproxy egress: {why}"),
            )
            .await;
            Err(why)
        }
    }
}

async fn read_request(client: &mut TcpStream) -> Result<(Request, HttpAnswer), String> {
    let mut buffer = Vec::with_capacity(1024);
    let head_end = loop {
        if let Some(end) = find_head_end(&buffer) {
            break end;
        }
        if buffer.len() >= MAX_HEAD {
            return Err(format!("the request head is longer than {MAX_HEAD} bytes"));
        }
        let mut chunk = [0u8; 2048];
        let read = client
            .read(&mut chunk)
            .await
            .map_err(|e| format!("reading the request failed: {e}"))?;
        if read == 0 {
            return Err("the client closed before its request head ended".to_owned());
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut headers);
    match parsed.parse(&buffer[..head_end]) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err("the request head is incomplete".to_owned()),
        Err(e) => return Err(format!("the request is not HTTP/1: {e}")),
    }
    let method = parsed.method.unwrap_or_default();
    let target = parsed.path.unwrap_or_default();
    let leftover = buffer[head_end..].to_vec();
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = authority(target, None)?;
        return Ok((
            Request {
                host,
                port,
                protocol: "connect",
            },
            HttpAnswer::Tunnel { leftover },
        ));
    }
    let lower = target.to_ascii_lowercase();
    let Some(rest) = lower.strip_prefix("http://").map(|_| &target[7..]) else {
        return Err(if lower.starts_with("https://") {
            "an https:// URL must be tunnelled with CONNECT (set HTTPS_PROXY, not HTTP_PROXY)"
                .to_owned()
        } else {
            format!(
                "'{}' is not an absolute http:// URL: a proxy is asked with `GET http://host/path`",
                capped(target)
            )
        });
    };
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (host, port) = authority(&rest[..split], Some(80))?;
    let path = match &rest[split..] {
        "" => "/",
        path if path.starts_with('/') => path,
        query => {
            return Ok(forward(
                method,
                &format!("/{query}"),
                &parsed,
                leftover,
                host,
                port,
            ));
        }
    };
    Ok(forward(method, path, &parsed, leftover, host, port))
}

/// The request rewritten for the destination: origin form, no proxy headers, one request.
fn forward(
    method: &str,
    path: &str,
    parsed: &httparse::Request<'_, '_>,
    leftover: Vec<u8>,
    host: String,
    port: u16,
) -> (Request, HttpAnswer) {
    let mut request = Vec::with_capacity(512 + leftover.len());
    request.extend_from_slice(method.as_bytes());
    request.push(b' ');
    request.extend_from_slice(path.as_bytes());
    request.extend_from_slice(format!(" HTTP/1.{}\r\n", parsed.version.unwrap_or(1)).as_bytes());
    for header in parsed.headers.iter() {
        let name = header.name;
        let hop_by_hop = [
            "proxy-connection",
            "proxy-authorization",
            "connection",
            "keep-alive",
        ]
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h));
        if hop_by_hop {
            continue;
        }
        request.extend_from_slice(name.as_bytes());
        request.extend_from_slice(b": ");
        request.extend_from_slice(header.value);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"Connection: close\r\n\r\n");
    request.extend_from_slice(&leftover);
    (
        Request {
            host,
            port,
            protocol: "http",
        },
        HttpAnswer::Forward { request },
    )
}

/// `host:port` (or `[v6]:port`) split; `default_port` when the port may be left out.
fn authority(text: &str, default_port: Option<u16>) -> Result<(String, u16), String> {
    if text.contains('@') {
        return Err("credentials in the URL are not passed on: remove them".to_owned());
    }
    let bad = || format!("'{}' is not HOST:PORT", capped(text));
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or_else(bad)?;
        match after.strip_prefix(':') {
            Some(port) => (inside, Some(port)),
            None if after.is_empty() => (inside, None),
            None => return Err(bad()),
        }
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = match port {
        Some(port) => port
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(bad)?,
        None => default_port.ok_or_else(bad)?,
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok((capped(host), port))
}

/// `text` cut to 256 characters, for messages and records.
fn capped(text: &str) -> String {
    text.chars().take(256).collect()
}

fn find_head_end(buffer: &[u8]) -> Option<usize> {
    buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
}

/// Answers a refusal: 403 when the rules refused it, 502 when it could not be reached.
pub(super) async fn refused(
    client: &mut TcpStream,
    kind: RefusalKind,
    why: &str,
) -> std::io::Result<()> {
    let (status, reason) = match kind {
        RefusalKind::NotAllowed => (403, "Forbidden"),
        RefusalKind::Unresolved | RefusalKind::Unreachable => (502, "Bad Gateway"),
    };
    respond(client, status, reason, &format!("mcpproxy egress: {why}")).await
}

async fn respond(
    client: &mut TcpStream,
    status: u16,
    reason: &str,
    body: &str,
) -> std::io::Result<()> {
    let body = format!("{body}\n");
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nX-Mcpproxy-Egress: refused\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes()).await?;
    client.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_split_with_and_without_a_port() {
        assert_eq!(
            authority("example.com:443", None).unwrap(),
            ("example.com".to_owned(), 443)
        );
        assert_eq!(
            authority("[::1]:8080", None).unwrap(),
            ("::1".to_owned(), 8080)
        );
        assert_eq!(
            authority("example.com", Some(80)).unwrap(),
            ("example.com".to_owned(), 80)
        );
        for bad in [
            "example.com",
            "example.com:0",
            "example.com:x",
            ":443",
            "[::1",
            "u:p@h:1",
        ] {
            assert!(authority(bad, None).is_err(), "{bad}");
        }
    }
}
