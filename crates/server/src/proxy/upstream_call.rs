//! An allowed call's way to its upstream and back: the pending record first (fail closed:
//! nothing is sent off the record), the call under what is left of its timeout, an answer
//! that asks for input or starts a task, the result guards on the answer (an error's message
//! too), and the completed record.

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::CallToolResult;
use tracing::Instrument;
use tracing::field::Empty;

use super::guard::GuardNote;
use super::record::Concluded as _;
use super::{CallContext, CallOutcome, Proxy};
use mcpproxy_activity::{ActivityRecord, Status};
use mcpproxy_policy::{Caller, Evaluation};
use mcpproxy_upstream as upstream;

impl Proxy {
    /// Sends an allowed call (not a dry run) to `upstream` once its pending record is in the
    /// journal, and records how it ended.
    pub(super) async fn call_allowed(
        &self,
        upstream: Arc<upstream::Upstream>,
        evaluation: Evaluation,
        draft: ActivityRecord,
        context: &CallContext,
        started: Instant,
    ) -> CallOutcome {
        for warning in &evaluation.outcome.warnings {
            tracing::warn!(plugin = %warning.plugin, tool = %evaluation.request.tool.qualified_name(), "policy warning: {}", warning.message);
        }
        let pending = draft.judged(&evaluation, Status::Pending, started);
        let arguments = evaluation.request.args.as_object().cloned();
        // Time spent waiting for a connecting upstream counts against the call.
        let timeout = upstream
            .call_timeout(context.timeout)
            .saturating_sub(started.elapsed());
        let tool = &evaluation.request.tool.name;
        let upstream_span = tracing::info_span!(
            target: mcpproxy_policy::SPAN_TARGET,
            "upstream",
            otel.name = %format_args!("tools/call {tool}"),
            otel.kind = "client",
            otel.status_code = Empty,
            mcpproxy.server = upstream.name(),
            mcpproxy.tool = %tool,
            mcpproxy.outcome = Empty,
        );
        // Fail closed: the request goes upstream only once the journal holds the
        // pending record, so no call runs off the record. This is sequential on
        // purpose (it used to overlap the record's fsync with the upstream call):
        // in sync mode the record must be durable before anything is sent, because
        // a request cannot be taken back once the upstream has it; a call therefore
        // waits for one write-ahead log fsync before it is sent. In async mode
        // `append` only queues the record (microseconds), or refuses it at once
        // while the journal is failing.
        //
        // If this future is dropped from here until the answer is recorded (a
        // script's deadline, a client that cancels), the record ends as abandoned,
        // not `pending` for ever: the upstream may have run the call.
        let pending = super::record::Unanswered::new(&self.journal, pending, started);
        if let Err(refusal) = self.record_pending(pending.record().clone()).await {
            // Refused, not sent: the refusal is the answer, nothing was abandoned.
            drop(pending.answered());
            upstream_span.record("mcpproxy.outcome", "unrecorded");
            upstream_span.record("otel.status_code", "ERROR");
            return CallOutcome::Refused(refusal);
        }
        let asked = Instant::now();
        let answer = upstream
            .call(tool, arguments, Some(timeout), context.origin.as_ref())
            .instrument(upstream_span.clone())
            .await;
        self.metrics.upstream_call(upstream.name(), asked.elapsed());
        self.metrics.tool_call(upstream.name(), tool);
        let result = match answer {
            Ok(upstream::CallAnswer::Complete(result)) => Ok(result),
            Ok(upstream::CallAnswer::InputRequired(result)) => {
                upstream_span.record("mcpproxy.outcome", "input_required");
                self.journal
                    .submit(super::record::input_required(pending.answered(), started));
                return CallOutcome::InputRequired { evaluation, result };
            }
            Ok(upstream::CallAnswer::Task(task)) => {
                upstream_span.record("mcpproxy.outcome", "task");
                return self.task_started(
                    &upstream,
                    task,
                    pending.answered(),
                    started,
                    evaluation,
                    context.origin.as_ref(),
                );
            }
            Err(e) => Err(e),
        };
        let (result, guarded) = self
            .guarded_answer(&evaluation, result, context.caller())
            .await;
        let outcome = match &result {
            Ok(r) if r.is_error == Some(true) => "tool_error",
            Ok(_) => "success",
            Err(_) => "error",
        };
        upstream_span.record("mcpproxy.outcome", outcome);
        if outcome != "success" {
            upstream_span.record("otel.status_code", "ERROR");
        }
        let mut record = super::record::completed(pending.answered(), &result, started);
        guarded.note(&mut record);
        self.journal.submit(record);
        CallOutcome::Called { evaluation, result }
    }

    /// The result guards on a call's answer: on its result, or on the upstream's error
    /// message (the upstream's words too); an error the guards withheld becomes an error
    /// result saying why.
    async fn guarded_answer(
        &self,
        evaluation: &Evaluation,
        result: Result<CallToolResult, upstream::Error>,
        caller: Option<Arc<Caller>>,
    ) -> (Result<CallToolResult, upstream::Error>, GuardNote) {
        match result {
            Ok(r) => {
                let (r, note) = self.guard_tool_result(evaluation, r, caller).await;
                (Ok(r), note)
            }
            // The upstream's error message is its words too.
            Err(e) => match self.guard_call_error(evaluation, e, caller).await {
                Ok((e, note)) => (Err(e), note),
                Err(note) => {
                    let message = note.withheld.clone().unwrap_or_default();
                    let withheld =
                        CallToolResult::error(vec![rmcp::model::ContentBlock::text(message)]);
                    (Ok(withheld), note)
                }
            },
        }
    }
}
