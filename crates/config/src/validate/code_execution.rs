//! `code_execution`: the switch of the `code_execution` tool and the ceilings of one script
//! (time, tool calls, memory) and of how many run at once.

use std::time::Duration;

use super::Context;
use crate::raw::RawCodeExecution;
use crate::{CodeExecutionConfig, Result};
use mcpproxy_policy::mib_to_bytes;

pub(super) fn code_execution_from(
    raw: RawCodeExecution,
    ctx: &Context<'_>,
) -> Result<CodeExecutionConfig> {
    type C = CodeExecutionConfig;
    let mut code = C::default();
    if let Some(enabled) = raw.enabled {
        code.enabled = enabled;
    }
    if let Some(ms) = raw.timeout_ms {
        let ms = ctx.range(
            "code_execution.timeout_ms",
            ms,
            1,
            C::MAX_TIMEOUT_MS,
            " milliseconds",
        )?;
        code.timeout = Duration::from_millis(ms);
    }
    if let Some(n) = raw.max_tool_calls {
        let n = ctx.range("code_execution.max_tool_calls", n, 0, C::MAX_TOOL_CALLS, "")?;
        code.max_tool_calls = u32::try_from(n).unwrap_or(u32::MAX);
    }
    if let Some(mib) = raw.memory_mib {
        let mib = ctx.range(
            "code_execution.memory_mib",
            mib,
            C::MIN_MEMORY_MIB,
            C::MAX_MEMORY_MIB,
            " MiB",
        )?;
        code.memory_bytes = mib_to_bytes(mib);
    }
    if let Some(n) = raw.max_concurrent {
        let n = ctx.range("code_execution.max_concurrent", n, 1, C::MAX_CONCURRENT, "")?;
        code.max_concurrent = u32::try_from(n).unwrap_or(u32::MAX);
    }
    Ok(code)
}
