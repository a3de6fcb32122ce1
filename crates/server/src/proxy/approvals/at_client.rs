//! Asking the person at the calling client, with a form that shows the call as it will be
//! sent and asks yes or no:
//!
//! - a client that declared `elicitation` in its session is sent `elicitation/create` and
//!   the call waits for the answer ([`ask_client`]);
//! - a client on protocol 2026-07-28 (or later) is answered with an `input_required` result
//!   that carries the same question, and its retry of the call carries the answer
//!   ([`Approvals::through_input`]). The `requestState` names a question kept here, bound
//!   to the call's server, tool, canonical arguments' hash, caller and session, answered
//!   once: a retry that names another call's question, or one used or expired, is
//!   refused. What the upstream itself asked in an earlier round (its own `requestState`
//!   and the answers the client gave it) is kept with the question and passed on once the
//!   call is approved. In a cluster the question is also kept in PostgreSQL, so the retry
//!   may reach any replica, and is taken from there once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rmcp::model::{ElicitationAction, InputRequiredResult, InputResponses};
use serde_json::Value;

use mcpproxy_config::CallClass;
use mcpproxy_policy::Evaluation;
use mcpproxy_upstream::back_channel::CallOrigin;

use super::{Approvals, Asking, MAX_PENDING, MAX_REASON_BYTES, PersonSaid};
use crate::proxy::CallContext;

/// The key of the approval question among a round's `inputRequests`.
pub(super) const INPUT_KEY: &str = "mcpproxy_approval";

/// How a `requestState` of the proxy's approval question starts; what follows is its id.
const STATE_PREFIX: &str = "mcpproxy-approval:";

/// The most upstream answers kept with a question, in bytes of JSON.
const MAX_KEPT_RESPONSE_BYTES: usize = 256 * 1024;

/// A question sent to a 2026-07-28 client in an `input_required` result, until its retry;
/// in a cluster also kept in PostgreSQL, as this JSON, for the replica the retry reaches.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct AskedAtClient {
    server: String,
    tool: String,
    arguments_hash: String,
    caller: Option<String>,
    session_id: Option<String>,
    /// When it was asked and when it expires, in Unix milliseconds (replicas share them).
    asked_ms: u64,
    expires_ms: u64,
    /// What the upstream asked the client in an earlier round of this call: passed on with
    /// the approved call.
    upstream_state: Option<String>,
    upstream_responses: Option<InputResponses>,
    /// Kept in the cluster's PostgreSQL too: the retry must take it from there, so that no
    /// other replica can take it again.
    #[serde(skip)]
    shared: bool,
}

impl AskedAtClient {
    /// When the question was asked, on this process's clock.
    fn asked(&self) -> Instant {
        let ago = Duration::from_millis(mcpproxy_activity::now_ms().saturating_sub(self.asked_ms));
        Instant::now().checked_sub(ago).unwrap_or_else(Instant::now)
    }
}

/// The question and the form of its answer, as both paths ask it.
fn question(
    evaluation: &Evaluation,
    draft: &mcpproxy_activity::ActivityRecord,
    class: CallClass,
) -> Value {
    let request = &evaluation.request;
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
    serde_json::json!({"mode": "form", "message": message, "requestedSchema": schema})
}

