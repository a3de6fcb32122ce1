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
//!
//! In a cluster ([`Approvals::share_through`]) each waiting call is also a row in
//! PostgreSQL: every replica lists it, an answer through any replica is taken once there and
//! announced, and the replica where the call waits releases it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::oneshot;

use mcpproxy_activity::{ApprovalRecord, format_timestamp, now_ms};
use mcpproxy_cluster::{Cluster, SharedAnswer};
use mcpproxy_config::{ApprovalsConfig, CallClass, Via};
use mcpproxy_policy::{Evaluation, OperationType};
use mcpproxy_upstream::back_channel::CallOrigin;

use super::{CallContext, Proxy};

mod at_client;

use at_client::{AskedAtClientMap, ask_client};

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
    #[error("cannot answer approval {id} through the cluster's shared state: {reason}")]
    Shared { id: String, reason: String },
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
    /// The cluster this replica shares its waiting calls with, if any.
    shared: OnceLock<Arc<Cluster>>,
    /// The questions asked through `input_required`, until the client's retry.
    asked_at_client: Mutex<AskedAtClientMap>,
}

/// What a person said about a call, as the call goes on.
pub(super) enum PersonSaid {
    /// No rule asks about this call.
    NotAsked,
    /// Approved; `resume` is what the upstream asked in an earlier round of the call, to
    /// pass on with it (`input_responses`, `request_state`).
    Approved {
        approval: ApprovalRecord,
        resume: Option<(Option<rmcp::model::InputResponses>, Option<String>)>,
    },
    /// Not approved: the record, and what the caller is told.
    Refused(ApprovalRecord, String),
    /// A 2026-07-28 client is asked with this `input_required` result; its retry answers.
    Asking(ApprovalRecord, rmcp::model::InputRequiredResult),
}

impl PersonSaid {
    /// Approved, with nothing of the upstream's to pass on.
    fn approved(approval: ApprovalRecord) -> Self {
        Self::Approved {
            approval,
            resume: None,
        }
    }
}

impl Approvals {
    pub fn new(config: ApprovalsConfig) -> Self {
        Self {
            config,
            waiting: Mutex::default(),
            shared: OnceLock::new(),
            asked_at_client: Mutex::default(),
        }
    }

    /// Shares the waiting calls with the other replicas of `cluster`: listed and answered
    /// through any of them. Set once, at start.
    pub fn share_through(&self, cluster: Arc<Cluster>) {
        let _ = self.shared.set(cluster);
    }

    /// The calls waiting on this replica now, oldest first.
    pub fn pending(&self) -> Vec<PendingApproval> {
        let waiting = mcpproxy_support::lock(&self.waiting);
        let mut all: Vec<PendingApproval> = waiting.values().map(|w| w.shown.clone()).collect();
        all.sort_by(|a, b| a.asked_at.cmp(&b.asked_at).then(a.id.cmp(&b.id)));
        all
    }

    /// The calls waiting on any replica of the cluster (this one's included), oldest
    /// first; without a cluster, or when its database cannot be read, this replica's.
    pub async fn listed(&self) -> Vec<PendingApproval> {
        let mut all = self.pending();
        let Some(cluster) = self.shared.get() else {
            return all;
        };
        match cluster.pending_approvals().await {
            Ok(rows) => {
                for row in rows {
                    match serde_json::from_value::<PendingApproval>(row) {
                        Ok(shown) if !all.iter().any(|a| a.id == shown.id) => all.push(shown),
                        Ok(_) => {}
                        Err(e) => tracing::warn!("a shared pending approval is unreadable: {e}"),
                    }
                }
                all.sort_by(|a, b| a.asked_at.cmp(&b.asked_at).then(a.id.cmp(&b.id)));
            }
            Err(e) => tracing::warn!(
                "listing only this replica's pending approvals, the cluster's cannot be read: {e}"
            ),
        }
        all
    }

