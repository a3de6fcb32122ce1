//! The proxy's core ([`Proxy`]): a call resolved, judged by the pipeline, forwarded and
//! recorded, with who is calling ([`CallContext`]) and what happened ([`CallOutcome`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::CallToolResult;
use serde::Serialize;
use tracing::Instrument;
use tracing::field::Empty;

use super::approvals::PersonSaid;
use super::record::Concluded as _;
use super::{ActivitySettings, CallInput, CallReport};
use crate::metrics::Metrics;
use mcpproxy_activity::{ClientRecord, Journal, Source, Status};
use mcpproxy_policy::{
    Annotations, CompactJson, EffectiveAnnotations, Evaluation, Pipeline, SafetyClass, ToolScanner,
    call_with,
};
use mcpproxy_upstream::back_channel::CallOrigin;
use mcpproxy_upstream::index::ToolIndex;
use mcpproxy_upstream::{self as upstream, State, Upstreams};

/// Who is calling, for the audit record.
#[derive(Debug, Clone)]
pub struct CallContext {
    pub source: Source,
    /// Judge and record the call, but do not send it (`mcpproxy call --dry-run`).
    pub dry_run: bool,
    /// Overrides the upstream's call timeout.
    pub timeout: Option<Duration>,
    pub session_id: Option<String>,
    pub request_id: Option<String>,
    pub client: Option<ClientRecord>,
    /// The MCP client request the call came from, when it came over MCP: what the upstream
    /// sends about the call (progress, questions for the user) goes back there.
    pub origin: Option<CallOrigin>,
    /// The record this call belongs to (a `code_execution`'s, for its inner calls).
    pub parent_id: Option<String>,
    /// The id (and its milliseconds) the call's record takes, when the caller must know it
    /// before the call is made (a `code_execution` lists its inner calls' records).
    pub record_id: Option<(String, u64)>,
    /// Who is calling, when the client logged in (`auth`).
    pub identity: Option<mcpproxy_activity::IdentityRecord>,
}

impl CallContext {
    pub fn new(source: Source) -> Self {
        Self {
            source,
            dry_run: false,
            timeout: None,
            session_id: None,
            request_id: None,
            client: None,
            origin: None,
            parent_id: None,
            record_id: None,
            identity: None,
        }
    }

    /// The logged-in caller as the policy's plugins see it (`host.caller`).
    pub fn caller(&self) -> Option<Arc<mcpproxy_policy::Caller>> {
        self.identity.as_ref().map(|identity| {
            Arc::new(mcpproxy_policy::Caller {
                subject: identity.subject.clone(),
                groups: identity.groups.clone(),
            })
        })
    }
}

/// What happened to a call.
#[derive(Debug)]
pub enum CallOutcome {
    /// Refused before the policy ran: unknown server or tool, unusable server.
    Refused(String),
    /// Refused by a rate limit before the policy ran.
    Limited(super::Limited),
    /// The policy rejected it; the upstream was not contacted.
    Blocked(Evaluation),
    /// Held back by the trust rules (a quarantined server, a tool changed since approval):
    /// `detail` is what the caller reads (the security analysis, the change); the record
    /// keeps the one-line message.
    Held { detail: String },
    /// A dry run: the verdict, with nothing sent upstream.
    DryRun(Evaluation),
    /// The policy let it through and the upstream was called.
    Called {
        evaluation: Evaluation,
        result: Result<CallToolResult, upstream::Error>,
    },
    /// The policy let it through and the upstream needs input from the client before it
    /// answers (2026-07-28 multi-round-trip); the client calls again with its answers.
    InputRequired {
        evaluation: Evaluation,
        result: rmcp::model::InputRequiredResult,
    },
    /// The policy let it through and the upstream runs it as a task (the tasks extension),
    /// which the client follows with `tasks/get`; `task.taskId` is the server's own.
    Task {
        evaluation: Evaluation,
        server: String,
        task: rmcp::model::CreateTaskResult,
    },
}

