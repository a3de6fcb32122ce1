//! Holding each listing against the trust store: first sight pins a server's tools, a
//! quarantined server publishes none, new and changed tools are held back and reported,
//! approval pins them and publishes them, without a restart.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};

use crate::index::{ToolDoc, param_names};
use mcpproxy_activity::{format_timestamp, now_ms};
use mcpproxy_policy::Tool;
use mcpproxy_trust::{Review, ToolDiff, ToolStanding, fingerprint};

use super::Upstream;
use mcpproxy_support::{lock, write_lock as write};

/// What happened to a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// Listed for the first time on a server whose tools were pinned.
    New,
    /// Listed otherwise than approved: description, input or output schema, annotations
    /// or `_meta`.
    Changed,
    /// Pinned, no longer listed.
    Removed,
}

/// A tool change the supervisor noticed, for the activity journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolChange {
    pub server: String,
    pub tool: String,
    pub kind: ChangeKind,
    /// For `changed`: each field, as approved and as listed now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<ToolDiff>,
    /// The server's `auto_approve_tool_changes` accepted it at once.
    pub accepted: bool,
    /// The tool as listed now (new and changed tools), for the scanner; not recorded.
    #[serde(skip)]
    pub current: Option<Tool>,
}

/// A server's trusted tools and their parameter names, which the index's documents borrow:
/// the listing is shared, not copied (a copy of 10,000 tools' schemas was ~19 MB at its peak).
pub(super) struct IndexEntry {
    tools: Arc<BTreeMap<String, Tool>>,
    /// The trusted tools' names, in the listing's order, and each one's parameter names.
    trusted: Vec<(String, Vec<String>)>,
}

impl IndexEntry {
    pub(super) fn docs(&self) -> Vec<ToolDoc<'_>> {
        self.trusted
            .iter()
            .filter_map(|(name, params)| {
                let t = self.tools.get(name)?;
                Some(ToolDoc {
                    name: &t.name,
                    description: &t.description,
                    params,
                })
            })
            .collect()
    }
}

/// Why an approval did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApproveError {
    #[error(
        "server '{server}' is quarantined: approve the server itself first (`mcpproxy upstream approve {server}`), which accepts all its tools"
    )]
    StillQuarantined { server: String },
    #[error("server '{server}' lists no tool named '{tool}' (it lists: {listed})")]
    UnknownTool {
        server: String,
        tool: String,
        listed: String,
    },
    #[error(
        "server '{server}' has not listed its tools yet ({state}): approve it once `mcpproxy upstream list` shows it ready, so that what you approve is the tools it really has"
    )]
    NotListed { server: String, state: String },
    #[error("cannot save the approval: {0}")]
    Save(String),
}

/// What an approval did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub server: String,
    /// The quarantine was cleared.
    pub unquarantined: bool,
    /// The tools whose current form is now pinned.
    pub tools: Vec<String>,
    pub approved_by: String,
    pub approved_at: String,
    /// The launch spec approved with it (secrets masked), when the approval started a
    /// server whose launch was not approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<String>,
    /// That launch's fingerprint ([`mcpproxy_trust::LaunchSpec::fingerprint`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_fingerprint: Option<String>,
}

impl Upstream {
    /// Holds a fresh listing against the pins: pins everything on first sight of a server
    /// that is not quarantined, accepts changes at once under `auto_approve_tool_changes`,
    /// and reports each held-back or removed tool once.
    pub(super) fn vet(&self, tools: &BTreeMap<String, Tool>) -> Review {
        let name = self.name();
        let now = format_timestamp(now_ms());
        let pins = self.trust.server(name);
        if self.is_quarantined() {
            return Review::of(tools, pins.as_ref());
        }
        if pins.as_ref().is_none_or(|p| p.tools.is_empty()) {
            // First sight: what the server lists now is what the operator trusted by adding it.
            let saved = self.trust.update(name, |s| {
                for tool in tools.values() {
                    s.pin(tool, &now);
                }
            });
            if let Err(e) = saved {
                tracing::error!(server = name, "cannot pin the server's tools: {e}");
            }
            return Review::of(tools, self.trust.server(name).as_ref());
        }
        let review = Review::of(tools, pins.as_ref());
        let auto = self.config.auto_approve_tool_changes;
        let mut changes = Vec::new();
        {
            let mut reported = lock(&self.reported);
            for (tool, standing) in review.pending() {
                let (kind, diff) = match standing {
                    ToolStanding::New => (ChangeKind::New, None),
                    ToolStanding::Changed(diff) => (ChangeKind::Changed, Some((**diff).clone())),
                    ToolStanding::Trusted => continue,
                };
                let print = tools.get(tool).map(fingerprint).unwrap_or_default();
                if reported.get(tool) == Some(&print) {
                    continue;
                }
                reported.insert(tool.to_owned(), print);
                changes.push(ToolChange {
                    server: name.to_owned(),
                    tool: tool.to_owned(),
                    kind,
                    diff,
                    accepted: auto,
                    current: tools.get(tool).cloned(),
                });
            }
            for tool in &review.removed {
                if reported.get(tool).map(String::as_str) != Some("") {
                    reported.insert(tool.clone(), String::new());
                    changes.push(ToolChange {
                        server: name.to_owned(),
                        tool: tool.clone(),
                        kind: ChangeKind::Removed,
                        diff: None,
                        accepted: true,
                        current: None,
                    });
                }
            }
        }
        if !auto {
            // Shared state: every replica holds what this one saw change.
            for change in changes.iter().filter(|c| c.kind == ChangeKind::Changed) {
                let (Some(diff), Some(tool)) = (&change.diff, &change.current) else {
                    continue;
                };
                if let Err(e) = self
                    .trust
                    .hold(name, &change.tool, &fingerprint(tool), diff, &now)
                {
                    tracing::error!(
                        server = name,
                        "cannot hold the changed tool on every replica: {e}"
                    );
                }
            }
        }
        for change in &changes {
            match change.kind {
                ChangeKind::Removed => {}
                _ if auto => tracing::warn!(
                    server = name,
                    tool = %mcpproxy_support::quote(&change.tool),
                    "tool {} since approval; accepted (auto_approve_tool_changes)",
                    if change.kind == ChangeKind::New { "is new" } else { "changed" }
                ),
                _ => tracing::warn!(
                    server = name,
                    tool = %mcpproxy_support::quote(&change.tool),
                    "tool {} since approval; held until approved (`mcpproxy upstream inspect {name}`)",
                    if change.kind == ChangeKind::New { "is new" } else { "changed" }
                ),
            }
            let _ = self.changes.send(change.clone());
        }
        if auto && review.pending().next().is_some() {
            let pending: Vec<&Tool> = review
                .pending()
                .filter_map(|(tool, _)| tools.get(tool))
                .collect();
            let saved = self.trust.update(name, |s| {
                for tool in pending {
                    s.pin(tool, &now);
                }
            });
            if let Err(e) = saved {
                tracing::error!(server = name, "cannot pin the accepted tools: {e}");
            }
            return Review::of(tools, self.trust.server(name).as_ref());
        }
        review
    }