    /// Answers the call waiting on `id`, on this replica or (in a cluster) on another: it
    /// is sent (approve) or refused (deny). In a cluster the first answer through any
    /// replica is the one taken.
    pub async fn answer(&self, id: &str, answer: Answer) -> Result<(), AnswerError> {
        let answer = Answer {
            reason: answer
                .reason
                .map(|r| mcpproxy_support::cut_to(&r, MAX_REASON_BYTES)),
            ..answer
        };
        let here = mcpproxy_support::lock(&self.waiting).contains_key(id);
        if let Some(cluster) = self.shared.get() {
            let shared = SharedAnswer {
                approve: answer.approve,
                by: answer.by.clone(),
                reason: answer.reason.clone(),
            };
            match cluster.answer_approval(id, &shared).await {
                // Taken: the replica that holds the call hears of it (this one too).
                Ok(true) if !here => return Ok(()),
                Ok(true) => {}
                Ok(false) if here => {
                    // Not shared (its row could not be written) or answered elsewhere
                    // first: the waiting call reads the shared answer, if any, itself.
                    if let Ok(Some(_)) = cluster.approval_answer(id).await {
                        return Err(AnswerError::NotWaiting(mcpproxy_support::quote(id)));
                    }
                }
                Ok(false) => return Err(AnswerError::NotWaiting(mcpproxy_support::quote(id))),
                Err(e) if here => {
                    tracing::warn!("answering approval {id} on this replica only: {e}");
                }
                Err(e) => {
                    return Err(AnswerError::Shared {
                        id: mcpproxy_support::quote(id),
                        reason: e.to_string(),
                    });
                }
            }
        }
        self.answer_here(id, answer)
    }

