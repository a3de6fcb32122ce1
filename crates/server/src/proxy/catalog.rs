//! What the upstreams offer besides tools: prompts, resources, resource templates and
//! completions, gathered from every usable upstream (or from one, for a direct endpoint)
//! and routed back to the server they came from.
//!
//! On the aggregate endpoint, prompt and resource names carry their server
//! (`server:prompt`) and resource URIs are kept as the server wrote them: a read goes to the
//! server that lists the URI, or whose template matches it. A quarantined, disabled or
//! unconnected server offers nothing. Reading a resource is judged by the policy pipeline
//! as a read of the pseudo-tool [`RESOURCE_READ_TOOL`] and recorded, like a call.
//!
//! Everything else that runs server code is recorded too: `prompts/get` (a `prompt_get`
//! record), `completion/complete` (`completion`) and resource subscriptions (`subscription`).
//! A request to a quarantined server is refused and recorded as blocked; a name or URI that
//! leads to no server is refused unrecorded (no server was asked). The pending record is
//! written while the request is on its way upstream, and completed with its answer.

use std::sync::Arc;
use std::time::Instant;

use futures::future::join_all;
use rmcp::model::{
    ClientRequest, CompleteRequestParams, CompleteResult, GetPromptRequestParams,
    GetPromptResponse, Prompt, ReadResourceRequestParams, ReadResourceResponse, Reference,
    Resource, ResourceTemplate, ServerResult, SubscribeRequestParams, UnsubscribeRequestParams,
};
use serde_json::{Map, Value, json};

use super::record::Concluded as _;
use mcpproxy_activity::{ActivityRecord, RecordType, Status};
use mcpproxy_policy::{Annotations, OperationType, Tool};
use mcpproxy_upstream::{self as upstream, Upstream};

use super::{CallContext, CallInput, Judged, Proxy};

/// The tool name a resource read is judged and recorded as.
pub(super) const RESOURCE_READ_TOOL: &str = "resources/read";

/// Which servers a request sees: every upstream (names carry their server), or one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    All,
    Server(&'a str),
}

/// Why a catalog request failed.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The name or URI does not lead to a usable server (the client's mistake).
    #[error("{0}")]
    NotFound(String),
    /// The policy or the trust rules refused it.
    #[error("{0}")]
    Refused(String),
    /// The server failed or could not be reached.
    #[error(transparent)]
    Upstream(#[from] upstream::Error),
}

/// What a `subscription` record is about: its MCP method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionMethod {
    /// `resources/subscribe`.
    Subscribe,
    /// `resources/unsubscribe` (also sent when the last session watching a URI ends).
    Unsubscribe,
    /// `subscriptions/listen` (protocol 2026-07-28): a stream opened upstream.
    Listen,
}

impl SubscriptionMethod {
    /// The MCP method, kept in the record's `details.method`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Subscribe => "resources/subscribe",
            Self::Unsubscribe => "resources/unsubscribe",
            Self::Listen => "subscriptions/listen",
        }
    }
}

/// The record of a subscription request in progress: made by
/// [`Proxy::subscription_route`] or [`Proxy::subscription_record`], written by
/// [`Proxy::subscription_done`] once the request has ended.
#[derive(Debug)]
pub struct PendingSubscription {
    record: ActivityRecord,
    started: Instant,
}

impl PendingSubscription {
    /// The server the request goes to.
    pub fn server(&self) -> &str {
        &self.record.server_name
    }
}

/// The upstream that answered, and how a result's names are shown.
fn qualify(scope: Scope<'_>, server: &str, name: &str) -> String {
    match scope {
        Scope::All => format!("{server}:{name}"),
        Scope::Server(_) => name.to_owned(),
    }
}

/// Whether `uri` matches an RFC 6570 template well enough to route it: the text before
/// the first expression and after the last one must match.
fn template_matches(template: &str, uri: &str) -> bool {
    let (Some(open), Some(close)) = (template.find('{'), template.rfind('}')) else {
        return template == uri;
    };
    let (prefix, suffix) = (&template[..open], &template[close + 1..]);
    uri.len() >= prefix.len() + suffix.len() && uri.starts_with(prefix) && uri.ends_with(suffix)
}

