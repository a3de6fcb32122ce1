//! A call refused by a rate limit, as MCP answers it: a JSON-RPC error (code
//! [`RATE_LIMITED_CODE`]) whose message names the limit and whose `data` says which limit,
//! which bucket and how many seconds to wait (`retry_after`). Over HTTP the `/mcp` gate
//! also answers `429 Too Many Requests` with `Retry-After`: it puts a [`RetryAfter`] slot
//! in each POST's extensions, the handler fills it, and the gate reads it once the answer
//! is there (a client that takes only event streams gets the error in the stream, with the
//! status already sent).

use std::sync::{Arc, Mutex};

use rmcp::ErrorData;
use rmcp::model::ErrorCode;
use rmcp::service::{RequestContext, RoleServer};
use serde_json::json;

use crate::proxy::{Limited, RATE_LIMITED_CODE};

/// Filled with the seconds to wait when the request's call was refused by a rate limit.
#[derive(Debug, Clone, Default)]
pub(super) struct RetryAfter(Arc<Mutex<Option<u64>>>);

impl RetryAfter {
    pub(super) fn seconds(&self) -> Option<u64> {
        *mcpproxy_support::lock(&self.0)
    }

    fn set(&self, seconds: u64) {
        *mcpproxy_support::lock(&self.0) = Some(seconds);
    }
}

/// The JSON-RPC error for `limited`; tells the HTTP gate, when there is one.
pub(super) fn rate_limited(limited: &Limited, context: &RequestContext<RoleServer>) -> ErrorData {
    if let Some(slot) = context
        .extensions
        .get::<::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<RetryAfter>())
    {
        slot.set(limited.retry_after);
    }
    ErrorData::new(
        ErrorCode(RATE_LIMITED_CODE),
        limited.message.clone(),
        Some(json!({
            "limit": limited.limit,
            "key": limited.key,
            "retry_after": limited.retry_after,
        })),
    )
}
