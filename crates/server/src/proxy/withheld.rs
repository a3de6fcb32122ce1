//! What the tool listings leave out, said in a word: servers quarantined or not started
//! until a person approves them, and tools held back since they are new or changed. The
//! listings (`retrieve_tools`, `mcpproxy tools list|search`) never show these tools; this
//! counts and names them, and says how a person approves them.

use serde::Serialize;

use mcpproxy_upstream::{ServerStatus, State};

/// The servers and tools that wait for a person's approval.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Withheld {
    /// Servers quarantined (or whose launch is not approved): none of their tools is listed.
    pub servers: Vec<WithheldServer>,
    /// Tools held back on servers that are otherwise trusted, as `server:tool`.
    pub tools: Vec<String>,
}

/// A server none of whose tools is listed until it is approved.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct WithheldServer {
    pub name: String,
    /// How many tools it lists (0 when it is not started).
    pub tools: usize,
    /// Not started: how it starts waits for approval.
    pub not_started: bool,
}

impl Withheld {
    /// What `statuses` withhold; with `server`, only what that server withholds.
    pub fn of(statuses: &[ServerStatus], server: Option<&str>) -> Self {
        let mut withheld = Self::default();
        for status in statuses
            .iter()
            .filter(|s| server.is_none_or(|name| name == s.name))
        {
            if matches!(status.state, State::Disabled) {
                continue;
            }
            let not_started = matches!(status.state, State::Unapproved);
            if status.quarantined || not_started {
                withheld.servers.push(WithheldServer {
                    name: status.name.clone(),
                    tools: status.tools,
                    not_started,
                });
            } else {
                withheld.tools.extend(
                    status
                        .pending
                        .iter()
                        .map(|tool| format!("{}:{tool}", status.name)),
                );
            }
        }
        withheld
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty() && self.tools.is_empty()
    }

    /// One paragraph for a person or an agent: what waits and how a person approves it
    /// (names escaped, at most ten of each named).
    pub fn note(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let names = |items: &mut dyn Iterator<Item = String>, count: usize| {
            let mut shown: Vec<String> = items.take(10).collect();
            if count > 10 {
                shown.push(format!("and {} more", count - 10));
            }
            shown.join(", ")
        };
        let mut parts = Vec::new();
        if !self.servers.is_empty() {
            let count = self.servers.len();
            let listed: usize = self.servers.iter().map(|s| s.tools).sum();
            parts.push(format!(
                "{count} server{} wait{} for approval ({}; {listed} tool{} not shown)",
                plural(count),
                if count == 1 { "s" } else { "" },
                names(
                    &mut self
                        .servers
                        .iter()
                        .map(|s| mcpproxy_support::quote(&s.name)),
                    count
                ),
                plural(listed),
            ));
        }
        if !self.tools.is_empty() {
            let count = self.tools.len();
            parts.push(format!(
                "{count} tool{} held back since new or changed ({})",
                plural(count),
                names(
                    &mut self.tools.iter().map(|t| mcpproxy_support::quote(t)),
                    count
                )
            ));
        }
        let example = self
            .servers
            .first()
            .map(|s| mcpproxy_support::quote(&s.name))
            .or_else(|| {
                self.tools
                    .first()
                    .and_then(|t| t.split(':').next())
                    .map(mcpproxy_support::quote)
            })
            .unwrap_or_default();
        Some(format!(
            "{}. A person reviews them with `mcpproxy upstream inspect {example}` and approves \
             with `mcpproxy upstream approve {example}` (or on the web page); until then they \
             are not listed and cannot be called.",
            parts.join("; ")
        ))
    }
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpproxy_upstream::TransportKind;

    fn status(name: &str, state: State, quarantined: bool, pending: &[&str]) -> ServerStatus {
        ServerStatus {
            name: name.to_owned(),
            transport: TransportKind::Stdio,
            state,
            tools: 3,
            quarantined,
            pending: pending.iter().map(|t| (*t).to_owned()).collect(),
            sandbox: None,
        }
    }

    #[test]
    fn quarantined_servers_and_held_tools_are_counted_and_named() {
        let statuses = vec![
            status("mem", State::Ready, true, &[]),
            status("fs", State::Ready, false, &["write_file"]),
            status("off", State::Disabled, true, &[]),
            status("ok", State::Ready, false, &[]),
        ];
        let withheld = Withheld::of(&statuses, None);
        assert_eq!(withheld.servers.len(), 1);
        assert_eq!(withheld.tools, vec!["fs:write_file"]);
        let note = withheld.note().unwrap();
        assert!(
            note.starts_with(
                "1 server waits for approval (mem; 3 tools not shown); 1 tool held back since \
                 new or changed (fs:write_file). A person reviews them with `mcpproxy upstream \
                 inspect mem`"
            ),
            "{note}"
        );
        assert_eq!(Withheld::of(&statuses, Some("ok")).note(), None);
        assert_eq!(Withheld::of(&statuses, Some("mem")).servers[0].name, "mem");
    }
}
