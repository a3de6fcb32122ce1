//! `management`: whether the `upstream_servers` tool is offered, whether servers may be
//! changed at all, and which logged-in callers (`subjects`, `groups`) hold the grant to
//! manage them through MCP. Subjects and groups follow the rule of `scopes`' names.

use super::Context;
use super::scopes::names;
use crate::raw::RawManagement;
use crate::{ManagementConfig, Result};

pub(super) fn management_from(raw: RawManagement, ctx: &Context<'_>) -> Result<ManagementConfig> {
    let default = ManagementConfig::default();
    Ok(ManagementConfig {
        upstream_servers_tool: raw
            .upstream_servers_tool
            .unwrap_or(default.upstream_servers_tool),
        read_only: raw.read_only.unwrap_or(default.read_only),
        subjects: names(raw.subjects, "management.subjects", ctx)?,
        groups: names(raw.groups, "management.groups", ctx)?,
    })
}

#[cfg(test)]
mod tests {
    use crate::Config;

    #[test]
    fn grants_are_read_and_default_to_nobody() {
        let config = Config::from_json("{}", "t.json").expect("valid");
        assert!(config.management.subjects.is_empty());
        assert!(config.management.groups.is_empty());
        let config = Config::from_json(
            r#"{"management": {"groups": ["platform-admins"], "subjects": ["carol"]}}"#,
            "t.json",
        )
        .expect("valid");
        assert_eq!(config.management.groups, ["platform-admins"]);
        assert_eq!(config.management.subjects, ["carol"]);
        assert!(config.management.upstream_servers_tool);
    }

    #[test]
    fn a_grant_that_is_not_a_name_is_refused_naming_the_key() {
        for (text, key) in [
            (
                r#"{"management": {"groups": [""]}}"#,
                "management.groups[0]",
            ),
            (
                r#"{"management": {"subjects": ["ok", "a\u001b[2Jb"]}}"#,
                "management.subjects[1]",
            ),
            (r#"{"management": {"groups": "admins"}}"#, "management"),
        ] {
            let error = Config::from_json(text, "t.json")
                .expect_err(text)
                .to_string();
            assert!(error.contains(key), "{text}: {error}");
        }
    }
}
