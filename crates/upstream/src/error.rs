//! Why an upstream call did not produce a result: the error every request to an upstream
//! returns, with the text a client and the log show.

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
    #[error(
        "the connection to upstream server '{server}' failed during the call to '{tool}': {message}; it reconnects by itself"
    )]
    Connection {
        server: String,
        tool: String,
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

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
