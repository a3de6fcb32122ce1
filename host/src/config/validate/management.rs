//! `management`: whether the `upstream_servers` tool is offered, whether servers may be
//! changed at all, and which logged-in callers (`subjects`, `groups`) hold the grant to
//! manage them through MCP. Subjects and groups follow the rule of `scopes`' names.

use super::Context;
use super::scopes::names;
use crate::config::raw::RawManagement;
use crate::config::{ManagementConfig, Result};

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
