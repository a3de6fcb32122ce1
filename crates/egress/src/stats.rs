//! What one server's egress proxy carried and refused since mcpproxy started it: for
//! `upstream inspect`, the REST status and the page.

use serde::{Deserialize, Serialize};

use super::{EgressEvent, Outcome};

/// The most recent refusals kept per server.
const RECENT_REFUSALS: usize = 5;

/// Counts since the server's first start in this mcpproxy, and its latest refusals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressStats {
    /// The destinations allowed (`api.github.com:443`).
    pub allow: Vec<String>,
    pub connected: u64,
    pub refused: u64,
    pub failed: u64,
    /// Bytes from the server out, and back in.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Connections counted here but never recorded: the queue to the journal was full.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unrecorded: u64,
    /// The latest refusals and failures, newest last: destination and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent_refusals: Vec<Refused>,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// One refused or failed connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    pub destination: String,
    pub why: String,
}

impl EgressStats {
    /// Counts `event` in.
    pub fn count(&mut self, event: &EgressEvent) {
        self.bytes_sent += event.sent;
        self.bytes_received += event.received;
        let why = match &event.outcome {
            Outcome::Connected => {
                self.connected += 1;
                return;
            }
            Outcome::Refused(why) => {
                self.refused += 1;
                why
            }
            Outcome::Failed(why) => {
                self.failed += 1;
                why
            }
        };
        if self.recent_refusals.len() == RECENT_REFUSALS {
            self.recent_refusals.remove(0);
        }
        self.recent_refusals.push(Refused {
            destination: event.destination(),
            why: why.chars().take(512).collect(),
        });
    }

    /// One paragraph for `upstream inspect`.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "Egress: allows {}; {} connection(s) carried, {} refused, {} failed since start; {} bytes out, {} bytes in",
            if self.allow.is_empty() {
                "nothing".to_owned()
            } else {
                self.allow.join(", ")
            },
            self.connected,
            self.refused,
            self.failed,
            self.bytes_sent,
            self.bytes_received
        );
        if self.unrecorded > 0 {
            text.push_str(&format!(
                "; {} connection(s) not recorded (the journal did not keep up)",
                self.unrecorded
            ));
        }
        for refused in &self.recent_refusals {
            text.push_str(&format!(
                "\n  refused {}: {}",
                mcpproxy_support::quote(&refused.destination),
                mcpproxy_support::quote(&refused.why)
            ));
        }
        text
    }
}