impl Proxy {
    /// The servers a scope sees, usable now (enabled, not quarantined, connected).
    pub(super) fn catalog_servers(
        &self,
        scope: Scope<'_>,
    ) -> Result<Vec<Arc<Upstream>>, CatalogError> {
        let usable = |u: &Arc<Upstream>| !u.is_quarantined() && u.check_usable().is_ok();
        match scope {
            Scope::All => Ok(self.upstreams.all().into_iter().filter(usable).collect()),
            Scope::Server(name) => {
                let upstream = self.direct_server(name)?;
                Ok(usable(&upstream).then_some(upstream).into_iter().collect())
            }
        }
    }

    /// The server of a direct endpoint, or why there is none.
    pub fn direct_server(&self, name: &str) -> Result<Arc<Upstream>, CatalogError> {
        self.upstreams.get(name).ok_or_else(|| {
            CatalogError::NotFound(format!(
                "there is no upstream server '{}'; configured servers: {}",
                mcpproxy_support::quote(name),
                self.upstreams.names().join(", ")
            ))
        })
    }

    /// The server a name (`server:name` on the aggregate endpoint) belongs to, and the
    /// name as that server knows it. A quarantined server is found too: the caller refuses
    /// the request and records the refusal.
    pub(super) fn find_name<'n>(
        &self,
        scope: Scope<'_>,
        name: &'n str,
        what: &str,
    ) -> Result<(Arc<Upstream>, &'n str), CatalogError> {
        let (server, local) = match scope {
            Scope::Server(server) => (server, name),
            Scope::All => name.split_once(':').ok_or_else(|| {
                CatalogError::NotFound(format!(
                    "{what} '{}' has no server: mcpproxy names them 'server:{what}', as \
                     {what}s/list shows",
                    mcpproxy_support::quote(name)
                ))
            })?,
        };
        let upstream = self.direct_server(server)?;
        Ok((upstream, local))
    }

    /// What every server of the scope that offers it lists (`list`), each item's name
    /// qualified with its server on the aggregate endpoint. There, a server that fails is
    /// left out (and logged); on a direct endpoint its error is the answer.
    async fn gather<T, F>(
        &self,
        scope: Scope<'_>,
        offered: fn(&rmcp::model::ServerCapabilities) -> bool,
        list: impl Fn(Arc<Upstream>) -> F,
        name: fn(&mut T) -> &mut String,
    ) -> Result<Vec<T>, CatalogError>
    where
        F: Future<Output = Result<Vec<T>, upstream::Error>>,
    {
        let servers = self.catalog_servers(scope)?;
        let listed = join_all(servers.into_iter().filter(|u| offers(u, offered)).map(|u| {
            let server = u.name().to_owned();
            let listing = list(u);
            async move { (server, listing.await) }
        }))
        .await;
        let mut items = Vec::new();
        for (server, result) in listed {
            match result {
                Ok(listed) => items.extend(listed.into_iter().map(|mut item| {
                    let qualified = qualify(scope, &server, name(&mut item));
                    *name(&mut item) = qualified;
                    item
                })),
                Err(e) if scope == Scope::All => tracing::warn!("'{server}' left out: {e}"),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(items)
    }

    /// Every prompt of the scope's servers.
    pub async fn list_prompts(&self, scope: Scope<'_>) -> Result<Vec<Prompt>, CatalogError> {
        self.gather(
            scope,
            |c| c.prompts.is_some(),
            |u| async move { u.list_prompts().await },
            |p: &mut Prompt| &mut p.name,
        )
        .await
    }

    /// One prompt, from the server its name leads to; recorded as `prompt_get` (the
    /// prompt's name on its server, its arguments capped and redacted).
    pub async fn get_prompt(
        &self,
        scope: Scope<'_>,
        mut params: GetPromptRequestParams,
        context: CallContext,
    ) -> Result<GetPromptResponse, CatalogError> {
        let started = Instant::now();
        let view = self.view_of(&context);
        let (upstream, local) =
            self.find_name_as(scope, &params.name, "prompt", view.as_deref())?;
        params.name = local.to_owned();
        params.meta = None;
        let arguments = params.arguments.clone().map_or(Value::Null, Value::Object);
        let draft = self.activity.request_draft(
            RecordType::PromptGet,
            "prompts/get",
            upstream.name(),
            &params.name,
            &arguments,
            &context,
        );
        let request = ClientRequest::GetPromptRequest(rmcp::model::Request::new(params));
        self.request_recorded(
            &upstream,
            request,
            draft,
            started,
            &context,
            |answer| match answer {
                ServerResult::GetPromptResult(result) => Some(GetPromptResponse::Complete(result)),
                ServerResult::InputRequiredResult(result) => {
                    Some(GetPromptResponse::InputRequired(result))
                }
                _ => None,
            },
        )
        .await
    }

    /// Sends a client's `request` to `upstream` and records it: refused and recorded as
    /// blocked when the server is quarantined; otherwise the pending `draft` is written while
    /// the request is on its way, and completed with the answer `read` takes (`None`: the
    /// wrong kind of answer).
    async fn request_recorded<T: super::guard::Guardable>(
        &self,
        upstream: &Upstream,
        request: ClientRequest,
        draft: ActivityRecord,
        started: Instant,
        context: &CallContext,
        read: impl FnOnce(ServerResult) -> Option<T>,
    ) -> Result<T, CatalogError> {
        if let Some(message) = quarantine_refusal(upstream) {
            self.append(draft.held(&message, started)).await;
            return Err(CatalogError::Refused(message));
        }
        let method = draft.details.as_ref().and_then(|d| d["method"].as_str());
        let method = method.unwrap_or("request").to_owned();
        let (_, answer) = tokio::join!(
            self.append(draft.clone()),
            upstream.request(request, context.origin.as_ref())
        );
        let outcome = match answer {
            Ok(answer) => {
                let bytes = super::record::json_len(&answer);
                read(answer)
                    .map(|answer| (answer, bytes))
                    .ok_or_else(|| unexpected(upstream, &method))
            }
            Err(e) => Err(CatalogError::Upstream(e)),
        };
        let size = outcome
            .as_ref()
            .map(|(_, bytes)| *bytes)
            .map_err(ToString::to_string);
        let answer = outcome.map(|(answer, _)| answer);
        let (outcome, guarded) = self
            .guard_answer(answer, upstream.name(), &draft.tool_name)
            .await;
        let mut record = super::record::finished(draft, size, started);
        guarded.note(&mut record);
        self.journal.submit(record);
        outcome
    }

    /// Every resource of the scope's servers.
    pub async fn list_resources(&self, scope: Scope<'_>) -> Result<Vec<Resource>, CatalogError> {
        self.gather(
            scope,
            |c| c.resources.is_some(),
            |u| async move { u.list_resources().await },
            |r: &mut Resource| &mut r.name,
        )
        .await
    }

    /// Every resource template of the scope's servers.
    pub async fn list_resource_templates(
        &self,
        scope: Scope<'_>,
    ) -> Result<Vec<ResourceTemplate>, CatalogError> {
        self.gather(
            scope,
            |c| c.resources.is_some(),
            |u| async move { u.list_resource_templates().await },
            |t: &mut ResourceTemplate| &mut t.name,
        )
        .await
    }

    /// The server a resource URI belongs to: on a direct endpoint its server; otherwise the
    /// one server offering resources, or the server that lists the URI, or whose template
    /// matches it. A quarantined server refuses.
    async fn route_uri(&self, scope: Scope<'_>, uri: &str) -> Result<Arc<Upstream>, CatalogError> {
        let upstream = self.find_uri(scope, uri, None).await?;
        match quarantine_refusal(&upstream) {
            Some(message) => Err(CatalogError::Refused(message)),
            None => Ok(upstream),
        }
    }

    /// [`Proxy::route_uri`], a direct endpoint's quarantined server included (the caller
    /// refuses and records; the aggregate endpoint never routes to one).
    /// The server that offers `uri`, among those `view` shows (`None`: all).
    async fn find_uri(
        &self,
        scope: Scope<'_>,
        uri: &str,
        view: Option<&crate::scoping::View>,
    ) -> Result<Arc<Upstream>, CatalogError> {
        if let Scope::Server(_) = scope {
            return self.find_name(scope, uri, "resource").map(|(u, _)| u);
        }
        let candidates: Vec<_> = self
            .catalog_servers(scope)?
            .into_iter()
            .filter(|u| offers(u, |c| c.resources.is_some()))
            .filter(|u| view.is_none_or(|v| v.sees_server(u.name())))
            .collect();
        if let [only] = candidates.as_slice() {
            return Ok(only.clone());
        }
        for upstream in &candidates {
            if let Ok(resources) = upstream.list_resources().await
                && resources.iter().any(|r| r.uri == uri)
            {
                return Ok(upstream.clone());
            }
        }
        for upstream in &candidates {
            if let Ok(templates) = upstream.list_resource_templates().await
                && templates
                    .iter()
                    .any(|t| template_matches(&t.uri_template, uri))
            {
                return Ok(upstream.clone());
            }
        }
        Err(CatalogError::NotFound(format!(
            "no usable upstream server lists the resource '{}' or a template that matches it; \
             resources/list and resources/templates/list show what can be read",
            mcpproxy_support::quote(uri)
        )))
    }

    /// Reads a resource: judged by the policy as a read of [`RESOURCE_READ_TOOL`] with
    /// `{"uri": ...}` as arguments, recorded, then read from its server.
    pub async fn read_resource(
        &self,
        scope: Scope<'_>,
        mut params: ReadResourceRequestParams,
        context: CallContext,
    ) -> Result<ReadResourceResponse, CatalogError> {
        let started = Instant::now();
        let view = self.view_of(&context);
        let upstream = self.find_uri(scope, &params.uri, view.as_deref()).await?;
        let uri = params.uri.clone();
        let mut args = Map::new();
        args.insert("uri".into(), Value::String(uri.clone()));
        let input = CallInput {
            variant: OperationType::Read,
            server: upstream.name().to_owned(),
            tool: RESOURCE_READ_TOOL.to_owned(),
            args,
            intent: None,
        };
        let mut draft = self.activity.draft(&input, &context);
        draft.record_type = RecordType::ResourceRead;
        if let Some(message) = quarantine_refusal(&upstream) {
            self.append(draft.held(&message, started)).await;
            return Err(CatalogError::Refused(message));
        }
        let tool = resource_read_tool(upstream.name());
        let evaluation = match self
            .evaluate(upstream.clone(), tool, input, context.caller())
            .await
        {
            Judged::Allowed(_, evaluation) => evaluation,
            Judged::Blocked(evaluation) => {
                let message = evaluation
                    .outcome
                    .message
                    .clone()
                    .unwrap_or_else(|| "Resource read blocked by policy".into());
                self.append(draft.judged(&evaluation, Status::Blocked, started))
                    .await;
                return Err(CatalogError::Refused(message));
            }
            Judged::Refused(message) | Judged::Held { message, .. } => {
                self.append(draft.refused(&message, started)).await;
                return Err(CatalogError::Refused(message));
            }
        };
        let pending = draft.judged(&evaluation, Status::Pending, started);
        params.meta = None;
        let request = ClientRequest::ReadResourceRequest(rmcp::model::Request::new(params));
        // Fail closed, as for a tool call: nothing is sent before the record is written.
        if let Err(refusal) = self.record_pending(pending.clone()).await {
            return Err(CatalogError::Refused(refusal));
        }
        let answer = upstream.request(request, context.origin.as_ref()).await;
        let mut record = pending;
        record.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let response = match answer {
            Ok(ServerResult::ReadResourceResult(result)) => {
                record.status = Status::Success;
                record.response_bytes = super::record::json_len(&result);
                Ok(ReadResourceResponse::Complete(result))
            }
            Ok(ServerResult::InputRequiredResult(result)) => {
                record.status = Status::Success;
                Ok(ReadResourceResponse::InputRequired(result))
            }
            Ok(_) => Err(unexpected(&upstream, "resources/read")),
            Err(e) => Err(CatalogError::Upstream(e)),
        };
        let (response, guarded) = self.guard_answer(response, upstream.name(), &uri).await;
        if let Err(e) = &response {
            record.status = Status::Error;
            record.error_message = Some(e.to_string());
        }
        guarded.note(&mut record);
        self.journal.submit(record);
        response
    }

    /// Completion for a prompt argument or a resource template, from the server the
    /// reference leads to; recorded as `completion` (the prompt or template completed, and
    /// what was asked, capped and redacted). A server that offers no completion is not asked
    /// (and nothing is recorded): the answer is empty.
    pub async fn complete(
        &self,
        scope: Scope<'_>,
        mut params: CompleteRequestParams,
        context: CallContext,
    ) -> Result<CompleteResult, CatalogError> {
        let started = Instant::now();
        let view = self.view_of(&context);
        let (upstream, name) = match &mut params.r#ref {
            Reference::Prompt(prompt) => {
                let (upstream, local) =
                    self.find_name_as(scope, &prompt.name, "prompt", view.as_deref())?;
                prompt.name = local.to_owned();
                (upstream, prompt.name.clone())
            }
            Reference::Resource(resource) => (
                self.find_uri(scope, &resource.uri, view.as_deref()).await?,
                resource.uri.clone(),
            ),
            _ => {
                return Err(CatalogError::NotFound(
                    "completion/complete names neither a prompt nor a resource template".into(),
                ));
            }
        };
        if !upstream.is_quarantined() && !offers(&upstream, |c| c.completions.is_some()) {
            return Ok(CompleteResult::default());
        }
        params.meta = None;
        let draft = self.activity.request_draft(
            RecordType::Completion,
            "completion/complete",
            upstream.name(),
            &name,
            &completion_arguments(&params),
            &context,
        );
        let request = ClientRequest::CompleteRequest(rmcp::model::Request::new(params));
        self.request_recorded(
            &upstream,
            request,
            draft,
            started,
            &context,
            |answer| match answer {
                ServerResult::CompleteResult(result) => Some(result),
                _ => None,
            },
        )
        .await
    }

    /// The server `uri` belongs to for a client's subscription request, with the request's
    /// record drafted. A quarantined server refuses, recorded as blocked; a URI that leads
    /// to no server is refused unrecorded.
    pub async fn subscription_route(
        &self,
        scope: Scope<'_>,
        method: SubscriptionMethod,
        uri: &str,
        context: &CallContext,
    ) -> Result<PendingSubscription, CatalogError> {
        let started = Instant::now();
        let view = self.view_of(context);
        let upstream = self.find_uri(scope, uri, view.as_deref()).await?;
        let mut pending = self.subscription_record(method, upstream.name(), uri, context);
        pending.started = started;
        if let Some(message) = quarantine_refusal(&upstream) {
            self.append(pending.record.held(&message, started)).await;
            return Err(CatalogError::Refused(message));
        }
        Ok(pending)
    }

    /// The record of a subscription request of `method` on `uri` of `server` (`uri` is the
    /// `tool_name` and `arguments.uri`), started now.
    pub fn subscription_record(
        &self,
        method: SubscriptionMethod,
        server: &str,
        uri: &str,
        context: &CallContext,
    ) -> PendingSubscription {
        self.subscription_draft(method, server, uri, &json!({ "uri": uri }), context)
    }

    /// The record of a subscription request about `name` (a URI, or the method of a listen
    /// stream) with `arguments`, started now.
    pub(super) fn subscription_draft(
        &self,
        method: SubscriptionMethod,
        server: &str,
        name: &str,
        arguments: &Value,
        context: &CallContext,
    ) -> PendingSubscription {
        PendingSubscription {
            record: self.activity.request_draft(
                RecordType::Subscription,
                method.as_str(),
                server,
                name,
                arguments,
                context,
            ),
            started: Instant::now(),
        }
    }

    /// Writes the record of a subscription request that has ended: `sent` whether it went
    /// to the server (the first session to subscribe to a URI subscribes upstream, the last
    /// to leave unsubscribes; the others are only registered), `outcome` its error if any.
    pub async fn subscription_done(
        &self,
        pending: PendingSubscription,
        sent: bool,
        outcome: Result<(), String>,
    ) {
        let PendingSubscription {
            mut record,
            started,
        } = pending;
        if let Some(Value::Object(details)) = &mut record.details {
            details.insert("sent_upstream".into(), Value::Bool(sent));
        }
        self.append(super::record::finished(
            record,
            outcome.map(|()| 0),
            started,
        ))
        .await;
    }

    /// Unsubscribes upstream from `uri` of `server` for the proxy itself (the last session
    /// watching it ended), recorded as a `subscription` from the proxy.
    pub async fn unsubscribe_orphaned(&self, server: &str, uri: &str) -> Result<(), CatalogError> {
        let context = CallContext::new(mcpproxy_activity::Source::Proxy);
        let pending =
            self.subscription_record(SubscriptionMethod::Unsubscribe, server, uri, &context);
        let outcome = self.unsubscribe(server, uri).await;
        let error = outcome.as_ref().map(|_| ()).map_err(ToString::to_string);
        self.subscription_done(pending, true, error).await;
        outcome
    }

    /// Subscribes upstream to `uri` (the back channel keeps which sessions want it); returns the
    /// server it belongs to.
    pub async fn subscribe(&self, scope: Scope<'_>, uri: &str) -> Result<String, CatalogError> {
        let upstream = self.route_uri(scope, uri).await?;
        if !offers(&upstream, |c| {
            c.resources
                .as_ref()
                .is_some_and(|r| r.subscribe == Some(true))
        }) {
            return Err(CatalogError::NotFound(format!(
                "server '{}' does not support resource subscriptions",
                upstream.name()
            )));
        }
        #[allow(
            deprecated,
            reason = "resources/subscribe is legacy-only in rmcp; pre-2026 clients send it"
        )]
        let request = ClientRequest::SubscribeRequest(rmcp::model::Request::new(
            SubscribeRequestParams::new(uri),
        ));
        upstream.request(request, None).await?;
        Ok(upstream.name().to_owned())
    }

    /// Unsubscribes upstream from `uri` of `server` (no session wants it any more).
    pub async fn unsubscribe(&self, server: &str, uri: &str) -> Result<(), CatalogError> {
        let upstream = self.direct_server(server)?;
        #[allow(
            deprecated,
            reason = "resources/subscribe is legacy-only in rmcp; pre-2026 clients send it"
        )]
        let request = ClientRequest::UnsubscribeRequest(rmcp::model::Request::new(
            UnsubscribeRequestParams::new(uri),
        ));
        upstream.request(request, None).await?;
        Ok(())
    }

    /// Asks every usable upstream that logs (or the one of a direct endpoint) to send
    /// messages at `level` and above. A server that refuses is logged, not fatal.
    #[allow(
        deprecated,
        reason = "MCP logging and sampling are deprecated by SEP-2577; earlier clients and servers use them"
    )]
    pub async fn set_upstream_log_level(&self, scope: Scope<'_>, level: rmcp::model::LoggingLevel) {
        let Ok(servers) = self.catalog_servers(scope) else {
            return;
        };
        let asked = servers
            .iter()
            .filter(|u| offers(u, |c| c.logging.is_some()))
            .map(|u| async move {
                let request = ClientRequest::SetLevelRequest(rmcp::model::Request::new(
                    rmcp::model::SetLevelRequestParams::new(level),
                ));
                if let Err(e) = u.request(request, None).await {
                    tracing::debug!(server = u.name(), "logging/setLevel not taken: {e}");
                }
            });
        join_all(asked).await;
    }

    /// The server a resource URI is routed to, for unsubscribing.
    pub async fn resource_server(
        &self,
        scope: Scope<'_>,
        uri: &str,
    ) -> Result<String, CatalogError> {
        self.route_uri(scope, uri)
            .await
            .map(|u| u.name().to_owned())
    }
}