impl CallOutcome {
    /// How the call ended and the policy's decision, as metric labels.
    fn labels(&self) -> (&'static str, &'static str) {
        let decision = |evaluation: &Evaluation| evaluation.outcome.decision.as_str();
        match self {
            Self::Refused(_) => ("refused", "none"),
            Self::Limited(_) => ("rate_limited", "none"),
            Self::Held { .. } => ("held", "none"),
            Self::Blocked(evaluation) => ("blocked", decision(evaluation)),
            Self::DryRun(evaluation) => ("dry_run", decision(evaluation)),
            Self::InputRequired { evaluation, .. } => ("input_required", decision(evaluation)),
            Self::Task { evaluation, .. } => ("task", decision(evaluation)),
            Self::Called { evaluation, result } => match result {
                Ok(result) if result.is_error == Some(true) => ("tool_error", decision(evaluation)),
                Ok(_) => ("success", decision(evaluation)),
                Err(_) => ("upstream_error", decision(evaluation)),
            },
        }
    }
}

/// The pipeline's answer, before any upstream is contacted.
pub(super) enum Judged {
    Refused(String),
    Held { message: String, detail: String },
    Blocked(Evaluation),
    Allowed(Arc<upstream::Upstream>, Evaluation),
}

/// One `retrieve_tools` hit.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct RetrievedTool {
    /// `server:tool`, what the call variants take as `name`.
    pub name: String,
    pub server: String,
    pub description: String,
    #[serde(rename = "inputSchema")]
    pub input_schema: CompactJson,
    pub score: f32,
    /// The effective annotations: the server's own, else the annotators'.
    pub annotations: Option<Annotations>,
    pub annotation_source: String,
    pub safety_class: SafetyClass,
    pub call_with: String,
    /// The JSON Schema of the tool's `structuredContent`, when the server gave one.
    #[serde(
        default,
        rename = "outputSchema",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_schema: Option<CompactJson>,
    /// The tool's `_meta`, as the server sent it.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Value>,
}

/// The shared proxy state.
pub struct Proxy {
    /// The policy in force; replaced whole by [`Proxy::replace_pipeline`] (a call keeps the
    /// one it started with).
    pipeline: std::sync::RwLock<Arc<Pipeline>>,
    pub(super) upstreams: Arc<Upstreams>,
    pub(super) index: Arc<ToolIndex>,
    pub(super) journal: Arc<Journal>,
    pub(super) activity: ActivitySettings,
    pub(super) scanner: Option<Arc<dyn ToolScanner>>,
    pub(super) metrics: Arc<Metrics>,
    /// The tasks clients follow through this proxy.
    pub(super) tasks: super::tasks::TaskRoutes,
    /// The result guards every upstream answer goes through; replaced whole by
    /// [`Proxy::replace_guards`] (a plugin reload).
    /// Shared with the back channel, which runs them over relayed log and progress messages.
    guards: Arc<std::sync::RwLock<Arc<mcpproxy_policy::Guards>>>,
    /// The `code_execution` tool, when the config enables it.
    pub(super) code: Option<Arc<super::CodeExecutor>>,
    /// The `scopes` rules: what logged-in callers see (see `scoped`).
    pub(super) scopes: Arc<crate::scoping::Scopes>,
    /// The `rate_limits` and their buckets (see `limits`).
    pub(super) limits: Arc<super::RateLimits>,
    /// The launches analyses showed lately (see `review`).
    pub(super) shown_launches: super::review::ShownLaunches,
    /// The calls waiting for a person (see `approvals`).
    pub(super) approvals: Arc<super::Approvals>,
}

impl Proxy {
    pub fn new(
        pipeline: Arc<Pipeline>,
        upstreams: Arc<Upstreams>,
        index: Arc<ToolIndex>,
        journal: Arc<Journal>,
        activity: ActivitySettings,
    ) -> Self {
        upstreams
            .back_channel()
            .set_observer(Arc::new(super::forwarded::Recorder {
                journal: journal.clone(),
                settings: activity.clone(),
            }));
        let guards: Arc<std::sync::RwLock<Arc<mcpproxy_policy::Guards>>> = Arc::default();
        upstreams
            .back_channel()
            .set_relay_guard(Arc::new(super::guard::RelayGuards {
                guards: guards.clone(),
            }));
        Self {
            pipeline: std::sync::RwLock::new(pipeline),
            upstreams,
            index,
            journal,
            activity,
            scanner: None,
            metrics: Arc::default(),
            tasks: super::tasks::TaskRoutes::default(),
            guards,
            code: None,
            scopes: Arc::default(),
            limits: Arc::default(),
            shown_launches: Default::default(),
            approvals: Arc::default(),
        }
    }

