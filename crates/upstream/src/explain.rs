//! Why a sandboxed server's tool call failed, when its sandbox is the likely cause: what the
//! server wrote to stderr and what its egress proxy refused while the call ran, said in
//! one line the agent and the CLI get with the error (`the server runs with network none;
//! it tried 127.0.0.1:5432 (connection refused)`), with the `isolation` keys that would
//! allow it. Without this a sandbox refusal reads like a bug of the server
//! (`Error executing tool fetch_url`), its cause in a log the person may never open.
//!
//! Everything read here was written by the server, hostile code: a destination is taken
//! only when it looks like one (host characters, a port number), a symptom is one of the
//! fixed phrases below, and paths go through [`Refusals`]' own checks.

use std::time::Duration;

use mcpproxy_sandbox::Network;

use mcpproxy_config::Transport;
use mcpproxy_support::lock;

use super::refusals::Refusals;
use super::{CallAnswer, Error, Upstream};

/// The most destinations one explanation names.
const MAX_DESTINATIONS: usize = 4;
/// The longest host name taken from a line.
const MAX_HOST: usize = 253;
/// How long a failed call waits for the stderr lines the server wrote before its answer
/// (the pipes are read apart, so they may arrive a moment later), at most, in steps.
const SETTLE_STEP: Duration = Duration::from_millis(10);
const SETTLE_STEPS: usize = 5;

/// Where a call's window starts: the server's last stderr line and its egress count.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallWindow {
    log_seq: u64,
    egress_events: u64,
}

/// A failed connection a line reports: where to, when it says, and what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Attempt {
    destination: Option<String>,
    symptom: &'static str,
}

/// Whether `line` reports a refused path or a failed connection (kept aside by the log).
pub(crate) fn is_notable(line: &str) -> bool {
    super::refusals::refused_path(line).is_some() || attempt(line).is_some()
}

impl Upstream {
    /// The start of a call's window, for a server that runs in a sandbox (none else has
    /// one to explain).
    pub(crate) fn call_window(&self) -> Option<CallWindow> {
        let sandboxed = matches!(self.config.transport, Transport::Stdio { .. })
            && self.config.isolation.enabled;
        sandboxed.then(|| CallWindow {
            log_seq: lock(&self.log).last_seq(),
            egress_events: self.egress_events(),
        })
    }

    /// `answer` with the explanation of its failure added, when it failed and the window
    /// shows the sandbox refusing something: a line of its own after a tool result's
    /// content, a sentence after an error's message.
    pub(crate) async fn explain(
        &self,
        window: CallWindow,
        answer: Result<CallAnswer, Error>,
    ) -> Result<CallAnswer, Error> {
        let failed = match &answer {
            Ok(CallAnswer::Complete(result)) => result.is_error == Some(true),
            Err(Error::Call { .. } | Error::Rejected { .. } | Error::Connection { .. }) => true,
            _ => false,
        };
        if !failed {
            return answer;
        }
        self.settle_log().await;
        let Some(explanation) = self.explanation(window) else {
            return answer;
        };
        let line = format!("mcpproxy: {explanation}");
        let mut answer = answer;
        match &mut answer {
            Ok(CallAnswer::Complete(result)) => {
                result.content.push(rmcp::model::ContentBlock::text(line));
            }
            Err(Error::Call { message, .. } | Error::Connection { message, .. }) => {
                message.push_str(&format!(" ({line})"));
            }
            Err(Error::Rejected { error, .. }) => {
                error.message = format!("{} ({line})", error.message).into();
            }
            _ => {}
        }
        answer
    }

    /// Waits (briefly) until the server's stderr stops growing.
    async fn settle_log(&self) {
        let mut seen = lock(&self.log).last_seq();
        for _ in 0..SETTLE_STEPS {
            tokio::time::sleep(SETTLE_STEP).await;
            let now = lock(&self.log).last_seq();
            if now == seen {
                return;
            }
            seen = now;
        }
    }

    fn egress_events(&self) -> u64 {
        self.egress_stats().as_ref().map_or(0, events)
    }

