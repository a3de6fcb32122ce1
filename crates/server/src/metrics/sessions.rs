//! The sessions' metrics: open MCP sessions (counted while open, or read from an endpoint's
//! probe at each scrape) and open long-lived streams.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Metrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

/// Counts how many of something are open, by kind; the count goes down when the guard
/// [`Metrics::opened`] returns is dropped.
pub struct OpenGuard {
    gauge: Gauge,
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// Reads a count at scrape time (the HTTP sessions of an endpoint).
pub type Probe = Box<dyn Fn() -> usize + Send + Sync>;

/// What [`Metrics::opened`] counts.
#[derive(Debug, Clone, Copy)]
pub enum Open {
    /// An MCP session (`mcpproxy_sessions`).
    Session,
    /// A long-lived stream (`mcpproxy_open_streams`).
    Stream,
}

/// The families of this area, registered by [`SessionMetrics::register`].
pub(super) struct SessionMetrics {
    sessions: Family<KindLabels, Gauge>,
    session_probes: std::sync::Mutex<Vec<(String, Probe)>>,
    streams: Family<KindLabels, Gauge>,
}

impl SessionMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let sessions: Family<KindLabels, Gauge> = Family::default();
        registry.register(
            "sessions",
            "Open MCP sessions, by kind (http, stdio, socket: IDEs forwarded by another mcpproxy)",
            sessions.clone(),
        );
        let streams: Family<KindLabels, Gauge> = Family::default();
        registry.register(
            "open_streams",
            "Open long-lived streams, by kind (activity: the live feed of /api/v1/activity/stream)",
            streams.clone(),
        );
        Self {
            sessions,
            session_probes: std::sync::Mutex::default(),
            streams,
        }
    }
}

impl Metrics {
    /// One more open session (`kind`: `stdio`, `socket`) or stream (`activity`) until the
    /// guard is dropped.
    pub fn opened(&self, what: Open, kind: &str) -> OpenGuard {
        let family = match what {
            Open::Session => &self.sessions.sessions,
            Open::Stream => &self.sessions.streams,
        };
        let gauge = family
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .clone();
        gauge.inc();
        OpenGuard { gauge }
    }

    /// Sessions of `kind` counted by `probe` at each scrape (an HTTP endpoint's sessions).
    pub fn probe_sessions(&self, kind: &str, probe: Probe) {
        mcpproxy_support::lock(&self.sessions.session_probes).push((kind.to_owned(), probe));
    }
}

impl SessionMetrics {
    /// Sets the sessions each probe counts, just before a scrape.
    pub(super) fn read_probes(&self) {
        for (kind, probe) in mcpproxy_support::lock(&self.session_probes).iter() {
            let open = i64::try_from(probe()).unwrap_or(i64::MAX);
            self.sessions
                .get_or_create(&KindLabels { kind: kind.clone() })
                .set(open);
        }
    }
}
