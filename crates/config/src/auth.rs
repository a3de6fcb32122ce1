//! `auth`: clients log in. The proxy is an OAuth protected resource of one authorization
//! server: `/mcp` takes access tokens that server issued for it (checked by
//! `crate::client_auth`).

/// The validated `auth` object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthConfig {
    /// The authorization server's issuer URL (its metadata and keys are found from it).
    pub issuer: String,
    /// The `aud` a token must name; `None`: the resource URL of `/mcp`.
    pub audience: Option<String>,
    /// The public URL of `/mcp` (behind a proxy or a load balancer); `None`: built from the
    /// request's `Host`.
    pub resource: Option<String>,
    /// The claim naming the caller (`sub` by default).
    pub subject_claim: String,
    /// The claim listing the caller's groups (`groups` by default; a dotted name walks into
    /// objects, e.g. `realm_access.roles`).
    pub groups_claim: String,
}

impl AuthConfig {
    pub const DEFAULT_SUBJECT_CLAIM: &str = "sub";
    pub const DEFAULT_GROUPS_CLAIM: &str = "groups";
}
