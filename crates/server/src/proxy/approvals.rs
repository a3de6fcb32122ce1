//! Calls that wait for a person (`approvals`): after the policy allowed a call and before
//! anything reaches the upstream, a rule may ask a person to approve *this* call. The person
//! at the calling client is asked through `elicitation/create` when the client declared it
//! can answer (and the rule does not say `page`); otherwise the call waits as a pending
//! approval that `mcpproxy approvals approve|deny ID`, the REST API or the page answers.
//!
//! An approval covers one call: it is made for the call's server, tool, the SHA-256 of its
//! canonical arguments, its session and caller, answered once, and releases only the call
//! that waits on it. Answering is never an MCP tool: an agent cannot approve its own calls
//! through the endpoint it calls tools with.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::oneshot;

use mcpproxy_activity::{ApprovalRecord, format_timestamp, now_ms};
use mcpproxy_config::{ApprovalsConfig, CallClass, Via};
use mcpproxy_policy::{Evaluation, OperationType};
use mcpproxy_upstream::back_channel::CallOrigin;

use super::{CallContext, Proxy};

/// The longest reason kept, in bytes.
const MAX_REASON_BYTES: usize = 1024;
/// The most calls that may wait for a person at once; one more is refused at once.
const MAX_PENDING: usize = 1000;

/// A call waiting for a person, as `approvals list` and `GET /api/v1/approvals` show it.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct PendingApproval {
    pub id: String,
    pub server: String,
    pub tool: String,
    /// `write` or `destructive`: why a rule asked.
    pub class: String,
    /// The variant the caller used (`call_tool_destructive`).
    pub variant: String,
    /// The arguments as the audit record keeps them (capped, secrets redacted).
    pub arguments: serde_json::Value,
    /// SHA-256 of the canonical arguments as they will be sent: what an answer covers.
    pub arguments_hash: String,
    /// The agent's declared intent and reason, as sent.
    pub intent: Option<serde_json::Value>,
    /// The tool's effective annotations and where they came from.
    pub annotations: Option<serde_json::Value>,
    pub annotation_source: String,
    pub session_id: Option<String>,
    /// The caller's request id (`mcpproxy call` gives each call one, to answer its own).
    pub request_id: Option<String>,
    /// The logged-in caller's subject, in team mode.
    pub caller: Option<String>,
    pub client: Option<String>,
    pub asked_at: String,
    /// When the call gives up waiting.
    pub expires_at: String,
}

/// A person's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub approve: bool,
    /// `cli`, `rest`, `page`.
    pub by: String,
    pub reason: Option<String>,
}

/// Why an answer was not taken.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AnswerError {
    #[error(
        "no call waits for approval {0}: it was answered already, it timed out, or its caller \
         went away (`mcpproxy approvals list` shows the calls that wait)"
    )]
    NotWaiting(String),
}

struct Waiting {
    shown: PendingApproval,
    answer: oneshot::Sender<Answer>,
}

/// The calls that wait for a person, by approval id.
#[derive(Default)]
pub struct Approvals {
    config: ApprovalsConfig,
    waiting: Mutex<BTreeMap<String, Waiting>>,
}

/// How asking ended.
enum Asked {
    Approved(ApprovalRecord),
    Refused(ApprovalRecord, String),
}

impl Approvals {
    pub fn new(config: ApprovalsConfig) -> Self {
        Self {
            config,
            waiting: Mutex::default(),
        }
    }

    /// The calls waiting now, oldest first.
    pub fn pending(&self) -> Vec<PendingApproval> {
        let waiting = mcpproxy_support::lock(&self.waiting);
        let mut all: Vec<PendingApproval> = waiting.values().map(|w| w.shown.clone()).collect();
        all.sort_by(|a, b| a.asked_at.cmp(&b.asked_at).then(a.id.cmp(&b.id)));
        all
    }

    /// Answers the call waiting on `id`: it is sent (approve) or refused (deny).
    pub fn answer(&self, id: &str, answer: Answer) -> Result<(), AnswerError> {
        let waiting = mcpproxy_support::lock(&self.waiting).remove(id);
        let Some(waiting) = waiting else {
            return Err(AnswerError::NotWaiting(mcpproxy_support::quote(id)));
        };
        let answer = Answer {
            reason: answer
                .reason
                .map(|r| mcpproxy_support::cut_to(&r, MAX_REASON_BYTES)),
            ..answer
        };
        waiting
            .answer
            .send(answer)
            .map_err(|_| AnswerError::NotWaiting(mcpproxy_support::quote(id)))
    }

