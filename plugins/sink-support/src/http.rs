//! A thin HTTP/1.1 client over `wasi:http/outgoing-handler`, shared by the sink plugins,
//! on this crate's [`bindings`](crate::bindings). The parts that do not touch the bindings
//! (URL parsing, timeouts, error wording) are plain Rust with native unit tests.
//!
//! One request per call: the request is handed to `outgoing-handler.handle` *before* its body
//! is written (mcpproxy's grant check and the connection happen behind `handle`), the body is
//! written as fast as the host takes it, and the response body is read up to
//! [`MAX_RESPONSE_BYTES`]. Every error is a sentence naming the remote.

use serde_json::Value;

use crate::bindings::wasi::http::outgoing_handler;
use crate::bindings::wasi::http::types::{
    ErrorCode, Fields, IncomingResponse, Method, OutgoingBody, OutgoingRequest, RequestOptions,
    Scheme,
};
use crate::bindings::wasi::io::streams::StreamError;

/// How much of a response body is kept (for error messages); the rest is not read.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// Default time to wait for the TCP (and TLS) connection.
pub const DEFAULT_CONNECT_MS: u64 = 5_000;
/// Default time to wait for the first response byte, and between two response bytes.
pub const DEFAULT_RESPONSE_MS: u64 = 30_000;

/// Where a request goes: the parts of an `http(s)://` URL that `wasi:http` wants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `https://` rather than `http://`.
    pub https: bool,
    /// `host[:port]` as written in the URL (what mcpproxy checks against the sink's grant).
    pub authority: String,
    /// Starts with `/`; may carry a `?query`. The fragment is dropped.
    pub path_and_query: String,
}

impl Target {
    /// Parses the URL in setting `setting` (named in errors), e.g. `http://127.0.0.1:8123/`.
    pub fn parse(setting: &str, url: &str) -> Result<Target, String> {
        let url = url.trim();
        let bad = |why: &str| format!("the {setting} setting {url:?} is not usable: {why}");
        let (https, rest) = if let Some(rest) = strip_prefix_ci(url, "http://") {
            (false, rest)
        } else if let Some(rest) = strip_prefix_ci(url, "https://") {
            (true, rest)
        } else {
            return Err(bad(
                "it must be an http:// or https:// URL, e.g. http://127.0.0.1:8123",
            ));
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.is_empty() {
            return Err(bad("it has no host"));
        }
        if authority.contains('@') {
            return Err(bad(
                "it carries credentials (user:password@); remove them from the URL and use \
                 this sink's settings for them instead",
            ));
        }
        check_authority(authority).map_err(|why| bad(&why))?;
        let tail = tail.split('#').next().unwrap_or("");
        if let Some(c) = tail.chars().find(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad(&format!("its path contains {c:?}; percent-encode it")));
        }
        let path_and_query = if tail.starts_with('/') {
            tail.to_string()
        } else {
            format!("/{tail}")
        };
        Ok(Target {
            https,
            authority: authority.to_string(),
            path_and_query,
        })
    }