/// The refusal of a quarantined server, or `None` when it is not quarantined.
fn quarantine_refusal(upstream: &Upstream) -> Option<String> {
    upstream.is_quarantined().then(|| {
        upstream::Error::Quarantined {
            server: upstream.name().to_owned(),
        }
        .to_string()
    })
}

/// What a `completion` record keeps of the request: the reference, the argument as
/// `{name: value}` (so that redaction by key applies to it: a partly typed `password` is
/// hidden like a call's), and the context's arguments.
fn completion_arguments(params: &CompleteRequestParams) -> Value {
    let mut arguments = Map::new();
    if let Ok(reference) = serde_json::to_value(&params.r#ref) {
        arguments.insert("ref".into(), reference);
    }
    let mut argument = Map::new();
    argument.insert(
        params.argument.name.clone(),
        Value::String(params.argument.value.clone()),
    );
    arguments.insert("argument".into(), Value::Object(argument));
    if let Some(resolved) = params.context.as_ref().and_then(|c| c.arguments.as_ref()) {
        let resolved: Map<String, Value> = resolved
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        arguments.insert("context".into(), Value::Object(resolved));
    }
    Value::Object(arguments)
}

/// Whether the server declared a capability in its `initialize` answer.
fn offers(upstream: &Upstream, has: impl Fn(&rmcp::model::ServerCapabilities) -> bool) -> bool {
    upstream.capabilities().is_some_and(|c| has(&c))
}

