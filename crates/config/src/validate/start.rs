//! `start` and `idle_stop_secs`, at the top level (every server's default) and in a server
//! (its own, each key given there wins).

use std::time::Duration;

use super::Context;
use crate::Result;
use crate::start::{MAX_IDLE_STOP_SECS, Start, StartMode};

/// The `start` of `prefix` (`""` at the top level, `mcpServers[0].` in a server) from its
/// keys, with `default` for what they leave out.
pub(super) fn start_from(
    mode: Option<&str>,
    idle_stop_secs: Option<u64>,
    default: &Start,
    prefix: &str,
    ctx: &Context<'_>,
) -> Result<Start> {
    let mode = match mode {
        None => default.mode,
        Some(text) => StartMode::parse(text).ok_or_else(|| {
            ctx.err(
                &format!("{prefix}start"),
                format!(
                    "'{}' is not a start mode: use 'eager' (started with mcpproxy, kept running) or 'lazy' (started by its first call, stopped after idle_stop_secs without one)",
                    mcpproxy_support::quote(text)
                ),
            )
        })?,
    };
    let idle_stop = match idle_stop_secs {
        None => default.idle_stop,
        Some(secs) => Duration::from_secs(ctx.range(
            &format!("{prefix}idle_stop_secs"),
            secs,
            1,
            MAX_IDLE_STOP_SECS,
            " seconds (a week)",
        )?),
    };
    Ok(Start { mode, idle_stop })
}