/// How a person answered the form: approved, or refused with the record's decision and the
/// caller's message.
enum Said {
    Approved(Option<String>),
    Refused(&'static str, String, Option<String>),
}

impl Said {
    /// What the person's answer makes of the call whose asking is `record`.
    fn decided(self, record: &Asking) -> PersonSaid {
        match self {
            Said::Approved(reason) => {
                PersonSaid::approved(record.ended("client", Some("client"), "approved", reason))
            }
            Said::Refused(decision, message, reason) => PersonSaid::Refused(
                record.ended("client", Some("client"), decision, reason),
                message,
            ),
        }
    }
}

fn read_answer(action: &ElicitationAction, content: Option<&Value>, name: &str) -> Said {
    let reason = content
        .and_then(|c| c.get("reason"))
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
        .map(|r| mcpproxy_support::cut_to(r, MAX_REASON_BYTES));
    let approved = content
        .and_then(|c| c.get("approve"))
        .and_then(Value::as_bool)
        == Some(true);
    match action {
        ElicitationAction::Accept if approved => Said::Approved(reason),
        ElicitationAction::Cancel => Said::Refused(
            "cancelled",
            format!("The call to '{name}' was cancelled by the user"),
            reason,
        ),
        _ => Said::Refused(
            "denied",
            format!("The call to '{name}' was denied by the user"),
            reason,
        ),
    }
}

/// Asks the person at the client through `elicitation/create`, and waits.
pub(super) async fn ask_client(
    origin: &CallOrigin,
    evaluation: &Evaluation,
    draft: &mcpproxy_activity::ActivityRecord,
    class: CallClass,
    timeout: Duration,
    record: &Asking,
) -> PersonSaid {
    use rmcp::model::{ClientResult, ServerRequest};
    let name = evaluation.request.tool.qualified_name();
    let Ok(params) = serde_json::from_value(question(evaluation, draft, class)) else {
        return PersonSaid::Refused(
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
            return PersonSaid::Refused(
                record.ended("client", None, "refused", None),
                format!(
                    "The call to '{name}' was not approved: the client answered the question with something else"
                ),
            );
        }
        Err(mcpproxy_upstream::back_channel::AskError::Timeout { .. }) => {
            return PersonSaid::Refused(
                record.ended("client", None, "timed_out", None),
                format!(
                    "The call to '{name}' was not approved within {} s (approvals.timeout_secs); it was not sent",
                    timeout.as_secs()
                ),
            );
        }
        Err(e) => {
            return PersonSaid::Refused(
                record.ended("client", None, "refused", None),
                format!("The call to '{name}' was not approved: {e}"),
            );
        }
    };
    read_answer(&result.action, result.content.as_ref(), &name).decided(record)
}

/// Whether the person at `origin` is asked with an `input_required` result: a client on
/// protocol 2026-07-28 or later that can answer a form.
pub(super) fn answers_input(origin: &CallOrigin) -> bool {
    origin.protocol.is_some() && origin.can_elicit()
}

impl Approvals {
    /// A call of a 2026-07-28 client that needs a person: asks with an `input_required`
    /// result, or reads the answer its retry carries.
    pub(super) async fn through_input(
        &self,
        origin: &CallOrigin,
        evaluation: &Evaluation,
        draft: &mcpproxy_activity::ActivityRecord,
        class: CallClass,
        context: &CallContext,
    ) -> PersonSaid {
        let request = &evaluation.request;
        let name = request.tool.qualified_name();
        let arguments_hash = mcpproxy_activity::canonical_sha256(&request.args);
        let caller = context.identity.as_ref().map(|i| i.subject.clone());
        let theirs = origin
            .request_state
            .as_deref()
            .and_then(|s| s.strip_prefix(STATE_PREFIX));
        let (upstream_state, upstream_responses) = match theirs {
            None => (origin.request_state.clone(), origin.input_responses.clone()),
            Some(id) => {
                let asked = self.take_question(id).await;
                let record = |decision: &str, started: Instant| {
                    Asking {
                        id: id.to_owned(),
                        arguments_hash: arguments_hash.clone(),
                        started,
                    }
                    .ended("client", None, decision, None)
                };
                let Some(asked) = asked else {
                    return PersonSaid::Refused(
                        record("refused", Instant::now()),
                        format!(
                            "The call to '{name}' was not sent: the approval its requestState names \
                             is unknown, was answered already or expired. Call again without \
                             requestState to be asked again"
                        ),
                    );
                };
                let same_call = asked.server == request.tool.server
                    && asked.tool == request.tool.name
                    && asked.arguments_hash == arguments_hash
                    && asked.caller == caller
                    && asked.session_id == context.session_id;
                if !same_call {
                    return PersonSaid::Refused(
                        record("refused", asked.asked()),
                        format!(
                            "The call to '{name}' was not sent: the approval its requestState names \
                             was asked for another call (another tool, other arguments or another \
                             caller), and releases only that one. Call again without requestState \
                             to be asked about this one"
                        ),
                    );
                }
                if mcpproxy_activity::now_ms() > asked.expires_ms {
                    return PersonSaid::Refused(
                        record("timed_out", asked.asked()),
                        format!(
                            "The call to '{name}' was not approved within {} s \
                             (approvals.timeout_secs); it was not sent",
                            self.config.timeout.as_secs()
                        ),
                    );
                }
                let answer = origin
                    .input_responses
                    .as_ref()
                    .and_then(|r| r.get(INPUT_KEY))
                    .and_then(|a| serde_json::to_value(a).ok());
                if let Some(answer) = answer {
                    let asking = Asking {
                        id: id.to_owned(),
                        arguments_hash,
                        started: asked.asked(),
                    };
                    let action = answer
                        .get("action")
                        .cloned()
                        .and_then(|a| serde_json::from_value::<ElicitationAction>(a).ok())
                        .unwrap_or(ElicitationAction::Decline);
                    return match read_answer(&action, answer.get("content"), &name).decided(&asking)
                    {
                        PersonSaid::Approved { approval, .. } => PersonSaid::Approved {
                            approval,
                            resume: Some((asked.upstream_responses, asked.upstream_state)),
                        },
                        refused => refused,
                    };
                }
                // The retry lacks the answer: asked again, the upstream's round kept.
                (asked.upstream_state, asked.upstream_responses)
            }
        };
        self.ask_input(
            evaluation,
            draft,
            class,
            context,
            arguments_hash,
            upstream_state,
            upstream_responses,
        )
        .await
    }