    /// Applies trust decisions another replica made (shared state): the quarantine as
    /// approved now, the listing held against the pins and held tools as they are now.
    /// `false` when whether it may start changed: the caller restarts it.
    pub fn retrust(&self) -> bool {
        let standing = self.trust.standing(&self.config);
        if standing.may_start() != self.standing.may_start() {
            return false;
        }
        let name = self.name();
        self.quarantined
            .store(standing.is_quarantined(), Ordering::Release);
        let review = Review::of(&self.tools(), self.trust.server(name).as_ref());
        {
            let mut reported = lock(&self.reported);
            reported.retain(|tool, _| {
                review
                    .standing(tool)
                    .is_some_and(|s| *s != ToolStanding::Trusted)
            });
        }
        *write(&self.review) = Arc::new(review);
        self.reindex();
        true
    }

    /// Stores a vetted listing and puts its trusted tools (none while quarantined) in the
    /// search index.
    pub(super) fn publish(&self, tools: BTreeMap<String, Tool>, review: Review) {
        self.store_listing(tools, review);
        self.reindex();
    }

    /// Stores a vetted listing; the caller puts it in the index ([`IndexEntry`]).
    pub(super) fn store_listing(&self, tools: BTreeMap<String, Tool>, review: Review) {
        *write(&self.tools) = Arc::new(tools);
        *write(&self.review) = Arc::new(review);
    }

    /// Replaces this server's entries in the index with its trusted tools.
    fn reindex(&self) {
        let entry = self.index_entry();
        if let Err(e) = self.index.replace_server(self.name(), &entry.docs()) {
            tracing::warn!(server = self.name(), "cannot index tools: {e}");
        }
    }

    /// This server's trusted tools, as the search index takes them.
    pub(super) fn index_entry(&self) -> IndexEntry {
        let tools = self.tools();
        let trusted = if self.is_quarantined() {
            Vec::new()
        } else {
            let review = self.review();
            tools
                .iter()
                .filter(|(_, t)| review.is_trusted(&t.name))
                .map(|(key, t)| (key.clone(), param_names(&t.input_schema.to_value())))
                .collect()
        };
        IndexEntry { tools, trusted }
    }

    /// Approves the server (clearing its quarantine and accepting every listed tool as it
    /// is now), or, with `tools`, accepts those tools' current form. Takes effect at once.
    pub fn approve(&self, tools: Option<&[String]>, by: &str) -> Result<Approval, ApproveError> {
        let name = self.name().to_owned();
        let listed = self.tools();
        let quarantined = self.is_quarantined();
        let state = self.state();
        if tools.is_none() && listed.is_empty() && state != super::State::Ready {
            return Err(ApproveError::NotListed {
                server: name,
                state: state.to_string(),
            });
        }
        let chosen: Vec<Tool> = match tools {
            None => listed.values().cloned().collect(),
            Some(_) if quarantined => {
                return Err(ApproveError::StillQuarantined { server: name });
            }
            Some(names) => names
                .iter()
                .map(|tool| {
                    listed
                        .get(tool)
                        .cloned()
                        .ok_or_else(|| ApproveError::UnknownTool {
                            server: name.clone(),
                            tool: tool.clone(),
                            listed: listed.keys().cloned().collect::<Vec<_>>().join(", "),
                        })
                })
                .collect::<Result<_, _>>()?,
        };
        let now = format_timestamp(now_ms());
        self.trust
            .update(&name, |s| {
                if tools.is_none() {
                    s.approved_at = Some(now.clone());
                    s.approved_by = Some(by.to_owned());
                    s.held.clear();
                }
                for tool in &chosen {
                    s.pin(tool, &now);
                }
            })
            .map_err(|e| ApproveError::Save(e.to_string()))?;
        if tools.is_none() {
            self.quarantined.store(false, Ordering::Release);
        }
        {
            let mut reported = lock(&self.reported);
            for tool in &chosen {
                reported.remove(&tool.name);
            }
        }
        let review = Review::of(&listed, self.trust.server(&name).as_ref());
        *write(&self.review) = Arc::new(review);
        self.reindex();
        Ok(Approval {
            server: name,
            unquarantined: quarantined && tools.is_none(),
            tools: chosen.into_iter().map(|t| t.name).collect(),
            approved_by: by.to_owned(),
            approved_at: now,
            launch: None,
            launch_fingerprint: None,
        })
    }
}
