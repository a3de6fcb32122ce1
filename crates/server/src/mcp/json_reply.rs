//! A request whose event stream carries nothing but its reply is answered with that reply as
//! a plain `application/json` body.
//!
//! rmcp answers every request of a session (protocol versions before 2026-07-28) with an event
//! stream, even when the reply is all it will ever carry: a priming event, the reply, the end of
//! the stream. That is three writes where one would do, and a client that stops reading at the
//! reply (rmcp's own client does) leaves the connection unusable, so its next call opens a new
//! TCP connection. Streamable HTTP lets a server answer a request with either form, and every
//! client must accept both.
//!
//! [`prefer_json`] reads the stream up to its first message. When that message is the reply (a
//! JSON-RPC response or error), the answer becomes that message alone, with `Content-Length`.
//! Otherwise the stream reaches the client as it is, byte for byte, nothing lost: the bytes
//! read so far first, then the rest. That happens when
//!
//! - a notification or a request of the server comes first (progress, a log message, an
//!   elicitation): the client needs to see them as they come;
//! - a keep-alive comment arrives before any message: the call is a long one, and the client
//!   should see the stream is alive;
//! - the events held grow past [`MAX_HELD_BYTES`] before the first message is complete, or the
//!   stream fails or ends without one.
//!
//! Only a `200` event stream is looked at; every other answer passes through untouched.

use axum::body::{Body, Bytes};
use axum::response::Response;
use futures::StreamExt;
use http::{HeaderValue, StatusCode, header};
use http_body_util::BodyExt;
use serde::Deserialize;
use serde::de::IgnoredAny;

/// The most bytes of an event stream held back while waiting for its first message. A reply
/// larger than this streams as events (it is no slower that way; it only keeps the
/// connection from being reused by a client that stops reading at the reply).
pub(super) const MAX_HELD_BYTES: usize = 8 << 20;

/// What the first complete event of a stream says about it.
#[derive(Debug, PartialEq, Eq)]
enum FirstEvent {
    /// No data, no comment (rmcp's priming event: an id and a retry hint): read on.
    Priming,
    /// A JSON-RPC response or error: the request's reply, the whole answer.
    Reply(Vec<u8>),
    /// Anything else: a notification, a server request, a keep-alive comment, a named event,
    /// data that is not a JSON-RPC reply.
    Other,
}

/// Answers with the reply alone where the stream's first message is the reply; see the
/// module docs.
pub(super) async fn prefer_json(response: Response) -> Response {
    if response.status() != StatusCode::OK
        || !has_content_type(response.headers(), "text/event-stream")
    {
        return response;
    }
    let (mut parts, mut body) = response.into_parts();
    let mut held: Vec<u8> = Vec::new();
    // Where the next event not yet looked at starts in `held`.
    let mut scanned = 0;
    loop {
        match body.frame().await {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => held.extend_from_slice(&data),
                // Trailers: not an event stream's business; pass everything on.
                Err(_) => return as_stream(parts, held, body),
            },
            // Failed or ended before its first message: the client sees what there was.
            Some(Err(_)) | None => return as_stream(parts, held, body),
        }
        while let Some((event, next)) = next_event(&held[scanned..]) {
            let event = &held[scanned..scanned + event];
            match first_event(event) {
                FirstEvent::Priming => scanned += next,
                FirstEvent::Reply(reply) => {
                    parts.headers.remove(header::CACHE_CONTROL);
                    parts.headers.remove("x-accel-buffering");
                    parts.headers.remove(header::TRANSFER_ENCODING);
                    parts.headers.insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    );
                    // The rest of the stream (its end) is dropped: the reply was its last
                    // message.
                    return Response::from_parts(parts, Body::from(reply));
                }
                FirstEvent::Other => return as_stream(parts, held, body),
            }
        }
        if held.len() > MAX_HELD_BYTES {
            return as_stream(parts, held, body);
        }
    }
}

/// Whether `headers` say the body is of media type `essence` (parameters such as `charset`
/// aside, case-insensitively).
pub(super) fn has_content_type(headers: &http::HeaderMap, essence: &str) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|found| found.trim().eq_ignore_ascii_case(essence))
}

/// The stream as it was: the bytes already read, then the rest of the body.
fn as_stream(parts: http::response::Parts, held: Vec<u8>, rest: Body) -> Response {
    let stream = futures::stream::once(async move { Ok::<_, axum::Error>(Bytes::from(held)) })
        .chain(rest.into_data_stream());
    Response::from_parts(parts, Body::from_stream(stream))
}

