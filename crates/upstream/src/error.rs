//! Why an upstream call did not produce a result: the error every request to an upstream
//! returns, with the text a client and the log show; and [`in_words`], rmcp's text of a
//! failed transport without the Rust type names rmcp puts in it.

use std::time::Duration;

use super::State;

/// Why an upstream call did not produce a result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error(
        "upstream server '{server}' is not connected ({state}); the call was not sent. It reconnects by itself; check `mcpproxy serve` logs or the server's command/url"
    )]
    NotConnected { server: String, state: State },
    #[error(
        "upstream server '{server}' (start: lazy) could not be started for this call ({state}); the call was not sent. Its next call tries again; see `mcpproxy upstream logs {server}` or check the server's command/url"
    )]
    NotStarted { server: String, state: State },
    #[error(
        "upstream server '{server}' is quarantined: review it with `mcpproxy upstream inspect {server}` and approve it with `mcpproxy upstream approve {server}`"
    )]
    Quarantined { server: String },
    #[error(
        "upstream server '{server}' needs a login ({reason}); the call did not run. Log in with `mcpproxy upstream login {server}`"
    )]
    LoginRequired { server: String, reason: String },
    #[error("upstream server '{server}' is disabled in mcp_config.json (\"enabled\": false)")]
    Disabled { server: String },
    #[error("upstream server '{server}' did not answer the call to '{tool}' within {} ms; raise tool_call_timeout_ms if it is slow", timeout.as_millis())]
    Timeout {
        server: String,
        tool: String,
        timeout: Duration,
    },
    #[error("upstream server '{server}' returned an error for '{tool}': {message}")]
    Call {
        server: String,
        tool: String,
        message: String,
    },
    /// The server answered with a JSON-RPC error, kept whole (code, message, data) so a
    /// transparent endpoint can pass it on as it is.
    #[error("upstream server '{server}' returned an error for '{tool}': {}", error.message)]
    Rejected {
        server: String,
        tool: String,
        error: rmcp::ErrorData,
    },
    /// `message` is rmcp's text as it was, shown [`in_words`].
    #[error(
        "the connection to upstream server '{server}' failed during the call to '{tool}': {}; it reconnects by itself",
        cause_in_words(message)
    )]
    Connection {
        server: String,
        tool: String,
        message: String,
    },
}

/// What [`in_words`] says for rmcp's "the transport failed".
const CONNECTION_FAILED: &str = "the connection to the server failed: ";

/// What stands for a Rust path left in a text.
const COMPONENT: &str = "a component";

/// rmcp's text of a failure in words: rmcp names the transport by its Rust type (`Transport
/// send error: Transport [rmcp::transport::worker::WorkerTransport<…>] error: CAUSE`), which
/// tells a person nothing. The transport's name goes, the cause stays, and the text says
/// the connection to the server failed; any other Rust path (`crate::module::Type<…>`)
/// becomes "a component".
pub(crate) fn in_words(text: &str) -> String {
    let mut words = text
        .replace("Transport send error: ", CONNECTION_FAILED)
        .replace("Send message error ", CONNECTION_FAILED);
    while let Some(at) = words.find("Transport [") {
        let open = at + "Transport ".len();
        let Some(close) = matching(&words, open, '[', ']') else {
            break;
        };
        let after = &words[close + 1..];
        let (end, said) = match after.strip_prefix(" error: ") {
            Some(_) => (close + 1 + " error: ".len(), ""),
            None => (close + 1, "the transport"),
        };
        words.replace_range(at..end, said);
    }
    without_rust_paths(&words)
}

/// The cause of a failed connection [`in_words`], without the words that it failed.
fn cause_in_words(message: &str) -> String {
    let words = in_words(message);
    match words.strip_prefix(CONNECTION_FAILED) {
        Some(cause) => cause.to_owned(),
        None => words,
    }
}

/// Where the `close` matching the `open` at byte `at` of `text` is.
fn matching(text: &str, at: usize, open: char, close: char) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text[at..].char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth = depth.checked_sub(1)?;
            if depth == 0 {
                return Some(at + i);
            }
        }
    }
    None
}

