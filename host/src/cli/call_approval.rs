//! `mcpproxy call` and approvals: a call a rule of `approvals` makes wait is answered from
//! here while it waits. With `--yes` it is approved at once (recorded as `--yes`); from a
//! terminal the person at it is shown the call and asked (recorded as `terminal`); otherwise
//! it waits for someone to answer with `mcpproxy approvals approve|deny ID`, and says so.
//!
//! The call carries a request id of its own (`cli-<ULID>`), and only the pending approval
//! with that id is answered: never another caller's call.

use std::future::Future;
use std::io::{BufRead, IsTerminal, Write};
use std::pin::Pin;
use std::time::Duration;

use anyhow::Result;

use super::remote::Remote;

use mcpproxy_server::proxy::PendingApproval;

/// How often the pending approvals are looked at while the call waits.
const POLL: Duration = Duration::from_millis(200);

/// Who answers a call of ours that waits for approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Answerer {
    /// `--yes`: approved in advance.
    Yes,
    /// The person at this terminal, asked.
    Terminal,
    /// No one here: someone runs `mcpproxy approvals`.
    Elsewhere,
}

impl Answerer {
    /// `--yes` if given, else the terminal when stdin and stderr are one.
    pub(super) fn of(yes: bool) -> Self {
        if yes {
            Self::Yes
        } else if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
            Self::Terminal
        } else {
            Self::Elsewhere
        }
    }
}

/// A boxed future, for the two ways of reaching the approvals (REST, in process).
pub(super) type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What reaches the approvals: the pending ones, and an answer (`id`, approve, by).
pub(super) trait Approvals: Sync {
    fn pending(&self) -> Boxed<'_, Result<Vec<PendingApproval>>>;
    fn answer<'a>(&'a self, id: &'a str, approve: bool, by: &'a str) -> Boxed<'a, Result<()>>;
}

/// A fresh request id for a call of this command.
pub(super) fn request_id() -> String {
    format!("cli-{}", mcpproxy_activity::new_id().0)
}

/// Runs `call` to its end, answering its pending approval (the one with `request_id`) as
/// `answerer` says while it waits.
pub(super) async fn answering<T>(
    call: impl Future<Output = T>,
    approvals: &dyn Approvals,
    request_id: &str,
    answerer: Answerer,
) -> T {
    tokio::pin!(call);
    let mut answered = false;
    loop {
        tokio::select! {
            out = &mut call => return out,
            () = tokio::time::sleep(POLL), if !answered => {
                let Ok(pending) = approvals.pending().await else { continue };
                let Some(ours) = pending
                    .into_iter()
                    .find(|p| p.request_id.as_deref() == Some(request_id))
                else {
                    continue;
                };
                answered = true;
                let (approve, by) = match answerer {
                    Answerer::Yes => (true, "--yes"),
                    Answerer::Terminal => (ask_terminal(&ours).await, "terminal"),
                    Answerer::Elsewhere => {
                        eprintln!(
                            "the call waits for a person's approval until {}: run `mcpproxy \
                             approvals approve {}` (or deny) where the proxy runs",
                            ours.expires_at, ours.id
                        );
                        continue;
                    }
                };
                if let Err(e) = approvals.answer(&ours.id, approve, by).await {
                    eprintln!("error: cannot answer approval {}: {e:#}", ours.id);
                }
            }
        }
    }
}

/// Shows the call on stderr and asks `Approve this call? [y/N]` on the terminal.
async fn ask_terminal(call: &PendingApproval) -> bool {
    let mut text = format!(
        "\n{}:{} needs your approval ({} call, {}):\n  arguments {}\n",
        mcpproxy_support::quote(&call.server),
        mcpproxy_support::quote(&call.tool),
        call.class,
        call.variant,
        call.arguments
    );
    if let Some(annotations) = &call.annotations {
        text.push_str(&format!(
            "  annotations {annotations} (from {})\n",
            call.annotation_source
        ));
    }
    text.push_str("Approve this call? [y/N] ");
    tokio::task::spawn_blocking(move || {
        let mut err = std::io::stderr();
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
        let mut line = String::new();
        if std::io::stdin().lock().read_line(&mut line).is_err() {
            return false;
        }
        matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
    })
    .await
    .unwrap_or(false)
}

/// The approvals of the running server, through its REST API.
pub(super) struct RemoteApprovals<'a>(pub(super) &'a Remote);

impl Approvals for RemoteApprovals<'_> {
    fn pending(&self) -> Boxed<'_, Result<Vec<PendingApproval>>> {
        Box::pin(async move {
            let data = self.0.get("/approvals", &[]).await?;
            Ok(serde_json::from_value(data)?)
        })
    }

    fn answer<'a>(&'a self, id: &'a str, approve: bool, by: &'a str) -> Boxed<'a, Result<()>> {
        Box::pin(super::approvals::post_answer(self.0, id, approve, by, None))
    }
}

/// The approvals of the proxy this command runs itself (no server owns the data dir).
pub(super) struct LocalApprovals<'a>(pub(super) &'a mcpproxy_server::proxy::Approvals);

impl Approvals for LocalApprovals<'_> {
    fn pending(&self) -> Boxed<'_, Result<Vec<PendingApproval>>> {
        let pending = self.0.pending();
        Box::pin(async move { Ok(pending) })
    }

    fn answer<'a>(&'a self, id: &'a str, approve: bool, by: &'a str) -> Boxed<'a, Result<()>> {
        Box::pin(async move {
            let answer = mcpproxy_server::proxy::Answer {
                approve,
                by: by.to_owned(),
                reason: None,
            };
            Ok(self.0.answer(id, answer).await?)
        })
    }
}
