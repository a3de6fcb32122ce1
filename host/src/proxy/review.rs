//! Reviewing upstreams: the security analysis of a server (its tools, their standing
//! against the pins, the scanner's findings), the answer to a call held back by the trust
//! rules, approvals, and the activity records of tool changes and approvals.

use std::sync::Arc;

use serde_json::json;

use crate::trust::{self, Analysis, ToolStanding};
use crate::upstream::{Approval, ChangeKind, ToolChange, Upstream};
use mcpproxy_activity::{ActivityRecord, RecordType, Source, Status};
use mcpproxy_policy::{Outcome, Tool};

use super::{Judged, Proxy};

/// The most of an analysis's text a held call's record keeps (the caller gets it whole).
const MAX_RECORDED_MESSAGE: usize = 1000;

impl Proxy {
    /// The security analysis of `server`: every tool it lists, each tool's standing, and
    /// what the scanner found.
    pub(crate) async fn analysis(&self, server: &str) -> Result<Analysis, String> {
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
        Analysis::new(
            upstream.name(),
            upstream.is_quarantined(),
            &tools,
            &review,
            scan,
        )
        .with_launch(
            &trust::LaunchSpec::of(upstream.config()),
            upstream.standing(),
        )
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
        let name = mcpproxy_policy::quote(&tool.name);
        let what = match review.standing.get(&tool.name) {
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
        if let Some(ToolStanding::Changed(diff)) = review.standing.get(&tool.name) {
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
                mcpproxy_policy::quote(&finding.detail)
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
    /// A server whose launch spec is not approved (not started) has its launch spec as
    /// configured now approved and is started; with `launch_only` it starts quarantined, so
    /// its tools can be reviewed before its calls are approved.
    pub(crate) async fn approve(
        &self,
        server: &str,
        tools: Option<Vec<String>>,
        by: &str,
        source: Source,
        launch_only: bool,
    ) -> Result<Approval, String> {
        let upstream = self
            .upstreams()
            .get(server)
            .ok_or_else(|| format!("unknown server '{server}'"))?;
        let launch_pending = !upstream.standing().may_start();
        let approval = if launch_pending || (launch_only && tools.is_none()) {
            if tools.is_some() {
                return Err(format!(
                    "server '{server}' is not started: its launch (command, args, env, url) is not approved. Approve the server first (`mcpproxy upstream approve {server}`)"
                ));
            }
            let now = mcpproxy_activity::format_timestamp(mcpproxy_activity::now_ms());
            let calls = !launch_only;
            self.upstreams()
                .approve_launch(server, calls, by, &now)
                .await
                .map_err(|e| format!("cannot save the approval: {e}"))?;
            Approval {
                server: server.to_owned(),
                unquarantined: calls,
                tools: Vec::new(),
                approved_by: by.to_owned(),
                approved_at: now,
                launch: Some(trust::LaunchSpec::of(upstream.config()).view.summary()),
            }
        } else {
            upstream
                .approve(tools.as_deref(), by)
                .map_err(|e| e.to_string())?
        };
        let mut record = ActivityRecord::new(RecordType::Approval, source, server, "");
        record.status = Status::Success;
        record.verdict = Outcome::default();
        record.details = Some(json!({
            "approved_by": approval.approved_by,
            "unquarantined": approval.unquarantined,
            "tools": approval.tools,
            "launch": approval.launch,
        }));
        self.append(record).await;
        Ok(approval)
    }

    /// Records each tool change the supervisors report, until the channel closes.
    pub(crate) fn record_tool_changes(
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