/// The length of the first complete event in `bytes` (without its blank line) and where the
/// event after it starts; `None` while its blank line has not arrived. Lines end with `\n`,
/// `\r\n` or `\r`, as the SSE format allows.
fn next_event(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut line_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let end_len = match bytes[i] {
            b'\n' => 1,
            // A `\r` at the end of what has arrived may be the first half of `\r\n`.
            b'\r' if i + 1 == bytes.len() => return None,
            b'\r' if bytes[i + 1] == b'\n' => 2,
            b'\r' => 1,
            _ => {
                i += 1;
                continue;
            }
        };
        if i == line_start {
            // A blank line: the event ends before it.
            return Some((line_start, i + end_len));
        }
        i += end_len;
        line_start = i;
    }
    None
}

/// Reads one event (its lines, without the blank line that ends it).
fn first_event(event: &[u8]) -> FirstEvent {
    let mut data: Option<Vec<u8>> = None;
    for line in event.split(|&b| b == b'\n' || b == b'\r') {
        if line.is_empty() {
            // The second half of a `\r\n`.
            continue;
        }
        if line[0] == b':' {
            // A comment: rmcp's keep-alive. The call takes a while; let the client see it.
            return FirstEvent::Other;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                let data = data.get_or_insert_with(Vec::new);
                if !data.is_empty() {
                    data.push(b'\n');
                }
                data.extend_from_slice(value);
            }
            b"event" if value != b"message" => return FirstEvent::Other,
            // `id`, `retry`, `event: message` and unknown fields do not change the message.
            _ => {}
        }
    }
    match data {
        None => FirstEvent::Priming,
        Some(data) if data.is_empty() => FirstEvent::Priming,
        Some(data) if is_reply(&data) => FirstEvent::Reply(data),
        Some(_) => FirstEvent::Other,
    }
}