    /// Whether a call of `evaluation` needs a person, and who is asked.
    fn rule_for(&self, evaluation: &Evaluation) -> Option<(CallClass, Via)> {
        if !self.config.any() {
            return None;
        }
        let request = &evaluation.request;
        let annotations = request.effective.annotations.as_ref();
        let class = if request.variant == OperationType::Destructive
            || annotations.is_some_and(|a| a.is_destructive())
        {
            CallClass::Destructive
        } else if request.variant == OperationType::Write
            || !annotations.is_some_and(|a| a.is_read_only())
        {
            CallClass::Write
        } else {
            return None;
        };
        let tool = &request.tool;
        self.config
            .needs_person(&tool.server, &tool.name, class)
            .map(|via| (class, via))
    }
}

impl Proxy {
    /// Makes calls wait for a person as `approvals` says.
    pub fn with_approvals(mut self, approvals: Arc<Approvals>) -> Self {
        self.approvals = approvals;
        self
    }

    /// The calls waiting for a person.
    pub fn approvals(&self) -> &Arc<Approvals> {
        &self.approvals
    }

    /// Asks a person about an allowed call when a rule says so: `Ok(None)` when no rule
    /// asks, `Ok(Some(record))` when approved, `Err((record, message))` when refused
    /// (denied, cancelled, timed out, or no one could be asked).
    pub(super) async fn ask_person(
        &self,
        evaluation: &Evaluation,
        draft: &mcpproxy_activity::ActivityRecord,
        context: &CallContext,
    ) -> Result<Option<ApprovalRecord>, (ApprovalRecord, String)> {
        let Some((class, via)) = self.approvals.rule_for(evaluation) else {
            return Ok(None);
        };
        let started = Instant::now();
        let timeout = self.approvals.config.timeout;
        let request = &evaluation.request;
        let name = request.tool.qualified_name();
        let arguments_hash = mcpproxy_activity::canonical_sha256(&request.args);
        let (id, _) = mcpproxy_activity::new_id();
        let record = Asking {
            id: id.clone(),
            arguments_hash: arguments_hash.clone(),
            started,
        };
        let origin = context.origin.as_ref();
        let asked = if via == Via::Client
            && let Some(origin) = origin.filter(|o| o.can_elicit())
        {
            ask_client(origin, evaluation, draft, class, timeout, &record).await
        } else {
            let judgement = evaluation.judgement();
            let asked_at = now_ms();
            let shown = PendingApproval {
                id: id.clone(),
                server: request.tool.server.clone(),
                tool: request.tool.name.clone(),
                class: class.as_str().to_owned(),
                variant: request.variant.tool_name().to_owned(),
                arguments: draft.arguments.clone().unwrap_or_default(),
                arguments_hash: arguments_hash.clone(),
                intent: draft
                    .intent
                    .as_ref()
                    .and_then(|i| serde_json::to_value(i).ok()),
                annotations: judgement
                    .annotations
                    .and_then(|a| serde_json::to_value(a).ok()),
                annotation_source: judgement.annotation_source.label().to_owned(),
                session_id: context.session_id.clone(),
                request_id: context.request_id.clone(),
                caller: context.identity.as_ref().map(|i| i.subject.clone()),
                client: context.client.as_ref().map(|c| c.name.clone()),
                asked_at: format_timestamp(asked_at),
                expires_at: format_timestamp(
                    asked_at.saturating_add(u64::try_from(timeout.as_millis()).unwrap_or(0)),
                ),
            };
            self.wait_for_answer(shown, origin, timeout, &name, &record)
                .await
        };
        let ended = match &asked {
            Asked::Approved(approval) | Asked::Refused(approval, _) => approval,
        };
        self.metrics
            .approval_decided(&ended.decision, &ended.asked_via);
        match asked {
            Asked::Approved(approval) => Ok(Some(approval)),
            Asked::Refused(approval, message) => Err((approval, message)),
        }
    }