    /// Takes the question `id` out, once: from this replica and, in a cluster, from
    /// PostgreSQL. A question that was shared but is no longer there was taken through
    /// another replica (or expired), and is not taken here either; when PostgreSQL cannot
    /// say, a shared question is not taken (its answer could be used twice).
    async fn take_question(&self, id: &str) -> Option<AskedAtClient> {
        let here = mcpproxy_support::lock(&self.asked_at_client).remove(id);
        let Some(cluster) = self.shared.get() else {
            return here;
        };
        match cluster.take_question(id).await {
            Ok(Some(shared)) => match serde_json::from_value(shared) {
                Ok(shared) => Some(shared),
                Err(e) => {
                    tracing::warn!("the shared approval question {id} is unreadable: {e}");
                    here.filter(|h| !h.shared)
                }
            },
            Ok(None) => here.filter(|h| !h.shared),
            Err(e) => {
                tracing::warn!("cannot take approval question {id} from the cluster: {e}");
                here.filter(|h| !h.shared)
            }
        }
    }

    /// Keeps a new question for this call and makes the `input_required` result that asks it.
    #[allow(
        clippy::too_many_arguments,
        reason = "one call's parts, each used once"
    )]
    async fn ask_input(
        &self,
        evaluation: &Evaluation,
        draft: &mcpproxy_activity::ActivityRecord,
        class: CallClass,
        context: &CallContext,
        arguments_hash: String,
        upstream_state: Option<String>,
        upstream_responses: Option<InputResponses>,
    ) -> PersonSaid {
        let request = &evaluation.request;
        let name = request.tool.qualified_name();
        let (id, _) = mcpproxy_activity::new_id();
        let asking = Asking {
            id: id.clone(),
            arguments_hash: arguments_hash.clone(),
            started: Instant::now(),
        };
        let kept_bytes = upstream_responses
            .as_ref()
            .and_then(|r| serde_json::to_vec(r).ok())
            .map_or(0, |b| b.len());
        if kept_bytes > MAX_KEPT_RESPONSE_BYTES {
            return PersonSaid::Refused(
                asking.ended("client", None, "refused", None),
                format!(
                    "The call to '{name}' needs a person's approval, but the answers it carries for \
                     the upstream are larger than {} KiB; it was not sent",
                    MAX_KEPT_RESPONSE_BYTES / 1024
                ),
            );
        }
        let result = serde_json::json!({
            "resultType": "input_required",
            "inputRequests": {
                INPUT_KEY: {"method": "elicitation/create", "params": question(evaluation, draft, class)}
            },
            "requestState": format!("{STATE_PREFIX}{id}"),
        });
        let Ok(result) = serde_json::from_value::<InputRequiredResult>(result) else {
            return PersonSaid::Refused(
                asking.ended("client", None, "refused", None),
                format!("The call to '{name}' needs approval, but the question could not be built"),
            );
        };
        let asked_ms = mcpproxy_activity::now_ms();
        let timeout_ms = u64::try_from(self.config.timeout.as_millis()).unwrap_or(u64::MAX);
        let mut question = AskedAtClient {
            server: request.tool.server.clone(),
            tool: request.tool.name.clone(),
            arguments_hash,
            caller: context.identity.as_ref().map(|i| i.subject.clone()),
            session_id: context.session_id.clone(),
            asked_ms,
            expires_ms: asked_ms.saturating_add(timeout_ms),
            upstream_state,
            upstream_responses,
            shared: false,
        };
        {
            let mut asked = mcpproxy_support::lock(&self.asked_at_client);
            asked.retain(|_, a| a.expires_ms > asked_ms);
            if asked.len() >= MAX_PENDING {
                return PersonSaid::Refused(
                    asking.ended("client", None, "refused", None),
                    format!(
                        "The call to '{name}' needs a person's approval, but {MAX_PENDING} \
                         questions already wait for an answer; it was not sent"
                    ),
                );
            }
        }
        // In a cluster the retry may reach another replica: the question goes to PostgreSQL
        // too. Without it only this replica can take the answer.
        if let Some(cluster) = self.shared.get() {
            let shared = match serde_json::to_value(&question) {
                Ok(json) => cluster
                    .share_question(&id, &json, self.config.timeout)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match shared {
                Ok(()) => question.shared = true,
                Err(e) => tracing::warn!(
                    "approval question {id} can be answered through this replica only: {e}"
                ),
            }
        }
        mcpproxy_support::lock(&self.asked_at_client).insert(id, question);
        PersonSaid::Asking(asking.ended("client", None, "asked", None), result)
    }
}

