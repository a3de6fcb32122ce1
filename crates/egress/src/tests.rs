//! The egress proxy on loopback, driven by raw HTTP and SOCKS5 clients: what it lets through,
//! what it refuses and what it reports.

use std::sync::Arc;

use mcpproxy_sandbox::egress::{EgressRule, EgressRules};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::{EgressEvent, Outcome, serve};

/// A destination that answers every connection with what it read (its request head, then
/// `|bye`), then closes.
async fn destination() -> (u16, mpsc::UnboundedReceiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    #[allow(
        clippy::disallowed_methods,
        reason = "a test: one entry per request it sends"
    )]
    let (seen_tx, seen) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let seen_tx = seen_tx.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut chunk = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") && !request.ends_with(b"PING") {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&chunk[..n]),
                    }
                }
                let _ = seen_tx.send(request.clone());
                let mut answer = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n".to_vec();
                if request.ends_with(b"PING") {
                    answer = b"PONG".to_vec();
                } else {
                    answer.extend_from_slice(b"|bye");
                }
                let _ = stream.write_all(&answer).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (port, seen)
}

/// The proxy with `rules`, on a loopback port; its events arrive on the receiver.
async fn proxy(rules: &[String]) -> (u16, mpsc::UnboundedReceiver<EgressEvent>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let rules = EgressRules::new(
        rules
            .iter()
            .map(|r| EgressRule::parse(r).unwrap())
            .collect(),
    );
    #[allow(
        clippy::disallowed_methods,
        reason = "a test: one event per connection it makes"
    )]
    let (events_tx, events) = mpsc::unbounded_channel();
    tokio::spawn(serve(
        listener,
        Arc::new(rules),
        Arc::from("srv"),
        Arc::new(move |event| {
            let _ = events_tx.send(event);
        }),
    ));
    (port, events)
}

