//! `approvals`: the classes of call that wait for a person, for every server, per server and
//! per tool glob; who is asked (`via`); how long a call waits (`timeout_secs`).

use std::collections::BTreeMap;
use std::time::Duration;

use super::Context;
use super::servers::check_server_name;
use crate::Result;
use crate::approvals::{
    ApprovalRule, ApprovalsConfig, CallClass, MAX_APPROVAL_SECS, ServerApprovals, Via, specificity,
};
use crate::raw::{RawApprovals, RawServerApprovals};

/// The most servers, and tool globs of one server, the section may name.
const MAX_ENTRIES: usize = 10_000;

pub(super) fn approvals_from(raw: RawApprovals, ctx: &Context<'_>) -> Result<ApprovalsConfig> {
    let mut config = ApprovalsConfig {
        rule: ApprovalRule {
            ask: classes(raw.ask, "approvals.ask", ctx)?,
            via: via(raw.via, "approvals.via", ctx)?,
        },
        ..ApprovalsConfig::default()
    };
    if let Some(secs) = raw.timeout_secs {
        let secs = ctx.range(
            "approvals.timeout_secs",
            secs,
            1,
            MAX_APPROVAL_SECS,
            " seconds",
        )?;
        config.timeout = Duration::from_secs(secs);
    }
    let servers = raw.servers.unwrap_or_default();
    if servers.len() > MAX_ENTRIES {
        return Err(ctx.err(
            "approvals.servers",
            format!("{} servers: name at most {MAX_ENTRIES}", servers.len()),
        ));
    }
    for (name, server) in servers {
        let key = format!("approvals.servers.{name}");
        check_server_name(&name).map_err(|why| ctx.err(&key, why))?;
        config.servers.insert(name, server_from(server, &key, ctx)?);
    }
    Ok(config)
}

fn server_from(raw: RawServerApprovals, key: &str, ctx: &Context<'_>) -> Result<ServerApprovals> {
    let rule = match (raw.ask, raw.via) {
        (None, None) => None,
        (ask, via_text) => Some(ApprovalRule {
            ask: match ask {
                Some(ask) => classes(Some(ask), &format!("{key}.ask"), ctx)?,
                None => Vec::new(),
            },
            via: via(via_text, &format!("{key}.via"), ctx)?,
        }),
    };
    let tools: BTreeMap<String, Vec<String>> = raw.tools.unwrap_or_default();
    if tools.len() > MAX_ENTRIES {
        return Err(ctx.err(
            &format!("{key}.tools"),
            format!("{} tool globs: name at most {MAX_ENTRIES}", tools.len()),
        ));
    }
    let mut globs = Vec::with_capacity(tools.len());
    for (glob, ask) in tools {
        let at = format!("{key}.tools.{glob}");
        if glob.is_empty() || glob.len() > 256 || glob.chars().any(char::is_control) {
            return Err(ctx.err(
                &at,
                "a tool glob is a tool name with `*` for any run of characters (e.g. \
                 \"purge_*\"), 1 to 256 characters, no control characters",
            ));
        }
        let ask = classes(Some(ask), &at, ctx)?;
        globs.push((glob, ApprovalRule { ask, via: None }));
    }
    globs.sort_by_key(|(glob, _)| specificity(glob));
    Ok(ServerApprovals { rule, tools: globs })
}

/// A list of call classes; a class named twice counts once.
fn classes(raw: Option<Vec<String>>, key: &str, ctx: &Context<'_>) -> Result<Vec<CallClass>> {
    let mut out = Vec::new();
    for (i, class) in raw.unwrap_or_default().iter().enumerate() {
        let class = match class.as_str() {
            "write" => CallClass::Write,
            "destructive" => CallClass::Destructive,
            other => {
                return Err(ctx.err(
                    &format!("{key}[{i}]"),
                    format!(
                        "'{}' is not a class of call that can wait for a person: use \"write\" \
                         or \"destructive\" (reads never wait)",
                        mcpproxy_support::quote(other)
                    ),
                ));
            }
        };
        if !out.contains(&class) {
            out.push(class);
        }
    }
    out.sort();
    Ok(out)
}

fn via(raw: Option<String>, key: &str, ctx: &Context<'_>) -> Result<Option<Via>> {
    match raw.as_deref() {
        None => Ok(None),
        Some("client") => Ok(Some(Via::Client)),
        Some("page") => Ok(Some(Via::Page)),
        Some(other) => Err(ctx.err(
            key,
            format!(
                "'{}' is not who is asked: use \"client\" (the person at the calling client when \
                 it can answer, else someone through `mcpproxy approvals` or the page) or \
                 \"page\" (never the client)",
                mcpproxy_support::quote(other)
            ),
        )),
    }
}