/// A server's answer of the wrong kind to `method`.
pub(super) fn unexpected(upstream: &Upstream, method: &str) -> CatalogError {
    CatalogError::Upstream(upstream::Error::Call {
        server: upstream.name().to_owned(),
        tool: method.to_owned(),
        message: format!("the server answered {method} with another kind of result"),
    })
}

/// The pseudo-tool a resource read is judged as: read-only by construction.
fn resource_read_tool(server: &str) -> Tool {
    Tool {
        server: server.to_owned(),
        name: RESOURCE_READ_TOOL.to_owned(),
        description: "Reads a resource of the server (MCP resources/read)".to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {"uri": {"type": "string"}},
            "required": ["uri"],
        })
        .into(),
        annotations: Some(Annotations {
            read_only_hint: Some(true),
            destructive_hint: Some(false),
            idempotent_hint: Some(true),
            open_world_hint: None,
        }),
        meta: None,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_route_uris_by_their_literal_parts() {
        assert!(template_matches(
            "test://template/{id}/data",
            "test://template/42/data"
        ));
        assert!(!template_matches(
            "test://template/{id}/data",
            "test://template/42/meta"
        ));
        assert!(!template_matches(
            "test://template/{id}/data",
            "other://template/42/data"
        ));
        assert!(template_matches("file:///{path}", "file:///etc/hosts"));
        assert!(template_matches("test://static", "test://static"));
        assert!(!template_matches("test://static", "test://static2"));
        // The prefix and suffix may not overlap.
        assert!(!template_matches("ab{x}ba", "aba"));
    }

    #[test]
    fn names_carry_their_server_only_on_the_aggregate_endpoint() {
        assert_eq!(qualify(Scope::All, "fs", "greet"), "fs:greet");
        assert_eq!(qualify(Scope::Server("fs"), "fs", "greet"), "greet");
    }
}
