//! Reviewing upstreams: the security analysis of a server (its tools, their standing
//! against the pins, the scanner's findings), the answer to a call held back by the trust
//! rules, approvals, and the activity records of tool changes and approvals.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;

use mcpproxy_activity::{ActivityRecord, RecordType, Source, Status};
use mcpproxy_policy::{Outcome, Tool};
use mcpproxy_trust::{self as trust, Analysis, ToolStanding};
use mcpproxy_upstream::{Approval, ChangeKind, ToolChange, Upstream};

use super::{Judged, Proxy};

/// The most of an analysis's text a held call's record keeps (the caller gets it whole).
const MAX_RECORDED_MESSAGE: usize = 1000;

/// How many launches an analysis showed are remembered per server.
const SHOWN_LAUNCHES_PER_SERVER: usize = 8;

/// The launches analyses showed lately, per server, newest last: when an approval names one
/// that is no longer the server's launch, the refusal lists what changed since. Only for
/// that text: an approval is checked against the launch itself, never against this.
#[derive(Debug, Default)]
pub(super) struct ShownLaunches(std::sync::Mutex<HashMap<String, Vec<trust::LaunchSpec>>>);

impl ShownLaunches {
    fn remember(&self, server: &str, spec: &trust::LaunchSpec) {
        let mut shown = mcpproxy_support::lock(&self.0);
        let launches = shown.entry(server.to_owned()).or_default();
        launches.retain(|seen| seen.sha256 != spec.sha256);
        launches.push(spec.clone());
        if launches.len() > SHOWN_LAUNCHES_PER_SERVER {
            launches.remove(0);
        }
    }

    /// The launch of `server` with `fingerprint`, if an analysis showed it lately.
    fn find(&self, server: &str, fingerprint: &str) -> Option<trust::LaunchView> {
        mcpproxy_support::lock(&self.0)
            .get(server)
            .and_then(|launches| {
                launches
                    .iter()
                    .find(|seen| seen.has_fingerprint(fingerprint))
                    .map(|seen| seen.view.clone())
            })
    }
}

impl Proxy {
    /// The security analysis of `server`: every tool it lists, each tool's standing, and
    /// what the scanner found.
    pub async fn analysis(&self, server: &str) -> Result<Analysis, String> {
        let upstream = self
            .upstreams()
            .get(server)
            .ok_or_else(|| format!("unknown server '{server}'"))?
            .clone();
        Ok(self.analyze(&upstream).await)
    }

    async fn analyze(&self, upstream: &Arc<Upstream>) -> Analysis {
        let tools = upstream.tools();
        let review = upstream.review();
        let scan = self
            .scan(upstream.name(), tools.values().cloned().collect())
            .await;
        let analysis = Analysis::new(
            upstream.name(),
            upstream.is_quarantined(),
            &tools,
            &review,
            scan,
        );
        let launch = trust::LaunchSpec::of(upstream.config());
        self.shown_launches.remember(upstream.name(), &launch);
        let mut analysis = analysis.with_launch(&launch, upstream.standing());
        analysis.inferred_read = upstream.inferred_reads();
        analysis.egress = upstream.egress_stats();
        let refusals = upstream.refusals();
        analysis.refused_lately = (!refusals.is_empty() && upstream.config().isolation.enabled)
            .then(|| refusals.describe());
        analysis
    }

