//! `scopes` and `rate_limits`: what a logged-in caller may see, and how often anyone may
//! call. Validated in `validate::scopes` and `validate::rate_limits`; applied by
//! `crate::scoping` and `crate::proxy`'s limits.

use std::collections::BTreeMap;

use crate::Limit;

/// One `scopes` rule: what the callers it names do not see.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScopeRule {
    /// Callers whose subject is one of these...
    pub subjects: Vec<String>,
    /// ...or who are in one of these groups.
    pub groups: Vec<String>,
    /// Servers hidden from them.
    pub hide_servers: Vec<String>,
    /// Tools hidden from them, as (server, tool).
    pub hide_tools: Vec<(String, String)>,
    /// When given, every server not in it is hidden from them.
    pub only_servers: Option<Vec<String>>,
}

/// `rate_limits`: token buckets per caller, per tool and per upstream server.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RateLimitsConfig {
    /// Each logged-in caller's bucket (every call they make).
    pub identity: Option<Limit>,
    /// Per tool, keyed by (server, tool): shared by every caller.
    pub tools: BTreeMap<(String, String), Limit>,
    /// Per upstream server: shared by every caller.
    pub upstreams: BTreeMap<String, Limit>,
}
