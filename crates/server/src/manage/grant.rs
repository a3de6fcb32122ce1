//! Who may manage the servers through MCP (the `upstream_servers` tool). A caller without an
//! identity (no `auth` configured, the static `http.auth_token`, stdio, the control socket)
//! is the owner and needs no grant. A logged-in caller (`auth`) needs one: its subject in
//! `management.subjects` or one of its groups in `management.groups`; and no `scopes` rule
//! may name it (the tool lists and changes every server, hidden ones included). Every
//! refusal is a `server_change` record (`blocked`) under the caller's name.

use serde_json::{Map, Value, json};

use mcpproxy_activity::{ActivityRecord, IdentityRecord, RecordType, Source, Status};
use mcpproxy_support::quote;

use super::Manager;
use mcpproxy_config::ManagementConfig;

/// Why a logged-in caller may not manage the servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// Neither its subject nor any of its groups holds the grant.
    NoGrant,
    /// It holds the grant, but a `scopes` rule hides servers from it.
    Scoped,
}

/// Whether the caller (`identity`, `None` for the owner) may manage the servers; `scoped`:
/// a `scopes` rule names it.
pub fn check(
    settings: &ManagementConfig,
    identity: Option<&IdentityRecord>,
    scoped: bool,
) -> Result<(), Denied> {
    let Some(identity) = identity else {
        return Ok(());
    };
    if !settings.grants(&identity.subject, &identity.groups) {
        return Err(Denied::NoGrant);
    }
    if scoped {
        return Err(Denied::Scoped);
    }
    Ok(())
}

impl Denied {
    /// What the caller reads: what it lacks and who can grant it.
    pub fn message(self, identity: &IdentityRecord) -> String {
        let subject = quote(&identity.subject);
        match self {
            Denied::NoGrant => {
                let groups = if identity.groups.is_empty() {
                    "none".to_owned()
                } else {
                    identity
                        .groups
                        .iter()
                        .take(16)
                        .map(|g| quote(g))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                format!(
                    "upstream_servers is not available to '{subject}': managing the upstream \
                     servers needs the management grant, which a logged-in caller holds only when \
                     the config names its subject in management.subjects or one of its groups \
                     (yours: {groups}) in management.groups; ask the gateway's administrator for \
                     it. Nothing was changed."
                )
            }
            Denied::Scoped => format!(
                "upstream_servers is not available to '{subject}': a scopes rule hides servers \
                 from you, and the tool lists and changes every server; managing needs the \
                 management grant (management.subjects or management.groups) and no scopes rule \
                 naming you. Nothing was changed."
            ),
        }
    }
}

/// The operation a refused call asked for, as a record names it.
fn operation_word(arguments: &Map<String, Value>) -> &'static str {
    match arguments.get("operation").and_then(Value::as_str) {
        Some("list") => "list",
        Some("add") => "add",
        Some("remove") => "remove",
        Some("update" | "patch") => "update",
        Some("tail_log") => "tail_log",
        _ => "upstream_servers",
    }
}

impl Manager {
    /// Records the refusal of the `upstream_servers` call `arguments` by `identity`
    /// (`message`: what it was told).
    pub async fn record_refusal(
        &self,
        identity: &IdentityRecord,
        arguments: &Map<String, Value>,
        message: &str,
    ) {
        let server = arguments
            .get("name")
            .and_then(Value::as_str)
            .map(quote)
            .unwrap_or_default();
        let mut record = ActivityRecord::new(
            RecordType::ServerChange,
            Source::Mcp,
            server,
            operation_word(arguments),
        );
        record.status = Status::Blocked;
        record.error_message = Some(message.to_owned());
        record.identity = Some(identity.clone());
        record.details = Some(json!({"actor": "agent", "refused": "management grant"}));
        self.proxy.append(record).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(subject: &str, groups: &[&str]) -> IdentityRecord {
        IdentityRecord {
            subject: subject.to_owned(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        }
    }

    fn granting(subjects: &[&str], groups: &[&str]) -> ManagementConfig {
        ManagementConfig {
            subjects: subjects.iter().map(|s| (*s).to_owned()).collect(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ..ManagementConfig::default()
        }
    }

    #[test]
    fn the_owner_needs_no_grant_and_a_logged_in_caller_does() {
        let none = ManagementConfig::default();
        assert_eq!(check(&none, None, false), Ok(()));
        assert_eq!(
            check(&none, Some(&caller("alice", &["sre"])), false),
            Err(Denied::NoGrant)
        );
        let admins = granting(&["carol"], &["platform-admins"]);
        assert_eq!(
            check(&admins, Some(&caller("alice", &["platform-admins"])), false),
            Ok(())
        );
        assert_eq!(check(&admins, Some(&caller("carol", &[])), false), Ok(()));
        assert_eq!(
            check(
                &admins,
                Some(&caller("bob", &["dev", "Platform-Admins"])),
                false
            ),
            Err(Denied::NoGrant),
            "groups match exactly"
        );
        assert_eq!(
            check(&admins, Some(&caller("platform-admins", &[])), false),
            Err(Denied::NoGrant),
            "a subject named like a granted group is not in the group"
        );
        assert_eq!(
            check(&admins, Some(&caller("carol", &[])), true),
            Err(Denied::Scoped)
        );
    }

    #[test]
    fn the_refusal_names_the_grant_and_escapes_the_callers_names() {
        let message = Denied::NoGrant.message(&caller("bob\u{1b}[2J", &["dev\n"]));
        assert!(message.contains("management.groups"), "{message}");
        assert!(message.contains("management.subjects"), "{message}");
        assert!(!message.contains('\u{1b}'), "{message}");
        assert!(!message.contains('\n'), "{message}");
    }
}