    /// Runs the scanner over `tools` of `server` (against every other server's tools), off
    /// the async threads: the scanner's name and findings, or why there are none.
    async fn scan(
        &self,
        server: &str,
        tools: Vec<Tool>,
    ) -> Result<(String, Vec<mcpproxy_policy::Finding>), String> {
        let Some(scanner) = self.scanner.clone() else {
            return Err("no scanner plugin is loaded".to_owned());
        };
        let others = self.other_tools(server);
        let scanned = tokio::task::spawn_blocking(move || {
            scanner
                .scan(&tools, &others)
                .map(|found| (scanner.name().to_owned(), found))
        })
        .await;
        match scanned {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(fault)) => Err(format!("the scanner failed: {fault}")),
            Err(e) => Err(format!("the scanner failed: {e}")),
        }
    }

    /// A call to a quarantined server: not sent; the caller gets the analysis.
    pub(super) async fn held_quarantined(&self, upstream: &Arc<Upstream>) -> Judged {
        let name = upstream.name();
        let analysis = self.analyze(upstream).await;
        let message = format!(
            "Server '{name}' is quarantined: the call was not sent. Review it with `mcpproxy upstream inspect {name}` and approve it with `mcpproxy upstream approve {name}`."
        );
        let detail = format!("{message}\n\n{}", analysis.to_text());
        Judged::Held { message, detail }
    }

    /// A call to a tool held back since it is new or changed: not sent; the caller learns
    /// what changed and how to approve it.
    pub(super) async fn held_changed(&self, upstream: &Arc<Upstream>, tool: &Tool) -> Judged {
        let server = upstream.name();
        let review = upstream.review();
        let name = mcpproxy_support::quote(&tool.name);
        let what = match review.standing(&tool.name) {
            Some(ToolStanding::Changed(diff)) => {
                format!(
                    "changed since it was approved ({})",
                    diff.fields().join(", ")
                )
            }
            _ => "is new since the server was approved".to_owned(),
        };
        let message = format!(
            "Tool '{server}:{name}' {what}, so it is held and was not called. Review it with `mcpproxy upstream inspect {server}` and accept it with `mcpproxy upstream approve {server} --tool {name}`."
        );
        let mut detail = message.clone();
        if let Some(ToolStanding::Changed(diff)) = review.standing(&tool.name) {
            for line in diff.lines() {
                detail.push_str(&format!("\n  {line}"));
            }
        }
        // Only this tool is scanned: the rest of the server is not what is held.
        let mut findings = self
            .scan(server, vec![tool.clone()])
            .await
            .map(|(_, found)| found)
            .unwrap_or_default();
        findings.retain(|f| f.tool == tool.name);
        findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
        for finding in findings {
            detail.push_str(&format!(
                "\n  [{}] {}: {}",
                finding.severity,
                finding.kind,
                mcpproxy_support::quote(&finding.detail)
            ));
        }
        Judged::Held {
            message: cut(&message),
            detail,
        }
    }

    /// Approves `server` (clearing its quarantine and accepting every tool as listed now) or,
    /// with `tools`, those tools' current form; takes effect at once and is recorded.
    ///
    /// A server whose launch spec is not approved (not started) has its launch spec approved
    /// and is started; with `launch_only` it starts quarantined, so its tools can be reviewed
    /// before its calls are approved. Approving a launch takes the `fingerprint` of the
    /// launch the person reviewed (`upstream inspect`, the analysis): a launch changed since
    /// (by an agent, a hand edit, another replica) is refused, with what changed. A
    /// fingerprint given for any other approval is checked the same way.
    pub async fn approve(
        &self,
        server: &str,
        tools: Option<Vec<String>>,
        by: &str,
        source: Source,
        launch_only: bool,
        fingerprint: Option<&str>,
    ) -> Result<Approval, String> {
        let upstream = self
            .upstreams()
            .get(server)
            .ok_or_else(|| format!("unknown server '{server}'"))?;
        let fingerprint = fingerprint
            .map(|given| trust::parse_fingerprint(server, given))
            .transpose()?;
        let launch_pending = !upstream.standing().may_start();
        let approval = if launch_pending || (launch_only && tools.is_none()) {
            if tools.is_some() {
                return Err(format!(
                    "server '{server}' is not started: its launch (command, args, env, url) is not approved. Approve the server first (`mcpproxy upstream approve {server} --fingerprint F`, F from `mcpproxy upstream inspect {server}`)"
                ));
            }
            let now = mcpproxy_activity::format_timestamp(mcpproxy_activity::now_ms());
            let calls = !launch_only;
            let launch = self
                .upstreams()
                .approve_launch(server, calls, by, &now, fingerprint.as_deref())
                .await
                .map_err(|e| self.launch_refusal(server, fingerprint.as_deref(), e))?;
            Approval {
                server: server.to_owned(),
                unquarantined: calls,
                tools: Vec::new(),
                approved_by: by.to_owned(),
                approved_at: now,
                launch: Some(launch.view.summary()),
                launch_fingerprint: Some(launch.fingerprint().to_owned()),
            }
        } else {
            let launch = trust::LaunchSpec::of(upstream.config());
            if let Some(given) = fingerprint.as_deref()
                && !launch.has_fingerprint(given)
            {
                let changed = mcpproxy_upstream::LaunchApprovalError::Changed {
                    now: Box::new(launch),
                };
                return Err(self.launch_refusal(server, Some(given), changed));
            }
            let mut approval = upstream
                .approve(tools.as_deref(), by)
                .map_err(|e| e.to_string())?;
            approval.launch_fingerprint = Some(launch.fingerprint().to_owned());
            approval
        };
        let mut record = ActivityRecord::new(RecordType::Approval, source, server, "");
        record.status = Status::Success;
        record.verdict = Outcome::default();
        record.details = Some(json!({
            "approved_by": approval.approved_by,
            "unquarantined": approval.unquarantined,
            "tools": approval.tools,
            "launch": approval.launch,
            "launch_fingerprint": approval.launch_fingerprint,
        }));
        self.append(record).await;
        Ok(approval)
    }

    /// Why a launch was not approved, for the person: what changed since the launch they
    /// reviewed (when this proxy showed it lately, or it is the one approved before), how
    /// the server would start now, and the command that approves that.
    fn launch_refusal(
        &self,
        server: &str,
        given: Option<&str>,
        error: mcpproxy_upstream::LaunchApprovalError,
    ) -> String {
        use mcpproxy_upstream::LaunchApprovalError;
        use std::fmt::Write;
        let name = mcpproxy_support::quote(server);
        let approved = self
            .upstreams()
            .trust()
            .server(server)
            .and_then(|trust| trust.launch);
        let mut text = String::new();
        let now = match error {
            LaunchApprovalError::Changed { now } => {
                let given = given.unwrap_or_default();
                let _ = writeln!(
                    text,
                    "Nothing was approved: the launch of server '{name}' changed since it was reviewed (fingerprint {given}; it is {} now).",
                    now.fingerprint()
                );
                let reviewed = self.shown_launches.find(server, given).or_else(|| {
                    approved
                        .as_ref()
                        .filter(|a| a.sha256.starts_with(given))
                        .map(|a| a.spec.clone())
                });
                match reviewed {
                    Some(reviewed) => {
                        let _ = writeln!(text, "What changed since then:");
                        for line in reviewed.diff(&now) {
                            let _ = writeln!(text, "  {line}");
                        }
                    }
                    None => {
                        let _ = writeln!(
                            text,
                            "What changed cannot be listed: no launch with fingerprint {given} was shown here lately (it may come from another replica or an earlier run)."
                        );
                    }
                }
                now
            }
            LaunchApprovalError::Unreviewed { now } => {
                let _ = writeln!(
                    text,
                    "Nothing was approved: approving server '{name}' approves how it starts, which {}, so the approval must name the launch it approves by its fingerprint.",
                    if approved.is_some() {
                        "changed since it was approved"
                    } else {
                        "nobody approved yet"
                    }
                );
                if let Some(approved) = &approved {
                    let _ = writeln!(text, "What changed since it was approved:");
                    for line in approved.spec.diff(&now) {
                        let _ = writeln!(text, "  {line}");
                    }
                }
                now
            }
            other => return other.to_string(),
        };
        let fingerprint = now.fingerprint();
        let _ = writeln!(text, "It would start as: {}", now.view.summary());
        let _ = writeln!(text, "Fingerprint: {fingerprint}");
        let _ = write!(
            text,
            "Review it (`mcpproxy upstream inspect {name}`); to approve this launch: `mcpproxy upstream approve {name} --fingerprint {fingerprint}` (REST: {{\"fingerprint\": \"{fingerprint}\"}} in the body of POST /api/v1/upstreams/{name}/approve)."
        );
        text
    }

    /// Records each tool change the supervisors report, until the channel closes.
    pub fn record_tool_changes(
        self: &Arc<Self>,
        mut changes: tokio::sync::mpsc::UnboundedReceiver<ToolChange>,
    ) -> tokio::task::JoinHandle<()> {
        let proxy = self.clone();
        tokio::spawn(async move {
            while let Some(change) = changes.recv().await {
                let mut record = change_record(&change);
                if let (Some(tool), Some(details)) = (&change.current, &mut record.details) {
                    details["findings"] = proxy.scan_one(tool).await;
                }
                proxy.append(record).await;
            }
        })
    }

    /// Every tool of the servers other than `server`, as `server:tool`: what a scanner checks
    /// cross-server references against.
    fn other_tools(&self, server: &str) -> Vec<String> {
        self.upstreams()
            .all()
            .iter()
            .filter(|u| u.name() != server)
            .flat_map(|u| {
                u.tools()
                    .values()
                    .map(|t| t.qualified_name())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The scanner's findings for one tool, as JSON for a record: a list, or a string
    /// saying why there is none.
    async fn scan_one(&self, tool: &Tool) -> serde_json::Value {
        match self.scan(&tool.server, vec![tool.clone()]).await {
            Ok((_, findings)) => serde_json::to_value(findings).unwrap_or_default(),
            Err(why) => json!(why),
        }
    }
}

/// The activity record of a tool change: blocked while held, success once accepted.
fn change_record(change: &ToolChange) -> ActivityRecord {
    let mut record = ActivityRecord::new(
        RecordType::ToolChange,
        Source::Upstream,
        change.server.as_str(),
        change.tool.as_str(),
    );
    let what = match change.kind {
        ChangeKind::New => "is new",
        ChangeKind::Changed => "changed",
        ChangeKind::Removed => "was removed",
    };
    let message = if change.kind == ChangeKind::Removed {
        format!("tool {what}")
    } else if change.accepted {
        format!("tool {what} since approval; accepted (auto_approve_tool_changes)")
    } else {
        format!("tool {what} since approval; held until approved")
    };
    let held = !change.accepted && change.kind != ChangeKind::Removed;
    record.status = if held {
        Status::Blocked
    } else {
        Status::Success
    };
    record.verdict = if held {
        Outcome::rejected("mcpproxy", message, Vec::new())
    } else {
        Outcome {
            message: Some(message),
            ..Outcome::default()
        }
    };
    record.details = serde_json::to_value(change).ok();
    record
}

/// The first [`MAX_RECORDED_MESSAGE`] bytes of a message, at a char boundary.
fn cut(message: &str) -> String {
    if message.len() <= MAX_RECORDED_MESSAGE {
        return message.to_owned();
    }
    let end = message.floor_char_boundary(MAX_RECORDED_MESSAGE);
    format!("{}…", &message[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_change_is_recorded_blocked_and_an_accepted_one_as_success() {
        let change = ToolChange {
            server: "fx".into(),
            tool: "echo".into(),
            kind: ChangeKind::Changed,
            diff: None,
            accepted: false,
            current: None,
        };
        let held = change_record(&change);
        assert_eq!(held.record_type, RecordType::ToolChange);
        assert_eq!(held.status, Status::Blocked);
        assert_eq!(held.details.as_ref().unwrap()["kind"], "changed");
        let accepted = change_record(&ToolChange {
            accepted: true,
            ..change
        });
        assert_eq!(accepted.status, Status::Success);
        assert!(accepted.verdict.is_allowed());
    }

    #[test]
    fn long_messages_are_cut_at_a_char_boundary() {
        let long = "é".repeat(2000);
        let cut = cut(&long);
        assert!(cut.len() <= MAX_RECORDED_MESSAGE + "…".len());
        assert!(cut.ends_with('…'));
    }
}
