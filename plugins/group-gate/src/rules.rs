//! The group gate's rules: which calls a rule covers and who may make them.
//!
//! Settings (`plugins.settings.group-gate`):
//!
//! ```json
//! {"rules": [{"servers": ["prod-db"], "operations": ["destructive"], "groups": ["sre"]}]}
//! ```
//!
//! A rule covers a call when every selector it gives matches: `servers` (server names,
//! `*` for any), `tools` (tool names on the server, `*` for any), `operations` (`read`,
//! `write`, `destructive`: the variant the caller used). A selector left out matches every
//! call. A covered call is let through only for a caller in one of the rule's `groups` or
//! `subjects`; every rule that covers a call must admit the caller. A caller who did not log
//! in is admitted by no rule. Calls no rule covers pass.

use serde::Deserialize;

/// Longest name quoted back in a message, in characters.
const MAX_QUOTED: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Operation {
    Read,
    Write,
    Destructive,
}

impl Operation {
    fn word(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Destructive => "destructive",
        }
    }
}

/// The call being judged.
pub(crate) struct Call<'a> {
    pub(crate) server: &'a str,
    pub(crate) tool: &'a str,
    pub(crate) operation: Operation,
}

/// Who asks.
pub(crate) struct Who {
    pub(crate) subject: String,
    pub(crate) groups: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    #[serde(default)]
    servers: Option<Vec<String>>,
    #[serde(default)]
    tools: Option<Vec<String>>,
    #[serde(default)]
    operations: Option<Vec<Operation>>,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    subjects: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Rules {
    #[serde(default)]
    rules: Vec<Rule>,
}

impl Rules {
    /// The rules in the plugin's settings (other keys are ignored: the proxy adds its own).
    /// `Err` says what is wrong, for the caller of a call the gate therefore refuses.
    pub(crate) fn parse(settings: &str) -> Result<Self, String> {
        let rules: Self = serde_json::from_str(settings).map_err(|e| {
            format!(
                "group-gate: its settings (plugins.settings.group-gate) cannot be read: {e}; \
                 every call is refused until they are fixed"
            )
        })?;
        for (i, rule) in rules.rules.iter().enumerate() {
            if rule.groups.is_empty() && rule.subjects.is_empty() {
                return Err(format!(
                    "group-gate: rule {} (plugins.settings.group-gate.rules[{i}]) names no \
                     groups and no subjects, so it would admit nobody; add \"groups\" or \
                     \"subjects\". Every call is refused until it is fixed",
                    i + 1
                ));
            }
        }
        Ok(rules)
    }

    /// `None` to let the call through, else why it is refused.
    pub(crate) fn judge(&self, call: &Call<'_>, who: Option<&Who>) -> Option<String> {
        let rule = self
            .rules
            .iter()
            .find(|rule| rule.covers(call) && !who.is_some_and(|who| rule.admits(who)))?;
        let kind = match &rule.operations {
            Some(_) => format!("{} calls", call.operation.word()),
            None => "calls".to_owned(),
        };
        let allowed = allowed_list(rule);
        Some(match who {
            None => format!(
                "group-gate: {kind} to '{}:{}' are only for {allowed}, and this caller did not \
                 log in; connect with an access token of the proxy's issuer",
                quoted(call.server),
                quoted(call.tool)
            ),
            Some(who) => format!(
                "group-gate: {kind} to '{}:{}' are only for {allowed}; '{}' is not (groups: \
                 {}). Ask an operator for access, or use a read-only tool",
                quoted(call.server),
                quoted(call.tool),
                quoted(&who.subject),
                if who.groups.is_empty() {
                    "none".to_owned()
                } else {
                    who.groups
                        .iter()
                        .map(|g| quoted(g))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
        })
    }
}

impl Rule {
    fn covers(&self, call: &Call<'_>) -> bool {
        let named = |list: &Option<Vec<String>>, name: &str| {
            list.as_ref()
                .is_none_or(|list| list.iter().any(|n| n == "*" || n == name))
        };
        named(&self.servers, call.server)
            && named(&self.tools, call.tool)
            && self
                .operations
                .as_ref()
                .is_none_or(|ops| ops.contains(&call.operation))
    }

    fn admits(&self, who: &Who) -> bool {
        self.subjects.contains(&who.subject) || who.groups.iter().any(|g| self.groups.contains(g))
    }
}

fn allowed_list(rule: &Rule) -> String {
    let mut parts = Vec::new();
    if !rule.groups.is_empty() {
        parts.push(format!("group {}", rule.groups.join(", ")));
    }
    if !rule.subjects.is_empty() {
        parts.push(format!("subject {}", rule.subjects.join(", ")));
    }
    parts.join(" or ")
}

/// `text` cut to [`MAX_QUOTED`] characters, control characters replaced: names come from
/// tokens and upstreams.
fn quoted(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(MAX_QUOTED)
        .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
        .collect();
    if text.chars().count() > MAX_QUOTED {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTINGS: &str = r#"{"rules": [{"servers": ["prod-db"], "operations": ["destructive"], "groups": ["sre"]}], "strict_server_validation": true}"#;

    fn who(subject: &str, groups: &[&str]) -> Who {
        Who {
            subject: subject.into(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        }
    }

    fn call(server: &'static str, operation: Operation) -> Call<'static> {
        Call {
            server,
            tool: "drop_table",
            operation,
        }
    }

    #[test]
    fn a_covered_call_passes_for_the_group_only() {
        let rules = Rules::parse(SETTINGS).unwrap();
        let destructive = call("prod-db", Operation::Destructive);
        assert_eq!(
            rules.judge(&destructive, Some(&who("alice", &["sre"]))),
            None
        );
        let refused = rules
            .judge(&destructive, Some(&who("bob", &["dev"])))
            .unwrap();
        assert!(refused.contains("only for group sre"), "{refused}");
        assert!(
            rules
                .judge(&destructive, None)
                .unwrap()
                .contains("did not log in")
        );
        // Calls no rule covers pass for anyone.
        assert_eq!(rules.judge(&call("prod-db", Operation::Read), None), None);
        assert_eq!(
            rules.judge(&call("staging", Operation::Destructive), None),
            None
        );
    }

    #[test]
    fn a_rule_that_admits_nobody_is_refused() {
        let e = Rules::parse(r#"{"rules": [{"servers": ["x"]}]}"#).unwrap_err();
        assert!(e.contains("names no groups and no subjects"), "{e}");
        assert!(Rules::parse(r#"{"rules": [{"groups": ["a"], "typo": 1}]}"#).is_err());
    }
}
