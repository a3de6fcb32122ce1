//! `scopes`: rules that hide servers and tools from logged-in callers. Each rule names its
//! callers (`subjects`, `groups`) and what they do not see (`hide_servers`, `hide_tools` as
//! `server:tool`, `only_servers`). A rule that names nobody, or hides nothing, is refused:
//! it would be a mistake that looks like a protection.

use super::Context;
use super::servers::check_server_name;
use crate::raw::RawScope;
use crate::{Result, ScopeRule};

/// The most rules, and the most entries in one of a rule's lists.
const MAX_ENTRIES: usize = 1_000;
/// The longest subject, group or tool name.
const MAX_NAME_LEN: usize = 256;

pub(super) fn scopes_from(raw: Vec<RawScope>, ctx: &Context<'_>) -> Result<Vec<ScopeRule>> {
    if raw.len() > MAX_ENTRIES {
        return Err(ctx.err(
            "scopes",
            format!("{} rules: use at most {MAX_ENTRIES}", raw.len()),
        ));
    }
    raw.into_iter()
        .enumerate()
        .map(|(i, rule)| rule_from(rule, &format!("scopes[{i}]"), ctx))
        .collect()
}

fn rule_from(raw: RawScope, at: &str, ctx: &Context<'_>) -> Result<ScopeRule> {
    let key = |name: &str| format!("{at}.{name}");
    let subjects = names(raw.subjects, &key("subjects"), ctx)?;
    let groups = names(raw.groups, &key("groups"), ctx)?;
    if subjects.is_empty() && groups.is_empty() {
        return Err(ctx.err(
            at,
            "the rule names no callers: give \"subjects\" (token subjects) or \"groups\" \
             (from the token's groups claim), e.g. \"groups\": [\"contractors\"]",
        ));
    }
    let hide_servers = servers(raw.hide_servers, &key("hide_servers"), ctx)?;
    let only_servers = match raw.only_servers {
        Some(list) => Some(servers(Some(list), &key("only_servers"), ctx)?),
        None => None,
    };
    let hide_tools = list(raw.hide_tools, &key("hide_tools"), ctx)?
        .into_iter()
        .enumerate()
        .map(|(i, entry)| {
            let at = format!("{}[{i}]", key("hide_tools"));
            let Some((server, tool)) = entry.split_once(':') else {
                return Err(ctx.err(
                    &at,
                    format!(
                        "'{}' is not server:tool: name a tool with its server, e.g. \
                         github:delete_repo (hide a whole server with hide_servers)",
                        mcpproxy_support::quote(&entry)
                    ),
                ));
            };
            check_server_name(server).map_err(|why| ctx.err(&at, why))?;
            check_name(tool, &at, ctx)?;
            Ok((server.to_owned(), tool.to_owned()))
        })
        .collect::<Result<Vec<_>>>()?;
    if hide_servers.is_empty() && hide_tools.is_empty() && only_servers.is_none() {
        return Err(ctx.err(
            at,
            "the rule hides nothing: give \"hide_servers\", \"hide_tools\" (server:tool) or \
             \"only_servers\"",
        ));
    }
    Ok(ScopeRule {
        subjects,
        groups,
        hide_servers,
        hide_tools,
        only_servers,
    })
}

fn list(raw: Option<Vec<String>>, key: &str, ctx: &Context<'_>) -> Result<Vec<String>> {
    let list = raw.unwrap_or_default();
    if list.len() > MAX_ENTRIES {
        return Err(ctx.err(
            key,
            format!("{} entries: use at most {MAX_ENTRIES}", list.len()),
        ));
    }
    Ok(list)
}

pub(super) fn names(raw: Option<Vec<String>>, key: &str, ctx: &Context<'_>) -> Result<Vec<String>> {
    let list = list(raw, key, ctx)?;
    for (i, name) in list.iter().enumerate() {
        check_name(name, &format!("{key}[{i}]"), ctx)?;
    }
    Ok(list)
}

fn servers(raw: Option<Vec<String>>, key: &str, ctx: &Context<'_>) -> Result<Vec<String>> {
    let list = list(raw, key, ctx)?;
    for (i, name) in list.iter().enumerate() {
        check_server_name(name).map_err(|why| ctx.err(&format!("{key}[{i}]"), why))?;
    }
    Ok(list)
}

fn check_name(name: &str, key: &str, ctx: &Context<'_>) -> Result<()> {
    if name.is_empty() || name.len() > MAX_NAME_LEN || name.chars().any(char::is_control) {
        return Err(ctx.err(
            key,
            format!(
                "'{}' is not a name: use 1 to {MAX_NAME_LEN} characters, no control characters",
                mcpproxy_support::quote(name)
            ),
        ));
    }
    Ok(())
}
