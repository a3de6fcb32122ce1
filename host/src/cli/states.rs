//! How `mcpproxy upstream list` shows a server's state: one word in the table's STATE
//! column (`error`, `not-started`), and what went wrong on lines under the table, fitted to
//! the output's width, with the command that shows more.

use mcpproxy_support::quote;
use mcpproxy_upstream::{ServerStatus, State};

use super::output::{output_width, wrap};
use super::remote::Remote;

/// The state as one word, for a table column.
pub(super) fn state_word(state: &State) -> &'static str {
    match state {
        State::Disconnected => "disconnected",
        State::Connecting => "connecting",
        State::Ready => "ready",
        State::Error(_) => "error",
        State::Disabled => "disabled",
        State::Unapproved => "not-started",
        State::LoginRequired(_) => "login-required",
        State::Authenticating => "authenticating",
        State::Idle => "idle",
    }
}

/// A line or a few for each server whose state has more to say than its word: an error's
/// message (cut at 300 characters; `upstream logs NAME` and `upstream inspect NAME` have
/// more), a launch that waits for approval.
pub(super) fn print_state_details(statuses: &[ServerStatus]) {
    let width = output_width().unwrap_or(usize::MAX);
    let mut first = true;
    for status in statuses {
        let name = quote(&status.name);
        let detail = match &status.state {
            State::Error(message) => {
                let message: String = quote(message).chars().take(300).collect();
                format!(
                    "{name}: {message} (see `mcpproxy upstream logs {name}` and `mcpproxy upstream inspect {name}`)"
                )
            }
            State::Unapproved => format!(
                "{name}: how it starts is not approved; review it with `mcpproxy upstream inspect {name}`, then `mcpproxy upstream approve {name}`"
            ),
            State::LoginRequired(why) => format!("{name}: {}", quote(why)),
            State::Authenticating => format!(
                "{name}: a login is in progress (waiting for the browser); `mcpproxy upstream login {name}` starts a new one"
            ),
            _ => continue,
        };
        if first {
            println!();
            first = false;
        }
        let mut lines = wrap(&detail, width.saturating_sub(2).max(20)).into_iter();
        if let Some(head) = lines.next() {
            println!("{head}");
        }
        for line in lines {
            println!("  {line}");
        }
    }
}

/// After `upstream logs NAME`'s lines, says on stderr what they do not: that the server's
/// last start failed, and how (its stderr may hold only mcpproxy's own sandbox notes, or
/// nothing); or, with no line printed, why there is none (not started, disabled, silent).
pub(super) async fn say_why_logs_end(
    remote: &Remote,
    name: &str,
    printed: bool,
) -> anyhow::Result<()> {
    let statuses: Vec<ServerStatus> =
        serde_json::from_value(remote.get("/upstreams", &[]).await?).unwrap_or_default();
    let shown = quote(name);
    let why = match statuses.iter().find(|s| s.name == name).map(|s| &s.state) {
        Some(State::Error(message)) => format!(
            "'{shown}' is not running: its last start failed: {}",
            quote(message)
        ),
        _ if printed => return Ok(()),
        Some(State::Unapproved) => format!(
            "no log lines: '{shown}' was not started: how it starts waits for approval \
             (`mcpproxy upstream inspect {shown}`)"
        ),
        Some(State::Disabled) => format!("no log lines: '{shown}' is disabled: it does not run"),
        Some(_) => format!("no log lines: '{shown}' has written nothing to stderr"),
        None => format!("no log lines: '{shown}' is not a running upstream"),
    };
    eprintln!("{why}");
    Ok(())
}