async fn exchange(port: u16, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn connect_to_an_allowed_address_tunnels_and_counts_bytes() {
    let (target, _seen) = destination().await;
    let (port, mut events) = proxy(&[format!("127.0.0.1:{target}")]).await;
    let answer = exchange(
        port,
        format!("CONNECT 127.0.0.1:{target} HTTP/1.1\r\nHost: x\r\n\r\nPING").as_bytes(),
    )
    .await;
    assert_eq!(answer, "HTTP/1.1 200 Connection established\r\n\r\nPONG");
    let event = events.recv().await.unwrap();
    assert_eq!(event.outcome, Outcome::Connected);
    assert_eq!(event.protocol, "connect");
    assert_eq!((event.host.as_str(), event.port), ("127.0.0.1", target));
    assert_eq!((event.sent, event.received), (4, 4));
    assert_eq!(&*event.server, "srv");
}

#[tokio::test]
async fn a_destination_not_allowed_is_refused_with_what_to_add() {
    let (target, mut seen) = destination().await;
    let (port, mut events) = proxy(&[format!("127.0.0.1:{}", target.wrapping_add(1))]).await;
    let answer = exchange(
        port,
        format!("CONNECT 127.0.0.1:{target} HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403 Forbidden"), "{answer}");
    assert!(
        answer.contains(&format!("add \"127.0.0.1:{target}\"")),
        "{answer}"
    );
    let event = events.recv().await.unwrap();
    assert!(matches!(event.outcome, Outcome::Refused(_)), "{event:?}");
    assert_eq!((event.sent, event.received), (0, 0));
    // Nothing reached the destination.
    assert!(seen.try_recv().is_err());
}

#[tokio::test]
async fn a_plain_http_request_is_forwarded_once_in_origin_form() {
    let (target, mut seen) = destination().await;
    let (port, mut events) = proxy(&[format!("127.0.0.1:{target}")]).await;
    let answer = exchange(
        port,
        format!(
            "GET http://127.0.0.1:{target}/pkg?v=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nProxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n"
        )
        .as_bytes(),
    )
    .await;
    assert!(answer.ends_with("|bye"), "{answer}");
    let request = String::from_utf8(seen.recv().await.unwrap()).unwrap();
    assert!(
        request.starts_with("GET /pkg?v=1 HTTP/1.1\r\n"),
        "{request}"
    );
    assert!(request.contains("Accept: */*\r\n"), "{request}");
    assert!(request.contains("Connection: close\r\n"), "{request}");
    assert!(
        !request.to_ascii_lowercase().contains("proxy-"),
        "{request}"
    );
    let event = events.recv().await.unwrap();
    assert_eq!(
        (event.protocol, event.outcome),
        ("http", Outcome::Connected)
    );
}

#[tokio::test]
async fn an_allowed_name_that_resolves_to_loopback_is_refused_unless_the_address_is_listed() {
    let (target, _seen) = destination().await;
    let socks = |name: &str| {
        let mut request = vec![5, 1, 0, 5, 1, 0, 3, name.len() as u8];
        request.extend_from_slice(name.as_bytes());
        request.extend_from_slice(&target.to_be_bytes());
        request.extend_from_slice(b"PING");
        request
    };
    // `localhost` resolves (from /etc/hosts) to a loopback address.
    let (port, mut events) = proxy(&[format!("localhost:{target}")]).await;
    let answer = exchange(port, &socks("localhost")).await;
    assert_eq!(answer.as_bytes()[..4], [5, 0, 5, 2], "{answer:?}");
    let event = events.recv().await.unwrap();
    let Outcome::Refused(why) = &event.outcome else {
        panic!("{event:?}")
    };
    assert!(why.contains("DNS rebinding"), "{why}");
    assert!(event.address.is_some_and(|a| a.is_loopback()), "{event:?}");

    let (port, mut events) = proxy(&[
        format!("localhost:{target}"),
        format!("127.0.0.1:{target}"),
        format!("[::1]:{target}"),
    ])
    .await;
    let answer = exchange(port, &socks("localhost")).await;
    assert_eq!(answer.as_bytes()[..4], [5, 0, 5, 0], "{answer:?}");
    assert!(answer.ends_with("PONG"), "{answer:?}");
    let event = events.recv().await.unwrap();
    assert_eq!(
        (event.protocol, event.outcome),
        ("socks5", Outcome::Connected)
    );
}

#[tokio::test]
async fn what_the_proxy_does_not_serve_is_answered_and_reported() {
    let (target, _seen) = destination().await;
    let (port, mut events) = proxy(&[format!("127.0.0.1:{target}")]).await;
    for (request, status) in [
        ("GET https://127.0.0.1/ HTTP/1.1\r\n\r\n".to_owned(), "400"),
        ("GET /relative HTTP/1.1\r\n\r\n".to_owned(), "400"),
        ("NOT HTTP AT ALL\r\n\r\n".to_owned(), "400"),
        (
            format!("GET http://user:pw@127.0.0.1:{target}/ HTTP/1.1\r\n\r\n"),
            "400",
        ),
    ] {
        let answer = exchange(port, request.as_bytes()).await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{request}: {answer}"
        );
        let event = events.recv().await.unwrap();
        assert!(matches!(event.outcome, Outcome::Refused(_)), "{event:?}");
    }
    // SOCKS5 BIND and UDP ASSOCIATE.
    for command in [2u8, 3] {
        let mut request = vec![5, 1, 0, 5, command, 0, 1, 127, 0, 0, 1];
        request.extend_from_slice(&target.to_be_bytes());
        let answer = exchange(port, &request).await;
        assert_eq!(answer.as_bytes()[..4], [5, 0, 5, 7], "{answer:?}");
        assert!(matches!(
            events.recv().await.unwrap().outcome,
            Outcome::Refused(_)
        ));
    }
    // A head that never ends.
    let answer = exchange(port, &vec![b'a'; 20 * 1024]).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
}
