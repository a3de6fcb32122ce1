//! One upstream server ([`Upstream`]): its configuration, its session's peer, its tools as
//! listed and as vetted, its stderr log, and what status displays show of it. Requests to
//! it are in `requests`; the task that keeps its session is `supervisor`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rmcp::service::{Peer, RoleClient};
use tokio::sync::{Notify, mpsc, watch};

use crate::back_channel::BackChannel;
use crate::index::ToolIndex;
use mcpproxy_config::{ServerConfig, UpstreamConfig};
use mcpproxy_policy::Tool;
use mcpproxy_trust::{Review, Standing, ToolStanding, TrustStore};

use super::{Error, ServerStatus, State, ToolChange, TransportKind, lane, log};
use mcpproxy_support::{lock, read_lock as read};

/// A server's tools as it listed them: in its order, found by name. Each is kept as its
/// JSON text (a tool's schemas as `serde_json` maps cost about ten times their text, and
/// this listing is read only by the direct endpoint) and parsed when it is read.
#[derive(Debug, Default)]
pub struct WireTools {
    tools: Vec<WireTool>,
    position: std::collections::HashMap<String, usize>,
}

/// One listed tool: its name and the tool as JSON text.
#[derive(Debug, PartialEq)]
struct WireTool {
    name: String,
    json: Box<str>,
}

impl WireTools {
    pub fn new(tools: Vec<rmcp::model::Tool>) -> Self {
        let tools: Vec<WireTool> = tools
            .iter()
            .filter_map(|tool| {
                // An rmcp tool always serialises (its maps have string keys).
                let json = serde_json::to_string(tool).ok()?.into_boxed_str();
                Some(WireTool {
                    name: tool.name.to_string(),
                    json,
                })
            })
            .collect();
        let position = tools
            .iter()
            .enumerate()
            .map(|(at, t)| (t.name.clone(), at))
            .collect();
        Self { tools, position }
    }

    /// The tool `name`, as the server sent it.
    pub fn get(&self, name: &str) -> Option<rmcp::model::Tool> {
        let at = *self.position.get(name)?;
        self.tools.get(at).and_then(WireTool::parse)
    }

    /// The tools, in the server's order.
    pub fn iter(&self) -> impl Iterator<Item = rmcp::model::Tool> + '_ {
        self.tools.iter().filter_map(WireTool::parse)
    }

    /// Whether both hold the same tools, in the same order.
    pub fn same_tools(&self, other: &Self) -> bool {
        self.tools == other.tools
    }
}

impl WireTool {
    /// The text was written from an rmcp tool, so it reads back as one.
    fn parse(&self) -> Option<rmcp::model::Tool> {
        serde_json::from_str(&self.json).ok()
    }
}

