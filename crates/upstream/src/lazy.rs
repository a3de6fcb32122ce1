//! Lazy servers (`"start": "lazy"`): not started with mcpproxy, but by the first call that
//! needs them, and stopped again after `idle_stop_secs` without a call. While one is not
//! running its tools are the list it last gave, kept in its pins, so `retrieve_tools`
//! finds them from mcpproxy's first moment; a server never listed yet is started once to
//! learn them, then left to idle.
//!
//! A caller moves an idle (or failed) server to `connecting` itself before it wakes the
//! supervisor ([`Upstream::ensure_started`]), so its wait cannot mistake the state it found
//! for the answer to its wake; the supervisor takes a wake only in that state, so a stale
//! one does not start a server nobody asked for.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use mcpproxy_support::lock;

use super::{State, Upstream};
use crate::index::{ToolDoc, ToolIndex};

/// How a lazy server is used: who wants it started, how many requests it has in flight,
/// and when it was last used.
#[derive(Debug)]
pub(super) struct Usage {
    wanted: Notify,
    in_flight: AtomicUsize,
    last_used: std::sync::Mutex<Instant>,
}

impl Default for Usage {
    fn default() -> Self {
        Self {
            wanted: Notify::new(),
            in_flight: AtomicUsize::new(0),
            last_used: std::sync::Mutex::new(Instant::now()),
        }
    }
}

/// A request in flight on a lazy server: it is not stopped for idleness meanwhile, and its
/// end counts as a use.
pub(super) struct InFlight<'a>(&'a Upstream);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.usage.in_flight.fetch_sub(1, Ordering::AcqRel);
        *lock(&self.0.usage.last_used) = Instant::now();
    }
}

impl Upstream {
    pub(super) fn is_lazy(&self) -> bool {
        self.config.start.is_lazy()
    }

    /// For a lazy server, starts it if it is not running and waits (up to `timeout`) until
    /// it is ready or its start failed; the guard keeps it from being stopped while the
    /// request runs. Nothing for any other server.
    pub(super) async fn ensure_started(&self, timeout: Duration) -> Option<InFlight<'_>> {
        if !self.is_lazy() {
            return None;
        }
        self.usage.in_flight.fetch_add(1, Ordering::AcqRel);
        *lock(&self.usage.last_used) = Instant::now();
        let in_flight = InFlight(self);
        let deadline = Instant::now() + timeout;
        loop {
            match self.state() {
                State::Idle | State::Error(_) => {
                    self.state.send_replace(State::Connecting);
                    self.usage.wanted.notify_one();
                }
                State::Connecting | State::Disconnected => {}
                _ => return Some(in_flight),
            }
            let mut states = self.subscribe();
            let started = tokio::time::timeout_at(
                deadline,
                states.wait_for(|s| !matches!(s, State::Connecting | State::Disconnected)),
            )
            .await;
            // Stopped for idleness just as this request came: start it again.
            if started.is_err() || self.state() != State::Idle {
                return Some(in_flight);
            }
        }
    }

    /// Whether a lazy server has gone `idle_stop` without a request and has none in flight.
    pub(super) fn is_idle_now(&self) -> bool {
        self.usage.in_flight.load(Ordering::Acquire) == 0
            && lock(&self.usage.last_used).elapsed() >= self.config.start.idle_stop
    }

    /// How often a lazy server's supervisor looks whether it is idle.
    pub(super) fn idle_check_every(&self) -> Duration {
        (self.config.start.idle_stop / 4).clamp(Duration::from_millis(100), Duration::from_secs(30))
    }
}

/// Waits until a request wants the lazy server started; `true` when mcpproxy shuts down
/// first.
pub(super) async fn wait_until_wanted(upstream: &Upstream, shutdown: &CancellationToken) -> bool {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return true,
            _ = upstream.usage.wanted.notified() => {}
        }
        if upstream.state() == State::Connecting {
            return false;
        }
    }
}

/// For each lazy server of `upstreams` about to start whose pins hold its tools, publishes
/// those tools as its last listing gave them and marks it `idle`: the search index takes
/// them all in one commit (a commit costs milliseconds, whatever it holds, and 20 lazy
/// servers once cost 20 in a row at start). A server with no pins, or some of an earlier
/// format, stays `disconnected`: its supervisor starts it to list its tools.
pub(super) fn publish_pinned(upstreams: &[Arc<Upstream>], index: &ToolIndex) {
    let mut entries = Vec::new();
    for upstream in upstreams {
        if !upstream.is_lazy() || upstream.state() != State::Disconnected {
            continue;
        }
        let Some(listed) = pinned_listing(upstream) else {
            continue;
        };
        super::supervisor::store_listing(upstream, listed);
        entries.push((upstream, upstream.index_entry()));
    }
    if entries.is_empty() {
        return;
    }
    let docs: Vec<_> = entries.iter().map(|(_, entry)| entry.docs()).collect();
    let servers: Vec<(&str, &[ToolDoc<'_>])> = entries
        .iter()
        .zip(&docs)
        .map(|((upstream, _), docs)| (upstream.name(), docs.as_slice()))
        .collect();
    if let Err(e) = index.replace_servers(&servers) {
        tracing::warn!("cannot index the tools of idle lazy servers: {e}");
    }
    for (upstream, _) in &entries {
        upstream.state.send_replace(State::Idle);
    }
}

/// The tools the server's pins hold, as its last listing gave them; `None` when there are
/// no pins, or some of an earlier format.
fn pinned_listing(upstream: &Upstream) -> Option<Vec<rmcp::model::Tool>> {
    let pins = upstream.trust.server(upstream.name())?;
    if pins.tools.is_empty() {
        return None;
    }
    pins.tools
        .iter()
        .map(|(tool, pin)| {
            pin.as_listed(tool)
                .and_then(|value| serde_json::from_value::<rmcp::model::Tool>(value).ok())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::tool_from_mcp;

    /// A tool read back from its pin is the tool as pinned: its vetting finds it unchanged,
    /// so an idle server's tools are trusted as they were, never held as changed.
    #[test]
    fn a_tool_read_back_from_its_pin_matches_the_pin() {
        let listed = [
            json!({"name": "plain", "inputSchema": {"type": "object"}}),
            json!({
                "name": "write_file",
                "description": "Writes a file.",
                "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
                "outputSchema": {"type": "object"},
                "annotations": {"title": "Write", "destructiveHint": true, "readOnlyHint": false},
                "_meta": {"safety_class": "dangerous"}
            }),
            json!({"name": "empty_hints", "inputSchema": {"type": "object"}, "annotations": {}}),
        ];
        for wire in listed {
            let wire: rmcp::model::Tool = serde_json::from_value(wire).unwrap();
            let tool = tool_from_mcp("fx", &wire);
            let pin = mcpproxy_trust::PinnedTool::of(&tool, "2026-11-29T00:00:00Z");
            let back: rmcp::model::Tool =
                serde_json::from_value(pin.as_listed(&tool.name).unwrap()).unwrap();
            let back = tool_from_mcp("fx", &back);
            assert!(
                pin.matches(&back),
                "{} changed on the way back: {back:?}",
                tool.name
            );
            assert_eq!(back, tool);
        }
    }
}
