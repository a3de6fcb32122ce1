//! What the upstreams offer besides tools: prompts, resources, resource templates and
//! completions, gathered from every usable upstream (or from one, for a direct endpoint)
//! and routed back to the server they came from.
//!
//! On the aggregate endpoint, prompt and resource names carry their server
//! (`server:prompt`) and resource URIs are kept as the server wrote them: a read goes to the
//! server that lists the URI, or whose template matches it. A quarantined, disabled or
//! unconnected server offers nothing. Reading a resource is judged by the policy pipeline
//! as a read of the pseudo-tool [`RESOURCE_READ_TOOL`] and recorded, like a call.

use std::sync::Arc;
use std::time::Instant;

use futures::future::join_all;
use rmcp::model::{
    ClientRequest, CompleteRequestParams, CompleteResult, GetPromptRequestParams,
    GetPromptResponse, Prompt, ReadResourceRequestParams, ReadResourceResponse, Reference,
    Resource, ResourceTemplate, ServerResult, SubscribeRequestParams, UnsubscribeRequestParams,
};
use serde_json::{Map, Value, json};

use crate::activity::{RecordType, Status};
use crate::back_channel::CallOrigin;
use crate::policy::{Annotations, OperationType, Tool};
use crate::upstream::{self, Upstream};

use super::{CallContext, CallInput, Judged, Proxy};

/// The tool name a resource read is judged and recorded as.
pub const RESOURCE_READ_TOOL: &str = "resources/read";

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
                crate::trust::quote(name),
                self.upstreams.names().join(", ")
            ))
        })
    }

    /// The server a name (`server:name` on the aggregate endpoint) belongs to, and the
    /// name as that server knows it.
    fn route_name<'n>(
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
                    crate::trust::quote(name)
                ))
            })?,
        };
        let upstream = self.direct_server(server)?;
        if upstream.is_quarantined() {
            return Err(CatalogError::Refused(
                upstream::Error::Quarantined {
                    server: server.to_owned(),
                }
                .to_string(),
            ));
        }
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
        F: std::future::Future<Output = Result<Vec<T>, upstream::Error>>,
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

    /// One prompt, from the server its name leads to.
    pub async fn get_prompt(
        &self,
        scope: Scope<'_>,
        mut params: GetPromptRequestParams,
        origin: Option<&CallOrigin>,
    ) -> Result<GetPromptResponse, CatalogError> {
        let (upstream, local) = self.route_name(scope, &params.name, "prompt")?;
        params.name = local.to_owned();
        params.meta = None;
        let request = ClientRequest::GetPromptRequest(rmcp::model::Request::new(params));
        match upstream.request(request, origin).await? {
            ServerResult::GetPromptResult(result) => Ok(GetPromptResponse::Complete(result)),
            ServerResult::InputRequiredResult(result) => {
                Ok(GetPromptResponse::InputRequired(result))
            }
            _ => Err(unexpected(&upstream, "prompts/get")),
        }
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
    /// matches it.
    async fn route_uri(&self, scope: Scope<'_>, uri: &str) -> Result<Arc<Upstream>, CatalogError> {
        if let Scope::Server(_) = scope {
            return self.route_name(scope, uri, "resource").map(|(u, _)| u);
        }
        let candidates: Vec<_> = self
            .catalog_servers(scope)?
            .into_iter()
            .filter(|u| offers(u, |c| c.resources.is_some()))
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
            crate::trust::quote(uri)
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
        let upstream = self.route_uri(scope, &params.uri).await?;
        let mut args = Map::new();
        args.insert("uri".into(), Value::String(params.uri.clone()));
        let input = CallInput {
            variant: OperationType::Read,
            server: upstream.name().to_owned(),
            tool: RESOURCE_READ_TOOL.to_owned(),
            args,
            intent: None,
        };
        let mut draft = self.activity.draft(&input, &context);
        draft.record_type = RecordType::ResourceRead;
        let tool = resource_read_tool(upstream.name());
        let evaluation = match self.evaluate(upstream.clone(), tool, input).await {
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
        let (_, answer) = tokio::join!(
            self.append(pending.clone()),
            upstream.request(request, context.origin.as_ref())
        );
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
        if let Err(e) = &response {
            record.status = Status::Error;
            record.error_message = Some(e.to_string());
        }
        self.journal.submit(record);
        response
    }

    /// Completion for a prompt argument or a resource template, from the server the
    /// reference leads to.
    pub async fn complete(
        &self,
        scope: Scope<'_>,
        mut params: CompleteRequestParams,
        origin: Option<&CallOrigin>,
    ) -> Result<CompleteResult, CatalogError> {
        let upstream = match &mut params.r#ref {
            Reference::Prompt(prompt) => {
                let (upstream, local) = self.route_name(scope, &prompt.name, "prompt")?;
                prompt.name = local.to_owned();
                upstream
            }
            Reference::Resource(resource) => self.route_uri(scope, &resource.uri).await?,
            _ => {
                return Err(CatalogError::NotFound(
                    "completion/complete names neither a prompt nor a resource template".into(),
                ));
            }
        };
        if !offers(&upstream, |c| c.completions.is_some()) {
            return Ok(CompleteResult::default());
        }
        params.meta = None;
        let request = ClientRequest::CompleteRequest(rmcp::model::Request::new(params));
        match upstream.request(request, origin).await? {
            ServerResult::CompleteResult(result) => Ok(result),
            _ => Err(unexpected(&upstream, "completion/complete")),
        }
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
        #[allow(deprecated)]
        let request = ClientRequest::SubscribeRequest(rmcp::model::Request::new(
            SubscribeRequestParams::new(uri),
        ));
        upstream.request(request, None).await?;
        Ok(upstream.name().to_owned())
    }

    /// Unsubscribes upstream from `uri` of `server` (no session wants it any more).
    pub async fn unsubscribe(&self, server: &str, uri: &str) -> Result<(), CatalogError> {
        let upstream = self.direct_server(server)?;
        #[allow(deprecated)]
        let request = ClientRequest::UnsubscribeRequest(rmcp::model::Request::new(
            UnsubscribeRequestParams::new(uri),
        ));
        upstream.request(request, None).await?;
        Ok(())
    }

    /// Asks every usable upstream that logs (or the one of a direct endpoint) to send
    /// messages at `level` and above. A server that refuses is logged, not fatal.
    #[allow(deprecated)]
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
        }),
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
