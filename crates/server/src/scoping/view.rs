//! [`Scopes`] (the rules) and [`View`] (what one caller sees).

use std::collections::HashSet;
use std::sync::Arc;

use mcpproxy_config::ScopeRule;

/// The `scopes` rules in force.
#[derive(Debug, Default)]
pub struct Scopes {
    rules: Vec<ScopeRule>,
}

impl Scopes {
    pub fn new(rules: Vec<ScopeRule>) -> Self {
        Self { rules }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// What the caller `subject` in `groups` sees; `None` when no rule names them (they
    /// see everything).
    pub fn view(&self, subject: &str, groups: &[String]) -> Option<Arc<View>> {
        let mut view: Option<View> = None;
        for rule in self.rules.iter().filter(|rule| {
            rule.subjects.iter().any(|s| s == subject)
                || groups.iter().any(|g| rule.groups.contains(g))
        }) {
            let view = view.get_or_insert_with(View::default);
            view.hidden_servers
                .extend(rule.hide_servers.iter().cloned());
            view.hidden_tools.extend(rule.hide_tools.iter().cloned());
            if let Some(only) = &rule.only_servers {
                let only: HashSet<String> = only.iter().cloned().collect();
                // Every rule that names the caller narrows what they see.
                view.only = Some(match view.only.take() {
                    Some(before) => before.intersection(&only).cloned().collect(),
                    None => only,
                });
            }
        }
        view.map(Arc::new)
    }
}

/// What one caller sees: every server and tool except the hidden ones.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct View {
    hidden_servers: HashSet<String>,
    hidden_tools: HashSet<(String, String)>,
    /// When set, the only servers seen.
    only: Option<HashSet<String>>,
}

impl View {
    pub fn sees_server(&self, server: &str) -> bool {
        !self.hidden_servers.contains(server)
            && self.only.as_ref().is_none_or(|only| only.contains(server))
    }

    pub fn sees_tool(&self, server: &str, tool: &str) -> bool {
        self.sees_server(server)
            && !self
                .hidden_tools
                .contains(&(server.to_owned(), tool.to_owned()))
    }
}

/// What a caller is told of a tool it does not see, or that does not exist: the same
/// words for both, so the answer confirms nothing.
pub fn not_available(server: &str, tool: &str) -> String {
    format!(
        "Tool '{}:{}' is not available to this caller: it does not exist or is not offered to \
         you. Use retrieve_tools to find the tools you can call.",
        mcpproxy_support::quote(server),
        mcpproxy_support::quote(tool)
    )
}
