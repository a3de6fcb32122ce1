//! The proxy's side of `scopes`: the rules in force, and the [`View`] of the caller of a
//! call or a listing. The places that list or resolve tools ask it (`service` for calls and
//! search, `mcp` for the direct endpoints and `tools/list`).

use std::sync::Arc;

use super::{CallContext, Proxy};
use crate::scoping::{Scopes, View};

impl Proxy {
    /// Puts the `scopes` rules in force.
    pub(crate) fn with_scopes(mut self, scopes: Scopes) -> Self {
        self.scopes = Arc::new(scopes);
        self
    }

    /// What the caller `subject` in `groups` sees; `None`: everything.
    pub(crate) fn view_for(&self, subject: &str, groups: &[String]) -> Option<Arc<View>> {
        if self.scopes.is_empty() {
            return None;
        }
        self.scopes.view(subject, groups)
    }

    /// What the caller of `context` sees; `None` for a caller that did not log in or that
    /// no rule names.
    pub(crate) fn view_of(&self, context: &CallContext) -> Option<Arc<View>> {
        let identity = context.identity.as_ref()?;
        self.view_for(&identity.subject, &identity.groups)
    }
}