    /// Puts the call among the pending approvals and waits for an answer, the timeout, or
    /// the caller cancelling.
    async fn wait_for_answer(
        &self,
        shown: PendingApproval,
        origin: Option<&CallOrigin>,
        timeout: Duration,
        name: &str,
        record: &Asking,
    ) -> Asked {
        let id = shown.id.clone();
        let (tx, rx) = oneshot::channel();
        {
            let mut waiting = mcpproxy_support::lock(&self.approvals.waiting);
            if waiting.len() >= MAX_PENDING {
                return Asked::Refused(
                    record.ended("page", None, "refused", None),
                    format!(
                        "The call to '{name}' needs a person's approval, but {MAX_PENDING} calls \
                         already wait for one; it was not sent"
                    ),
                );
            }
            waiting.insert(id.clone(), Waiting { shown, answer: tx });
        }
        // Taken out of the pending list however the wait ends.
        let _remove = RemoveOnDrop {
            approvals: &self.approvals,
            id: &id,
        };
        tracing::info!(approval = %id, tool = %name, "a call waits for a person's approval (`mcpproxy approvals approve {id}`)");
        let cancelled = async {
            match origin {
                Some(origin) => origin.cancelled.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let progress = tell_progress(origin, &id, timeout);
        tokio::select! {
            answer = tokio::time::timeout(timeout, rx) => match answer {
                Ok(Ok(answer)) if answer.approve => {
                    Asked::Approved(record.ended("page", Some(&answer.by), "approved", answer.reason))
                }
                Ok(Ok(answer)) => {
                    let message = format!("The call to '{name}' was denied by {}", answer.by_whom());
                    Asked::Refused(record.ended("page", Some(&answer.by), "denied", answer.reason), message)
                }
                Ok(Err(_)) | Err(_) => Asked::Refused(
                    record.ended("page", None, "timed_out", None),
                    format!(
                        "The call to '{name}' was not approved within {} s (approvals.timeout_secs); it was not sent",
                        timeout.as_secs()
                    ),
                ),
            },
            never = progress => match never {},
            () = cancelled => Asked::Refused(
                record.ended("page", None, "cancelled", None),
                format!("The call to '{name}' was cancelled while it waited for approval"),
            ),
        }
    }
}

/// How often a waiting call tells its client it still waits.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// While the call waits: a progress notification to its client at once and then every
/// [`PROGRESS_EVERY`], when the client gave a progress token. It never ends: the wait
/// ends it.
async fn tell_progress(
    origin: Option<&CallOrigin>,
    id: &str,
    timeout: Duration,
) -> std::convert::Infallible {
    let Some((peer, token)) = origin.and_then(|o| {
        o.progress_token
            .clone()
            .map(|token| (o.peer.clone(), token))
    }) else {
        return std::future::pending().await;
    };
    let started = Instant::now();
    let total = timeout.as_secs_f64();
    loop {
        let waited = started.elapsed().as_secs_f64().min(total);
        let message = format!(
            "waiting for a person to approve this call (approval {id}; `mcpproxy approvals \
             approve {id}`)"
        );
        let note = rmcp::model::ProgressNotificationParam::new(token.clone(), waited)
            .with_total(total)
            .with_message(message);
        if let Err(e) = peer.notify_progress(note).await {
            tracing::debug!("cannot tell the client its call waits: {e}");
        }
        tokio::time::sleep(PROGRESS_EVERY).await;
    }
}

impl Answer {
    /// `the user` for the person at the client, else who answered (`mcpproxy approvals`).
    fn by_whom(&self) -> String {
        match self.by.as_str() {
            "client" => "the user".to_owned(),
            "cli" => "a person (mcpproxy approvals deny)".to_owned(),
            other => format!("a person ({other})"),
        }
    }
}

/// Asks the person at the client with a form: the call as it will be sent, and a yes/no.
async fn ask_client(
    origin: &CallOrigin,
    evaluation: &Evaluation,
    draft: &mcpproxy_activity::ActivityRecord,
    class: CallClass,
    timeout: Duration,
    record: &Asking,
) -> Asked {
    use rmcp::model::{ClientResult, ElicitationAction, ServerRequest};
    let request = &evaluation.request;
    let name = request.tool.qualified_name();
    let judgement = evaluation.judgement();
    let arguments = draft
        .arguments
        .as_ref()
        .map_or_else(|| "{}".to_owned(), |a| a.to_string());
    let intent = draft
        .intent
        .as_ref()
        .and_then(|i| serde_json::to_value(i).ok())
        .map_or_else(|| "none declared".to_owned(), |i| i.to_string());
    let annotations = judgement
        .annotations
        .and_then(|a| serde_json::to_value(a).ok())
        .map_or_else(|| "none".to_owned(), |a| a.to_string());
    let message = format!(
        "Approve this {} call?\n\nServer: {}\nTool: {}\nAnnotations: {annotations} (from {})\n\
         Arguments, as they will be sent (secrets masked): {}\nThe agent's intent: {intent}",
        class.as_str(),
        mcpproxy_support::quote(&request.tool.server),
        mcpproxy_support::quote(&request.tool.name),
        judgement.annotation_source.label(),
        mcpproxy_support::cut_to(&arguments, 4096),
    );
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "approve": {"type": "boolean", "title": "Approve", "description": "Send this call"},
            "reason": {"type": "string", "title": "Reason", "description": "Why (optional)"}
        },
        "required": ["approve"]
    });
    let params = serde_json::json!({"mode": "form", "message": message, "requestedSchema": schema});
    let Ok(params) = serde_json::from_value(params) else {
        return Asked::Refused(
            record.ended("client", None, "refused", None),
            format!("The call to '{name}' needs approval, but the question could not be built"),
        );
    };
    let asked = mcpproxy_upstream::back_channel::ask_client(
        origin,
        ServerRequest::ElicitRequest(rmcp::model::Request::new(params)),
        timeout,
    )
    .await;
    let result = match asked {
        Ok(ClientResult::ElicitResult(result)) => result,
        Ok(_) => {
            return Asked::Refused(
                record.ended("client", None, "refused", None),
                format!(
                    "The call to '{name}' was not approved: the client answered the question with something else"
                ),
            );
        }
        Err(mcpproxy_upstream::back_channel::AskError::Timeout { .. }) => {
            return Asked::Refused(
                record.ended("client", None, "timed_out", None),
                format!(
                    "The call to '{name}' was not approved within {} s (approvals.timeout_secs); it was not sent",
                    timeout.as_secs()
                ),
            );
        }
        Err(e) => {
            return Asked::Refused(
                record.ended("client", None, "refused", None),
                format!("The call to '{name}' was not approved: {e}"),
            );
        }
    };
    let content = result.content.as_ref();
    let reason = content
        .and_then(|c| c.get("reason"))
        .and_then(serde_json::Value::as_str)
        .filter(|r| !r.is_empty())
        .map(|r| mcpproxy_support::cut_to(r, MAX_REASON_BYTES));
    match result.action {
        ElicitationAction::Accept
            if content
                .and_then(|c| c.get("approve"))
                .and_then(serde_json::Value::as_bool)
                == Some(true) =>
        {
            Asked::Approved(record.ended("client", Some("client"), "approved", reason))
        }
        ElicitationAction::Cancel => Asked::Refused(
            record.ended("client", Some("client"), "cancelled", reason),
            format!("The call to '{name}' was cancelled by the user"),
        ),
        _ => Asked::Refused(
            record.ended("client", Some("client"), "denied", reason),
            format!("The call to '{name}' was denied by the user"),
        ),
    }
}

/// What an approval's record is made from, as the asking goes.
struct Asking {
    id: String,
    arguments_hash: String,
    started: Instant,
}

impl Asking {
    /// The record of how it ended: asked through `asked_via`, answered by `decided_by`
    /// (`None`: no one answered), `decision`.
    fn ended(
        &self,
        asked_via: &str,
        decided_by: Option<&str>,
        decision: &str,
        reason: Option<String>,
    ) -> ApprovalRecord {
        ApprovalRecord {
            id: self.id.clone(),
            asked_via: asked_via.to_owned(),
            decided_by: decided_by.map(str::to_owned),
            decision: decision.to_owned(),
            decided_at: decided_by.map(|_| format_timestamp(now_ms())),
            reason,
            arguments_hash: self.arguments_hash.clone(),
            waited_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// Takes an approval out of the pending list when the wait ends, however it ends.
struct RemoveOnDrop<'a> {
    approvals: &'a Approvals,
    id: &'a str,
}

impl Drop for RemoveOnDrop<'_> {
    fn drop(&mut self) {
        mcpproxy_support::lock(&self.approvals.waiting).remove(self.id);
    }
}