    /// The policy pipeline in force now.
    pub fn pipeline(&self) -> Arc<Pipeline> {
        mcpproxy_support::read_lock(&self.pipeline).clone()
    }

    /// Puts `pipeline` in force for calls from now on (a plugin reload); calls already being
    /// judged finish on the one they started with.
    pub fn replace_pipeline(&self, pipeline: Arc<Pipeline>) {
        *mcpproxy_support::write_lock(&self.pipeline) = pipeline;
    }

    /// The result guards in force now.
    pub fn guards(&self) -> Arc<mcpproxy_policy::Guards> {
        mcpproxy_support::read_lock(&self.guards).clone()
    }

    /// Puts `guards` in force for answers from now on (a plugin reload).
    pub fn replace_guards(&self, guards: Arc<mcpproxy_policy::Guards>) {
        *mcpproxy_support::write_lock(&self.guards) = guards;
    }

    /// Counts calls, policy time and plugin faults into `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Offers the `code_execution` tool (see `code`).
    pub fn with_code_execution(mut self, code: Option<Arc<super::CodeExecutor>>) -> Self {
        self.code = code;
        self
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Sets the scanner behind the security analysis of quarantined servers and changed
    /// tools.
    pub fn with_scanner(mut self, scanner: Option<Arc<dyn ToolScanner>>) -> Self {
        self.scanner = scanner;
        self
    }

    pub fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    pub fn upstreams(&self) -> &Arc<Upstreams> {
        &self.upstreams
    }

    /// Resolves, judges and (if allowed) performs one call, and records it. A refused or
    /// blocked call's record is durable before this returns; an allowed call's `pending`
    /// record is durable (sync mode) or queued (async mode) before the call is sent, and
    /// completed with the outcome right after. A call whose `pending` record the journal
    /// cannot take is refused and not sent ([`unrecorded`]).
    pub async fn call(&self, input: CallInput, context: CallContext) -> CallOutcome {
        let started = Instant::now();
        // Only configured servers become metric labels: a caller cannot add label sets.
        let server = match self.upstreams.get(&input.server) {
            Some(_) => input.server.clone(),
            None => "(unknown)".to_owned(),
        };
        let variant = input.variant.tool_name();
        let span = tracing::info_span!(
            target: mcpproxy_policy::SPAN_TARGET,
            "call",
            otel.name = %format_args!("{variant} {server}:{}", input.tool),
            otel.kind = "server",
            otel.status_code = Empty,
            mcp.method.name = "tools/call",
            mcpproxy.server = %server,
            mcpproxy.tool = %input.tool,
            mcpproxy.variant = variant,
            mcpproxy.source = context.source.as_str(),
            mcpproxy.session_id = context.session_id.as_deref(),
            mcpproxy.dry_run = context.dry_run,
            mcpproxy.status = Empty,
            mcpproxy.decision = Empty,
            mcpproxy.activity_id = Empty,
        );
        let outcome = self
            .call_recorded(input, context, started)
            .instrument(span.clone())
            .await;
        let (status, decision) = outcome.labels();
        span.record("mcpproxy.status", status);
        span.record("mcpproxy.decision", decision);
        if !matches!(status, "success" | "dry_run") {
            span.record("otel.status_code", "ERROR");
        }
        self.metrics
            .call(&server, variant, status, decision, started.elapsed());
        outcome
    }

    async fn call_recorded(
        &self,
        input: CallInput,
        context: CallContext,
        started: Instant,
    ) -> CallOutcome {
        let draft = self.activity.draft(&input, &context);
        tracing::Span::current().record("mcpproxy.activity_id", draft.id.as_str());
        let view = self.view_of(&context);
        // Limits are checked once the caller may know the tool (a hidden one is refused as
        // missing, below), and never for a dry run.
        if !context.dry_run
            && view
                .as_ref()
                .is_none_or(|v| v.sees_tool(&input.server, &input.tool))
            && let Err(limited) = self.take_tokens(&context, &input.server, &input.tool).await
        {
            let record = draft.refused(&limited.message, started);
            self.append(record).await;
            return CallOutcome::Limited(limited);
        }
        match self
            .judge(input, context.timeout, context.caller(), view.as_deref())
            .await
        {
            Judged::Refused(message) => {
                let record = draft.refused(&message, started);
                self.append(record).await;
                CallOutcome::Refused(message)
            }
            Judged::Held { message, detail } => {
                let record = draft.held(&message, started);
                self.append(record).await;
                CallOutcome::Held { detail }
            }
            Judged::Blocked(evaluation) => {
                let record = draft.judged(&evaluation, Status::Blocked, started);
                self.append(record).await;
                if context.dry_run {
                    CallOutcome::DryRun(evaluation)
                } else {
                    CallOutcome::Blocked(evaluation)
                }
            }
            Judged::Allowed(_, evaluation) if context.dry_run => {
                let record = draft.judged(&evaluation, Status::Success, started);
                self.append(record).await;
                CallOutcome::DryRun(evaluation)
            }
            Judged::Allowed(upstream, evaluation) => {
                let (mut draft, mut started, mut context) = (draft, started, context);
                match self.ask_person(&evaluation, &draft, &context).await {
                    PersonSaid::NotAsked => {}
                    PersonSaid::Approved { approval, resume } => {
                        // The call's deadline (and its duration) count from the answer: a
                        // person may take longer than the upstream may (the wait is in the
                        // record's `approval.waited_ms`).
                        started = Instant::now();
                        draft.approval = Some(approval);
                        // The proxy's question and its answer go no further; what the
                        // upstream asked in an earlier round of the call does.
                        if let (Some((responses, state)), Some(origin)) =
                            (resume, context.origin.as_mut())
                        {
                            origin.input_responses = responses;
                            origin.request_state = state;
                        }
                    }
                    PersonSaid::Refused(approval, message) => {
                        let mut record = draft.judged(&evaluation, Status::Blocked, started);
                        record.error_message = Some(message.clone());
                        record.approval = Some(approval);
                        self.append(record).await;
                        return CallOutcome::Refused(message);
                    }
                    PersonSaid::Asking(approval, result) => {
                        let mut record = draft.judged(&evaluation, Status::Success, started);
                        record.approval = Some(approval);
                        self.append(super::record::input_required(record, started))
                            .await;
                        return CallOutcome::InputRequired { evaluation, result };
                    }
                }
                self.call_allowed(upstream, evaluation, draft, &context, started)
                    .await
            }
        }
    }

    /// [`Proxy::call`], summed up as the report the REST API and the CLI print.
    pub async fn call_reported(&self, input: CallInput, context: CallContext) -> CallReport {
        let tool = format!("{}:{}", input.server, input.tool);
        let variant = input.variant;
        let arguments = serde_json::Value::Object(input.args.clone());
        let outcome = self.call(input, context).await;
        CallReport::new(tool, variant, arguments, &outcome)
    }

    /// Puts a call that was refused before it could be read on the record (every refused
    /// call is in the audit trail), with `message`, what the caller was told.
    pub async fn record_malformed_call(
        &self,
        variant: mcpproxy_policy::OperationType,
        call: &serde_json::Map<String, serde_json::Value>,
        message: &str,
        context: &CallContext,
    ) {
        let started = Instant::now();
        let record = self.activity.malformed_draft(variant, call, context);
        self.append(record.refused(message, started)).await;
        self.metrics.call(
            "(unknown)",
            variant.tool_name(),
            "refused",
            "none",
            started.elapsed(),
        );
    }

    /// Writes a record whose call is already decided (refused, held, blocked, a dry run), or
    /// that is not a call's (approvals, tool and server changes): a failure is logged, the
    /// caller's answer stays the same.
    pub async fn append(&self, record: mcpproxy_activity::ActivityRecord) {
        if let Err(e) = self.try_append(record).await {
            tracing::error!("cannot write the activity record: {e}");
        }
    }

    /// Writes the `pending` record of a call about to be sent upstream. `Err` is what the
    /// caller is told when the journal cannot take it: the call must then not be sent.
    pub(super) async fn record_pending(
        &self,
        record: mcpproxy_activity::ActivityRecord,
    ) -> Result<(), String> {
        self.try_append(record).await.map_err(|e| {
            // The journal logs its failure once; each refused call only at debug.
            tracing::debug!("call refused: cannot write its activity record: {e}");
            unrecorded(&e)
        })
    }

    async fn try_append(
        &self,
        record: mcpproxy_activity::ActivityRecord,
    ) -> Result<(), mcpproxy_activity::Error> {
        let span = tracing::info_span!(
            target: mcpproxy_policy::SPAN_TARGET,
            "journal",
            otel.name = "journal append",
            otel.status_code = Empty,
        );
        let result = self.journal.append(record).instrument(span.clone()).await;
        if result.is_err() {
            span.record("otel.status_code", "ERROR");
        }
        result
    }

    /// Resolves the tool and runs the policy pipeline; contacts no upstream. A server still
    /// connecting (just after start) is waited for, within the call's timeout.
    async fn judge(
        &self,
        input: CallInput,
        timeout: Option<Duration>,
        caller: Option<Arc<mcpproxy_policy::Caller>>,
        view: Option<&crate::scoping::View>,
    ) -> Judged {
        // A scoped caller is told the same of a tool hidden from it and of one that does not
        // exist (nor are the servers it does not see named).
        let not_available = || crate::scoping::not_available(&input.server, &input.tool);
        if view.is_some_and(|view| !view.sees_tool(&input.server, &input.tool)) {
            return Judged::Refused(not_available());
        }
        let Some(upstream) = self.upstreams.get(&input.server) else {
            if view.is_some() {
                return Judged::Refused(not_available());
            }
            let known = self.upstreams.names();
            return Judged::Refused(format!(
                "Unknown server '{}' in '{}:{}'. Known servers: {}. Use retrieve_tools to find tools.",
                input.server,
                input.server,
                input.tool,
                if known.is_empty() {
                    "none configured".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        };
        if upstream.is_quarantined() {
            return self.held_quarantined(&upstream).await;
        }
        if let Err(e) = upstream.check_usable() {
            return Judged::Refused(e.to_string());
        }
        if matches!(upstream.state(), State::Disconnected | State::Connecting) {
            upstream
                .wait_while_connecting(upstream.call_timeout(timeout))
                .await;
        }
        // The tool as the server describes it now: annotations are never a stale copy.
        let Some(tool) = upstream.tool(&input.tool) else {
            if view.is_some() && upstream.state() == State::Ready {
                return Judged::Refused(not_available());
            }
            return Judged::Refused(match upstream.state() {
                State::Ready => format!(
                    "Tool '{}:{}' not found: server '{}' has no tool named '{}'. Use retrieve_tools to find tools.",
                    input.server, input.tool, input.server, input.tool
                ),
                state => format!(
                    "Tool '{}:{}' is not available: upstream server '{}' is {state}. It reconnects by itself.",
                    input.server, input.tool, input.server
                ),
            });
        };
        if !upstream.is_trusted(&input.tool) {
            return self.held_changed(&upstream, &tool).await;
        }
        self.evaluate(upstream, tool, input, caller).await
    }

    /// Runs the policy pipeline on a call of `tool`: inline when it is quick (the embedded
    /// plugins on warm instances), else on a blocking thread (plugins are synchronous, and a
    /// plugin from `--plugins` may take milliseconds). The validators see `caller` as the
    /// call's caller (`host.caller`).
    pub(super) async fn evaluate(
        &self,
        upstream: Arc<upstream::Upstream>,
        tool: mcpproxy_policy::Tool,
        input: CallInput,
        caller: Option<Arc<mcpproxy_policy::Caller>>,
    ) -> Judged {
        let pipeline = self.pipeline();
        let (variant, intent) = (input.variant, input.intent);
        let args = serde_json::Value::Object(input.args);
        let judged_at = Instant::now();
        let span = tracing::info_span!(
            target: mcpproxy_policy::SPAN_TARGET,
            "policy",
            otel.name = "policy",
            mcpproxy.decision = Empty,
        );
        let policy_span = span.clone();
        let quick = pipeline.is_quick();
        let judge = move || {
            policy_span.in_scope(|| {
                mcpproxy_policy::with_caller(caller, || {
                    pipeline.evaluate(variant, tool, intent, args)
                })
            })
        };
        let judged = if quick {
            // The embedded plugins on warm instances: microseconds, bounded by their deadline.
            Ok(judge())
        } else {
            tokio::task::spawn_blocking(judge).await
        };
        let evaluation = match judged {
            Ok(evaluation) => {
                span.record("mcpproxy.decision", evaluation.outcome.decision.as_str());
                self.metrics.policy(judged_at.elapsed());
                if let Some(fault) = &evaluation.fault {
                    self.metrics.plugin_fault(&fault.stage, fault.kind.as_str());
                }
                evaluation
            }
            Err(e) => {
                return Judged::Refused(format!(
                    "the policy pipeline failed: {e}; the call was not sent"
                ));
            }
        };
        if evaluation.outcome.is_allowed() {
            Judged::Allowed(upstream, evaluation)
        } else {
            Judged::Blocked(evaluation)
        }
    }

    /// BM25 search over every upstream tool, each hit annotated.
    pub async fn retrieve(
        &self,
        query: String,
        limit: usize,
    ) -> Result<Vec<RetrievedTool>, String> {
        self.retrieve_as(query, limit, None).await
    }

    /// [`Proxy::retrieve`] for a caller who sees `view` only (`None`: everything).
    pub async fn retrieve_as(
        &self,
        query: String,
        limit: usize,
        view: Option<Arc<crate::scoping::View>>,
    ) -> Result<Vec<RetrievedTool>, String> {
        // Hidden hits are dropped after the search: ask for more, keep `limit`.
        let asked = if view.is_some() {
            limit.saturating_mul(4)
        } else {
            limit
        };
        let index = self.index.clone();
        let upstreams = self.upstreams.clone();
        let pipeline = self.pipeline();
        tokio::task::spawn_blocking(move || {
            let hits = index
                .search(&query, asked)
                .map_err(|e| format!("search failed: {e}"))?;
            Ok(hits
                .into_iter()
                .filter(|hit| {
                    view.as_ref()
                        .is_none_or(|v| v.sees_tool(&hit.server, &hit.name))
                })
                .take(limit)
                .filter_map(|hit| {
                    let upstream = upstreams.get(&hit.server)?;
                    let tool = upstream.tool(&hit.name)?;
                    // The index holds trusted tools only; checked again against a race.
                    upstream
                        .is_trusted(&hit.name)
                        .then(|| describe(&pipeline, tool, hit.score))
                })
                .collect())
        })
        .await
        .map_err(|e| format!("search failed: {e}"))?
    }

    /// Every tool of every upstream (or of one), sorted by server and name.
    pub async fn list_tools(&self, server: Option<String>) -> Result<Vec<RetrievedTool>, String> {
        if let Some(name) = &server
            && self.upstreams.get(name).is_none()
        {
            let known = self.upstreams.names();
            return Err(format!(
                "unknown server '{name}'; configured servers: {}",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        }
        let upstreams = self.upstreams.clone();
        let pipeline = self.pipeline();
        tokio::task::spawn_blocking(move || {
            upstreams
                .all()
                .iter()
                .filter(|u| server.as_deref().is_none_or(|s| s == u.name()))
                .flat_map(|u| {
                    u.trusted_tools()
                        .into_iter()
                        .map(|tool| describe(&pipeline, tool, 0.0))
                        .collect::<Vec<_>>()
                })
                .collect()
        })
        .await
        .map_err(|e| format!("listing tools failed: {e}"))
    }
}

/// What a caller is told when the record of its call cannot be written: the call was not
/// sent (`cannot record the call: the activity journal cannot write (No space left on
/// device); nothing was run`).
pub(super) fn unrecorded(e: &mcpproxy_activity::Error) -> String {
    format!("cannot record the call: {e}; nothing was run")
}

/// A tool with its effective annotations and `call_with` advice.
fn describe(pipeline: &Pipeline, tool: mcpproxy_policy::Tool, score: f32) -> RetrievedTool {
    let effective = pipeline.annotate(&tool).unwrap_or_else(|fault| {
        tracing::warn!(
            "annotator fault while listing {}: {fault}",
            tool.qualified_name()
        );
        EffectiveAnnotations::unknown()
    });
    RetrievedTool {
        name: tool.qualified_name(),
        call_with: call_with(effective.annotations.as_ref())
            .tool_name()
            .to_owned(),
        server: tool.server,
        description: tool.description,
        input_schema: tool.input_schema,
        score,
        annotations: effective.annotations,
        annotation_source: effective.source.label().to_owned(),
        safety_class: effective.safety_class,
        output_schema: tool.output_schema,
        meta: tool.meta,
    }
}
