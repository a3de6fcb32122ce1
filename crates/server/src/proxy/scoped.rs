//! The proxy's side of `scopes`: the rules in force, and the [`View`] of the caller of a
//! call or a listing. The places that list or resolve tools ask it (`service` for calls and
//! search, `catalog` for prompts and resources named by a caller, `mcp` for the direct
//! endpoints and the listings).

use std::sync::Arc;

use super::{CallContext, CatalogError, Proxy, Scope};
use crate::scoping::{Scopes, View};
use mcpproxy_upstream::Upstream;

impl Proxy {
    /// Puts the `scopes` rules in force.
    pub fn with_scopes(mut self, scopes: Scopes) -> Self {
        self.scopes = Arc::new(scopes);
        self
    }

    /// What the caller `subject` in `groups` sees; `None`: everything.
    pub fn view_for(&self, subject: &str, groups: &[String]) -> Option<Arc<View>> {
        if self.scopes.is_empty() {
            return None;
        }
        self.scopes.view(subject, groups)
    }

    /// What the caller of `context` sees; `None` for a caller that did not log in or that
    /// no rule names.
    pub fn view_of(&self, context: &CallContext) -> Option<Arc<View>> {
        let identity = context.identity.as_ref()?;
        self.view_for(&identity.subject, &identity.groups)
    }

    /// [`Proxy::find_name`] for a caller who sees `view` only: a name on a hidden server,
    /// or one that leads nowhere, is refused in the same words (naming no server).
    pub(super) fn find_name_as<'n>(
        &self,
        scope: Scope<'_>,
        name: &'n str,
        what: &str,
        view: Option<&View>,
    ) -> Result<(Arc<Upstream>, &'n str), CatalogError> {
        let Some(view) = view else {
            return self.find_name(scope, name, what);
        };
        match self.find_name(scope, name, what) {
            Ok((upstream, local)) if view.sees_server(upstream.name()) => Ok((upstream, local)),
            _ => Err(CatalogError::NotFound(format!(
                "{what} '{}' is not available to this caller: it does not exist or is not \
                 offered to you; {what}s/list shows what you can use",
                mcpproxy_support::quote(name)
            ))),
        }
    }
}