/// `text` with every Rust path (`a::b`, `a::B<c::D>`) said as [`COMPONENT`].
fn without_rust_paths(text: &str) -> String {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("::") {
        let before = rest[..at].chars().next_back();
        let after = rest[at + 2..].chars().next();
        if !before.is_some_and(is_ident) || !after.is_some_and(|c| is_ident(c) || c == '<') {
            out.push_str(&rest[..at + 2]);
            rest = &rest[at + 2..];
            continue;
        }
        let mut start = at;
        loop {
            let head = &rest[..start];
            if let Some(c) = head.chars().next_back().filter(|c| is_ident(*c)) {
                start -= c.len_utf8();
            } else if head.ends_with("::") && head[..head.len() - 2].ends_with(is_ident) {
                start -= 2;
            } else {
                break;
            }
        }
        let mut end = at;
        loop {
            let tail = &rest[end..];
            if tail.starts_with("::") {
                end += 2;
            } else if let Some(c) = tail.chars().next().filter(|c| is_ident(*c)) {
                end += c.len_utf8();
            } else if tail.starts_with('<') {
                end = matching(rest, end, '<', '>').map_or(rest.len(), |close| close + 1);
            } else {
                break;
            }
        }
        out.push_str(&rest[..start]);
        out.push_str(COMPONENT);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rmcp's error for a request its streamable HTTP transport could not send.
    fn transport_send_error(cause: &str) -> rmcp::ServiceError {
        type Transport = rmcp::transport::worker::WorkerTransport<
            rmcp::transport::streamable_http_client::StreamableHttpClientWorker<reqwest::Client>,
        >;
        rmcp::ServiceError::TransportSend(rmcp::transport::DynamicTransportError::from_parts(
            std::any::type_name::<Transport>(),
            std::any::TypeId::of::<Transport>(),
            Box::new(std::io::Error::other(cause.to_owned())),
        ))
    }

    #[test]
    fn a_transport_error_is_told_in_words_without_a_rust_type_name() {
        let rmcp_says = transport_send_error("connection refused").to_string();
        assert!(rmcp_says.contains("rmcp::"), "{rmcp_says}");
        let error = Error::Connection {
            server: "fs".into(),
            tool: "read_file".into(),
            message: rmcp_says,
        };
        assert_eq!(
            error.to_string(),
            "the connection to upstream server 'fs' failed during the call to 'read_file': connection refused; it reconnects by itself"
        );
        let initialize = rmcp::service::ClientInitializeError::TransportError {
            error: rmcp::transport::DynamicTransportError::from_parts(
                std::any::type_name::<Vec<std::collections::HashMap<String, u8>>>(),
                std::any::TypeId::of::<()>(),
                Box::new(std::io::Error::other("broken pipe")),
            ),
            context: "send initialize request".into(),
        };
        let words = in_words(&format!("MCP initialize with `srv` failed: {initialize}"));
        assert_eq!(
            words,
            "MCP initialize with `srv` failed: the connection to the server failed: broken pipe, when send initialize request"
        );
        for text in [error.to_string(), words] {
            assert!(
                !text.contains("rmcp::") && !text.contains("::<") && !text.contains("std::"),
                "{text}"
            );
        }
    }

    #[test]
    fn a_rust_path_left_is_a_component_and_other_colons_stay() {
        assert_eq!(
            in_words("failed in rmcp::service::Peer<rmcp::RoleClient>::send: closed"),
            "failed in a component: closed"
        );
        assert_eq!(in_words("Transport [weird] closed"), "the transport closed");
        let plain = "could not reach http://[::1]:8080/mcp at 12:30 (tool s:echo)";
        assert_eq!(in_words(plain), plain);
        assert_eq!(in_words("Transport [unclosed"), "Transport [unclosed");
    }

    #[test]
    fn not_connected_names_the_state_as_status_displays_do() {
        let error = Error::NotConnected {
            server: "fs".into(),
            state: State::Error("connection refused".into()),
        };
        assert_eq!(
            error.to_string(),
            "upstream server 'fs' is not connected (error: connection refused); the call was not sent. It reconnects by itself; check `mcpproxy serve` logs or the server's command/url"
        );
        let error = Error::NotConnected {
            server: "fs".into(),
            state: State::Connecting,
        };
        assert!(
            error.to_string().contains("is not connected (connecting);"),
            "{error}"
        );
    }

    #[test]
    fn errors_say_what_to_do() {
        let timeout = Error::Timeout {
            server: "fs".into(),
            tool: "read_file".into(),
            timeout: Duration::from_millis(1500),
        };
        assert_eq!(
            timeout.to_string(),
            "upstream server 'fs' did not answer the call to 'read_file' within 1500 ms; raise tool_call_timeout_ms if it is slow"
        );
        let quarantined = Error::Quarantined {
            server: "fs".into(),
        };
        assert_eq!(
            quarantined.to_string(),
            "upstream server 'fs' is quarantined: review it with `mcpproxy upstream inspect fs` and approve it with `mcpproxy upstream approve fs`"
        );
        let rejected = Error::Rejected {
            server: "fs".into(),
            tool: "read_file".into(),
            error: rmcp::ErrorData::invalid_params("no such file", None),
        };
        assert_eq!(
            rejected.to_string(),
            "upstream server 'fs' returned an error for 'read_file': no such file"
        );
    }
}