/// One upstream server.
pub struct Upstream {
    pub(super) config: ServerConfig,
    pub(super) settings: UpstreamConfig,
    pub(super) default_timeout: Duration,
    pub(super) state: watch::Sender<State>,
    /// The current connection and what the server said in it, swapped whole on reconnect
    /// so a reader never sees the peer of one session with the capabilities of another.
    pub(super) session: RwLock<Arc<ServerSession>>,
    pub(super) tools: RwLock<Arc<BTreeMap<String, Tool>>>,
    /// The same tools as the server sent them (title, icons, outputSchema, ...), for
    /// clients that see the server as it is (the direct endpoint, `retrieve_tools`).
    pub(super) wire_tools: RwLock<Arc<WireTools>>,
    pub(super) refresh: Notify,
    /// Quarantined now: its launch spec or its calls are not approved.
    pub(super) quarantined: AtomicBool,
    /// Where it stood against the approvals when it was launched.
    pub(super) standing: Standing,
    /// The last listing held against the pins.
    pub(super) review: RwLock<Arc<Review>>,
    pub(super) trust: Arc<TrustStore>,
    pub(super) index: Arc<ToolIndex>,
    pub(super) changes: mpsc::UnboundedSender<ToolChange>,
    /// Held-back tools already reported, with the fingerprint reported (a change is recorded
    /// once, not at every refresh).
    pub(super) reported: std::sync::Mutex<BTreeMap<String, String>>,
    /// The server's recent stderr lines (stdio servers).
    pub(super) log: std::sync::Mutex<log::Ring>,
    /// What its sandbox found it must read at its last launch, beyond what the config grants
    /// (its install tree, its interpreter's prefix, its working directory).
    pub(super) inferred_reads: std::sync::Mutex<Vec<String>>,
    /// What its egress proxy carried and refused (`"network": {"allow": [...]}`).
    pub(super) egress: std::sync::Mutex<mcpproxy_egress::EgressStats>,
    /// Where its egress proxy reports each connection (for the journal and the metrics).
    pub(super) egress_events: mpsc::Sender<mcpproxy_egress::EgressEvent>,
    /// Routes from this server back to the clients whose calls it serves.
    pub(super) back_channel: Arc<BackChannel>,
    /// Where `${secret:NAME}` values (and OAuth tokens) are kept.
    pub(super) credentials: mcpproxy_auth::credentials::CredentialStore,
    /// Paths no sandbox grant may reach (the data dir, the config file).
    pub(super) forbidden_paths: Arc<[mcpproxy_sandbox::ForbiddenPath]>,
    /// Its package launcher's caches (`npx -y`, `uvx`), under the data dir.
    pub(super) launcher_cache: std::path::PathBuf,
    /// The last `401`/`403` challenge the server's HTTP client met (cleared by a login).
    pub(super) challenge: Arc<crate::oauth::ChallengeSlot>,
    /// Woken when a login to the server finishes (or its tokens are forgotten).
    pub(super) login_done: Notify,
    /// Who wants a lazy server started, and when it was last used.
    pub(super) usage: super::lazy::Usage,
}

/// What one connection to a server is. While the server is not connected its `peer` and
/// `lane` are `None` and the rest is what the last connection said.
#[derive(Clone, Default)]
pub(super) struct ServerSession {
    pub(super) peer: Option<Peer<RoleClient>>,
    /// The call lane, when it is a stdio session that began with `initialize` (requests of
    /// 2026-07-28 carry per-request metadata only rmcp adds).
    pub(super) lane: Option<lane::Lane>,
    /// What the server offers besides tools (prompts, resources, ...), from its
    /// `initialize` answer.
    pub(super) capabilities: Option<rmcp::model::ServerCapabilities>,
    /// The protocol versions the server listed in `server/discover` (2026-07-28 and later);
    /// empty for a server that does not answer it.
    pub(super) discovered_versions: Vec<rmcp::model::ProtocolVersion>,
}

impl ServerSession {
    /// The same session with its connection gone (what it said is kept).
    pub(super) fn disconnected(&self) -> Self {
        Self {
            peer: None,
            lane: None,
            capabilities: self.capabilities.clone(),
            discovered_versions: self.discovered_versions.clone(),
        }
    }
}

impl Upstream {
    /// The current session.
    pub(super) fn session(&self) -> Arc<ServerSession> {
        read(&self.session).clone()
    }