/// The questions asked through `input_required`, by id.
pub(super) type AskedAtClientMap = HashMap<String, AskedAtClient>;

#[cfg(test)]
mod tests {
    use super::*;

    fn said(action: ElicitationAction, content: Value) -> String {
        match read_answer(&action, Some(&content), "fx:drop") {
            Said::Approved(reason) => format!("approved {reason:?}"),
            Said::Refused(decision, message, _) => format!("{decision}: {message}"),
        }
    }

    #[test]
    fn only_an_accepted_form_that_says_approve_approves() {
        let yes = serde_json::json!({"approve": true, "reason": "ticket 4"});
        assert_eq!(
            said(ElicitationAction::Accept, yes.clone()),
            "approved Some(\"ticket 4\")"
        );
        assert_eq!(
            said(
                ElicitationAction::Accept,
                serde_json::json!({"approve": false})
            ),
            "denied: The call to 'fx:drop' was denied by the user"
        );
        // A form accepted with anything but `true` (a string, nothing) is a denial.
        assert!(
            said(
                ElicitationAction::Accept,
                serde_json::json!({"approve": "true"})
            )
            .starts_with("denied")
        );
        assert!(said(ElicitationAction::Accept, serde_json::json!({})).starts_with("denied"));
        assert!(said(ElicitationAction::Decline, yes.clone()).starts_with("denied"));
        assert_eq!(
            said(ElicitationAction::Cancel, yes),
            "cancelled: The call to 'fx:drop' was cancelled by the user"
        );
    }
}