/// Whether `data` is a JSON-RPC response or error: an object with `result` or `error` and
/// no `method` (a server request has an `id` too, but also a `method`).
fn is_reply(data: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        method: Option<IgnoredAny>,
        result: Option<IgnoredAny>,
        error: Option<IgnoredAny>,
    }
    serde_json::from_slice::<Probe>(data)
        .is_ok_and(|p| p.method.is_none() && (p.result.is_some() || p.error.is_some()))
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;

    const REPLY: &str = r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}"#;
    const PROGRESS: &str = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;
    const ELICIT: &str =
        r#"{"jsonrpc":"2.0","id":0,"method":"elicitation/create","params":{"message":"?"}}"#;

    /// An event-stream response whose body arrives in these chunks.
    fn stream(chunks: &[&str]) -> Response {
        let chunks: Vec<Result<Bytes, Infallible>> = chunks
            .iter()
            .map(|c| Ok(Bytes::from(c.to_string())))
            .collect();
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .header("x-accel-buffering", "no")
            .header("mcp-session-id", "s-1")
            .body(Body::from_stream(futures::stream::iter(chunks)))
            .unwrap()
    }

    async fn answer(response: Response) -> (http::response::Parts, String) {
        let (parts, body) = prefer_json(response).await.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        (parts, String::from_utf8(bytes.to_vec()).unwrap())
    }

    fn content_type(parts: &http::response::Parts) -> &str {
        parts.headers[header::CONTENT_TYPE].to_str().unwrap()
    }

    #[tokio::test]
    async fn a_reply_after_the_priming_event_becomes_a_json_body() {
        let chunks = [
            "data: \nid: 0/0\nretry: 3000\n\n",
            &format!("data: {REPLY}\nid: 1/0\n\n"),
        ];
        let (parts, body) = answer(stream(&chunks)).await;
        assert_eq!(content_type(&parts), "application/json");
        assert_eq!(body, REPLY);
        assert_eq!(parts.headers["mcp-session-id"], "s-1", "other headers stay");
        assert!(!parts.headers.contains_key(header::CACHE_CONTROL));
        assert!(!parts.headers.contains_key("x-accel-buffering"));
    }

    #[tokio::test]
    async fn a_reply_split_across_chunks_and_lines_ending_in_crlf_is_found() {
        let event = format!("data: \r\nid: 0\r\n\r\ndata: {REPLY}\r\nid: 1\r\n\r\n");
        let (first, rest) = event.split_at(event.len() - 3);
        let (a, b) = first.split_at(40);
        let (parts, body) = answer(stream(&[a, b, rest])).await;
        assert_eq!(content_type(&parts), "application/json");
        assert_eq!(body, REPLY);
    }

    #[tokio::test]
    async fn an_error_reply_becomes_a_json_body_too() {
        let error = r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"no"}}"#;
        let (parts, body) = answer(stream(&[&format!("data: {error}\n\n")])).await;
        assert_eq!(content_type(&parts), "application/json");
        assert_eq!(body, error);
    }

    /// The stream reaches the client byte for byte.
    async fn passes_through(chunks: &[&str]) {
        let (parts, body) = answer(stream(chunks)).await;
        assert_eq!(content_type(&parts), "text/event-stream");
        assert_eq!(parts.headers[header::CACHE_CONTROL], "no-cache");
        assert_eq!(body, chunks.concat());
    }

    #[tokio::test]
    async fn a_notification_first_keeps_the_whole_stream() {
        passes_through(&[
            "data: \nid: 0\nretry: 3000\n\n",
            &format!("data: {PROGRESS}\n\n"),
            &format!("data: {REPLY}\n\n"),
        ])
        .await;
    }

    #[tokio::test]
    async fn a_server_request_first_keeps_the_whole_stream() {
        passes_through(&[
            &format!("data: {ELICIT}\n\n"),
            &format!("data: {REPLY}\n\n"),
        ])
        .await;
    }

    #[tokio::test]
    async fn a_keep_alive_before_the_reply_keeps_the_stream() {
        passes_through(&["data: \nid: 0\n\n", ":\n\n", &format!("data: {REPLY}\n\n")]).await;
    }

    #[tokio::test]
    async fn a_named_event_or_data_that_is_no_reply_keeps_the_stream() {
        passes_through(&[&format!("event: custom\ndata: {REPLY}\n\n")]).await;
        passes_through(&["data: not json\n\n", &format!("data: {REPLY}\n\n")]).await;
        passes_through(&["data: [1,2]\n\n"]).await;
    }

    #[tokio::test]
    async fn a_stream_that_ends_without_a_message_is_passed_on() {
        passes_through(&["data: \nid: 0\n\n", "data: {\"jsonrpc\""]).await;
        passes_through(&[]).await;
    }

    #[tokio::test]
    async fn a_first_message_larger_than_the_cap_streams() {
        let big = format!("data: {}", "x".repeat(MAX_HELD_BYTES / 2));
        passes_through(&[&big, &big, &big, &format!("\n\ndata: {REPLY}\n\n")]).await;
    }

    #[tokio::test]
    async fn other_answers_are_untouched() {
        let json = Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(REPLY))
            .unwrap();
        let (parts, body) = answer(json).await;
        assert_eq!(content_type(&parts), "application/json");
        assert_eq!(body, REPLY);

        let mut refused = stream(&[&format!("data: {REPLY}\n\n")]);
        *refused.status_mut() = StatusCode::NOT_FOUND;
        let (parts, body) = answer(refused).await;
        assert_eq!(parts.status, StatusCode::NOT_FOUND);
        assert_eq!(content_type(&parts), "text/event-stream");
        assert!(body.starts_with("data: "));
    }

    #[test]
    fn events_end_at_a_blank_line_in_any_line_ending() {
        assert_eq!(next_event(b"data: x\n\nrest"), Some((8, 9)));
        assert_eq!(next_event(b"data: x\r\n\r\nrest"), Some((9, 11)));
        assert_eq!(next_event(b"data: x\r\rrest"), Some((8, 9)));
        assert_eq!(next_event(b"data: x\n"), None);
        // A `\r` at the end may be half of a `\r\n`: wait for the next byte.
        assert_eq!(next_event(b"data: x\r\n\r"), None);
        assert_eq!(next_event(b"\n"), Some((0, 1)));
    }

    #[test]
    fn data_lines_join_and_fields_are_read_as_sse_says() {
        assert_eq!(first_event(b"id: 0\nretry: 3000"), FirstEvent::Priming);
        assert_eq!(first_event(b"data:\nid: 0"), FirstEvent::Priming);
        assert_eq!(first_event(b": ping"), FirstEvent::Other);
        let split = b"data: {\"jsonrpc\":\"2.0\",\ndata:\"id\":1,\"result\":{}}";
        assert_eq!(
            first_event(split),
            FirstEvent::Reply(b"{\"jsonrpc\":\"2.0\",\n\"id\":1,\"result\":{}}".to_vec())
        );
        let message = format!("event: message\ndata: {REPLY}");
        assert_eq!(
            first_event(message.as_bytes()),
            FirstEvent::Reply(REPLY.as_bytes().to_vec())
        );
    }
}