    /// Replaces the current session.
    pub(super) fn set_session(&self, session: ServerSession) {
        *mcpproxy_support::write_lock(&self.session) = Arc::new(session);
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// A snapshot for status displays.
    pub fn status(&self) -> ServerStatus {
        let quarantined = self.is_quarantined();
        ServerStatus {
            name: self.config.name.clone(),
            transport: TransportKind::from(&self.config.transport),
            state: self.state(),
            tools: self.tools().len(),
            quarantined,
            pending: if quarantined {
                Vec::new()
            } else {
                self.review()
                    .pending()
                    .map(|(name, _)| name.to_owned())
                    .collect()
            },
            sandbox: (TransportKind::from(&self.config.transport) == TransportKind::Stdio).then(
                || {
                    super::sandbox::SandboxStatus::of(
                        &self.config.isolation,
                        &self.forbidden_paths,
                        self.inferred_reads(),
                        self.egress_stats(),
                    )
                },
            ),
        }
    }

    /// What its sandbox granted to read at its last launch without the config naming it.
    pub fn inferred_reads(&self) -> Vec<String> {
        lock(&self.inferred_reads).clone()
    }

    /// What its egress proxy carried and refused since mcpproxy started; `None` when its
    /// network is not a list of destinations.
    pub fn egress_stats(&self) -> Option<mcpproxy_egress::EgressStats> {
        let stats = lock(&self.egress).clone();
        // The allow-list its last launch got (a launcher's registries included), else the
        // config's.
        if !stats.allow.is_empty() {
            return Some(stats);
        }
        let allow = self.config.isolation.network.egress()?;
        Some(mcpproxy_egress::EgressStats {
            allow: allow.rules().iter().map(ToString::to_string).collect(),
            ..stats
        })
    }

    /// Counts a connection of its egress proxy and passes it on to be recorded; a full
    /// queue drops the record and the metric (the server's stats still count it, and how
    /// many were dropped), warning at the 1st, 2nd, 4th, 8th... drop so a flood of
    /// connections cannot flood the log either.
    pub(super) fn egress_event(&self, event: mcpproxy_egress::EgressEvent) {
        lock(&self.egress).count(&event);
        if let Err(mpsc::error::TrySendError::Full(event)) = self.egress_events.try_send(event) {
            let dropped = {
                let mut stats = lock(&self.egress);
                stats.unrecorded += 1;
                stats.unrecorded
            };
            if dropped.is_power_of_two() {
                tracing::warn!(
                    server = %event.server,
                    "{dropped} egress record(s) dropped: the journal is not keeping up with this server's connections"
                );
            }
        }
    }

    /// What its sandbox refused lately, from its stderr and its egress proxy, with the
    /// `isolation` keys that would allow it.
    pub fn refusals(&self) -> super::refusals::Refusals {
        let (lines, _) = lock(&self.log).tail(200);
        let egress = self.egress_stats();
        super::refusals::Refusals::find(
            lines.iter().map(|l| l.line.as_str()),
            egress.as_ref(),
            &self.forbidden_paths,
        )
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The server's last `lines` stderr lines, oldest first, and how many it ever wrote.
    pub fn recent_log(&self, lines: usize) -> (Vec<log::LogLine>, u64) {
        lock(&self.log).tail(lines)
    }

    pub(super) fn log_line(&self, line: &str) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        lock(&self.log).push(line, now);
    }

    pub fn state(&self) -> State {
        self.state.borrow().clone()
    }

    /// Waits for the state to change (for startup summaries and tests).
    pub fn subscribe(&self) -> watch::Receiver<State> {
        self.state.subscribe()
    }

    /// The tool as the server describes it now.
    pub fn tool(&self, name: &str) -> Option<Tool> {
        read(&self.tools).get(name).cloned()
    }

    /// A tool as the server sent it.
    pub fn wire_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        read(&self.wire_tools).get(name)
    }

    /// The tools as the server sent them, in the order it listed them.
    pub fn wire_tools(&self) -> Arc<WireTools> {
        read(&self.wire_tools).clone()
    }

    pub fn tools(&self) -> Arc<BTreeMap<String, Tool>> {
        read(&self.tools).clone()
    }

    /// Whether the server is quarantined now (until a person approves it).
    pub fn is_quarantined(&self) -> bool {
        self.quarantined.load(Ordering::Acquire)
    }

    /// Where it stood against the approvals when it was launched (an approval since then
    /// may have cleared its quarantine: see [`Upstream::is_quarantined`]).
    pub fn standing(&self) -> &Standing {
        &self.standing
    }

    /// The last listing held against the pins.
    pub fn review(&self) -> Arc<Review> {
        read(&self.review).clone()
    }

    /// Whether `tool` may be searched and called: listed, pinned and unchanged, on a server
    /// that is not quarantined.
    pub fn is_trusted(&self, tool: &str) -> bool {
        !self.is_quarantined() && self.review().is_trusted(tool)
    }