    /// What the sandbox refused in `window`, in one sentence, or `None`.
    fn explanation(&self, window: CallWindow) -> Option<String> {
        let lines = lock(&self.log).notable_since(window.log_seq);
        let texts: Vec<&str> = lines.iter().map(|l| l.line.as_str()).collect();
        let mut parts = Vec::new();
        let paths = Refusals::find(texts.iter().copied(), None, &self.forbidden_paths);
        if !paths.is_empty() {
            parts.push(paths.describe());
        }
        let attempts = attempts(texts.iter().copied());
        let network = &self.config.isolation.network;
        match network {
            Network::None if !attempts.is_empty() => {
                parts.push(format!(
                    "the server runs with network none; {}; {}",
                    describe_attempts(&attempts),
                    allow_hint(&attempts)
                ));
            }
            Network::Allow(rules) => {
                let egress = self.egress_stats().unwrap_or_default();
                let new = usize::try_from(events(&egress).saturating_sub(window.egress_events))
                    .unwrap_or(usize::MAX);
                let refused =
                    &egress.recent_refusals[egress.recent_refusals.len().saturating_sub(new)..];
                if !refused.is_empty() {
                    let named: Vec<String> = refused
                        .iter()
                        .take(MAX_DESTINATIONS)
                        .map(|r| mcpproxy_support::quote(&r.destination))
                        .collect();
                    parts.push(format!(
                        "the server may reach only {rules} (isolation.network.allow); mcpproxy's egress proxy refused {}",
                        named.join(", ")
                    ));
                } else if !attempts.is_empty() {
                    parts.push(format!(
                        "the server may reach only {rules}, through the egress proxy its HTTPS_PROXY and HTTP_PROXY variables name, and has no other route out; {}",
                        describe_attempts(&attempts)
                    ));
                }
            }
            _ => {}
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// The connections an egress proxy refused or could not make: each is in its
/// `recent_refusals`.
fn events(stats: &mcpproxy_egress::EgressStats) -> u64 {
    stats.refused + stats.failed
}

/// "it tried 127.0.0.1:5432 (connection refused)", or what failed when no line named where.
fn describe_attempts(attempts: &[Attempt]) -> String {
    let named: Vec<String> = attempts
        .iter()
        .filter_map(|a| {
            a.destination
                .as_ref()
                .map(|d| format!("{d} ({})", a.symptom))
        })
        .collect();
    if named.is_empty() {
        let mut symptoms: Vec<&str> = attempts.iter().map(|a| a.symptom).collect();
        symptoms.dedup();
        format!("a connection it made failed ({})", symptoms.join(", "))
    } else {
        format!("it tried {}", named.join(", "))
    }
}

/// The `isolation` key that would let the server reach what it tried.
fn allow_hint(attempts: &[Attempt]) -> String {
    let with_port: Vec<String> = attempts
        .iter()
        .filter_map(|a| a.destination.clone())
        .filter(|d| {
            d.rsplit_once(':')
                .is_some_and(|(_, port)| port.parse::<u16>().is_ok())
        })
        .map(|d| format!("\"{d}\""))
        .collect();
    let allow = if with_port.is_empty() {
        "\"HOST:PORT\"".to_owned()
    } else {
        with_port.join(", ")
    };
    format!(
        "to let it, add to the server's \"isolation\" (a person approves the changed launch): {{\"network\": {{\"allow\": [{allow}]}}}}"
    )
}

/// The failed connections `lines` report, each destination once.
fn attempts<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<Attempt> {
    let mut found: Vec<Attempt> = Vec::new();
    for line in lines {
        let Some(attempt) = attempt(line) else {
            continue;
        };
        let known = found
            .iter()
            .any(|a| a.destination == attempt.destination && a.symptom == attempt.symptom);
        if !known && found.len() < MAX_DESTINATIONS {
            found.push(attempt);
        }
    }
    found
}

/// The failed connection `line` reports: Node.js (`connect ECONNREFUSED 127.0.0.1:5432`,
/// `getaddrinfo EAI_AGAIN api.example.com`), Python (`Connect call failed ('127.0.0.1',
/// 5432)`, urllib3's `host='x', port=443`, `[Errno 101] Network is unreachable`), aiohttp,
/// curl and Go.
fn attempt(line: &str) -> Option<Attempt> {
    let lower = line.to_ascii_lowercase();
    let symptom = [
        (
            &["enetunreach", "network is unreachable"][..],
            "network is unreachable",
        ),
        (
            &["ehostunreach", "no route to host"][..],
            "no route to host",
        ),
        (
            &["econnrefused", "connection refused", "connect call failed"][..],
            "connection refused",
        ),
        (
            &[
                "eai_again",
                "enotfound",
                "temporary failure in name resolution",
                "name or service not known",
                "could not resolve host",
                "no address associated with hostname",
                "nodename nor servname",
            ][..],
            "its name could not be resolved",
        ),
    ]
    .into_iter()
    .find(|(markers, _)| markers.iter().any(|m| lower.contains(m)))
    .map(|(_, symptom)| symptom)?;
    Some(Attempt {
        destination: destination(line),
        symptom,
    })
}

/// Where `line` says a connection went, when it says so in a form this knows.
fn destination(line: &str) -> Option<String> {
    // Node.js: "connect ECONNREFUSED 127.0.0.1:5432", "getaddrinfo ENOTFOUND example.com".
    for code in [
        "ECONNREFUSED ",
        "ENETUNREACH ",
        "EHOSTUNREACH ",
        "EAI_AGAIN ",
        "ENOTFOUND ",
    ] {
        if let Some(at) = line.find(code) {
            return word(&line[at + code.len()..]).and_then(host_port);
        }
    }
    // Python's asyncio: "Connect call failed ('127.0.0.1', 5432)".
    if let Some(at) = line.find("Connect call failed ('") {
        let rest = &line[at + "Connect call failed ('".len()..];
        let (host, rest) = rest.split_once("', ")?;
        let port: String = rest.chars().take_while(char::is_ascii_digit).collect();
        return host_port(&format!("{host}:{port}"));
    }
    // urllib3 (requests): "HTTPConnectionPool(host='127.0.0.1', port=8080)".
    if let Some(at) = line.find("host='") {
        let rest = &line[at + "host='".len()..];
        let (host, rest) = rest.split_once("', port=")?;
        let port: String = rest.chars().take_while(char::is_ascii_digit).collect();
        return host_port(&format!("{host}:{port}"));
    }
    // aiohttp "Cannot connect to host example.com:443", Go "dial tcp 1.2.3.4:443: ...",
    // curl "Could not resolve host: example.com".
    for marker in [
        "Cannot connect to host ",
        "dial tcp ",
        "Could not resolve host: ",
    ] {
        if let Some(at) = line.find(marker) {
            return word(&line[at + marker.len()..])
                .map(|w| w.trim_end_matches(':'))
                .and_then(host_port);
        }
    }
    None
}

/// The text up to the first blank or closing punctuation.
fn word(text: &str) -> Option<&str> {
    let end = text
        .find(|c: char| c.is_whitespace() || matches!(c, ')' | ',' | '\'' | '"' | '>'))
        .unwrap_or(text.len());
    let word = &text[..end];
    (!word.is_empty()).then_some(word)
}

/// `text` when it is a host name or address, with or without a port; `None` for anything
/// else (a server's stderr is its own to write).
fn host_port(text: &str) -> Option<String> {
    let (host, port) = match text.rsplit_once(':') {
        Some((host, port))
            if !host.is_empty() && !host.ends_with(':') && port.parse::<u16>().is_ok() =>
        {
            (host, Some(port))
        }
        _ => (text, None),
    };
    let host_ok = !host.is_empty()
        && host.len() <= MAX_HOST
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']'));
    if !host_ok {
        return None;
    }
    Some(match port {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_connections_are_read_from_what_node_python_curl_and_go_say() {
        let cases = [
            (
                "Error: connect ECONNREFUSED 127.0.0.1:5432",
                Some("127.0.0.1:5432"),
                "connection refused",
            ),
            (
                "Error: getaddrinfo EAI_AGAIN api.example.com",
                Some("api.example.com"),
                "its name could not be resolved",
            ),
            (
                "ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 40123)",
                Some("127.0.0.1:40123"),
                "connection refused",
            ),
            (
                "requests.exceptions.ConnectionError: HTTPConnectionPool(host='10.0.0.8', port=8080): Max retries exceeded (Caused by NewConnectionError('[Errno 101] Network is unreachable'))",
                Some("10.0.0.8:8080"),
                "network is unreachable",
            ),
            (
                "urllib.error.URLError: <urlopen error [Errno 111] Connection refused>",
                None,
                "connection refused",
            ),
            (
                "curl: (6) Could not resolve host: example.org",
                Some("example.org"),
                "its name could not be resolved",
            ),
            (
                "Get \"https://x\": dial tcp 10.1.2.3:443: connect: network is unreachable",
                Some("10.1.2.3:443"),
                "network is unreachable",
            ),
        ];
        for (line, destination, symptom) in cases {
            let found = attempt(line).unwrap_or_else(|| panic!("nothing found in {line}"));
            assert_eq!(found.destination.as_deref(), destination, "{line}");
            assert_eq!(found.symptom, symptom, "{line}");
            assert!(is_notable(line));
        }
        assert_eq!(attempt("INFO listening on stdio"), None);
        assert!(is_notable(
            "PermissionError: [Errno 13] Permission denied: '/srv/a'"
        ));
        assert!(!is_notable("INFO all good"));
    }

    #[test]
    fn a_hostile_line_names_no_odd_destination() {
        for line in [
            "connect ECONNREFUSED \u{1b}[31mevil:443",
            "Connect call failed ('$(rm -rf ~)', 1)",
            "host='a b', port=1: Connection refused",
        ] {
            let found = attempt(line).expect("a failure is still seen");
            assert_eq!(found.destination, None, "{line}");
        }
        let long = format!("connect ECONNREFUSED {}:443", "a".repeat(300));
        assert_eq!(attempt(&long).and_then(|a| a.destination), None);
    }

    #[test]
    fn the_sentence_names_what_was_tried_and_the_key_that_allows_it() {
        let found = attempts([
            "Error: connect ECONNREFUSED 127.0.0.1:5432",
            "Error: connect ECONNREFUSED 127.0.0.1:5432",
            "urllib.error.URLError: <urlopen error [Errno 111] Connection refused>",
        ]);
        assert_eq!(found.len(), 2);
        assert_eq!(
            describe_attempts(&found),
            "it tried 127.0.0.1:5432 (connection refused)"
        );
        assert!(allow_hint(&found).ends_with("{\"network\": {\"allow\": [\"127.0.0.1:5432\"]}}"));
        let unnamed = attempts(["OSError: [Errno 101] Network is unreachable"]);
        assert_eq!(
            describe_attempts(&unnamed),
            "a connection it made failed (network is unreachable)"
        );
        assert!(allow_hint(&unnamed).contains("\"HOST:PORT\""));
    }
}
