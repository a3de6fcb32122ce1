//! Where an upstream is in its life ([`State`]) and the snapshot status displays show of it
//! ([`ServerStatus`]), with the transport it is reached by ([`TransportKind`]).

use serde::{Deserialize, Serialize};

use mcpproxy_config::Transport;

/// Where an upstream is in its life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", content = "detail", rename_all = "lowercase")]
pub enum State {
    Disconnected,
    Connecting,
    Ready,
    /// The last attempt failed; a retry is scheduled.
    Error(String),
    Disabled,
    /// Not started: how it starts (or where it connects) is not approved. Nothing of it
    /// runs until a person approves it.
    Unapproved,
    /// The server asks for an OAuth login (or more access than the last one gave); the
    /// detail says why and the command to run. Nothing is retried until a login finishes.
    #[serde(rename = "login_required")]
    LoginRequired(String),
    /// A login was started and waits for the browser's redirect.
    Authenticating,
    /// A lazy server (`"start": "lazy"`) that is not running: its tools are known from the
    /// list it last gave, and its next call starts it.
    Idle,
}

impl State {
    /// The state's name without its detail (`error`, `login_required`, ...): a metric label
    /// and what the REST API's `state` field says.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Disconnected => "disconnected",
            Self::Connecting => "connecting",
            Self::Ready => "ready",
            Self::Error(_) => "error",
            Self::Disabled => "disabled",
            Self::Unapproved => "unapproved",
            Self::LoginRequired(_) => "login_required",
            Self::Authenticating => "authenticating",
            Self::Idle => "idle",
        }
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Disconnected => f.write_str("disconnected"),
            Self::Connecting => f.write_str("connecting"),
            Self::Ready => f.write_str("ready"),
            Self::Error(e) => write!(f, "error: {e}"),
            Self::Disabled => f.write_str("disabled"),
            Self::Unapproved => f.write_str("not started (launch not approved)"),
            Self::LoginRequired(why) => write!(f, "login required: {why}"),
            Self::Authenticating => f.write_str("authenticating (waiting for the browser)"),
            Self::Idle => f.write_str("idle (not running; its next call starts it)"),
        }
    }
}

/// How an upstream is reached, as status displays name it: `stdio` or `http`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// A child process speaking MCP over stdin/stdout.
    Stdio,
    /// A streamable-HTTP endpoint.
    Http,
}

impl From<&Transport> for TransportKind {
    fn from(transport: &Transport) -> Self {
        match transport {
            Transport::Stdio { .. } => Self::Stdio,
            Transport::Http { .. } => Self::Http,
        }
    }
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Stdio => "stdio",
            Self::Http => "http",
        })
    }
}

/// A snapshot of one upstream for status displays.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerStatus {
    pub name: String,
    pub transport: TransportKind,
    #[serde(flatten)]
    pub state: State,
    /// Tools the server lists.
    pub tools: usize,
    /// Quarantined until a person approves it: listed, never called.
    #[serde(default)]
    pub quarantined: bool,
    /// Tools held back because they are new or changed since approval.
    #[serde(default)]
    pub pending: Vec<String>,
    /// The sandbox of a stdio server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<super::sandbox::SandboxStatus>,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn every_state() -> Vec<State> {
        vec![
            State::Disconnected,
            State::Connecting,
            State::Ready,
            State::Error("connection refused".into()),
            State::Disabled,
            State::Unapproved,
            State::LoginRequired("the server asks for a login".into()),
            State::Authenticating,
            State::Idle,
        ]
    }

    #[test]
    fn states_read_as_status_displays_show_them() {
        let shown: Vec<String> = every_state().iter().map(State::to_string).collect();
        assert_eq!(
            shown,
            [
                "disconnected",
                "connecting",
                "ready",
                "error: connection refused",
                "disabled",
                "not started (launch not approved)",
                "login required: the server asks for a login",
                "authenticating (waiting for the browser)",
                "idle (not running; its next call starts it)",
            ]
        );
    }

    #[test]
    fn the_kind_of_a_state_is_the_name_the_rest_api_gives_it() {
        for state in every_state() {
            let json = serde_json::to_value(&state).unwrap();
            assert_eq!(json["state"], state.kind(), "{state:?}");
        }
    }

    #[test]
    fn the_transport_is_named_by_its_kind() {
        let stdio = Transport::Stdio {
            command: "npx".into(),
            args: vec!["server".into()],
            env: BTreeMap::new(),
            working_dir: None,
        };
        let http = Transport::Http {
            url: "https://mcp.example.com/mcp".into(),
            headers: BTreeMap::new(),
        };
        assert_eq!(TransportKind::from(&stdio), TransportKind::Stdio);
        assert_eq!(TransportKind::from(&http), TransportKind::Http);
        assert_eq!(TransportKind::Stdio.to_string(), "stdio");
        assert_eq!(TransportKind::Http.to_string(), "http");
    }

    /// The status as the REST API sent it when the transport was a string.
    #[derive(Serialize)]
    struct StatusWithTransportText {
        name: String,
        transport: String,
        #[serde(flatten)]
        state: State,
        tools: usize,
        quarantined: bool,
        pending: Vec<String>,
    }

    #[test]
    fn a_status_serializes_as_it_did_with_the_transport_as_text_and_reads_back() {
        for transport in [TransportKind::Stdio, TransportKind::Http] {
            for state in every_state() {
                let status = ServerStatus {
                    name: "fs".into(),
                    transport,
                    state: state.clone(),
                    tools: 3,
                    quarantined: false,
                    pending: vec!["write_file".into()],
                    sandbox: None,
                };
                let before = StatusWithTransportText {
                    name: "fs".into(),
                    transport: transport.to_string(),
                    state,
                    tools: 3,
                    quarantined: false,
                    pending: vec!["write_file".into()],
                };
                let json = serde_json::to_string(&status).unwrap();
                assert_eq!(json, serde_json::to_string(&before).unwrap());
                let read: ServerStatus = serde_json::from_str(&json).unwrap();
                assert_eq!(read.transport, transport);
                assert_eq!(read.state, status.state);
            }
        }
        let quarantined = ServerStatus {
            name: "gh".into(),
            transport: TransportKind::Http,
            state: State::Error("refused".into()),
            tools: 0,
            quarantined: true,
            pending: Vec::new(),
            sandbox: None,
        };
        assert_eq!(
            serde_json::to_string(&quarantined).unwrap(),
            r#"{"name":"gh","transport":"http","state":"error","detail":"refused","tools":0,"quarantined":true,"pending":[]}"#
        );
    }
}
