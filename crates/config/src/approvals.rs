//! `approvals`: which calls wait for a person before they are sent. A rule lists the call
//! classes (`write`, `destructive`) that need one; rules are given for every server, per
//! server and per tool glob of a server, and the nearest rule wins (a tool's over its
//! server's over the top level). The proxy applies them; they live here as plain values.

use std::collections::BTreeMap;
use std::time::Duration;

/// A class of call a rule can ask about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CallClass {
    Write,
    Destructive,
}

impl CallClass {
    /// `write`, `destructive`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Destructive => "destructive",
        }
    }
}

/// Who is asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Via {
    /// The person at the calling client, when the client can answer (elicitation);
    /// otherwise someone else, through `mcpproxy approvals`, the REST API or the page.
    #[default]
    Client,
    /// Never the client: always a pending approval answered elsewhere.
    Page,
}

impl Via {
    /// `client`, `page`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Page => "page",
        }
    }
}

/// One rule: the classes that need a person, and who is asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalRule {
    pub ask: Vec<CallClass>,
    /// `None`: the enclosing rule's.
    pub via: Option<Via>,
}

/// A server's rules: its own (`None`: the top level's), and per tool glob, the most specific
/// first (see [`specificity`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerApprovals {
    pub rule: Option<ApprovalRule>,
    /// `(glob, rule)`: `*` matches any run of characters; of the globs that match a tool,
    /// the most specific wins (the first here).
    pub tools: Vec<(String, ApprovalRule)>,
}

/// `approvals` as configured. Default: no call waits for anyone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalsConfig {
    pub rule: ApprovalRule,
    pub servers: BTreeMap<String, ServerApprovals>,
    /// How long a call waits for an answer before it is refused.
    pub timeout: Duration,
}

/// The longest `timeout_secs` accepted: a day.
pub const MAX_APPROVAL_SECS: u64 = 86_400;

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self {
            rule: ApprovalRule::default(),
            servers: BTreeMap::new(),
            timeout: Duration::from_secs(300),
        }
    }
}

impl ApprovalsConfig {
    /// Whether a call of `class` to `server`'s `tool` needs a person, and who is asked:
    /// the nearest rule decides.
    pub fn needs_person(&self, server: &str, tool: &str, class: CallClass) -> Option<Via> {
        let (rule, server_via) = match self.servers.get(server) {
            Some(s) => {
                let server_rule = s.rule.as_ref().unwrap_or(&self.rule);
                let tool_rule = s.tools.iter().find(|(glob, _)| glob_matches(glob, tool));
                let via = server_rule.via.or(self.rule.via);
                (tool_rule.map_or(server_rule, |(_, rule)| rule), via)
            }
            None => (&self.rule, self.rule.via),
        };
        rule.ask
            .contains(&class)
            .then(|| rule.via.or(server_via).unwrap_or_default())
    }

    /// Whether any rule asks about anything (no rule: calls never wait).
    pub fn any(&self) -> bool {
        !self.rule.ask.is_empty()
            || self.servers.values().any(|s| {
                s.rule.as_ref().is_some_and(|r| !r.ask.is_empty())
                    || s.tools.iter().any(|(_, r)| !r.ask.is_empty())
            })
    }
}

/// How specific a tool glob is: more literal characters first (an exact name beats every
/// glob of it), then fewer `*`; ties by the text, so the order never depends on the file.
pub(crate) fn specificity(glob: &str) -> (std::cmp::Reverse<usize>, usize, String) {
    let stars = glob.matches('*').count();
    (
        std::cmp::Reverse(glob.len() - stars),
        stars,
        glob.to_owned(),
    )
}

/// Whether `name` matches `glob`, where `*` stands for any run of characters (none too).
pub fn glob_matches(glob: &str, name: &str) -> bool {
    let parts: Vec<&str> = glob.split('*').collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return glob == name;
    };
    if parts.len() == 1 {
        return glob == name;
    }
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(ask: &[CallClass], via: Option<Via>) -> ApprovalRule {
        ApprovalRule {
            ask: ask.to_vec(),
            via,
        }
    }

    #[test]
    fn globs_match_runs_of_characters() {
        for (glob, name, matches) in [
            ("purge_*", "purge_all", true),
            ("purge_*", "purge_", true),
            ("purge_*", "xpurge_all", false),
            ("*", "anything", true),
            ("drop_table", "drop_table", true),
            ("drop_table", "drop_tables", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "acb", false),
            ("*_all", "delete_all", true),
            ("ab*ba", "aba", false),
        ] {
            assert_eq!(glob_matches(glob, name), matches, "{glob} {name}");
        }
    }

    #[test]
    fn the_nearest_rule_wins() {
        use CallClass::{Destructive, Write};
        let mut config = ApprovalsConfig {
            rule: rule(&[Destructive], None),
            ..ApprovalsConfig::default()
        };
        config.servers.insert(
            "prod-db".into(),
            ServerApprovals {
                rule: Some(rule(&[Write, Destructive], Some(Via::Page))),
                tools: Vec::new(),
            },
        );
        config.servers.insert(
            "notes".into(),
            ServerApprovals {
                rule: Some(rule(&[], None)),
                tools: vec![("purge_*".into(), rule(&[Destructive], None))],
            },
        );
        assert!(config.any());
        assert_eq!(
            config.needs_person("github", "x", Destructive),
            Some(Via::Client)
        );
        assert_eq!(config.needs_person("github", "x", Write), None);
        assert_eq!(config.needs_person("prod-db", "q", Write), Some(Via::Page));
        assert_eq!(config.needs_person("notes", "delete", Destructive), None);
        assert_eq!(
            config.needs_person("notes", "purge_all", Destructive),
            Some(Via::Client)
        );
        assert!(!ApprovalsConfig::default().any());
        assert_eq!(
            ApprovalsConfig::default().needs_person("a", "b", Destructive),
            None
        );
    }
}