    /// The tools that may be searched and called.
    pub fn trusted_tools(&self) -> Vec<Tool> {
        if self.is_quarantined() {
            return Vec::new();
        }
        let review = self.review();
        self.tools()
            .values()
            .filter(|t| review.standing(&t.name) == Some(&ToolStanding::Trusted))
            .cloned()
            .collect()
    }

    /// The challenge that asks for a login, when the server gave one and a login can answer
    /// it: OAuth is not turned off, and no `Authorization` header of the config is what
    /// the server refused.
    pub fn needs_login(&self) -> Option<crate::oauth::Challenge> {
        let mcpproxy_config::Transport::Http { headers, .. } = &self.config.transport else {
            return None;
        };
        if self.config.oauth.disabled
            || headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("authorization"))
        {
            return None;
        }
        self.challenge.get()
    }

    /// The server's `oauth.client_secret` with its `${env:}`/`${secret:}` reference
    /// resolved; `None` when it has none.
    pub(super) fn client_secret(
        &self,
    ) -> Result<Option<mcpproxy_auth::credentials::Secret>, String> {
        self.config
            .oauth
            .client_secret
            .as_deref()
            .map(|value| {
                mcpproxy_auth::credentials::references::resolve(value, &self.credentials)
                    .map_err(|e| format!("oauth.client_secret: {e}"))
            })
            .transpose()
    }

    /// Whether the server is usable at all (not disabled, not quarantined).
    pub fn check_usable(&self) -> Result<(), Error> {
        if !self.config.enabled {
            return Err(Error::Disabled {
                server: self.config.name.clone(),
            });
        }
        if self.is_quarantined() {
            return Err(Error::Quarantined {
                server: self.config.name.clone(),
            });
        }
        if let State::LoginRequired(reason) = self.state() {
            return Err(Error::LoginRequired {
                server: self.config.name.clone(),
                reason,
            });
        }
        Ok(())
    }

    /// The deadline of a call: the one asked for, else the server's, else the default.
    pub fn call_timeout(&self, requested: Option<Duration>) -> Duration {
        requested
            .or(self.config.tool_call_timeout)
            .unwrap_or(self.default_timeout)
    }

    /// Waits while the server is still connecting (as just after start), up to `timeout`;
    /// returns at once in any other state. `true` when it is ready.
    pub async fn wait_while_connecting(&self, timeout: Duration) -> bool {
        let mut states = self.subscribe();
        let _ = tokio::time::timeout(
            timeout,
            states.wait_for(|s| !matches!(s, State::Disconnected | State::Connecting)),
        )
        .await;
        matches!(self.state(), State::Ready)
    }

    /// What the server offers besides tools, from its `initialize` answer (`None` before
    /// the first connection).
    pub fn capabilities(&self) -> Option<rmcp::model::ServerCapabilities> {
        self.session().capabilities.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::WireTools;
    use std::sync::Arc;

    fn wire(name: &str, schema: serde_json::Value) -> rmcp::model::Tool {
        let serde_json::Value::Object(schema) = schema else {
            panic!("a schema is an object");
        };
        let mut tool = rmcp::model::Tool::new(name.to_owned(), "does things", Arc::new(schema));
        tool.title = Some("A title".into());
        tool
    }

    #[test]
    fn the_listing_reads_back_each_tool_as_sent_in_the_servers_order() {
        let mut second = wire(
            "b",
            serde_json::json!({"type": "object", "properties": {"x": {"type": "integer"}}}),
        );
        second.output_schema = Some(Arc::new(serde_json::Map::from_iter([(
            "type".to_owned(),
            serde_json::json!("object"),
        )])));
        let sent = vec![wire("z", serde_json::json!({"type": "object"})), second];
        let listing = WireTools::new(sent.clone());
        assert_eq!(listing.iter().collect::<Vec<_>>(), sent);
        assert_eq!(listing.get("b").as_ref(), Some(&sent[1]));
        assert!(listing.get("missing").is_none());
        assert!(listing.same_tools(&WireTools::new(sent.clone())));
        let changed = vec![
            sent[0].clone(),
            wire("b", serde_json::json!({"type": "object"})),
        ];
        assert!(!listing.same_tools(&WireTools::new(changed)));
    }
}
