//! Listing a server's tools: `tools/list` page by page, bounded, each malformed entry left
//! out on its own, each problem warned once ([`Warned`]); and which tool names can be listed.

use std::collections::HashSet;

use rmcp::model::{ClientRequest, CustomRequest};
use rmcp::service::{PeerRequestOptions, RoleClient};

use mcpproxy_policy::MAX_QUALIFIED_NAME_BYTES;
use mcpproxy_support::is_unprintable;

use super::convert::tool_from_wire;
use super::supervisor::CONNECT_TIMEOUT;
use mcpproxy_support::lock;

/// The most pages one listing reads; a server with more is listed up to there (warned).
const MAX_LIST_PAGES: usize = 1000;
/// The most tools one listing keeps; the rest are left out (warned).
const MAX_LISTED_TOOLS: usize = 100_000;

/// Warnings about a server's listings already given, so each is given once for as long as
/// the server is configured (across reconnections). Bounded: past [`Warned::MAX`]
/// different warnings it starts over.
#[derive(Default)]
pub(super) struct Warned(std::sync::Mutex<HashSet<u64>>);

impl Warned {
    const MAX: usize = 4096;

    /// Whether `message` was not warned before (and is now taken as warned).
    pub(super) fn first_time(&self, message: &str) -> bool {
        let key = hash_of(message);
        let mut seen = lock(&self.0);
        if seen.len() >= Self::MAX {
            seen.clear();
        }
        seen.insert(key)
    }

    /// Logs `message` about `server` as a warning, the first time only.
    fn warn(&self, server: &str, message: &str) {
        if self.first_time(message) {
            tracing::warn!(server, "tools/list: {message}");
        }
    }
}

/// The tools of one `tools/list` answer, and its `nextCursor` as sent. A page rmcp could
/// read as a whole is taken as it is (every entry a valid tool, every hint a boolean or
/// absent); any other is read entry by entry from its JSON ([`tool_from_wire`]), each
/// problem warned once. `position` counts the entries read so far, across pages.
fn read_page(
    result: rmcp::model::ServerResult,
    position: &mut usize,
    server: &str,
    warned: &Warned,
) -> Result<(Vec<rmcp::model::Tool>, Option<serde_json::Value>), String> {
    if let rmcp::model::ServerResult::ListToolsResult(page) = result {
        *position += page.tools.len();
        return Ok((page.tools, page.next_cursor.map(serde_json::Value::String)));
    }
    let mut result = serde_json::to_value(result)
        .map_err(|e| format!("tools/list answered with what cannot be read: {e}"))?;
    let Some(serde_json::Value::Array(entries)) =
        result.get_mut("tools").map(serde_json::Value::take)
    else {
        return Err(
            "tools/list failed: the answer has no `tools` list, so it is not a tools/list result"
                .to_owned(),
        );
    };
    let mut tools = Vec::with_capacity(entries.len());
    for entry in entries {
        *position += 1;
        let (tool, problems) = tool_from_wire(entry, *position);
        for problem in problems {
            warned.warn(server, &problem.to_string());
        }
        match tool {
            Ok(tool) => tools.push(tool),
            Err(problem) => warned.warn(server, &problem.to_string()),
        }
    }
    Ok((
        tools,
        result.get_mut("nextCursor").map(serde_json::Value::take),
    ))
}

/// A hash of `value`, to remember it without keeping it (the text is the upstream's).
fn hash_of<T: std::hash::Hash + ?Sized>(value: &T) -> u64 {
    use std::hash::Hasher;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// Lists the server's tools page by page with a `tools/list` request whose answer rmcp
/// hands back untyped when it cannot read it as a listing, then takes each entry of such a
/// page on its own ([`read_page`]): one malformed tool is left out, a hint of the wrong
/// type is dropped, each warned once, instead of rmcp's typed listing failing the whole
/// page, and with it every tool of the server. A page rmcp reads whole costs what it did. Pagination follows `nextCursor` up to [`MAX_LIST_PAGES`] pages and
/// [`MAX_LISTED_TOOLS`] tools, stopping at a cursor seen before; the whole listing has
/// [`CONNECT_TIMEOUT`].
pub(super) async fn list_tools(
    peer: &rmcp::service::Peer<RoleClient>,
    server: &str,
    warned: &Warned,
) -> Result<Vec<rmcp::model::Tool>, String> {
    let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
    let fetch = |cursor: Option<String>| async move {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err("tools/list did not answer".to_owned());
        }
        let params = cursor.map(|c| serde_json::json!({ "cursor": c }));
        let request = ClientRequest::CustomRequest(CustomRequest::new("tools/list", params));
        let answer = match peer
            .send_request_with_option(request, PeerRequestOptions::with_timeout(left))
            .await
        {
            Ok(handle) => handle.await_response().await,
            Err(e) => Err(e),
        };
        match answer {
            Ok(result) => Ok(result),
            Err(rmcp::ServiceError::Timeout { .. }) => Err("tools/list did not answer".to_owned()),
            Err(e) => Err(format!("tools/list failed: {e}")),
        }
    };
    list_pages(fetch, server, warned).await
}

/// Follows a listing's pages: `fetch` gets the page after a cursor (`None`: the first).
async fn list_pages<F, Fut>(
    mut fetch: F,
    server: &str,
    warned: &Warned,
) -> Result<Vec<rmcp::model::Tool>, String>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<rmcp::model::ServerResult, String>>,
{
    let mut tools = Vec::new();
    let mut cursors = HashSet::new();
    let mut cursor: Option<String> = None;
    let mut position = 0;
    for _ in 0..MAX_LIST_PAGES {
        let result = fetch(cursor.take()).await?;
        let (page, next) = read_page(result, &mut position, server, warned)?;
        for tool in page {
            if tools.len() == MAX_LISTED_TOOLS {
                warned.warn(
                    server,
                    &format!(
                        "the server lists more than {MAX_LISTED_TOOLS} tools; leaving out the rest"
                    ),
                );
                return Ok(tools);
            }
            tools.push(tool);
        }
        let next = match next {
            None | Some(serde_json::Value::Null) => return Ok(tools),
            Some(serde_json::Value::String(next)) => next,
            Some(_) => {
                warned.warn(
                    server,
                    "the answer's nextCursor is not a string; listing the pages read so far only",
                );
                return Ok(tools);
            }
        };
        if !cursors.insert(hash_of(next.as_str())) {
            warned.warn(
                server,
                "the server repeats a page cursor; listing the pages read so far only",
            );
            return Ok(tools);
        }
        cursor = Some(next);
    }
    warned.warn(
        server,
        &format!(
            "the server has more than {MAX_LIST_PAGES} pages of tools; listing the first {MAX_LIST_PAGES} only"
        ),
    );
    Ok(tools)
}

/// Whether a tool's name can be listed and called: printable (no control, bidirectional or
/// zero-width characters, which could forge what a terminal shows) and short enough that
/// `server:tool` fits [`MAX_QUALIFIED_NAME_BYTES`].
pub(super) fn is_listable_tool_name(server: &str, tool: &str) -> bool {
    !tool.is_empty()
        && server.len() + 1 + tool.len() <= MAX_QUALIFIED_NAME_BYTES
        && !tool.chars().any(is_unprintable)
}

#[cfg(test)]
mod tests;