    /// `scheme://authority/path?query`, for messages.
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}{}", self.authority, self.path_and_query)
    }

    /// `scheme://authority/path`, with a query shown as `?…`: for messages (a query may carry
    /// a token, or be long).
    pub fn display(&self) -> String {
        match self.path_and_query.split_once('?') {
            Some((path, _)) => format!("{}{path}?…", self.origin()),
            None => self.url(),
        }
    }

    /// `scheme://authority`, for messages that should not repeat a long query.
    pub fn origin(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.authority)
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`.
fn check_authority(authority: &str) -> Result<(), String> {
    let port = if let Some(rest) = authority.strip_prefix('[') {
        let (v6, after) = rest
            .split_once(']')
            .ok_or_else(|| "its IPv6 address has no closing ']'".to_string())?;
        if v6.is_empty()
            || !v6
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
        {
            return Err(format!("[{v6}] is not an IPv6 address"));
        }
        match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or_else(|| "unexpected text after the IPv6 address".to_string())?,
            ),
        }
    } else {
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        if host.is_empty() {
            return Err("it has no host".to_string());
        }
        if let Some(c) = host
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
        {
            return Err(format!("its host contains {c:?}"));
        }
        port
    };
    match port {
        Some(port) if !port.bytes().all(|b| b.is_ascii_digit()) || port.parse::<u16>().is_err() => {
            Err(format!("its port {port:?} is not a number from 0 to 65535"))
        }
        _ => Ok(()),
    }
}

/// The `request-options` timeouts, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// To set up the TCP (and TLS) connection.
    pub connect_ms: u64,
    /// From the end of the request to the first byte of the response.
    pub first_byte_ms: u64,
    /// Between two bytes of the response.
    pub between_bytes_ms: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect_ms: DEFAULT_CONNECT_MS,
            first_byte_ms: DEFAULT_RESPONSE_MS,
            between_bytes_ms: DEFAULT_RESPONSE_MS,
        }
    }
}

impl Timeouts {
    /// Reads the `timeout_ms` setting (absent or `null`: the defaults). It sets the
    /// first-byte and between-bytes timeouts; the connect timeout is the smaller of it and
    /// 5 s. A whole number of milliseconds, as a JSON number or a string of digits.
    pub fn from_setting(value: Option<&Value>) -> Result<Timeouts, String> {
        let ms = match value {
            None | Some(Value::Null) => return Ok(Timeouts::default()),
            Some(Value::Number(n)) => n.as_u64(),
            Some(Value::String(s)) => s.trim().parse::<u64>().ok(),
            Some(_) => None,
        };
        match ms {
            Some(ms) if ms > 0 => Ok(Timeouts {
                connect_ms: ms.min(DEFAULT_CONNECT_MS),
                first_byte_ms: ms,
                between_bytes_ms: ms,
            }),
            _ => Err(format!(
                "the timeout_ms setting must be a whole number of milliseconds above 0, e.g. \
                 30000; got {}",
                value.map(Value::to_string).unwrap_or_default()
            )),
        }
    }
}

/// One request to send.
pub struct Request<'a> {
    /// `POST`, `PUT`, ... (upper case; other tokens are sent as given).
    pub method: &'a str,
    /// Where it goes.
    pub target: &'a Target,
    /// Name and value; `content-length` is added from `body`.
    pub headers: &'a [(String, String)],
    /// Sent whole, with a `content-length`.
    pub body: &'a [u8],
    /// How long to wait for the remote.
    pub timeouts: Timeouts,
}

/// What came back.
#[derive(Debug)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// At most [`MAX_RESPONSE_BYTES`] of the body.
    pub body: Vec<u8>,
}

/// `body` as text for a message: lossy UTF-8, whitespace runs collapsed, cut to about `max`
/// bytes.
pub fn excerpt(body: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.is_empty() {
        return "(empty body)".to_string();
    }
    if text.len() <= max {
        return text;
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

/// Sends `request` and returns the response (any status), or a sentence saying why there
/// is none.
pub fn send(request: &Request) -> Result<Response, String> {
    let target = request.target;
    let mut entries: Vec<(String, Vec<u8>)> = Vec::with_capacity(request.headers.len() + 1);
    for (name, value) in request.headers {
        if name.eq_ignore_ascii_case("content-length") {
            continue;
        }
        entries.push((name.to_ascii_lowercase(), value.clone().into_bytes()));
    }
    entries.push((
        "content-length".to_string(),
        request.body.len().to_string().into_bytes(),
    ));
    let headers = Fields::from_list(&entries).map_err(|e| {
        format!(
            "cannot send to {}: a request header was refused ({e:?}); header names must be \
             HTTP tokens, values printable, and connection, host, transfer-encoding, upgrade, \
             keep-alive and proxy-* headers cannot be set",
            target.origin()
        )
    })?;

    let outgoing = OutgoingRequest::new(headers);
    let internal = |what: &str| format!("cannot send to {}: {what}", target.origin());
    outgoing
        .set_method(&method(request.method))
        .map_err(|()| internal(&format!("the method {:?} is not valid", request.method)))?;
    let scheme = if target.https {
        Scheme::Https
    } else {
        Scheme::Http
    };
    outgoing
        .set_scheme(Some(&scheme))
        .map_err(|()| internal("the scheme was refused"))?;
    outgoing
        .set_authority(Some(&target.authority))
        .map_err(|()| internal(&format!("the host {:?} was refused", target.authority)))?;
    outgoing
        .set_path_with_query(Some(&target.path_and_query))
        .map_err(|()| internal("the path was refused"))?;

    let options = RequestOptions::new();
    let t = request.timeouts;
    // A host that does not support a timeout refuses to set it; the others still apply.
    let _ = options.set_connect_timeout(Some(ms_to_ns(t.connect_ms)));
    let _ = options.set_first_byte_timeout(Some(ms_to_ns(t.first_byte_ms)));
    let _ = options.set_between_bytes_timeout(Some(ms_to_ns(t.between_bytes_ms)));

    let body = outgoing
        .body()
        .map_err(|()| internal("the request body was already taken"))?;
    // Hand the request over first, then stream the body into it.
    let future = outgoing_handler::handle(outgoing, Some(options))
        .map_err(|code| describe_error(&code, target, &t))?;
    let write_error = write_body(body, request.body);

    let pollable = future.subscribe();
    pollable.block();
    drop(pollable);
    let response = match future.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(code))) => return Err(describe_error(&code, target, &t)),
        Some(Err(())) | None => {
            return Err(internal(
                "the response was lost (mcpproxy reported no outcome)",
            ));
        }
    };
    drop(future);
    let status = response.status();
    let body = read_body(&response, MAX_RESPONSE_BYTES);
    drop(response);
    if let Some(why) = write_error
        && (200..300).contains(&status)
    {
        // A success for a body that did not go out whole is no success. (An error status is
        // returned as it is: it says why the remote stopped reading, e.g. 413.)
        return Err(format!(
            "sending the request body to {} failed: {why}",
            target.origin()
        ));
    }
    Ok(Response { status, body })
}

fn ms_to_ns(ms: u64) -> u64 {
    ms.saturating_mul(1_000_000)
}

fn method(name: &str) -> Method {
    match name.to_ascii_uppercase().as_str() {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "CONNECT" => Method::Connect,
        "OPTIONS" => Method::Options,
        "TRACE" => Method::Trace,
        "PATCH" => Method::Patch,
        _ => Method::Other(name.to_string()),
    }
}

/// Writes `bytes` into the request body and finishes it. `Some(reason)` if that failed
/// (the caller still looks at the response first: it usually says more).
fn write_body(body: OutgoingBody, bytes: &[u8]) -> Option<String> {
    let stream = match body.write() {
        Ok(stream) => stream,
        Err(()) => return Some("the body stream was already taken".to_string()),
    };
    let stream_error = |e: StreamError| match e {
        StreamError::Closed => "the connection closed while the body was sent".to_string(),
        StreamError::LastOperationFailed(err) => err.to_debug_string(),
    };
    // Write as much as the host accepts at once (`check-write`), waiting only when it is
    // full. No flush per chunk: each one waits for the connection and made a 1,000-record
    // batch many times slower. No flush at the end either: the request carries a
    // content-length, so the host may close the stream as soon as the last byte is in, and
    // `finish` below hands over whatever is buffered.
    let mut failed = None;
    let mut rest = bytes;
    while !rest.is_empty() {
        let room = match stream.check_write() {
            Ok(0) => {
                stream.subscribe().block();
                continue;
            }
            Ok(room) => usize::try_from(room).unwrap_or(usize::MAX),
            Err(e) => {
                failed = Some(stream_error(e));
                break;
            }
        };
        let (now, later) = rest.split_at(room.min(rest.len()));
        if let Err(e) = stream.write(now) {
            failed = Some(stream_error(e));
            break;
        }
        rest = later;
    }
    drop(stream);
    match OutgoingBody::finish(body, None) {
        Ok(()) => failed,
        Err(code) => failed.or_else(|| Some(format!("{code:?}"))),
    }
}

/// Reads at most `limit` bytes of the response body.
fn read_body(response: &IncomingResponse, limit: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let Ok(body) = response.consume() else {
        return out;
    };
    if let Ok(stream) = body.stream() {
        while out.len() < limit {
            let want = (limit - out.len()).min(16 * 1024) as u64;
            match stream.blocking_read(want) {
                Ok(bytes) => out.extend_from_slice(&bytes),
                Err(_) => break,
            }
        }
        drop(stream);
    }
    drop(body);
    out
}

/// A sentence for a `wasi:http` error, naming the remote and what to check.
pub fn describe_error(code: &ErrorCode, target: &Target, timeouts: &Timeouts) -> String {
    let auth = &target.authority;
    let origin = target.origin();
    match code {
        ErrorCode::HttpRequestDenied => format!(
            "request to {auth} was refused by mcpproxy: {auth} is not in this sink's allowed \
             hosts (its url setting's host and allowed_hosts)"
        ),
        ErrorCode::DnsTimeout => {
            format!("looking up the host of {origin} timed out; check the host name and DNS")
        }
        ErrorCode::DnsError(p) => format!(
            "the host of {origin} could not be resolved ({}); check the host name",
            p.rcode.as_deref().unwrap_or("DNS error")
        ),
        ErrorCode::DestinationNotFound => {
            format!("the host of {origin} was not found; check the host name")
        }
        ErrorCode::DestinationUnavailable | ErrorCode::DestinationIpUnroutable => {
            format!("{origin} is unreachable from this machine; check the address and network")
        }
        ErrorCode::DestinationIpProhibited => {
            format!("connecting to {origin} is prohibited (its IP address is blocked)")
        }
        ErrorCode::ConnectionRefused => format!(
            "{origin} refused the connection; is the server running and listening on that port?"
        ),
        // mcpproxy also bounds a TLS handshake by the sink's deadline and reports it so.
        ErrorCode::ConnectionTimeout => format!(
            "connecting to {origin} timed out (limit {} ms, or the sink's deadline if \
             shorter); is the host reachable, and does it answer on that port?",
            timeouts.connect_ms
        ),
        ErrorCode::ConnectionReadTimeout | ErrorCode::HttpResponseTimeout => format!(
            "{origin} did not answer within {} ms; check the server, or raise timeout_ms",
            timeouts.first_byte_ms
        ),
        ErrorCode::ConnectionTerminated | ErrorCode::HttpResponseIncomplete => format!(
            "{origin} closed the connection before answering in full; check the server's log"
        ),
        ErrorCode::ConnectionWriteTimeout => format!(
            "sending to {origin} stalled for more than {} ms; check the server, or raise \
             timeout_ms",
            timeouts.between_bytes_ms
        ),
        ErrorCode::TlsCertificateError => format!(
            "the TLS certificate of {origin} was not accepted; it must be valid for that host \
             and signed by a trusted authority"
        ),
        ErrorCode::TlsProtocolError => format!(
            "the TLS handshake with {origin} failed; does it really speak https on that port?"
        ),
        ErrorCode::TlsAlertReceived(alert) => format!(
            "{origin} ended the TLS handshake with an alert ({}); check its TLS setup",
            alert.alert_message.as_deref().unwrap_or("no description")
        ),
        ErrorCode::HttpRequestUriInvalid | ErrorCode::HttpRequestUriTooLong => {
            format!("{} is not a valid request URL ({code:?})", target.url())
        }
        ErrorCode::HttpRequestMethodInvalid => {
            format!("the request method was refused for {origin}; check the method setting")
        }
        ErrorCode::HttpProtocolError => format!(
            "{origin} did not speak HTTP as expected; check the scheme (http/https) and port"
        ),
        ErrorCode::InternalError(Some(text)) => format!("request to {origin} failed: {text}"),
        other => format!("request to {origin} failed: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_urls() {
        let t = Target::parse("url", "http://127.0.0.1:8123").unwrap();
        assert_eq!(
            t,
            Target {
                https: false,
                authority: "127.0.0.1:8123".into(),
                path_and_query: "/".into()
            }
        );
        let t = Target::parse(
            "url",
            " HTTPS://siem.example.com/services/collector?x=1#frag ",
        )
        .unwrap();
        assert!(t.https);
        assert_eq!(t.authority, "siem.example.com");
        assert_eq!(t.path_and_query, "/services/collector?x=1");
        assert_eq!(t.url(), "https://siem.example.com/services/collector?x=1");
        assert_eq!(t.origin(), "https://siem.example.com");
        assert_eq!(t.display(), "https://siem.example.com/services/collector?…");
        let t = Target::parse("url", "http://[::1]:9000?q").unwrap();
        assert_eq!(
            (t.authority.as_str(), t.path_and_query.as_str()),
            ("[::1]:9000", "/?q")
        );
    }

    #[test]
    fn refuses_bad_urls_with_a_reason() {
        for (url, why) in [
            ("", "http:// or https://"),
            ("ftp://x", "http:// or https://"),
            ("127.0.0.1:8123", "http:// or https://"),
            ("http://", "no host"),
            ("http:///path", "no host"),
            ("http://u:p@host", "credentials"),
            ("http://host:99999", "port"),
            ("http://host:", "port"),
            ("http://ho st", "host contains"),
            ("http://[::1", "closing"),
            ("http://host/a b", "percent-encode"),
        ] {
            let err = Target::parse("stray_url", url).unwrap_err();
            assert!(err.starts_with("the stray_url setting"), "{err}");
            assert!(err.contains(why), "{url}: {err}");
        }
    }

    #[test]
    fn timeouts_from_the_setting() {
        assert_eq!(Timeouts::from_setting(None).unwrap(), Timeouts::default());
        assert_eq!(
            Timeouts::from_setting(Some(&Value::Null)).unwrap(),
            Timeouts::default()
        );
        let t = Timeouts::from_setting(Some(&json!(2000))).unwrap();
        assert_eq!(
            (t.connect_ms, t.first_byte_ms, t.between_bytes_ms),
            (2000, 2000, 2000)
        );
        let t = Timeouts::from_setting(Some(&json!("60000"))).unwrap();
        assert_eq!(
            (t.connect_ms, t.first_byte_ms, t.between_bytes_ms),
            (5000, 60000, 60000)
        );
        for bad in [json!(0), json!(-1), json!(1.5), json!("soon"), json!(true)] {
            let err = Timeouts::from_setting(Some(&bad)).unwrap_err();
            assert!(err.contains("timeout_ms"), "{err}");
            assert!(err.contains(&bad.to_string()), "{err}");
        }
    }

    #[test]
    fn excerpts_are_short_and_on_one_line() {
        assert_eq!(excerpt(b"", 10), "(empty body)");
        assert_eq!(
            excerpt(b"Code: 60,\n e.what()\n", 100),
            "Code: 60, e.what()"
        );
        assert_eq!(excerpt("ééé".as_bytes(), 3), "é…");
        assert_eq!(excerpt(&[0xff, b'a'], 10), "\u{fffd}a");
    }

    #[test]
    fn describes_errors() {
        let t = Target::parse("url", "http://10.0.0.9:8123/").unwrap();
        let timeouts = Timeouts::default();
        assert_eq!(
            describe_error(&ErrorCode::HttpRequestDenied, &t, &timeouts),
            "request to 10.0.0.9:8123 was refused by mcpproxy: 10.0.0.9:8123 is not in this \
             sink's allowed hosts (its url setting's host and allowed_hosts)"
        );
        let refused = describe_error(&ErrorCode::ConnectionRefused, &t, &timeouts);
        assert!(
            refused.starts_with("http://10.0.0.9:8123 refused"),
            "{refused}"
        );
        let slow = describe_error(&ErrorCode::HttpResponseTimeout, &t, &timeouts);
        assert!(
            slow.contains("30000 ms") && slow.contains("timeout_ms"),
            "{slow}"
        );
        let other = describe_error(
            &ErrorCode::InternalError(Some("boom".into())),
            &t,
            &timeouts,
        );
        assert_eq!(other, "request to http://10.0.0.9:8123 failed: boom");
    }
}