    /// Releases the call waiting on `id` on this replica with `answer`.
    fn answer_here(&self, id: &str, answer: Answer) -> Result<(), AnswerError> {
        let waiting = mcpproxy_support::lock(&self.waiting).remove(id);
        let Some(waiting) = waiting else {
            return Err(AnswerError::NotWaiting(mcpproxy_support::quote(id)));
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

    /// Asks a person about an allowed call when a rule says so (see [`PersonSaid`]):
    /// refused when denied, cancelled, timed out, or no one could be asked.
    pub(super) async fn ask_person(
        &self,
        evaluation: &Evaluation,
        draft: &mcpproxy_activity::ActivityRecord,
        context: &CallContext,
    ) -> PersonSaid {
        let Some((class, via)) = self.approvals.rule_for(evaluation) else {
            return PersonSaid::NotAsked;
        };
        let said = if via == Via::Client
            && let Some(origin) = context
                .origin
                .as_ref()
                .filter(|o| at_client::answers_input(o))
        {
            self.approvals
                .through_input(origin, evaluation, draft, class, context)
                .await
        } else {
            self.ask_and_wait(evaluation, draft, context, class, via)
                .await
        };
        if let PersonSaid::Approved { approval, .. } | PersonSaid::Refused(approval, _) = &said {
            self.metrics
                .approval_decided(&approval.decision, &approval.asked_via);
        }
        said
    }

    /// Asks the person at the client through elicitation when the rule and the client allow
    /// it, otherwise makes the call a pending approval; either way waits for the answer.
    async fn ask_and_wait(
        &self,
        evaluation: &Evaluation,
        draft: &mcpproxy_activity::ActivityRecord,
        context: &CallContext,
        class: CallClass,
        via: Via,
    ) -> PersonSaid {
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
        if via == Via::Client
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
    ) -> PersonSaid {
        let id = shown.id.clone();
        let (tx, rx) = oneshot::channel();
        let cluster = self.approvals.shared.get();
        // Listening before the row is shared: an answer cannot slip in between.
        let answers = cluster.map(|c| c.approval_answers());
        let row = cluster.and(serde_json::to_value(&shown).ok());
        {
            let mut waiting = mcpproxy_support::lock(&self.approvals.waiting);
            if waiting.len() >= MAX_PENDING {
                return PersonSaid::Refused(
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
        if let (Some(cluster), Some(row)) = (cluster, row)
            && let Err(e) = cluster.share_approval(&id, &row, timeout).await
        {
            tracing::warn!(
                "approval {id} can be answered through this replica only, the cluster's shared state failed: {e}"
            );
        }
        tracing::info!(approval = %id, tool = %name, "a call waits for a person's approval (`mcpproxy approvals approve {id}`)");
        let cancelled = async {
            match origin {
                Some(origin) => origin.cancelled.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let progress = tell_progress(origin, &id, timeout);
        let elsewhere = answered_elsewhere(cluster, &id, answers);
        let answer = async {
            tokio::select! {
                answer = rx => answer.ok(),
                answer = elsewhere => Some(answer),
            }
        };
        tokio::select! {
            answer = tokio::time::timeout(timeout, answer) => match answer {
                Ok(Some(answer)) if answer.approve => {
                    PersonSaid::approved(record.ended("page", Some(&answer.by), "approved", answer.reason))
                }
                Ok(Some(answer)) => {
                    let message = format!("The call to '{name}' was denied by {}", answer.by_whom());
                    PersonSaid::Refused(record.ended("page", Some(&answer.by), "denied", answer.reason), message)
                }
                Ok(None) | Err(_) => PersonSaid::Refused(
                    record.ended("page", None, "timed_out", None),
                    format!(
                        "The call to '{name}' was not approved within {} s (approvals.timeout_secs); it was not sent",
                        timeout.as_secs()
                    ),
                ),
            },
            never = progress => match never {},
            () = cancelled => PersonSaid::Refused(
                record.ended("page", None, "cancelled", None),
                format!("The call to '{name}' was cancelled while it waited for approval"),
            ),
        }
    }
}

/// How often a call waiting in a cluster reads its row, in case an answer's announcement
/// was missed (the listening connection was being made again).
const SHARED_CHECK_EVERY: Duration = Duration::from_secs(2);

/// The answer given to `id` through another replica (or this one, through the cluster):
/// heard announced, or read from its row now and then. Never ends without a cluster.
async fn answered_elsewhere(
    cluster: Option<&Arc<Cluster>>,
    id: &str,
    answers: Option<tokio::sync::broadcast::Receiver<String>>,
) -> Answer {
    use tokio::sync::broadcast::error::RecvError;
    let Some(cluster) = cluster else {
        return std::future::pending().await;
    };
    let mut answers = answers;
    // One clock for the whole wait: announcements of other calls' answers do not put the
    // next look at the row off.
    let mut check = tokio::time::interval_at(
        tokio::time::Instant::now() + SHARED_CHECK_EVERY,
        SHARED_CHECK_EVERY,
    );
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let heard = async {
            match answers.as_mut() {
                Some(answers) => answers.recv().await,
                None => std::future::pending().await,
            }
        };
        let look = tokio::select! {
            heard = heard => match heard {
                Ok(answered) => answered == id,
                Err(RecvError::Lagged(_)) => true,
                Err(RecvError::Closed) => {
                    answers = None;
                    true
                }
            },
            _ = check.tick() => true,
        };
        if !look {
            continue;
        }
        match cluster.approval_answer(id).await {
            Ok(Some(answer)) => {
                return Answer {
                    approve: answer.approve,
                    by: answer.by,
                    reason: answer.reason,
                };
            }
            Ok(None) => {}
            Err(e) => tracing::debug!("cannot read approval {id}'s shared answer: {e}"),
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
        // `cli@replica-b`: answered through another replica of the cluster.
        let who = self
            .by
            .split_once('@')
            .map_or(self.by.as_str(), |(who, _)| who);
        match who {
            "client" => "the user".to_owned(),
            "cli" => "a person (mcpproxy approvals deny)".to_owned(),
            other => format!("a person ({other})"),
        }
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
        if let (Some(cluster), Ok(runtime)) = (
            self.approvals.shared.get(),
            tokio::runtime::Handle::try_current(),
        ) {
            let (cluster, id) = (cluster.clone(), self.id.to_owned());
            runtime.spawn(async move {
                if let Err(e) = cluster.withdraw_approval(&id).await {
                    tracing::debug!("approval {id}'s shared row stays until it expires: {e}");
                }
            });
        }
    }
}
