//! `auth`: the authorization server whose access tokens `/mcp` takes. The issuer and any
//! resource URL must be https, or http on a loopback host (a test or a local server);
//! claim names are plain names, dotted to walk into objects.

use super::Context;
use super::servers::check_url;
use crate::raw::RawAuth;
use crate::{AuthConfig, Result};

/// The longest claim name or audience.
const MAX_NAME_LEN: usize = 256;

pub(super) fn auth_from(raw: RawAuth, ctx: &Context<'_>) -> Result<AuthConfig> {
    let Some(issuer) = raw.issuer else {
        return Err(ctx.err(
            "auth.issuer",
            "missing: give the URL of the authorization server that issues access tokens for \
             this proxy, e.g. https://login.example.com/realms/team (or remove `auth` to go \
             without client login)",
        ));
    };
    secure_url(&issuer).map_err(|m| ctx.err("auth.issuer", m))?;
    if issuer.contains(['?', '#']) {
        return Err(ctx.err(
            "auth.issuer",
            "an issuer URL has no query or fragment: give it as the server's metadata names it",
        ));
    }
    let audience = match raw.audience {
        Some(aud) => {
            if aud.is_empty()
                || aud.len() > MAX_NAME_LEN
                || aud.chars().any(|c| c.is_control() || c.is_whitespace())
            {
                return Err(ctx.err(
                    "auth.audience",
                    format!(
                        "use 1 to {MAX_NAME_LEN} characters without spaces: the `aud` the \
                         authorization server puts in tokens for this proxy (e.g. \
                         https://mcp.example.com/mcp), or remove the key to require this \
                         proxy's resource URL"
                    ),
                ));
            }
            Some(aud)
        }
        None => None,
    };
    let resource = match raw.resource {
        Some(url) => {
            secure_url(&url).map_err(|m| ctx.err("auth.resource", m))?;
            if !url.trim_end_matches('/').ends_with("/mcp") {
                return Err(ctx.err(
                    "auth.resource",
                    format!(
                        "'{url}' must be the public URL of this proxy's /mcp, e.g. \
                         https://mcp.example.com/mcp"
                    ),
                ));
            }
            Some(url.trim_end_matches('/').to_owned())
        }
        None => None,
    };
    let claim = |key: &str, value: Option<String>, default: &str| -> Result<String> {
        let Some(name) = value else {
            return Ok(default.to_owned());
        };
        let plain = |part: &str| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-:/".contains(c))
        };
        if name.len() > MAX_NAME_LEN || !name.split('.').all(plain) {
            return Err(ctx.err(
                key,
                format!(
                    "'{}' is not a claim name: use letters, digits, _ - : /, and dots to walk \
                     into objects (e.g. {default} or realm_access.roles)",
                    mcpproxy_support::quote(&name)
                ),
            ));
        }
        Ok(name)
    };
    Ok(AuthConfig {
        issuer: issuer.trim_end_matches('/').to_owned(),
        audience,
        resource,
        subject_claim: claim(
            "auth.subject_claim",
            raw.subject_claim,
            AuthConfig::DEFAULT_SUBJECT_CLAIM,
        )?,
        groups_claim: claim(
            "auth.groups_claim",
            raw.groups_claim,
            AuthConfig::DEFAULT_GROUPS_CLAIM,
        )?,
    })
}

/// An http(s) URL that is https unless its host is loopback.
fn secure_url(url: &str) -> std::result::Result<(), String> {
    check_url(url)?;
    let lower = url.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("http://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let host = match authority.rsplit_once(':') {
            Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
            _ => authority,
        };
        let loopback = host == "localhost" || host == "[::1]" || host.starts_with("127.");
        if !loopback {
            return Err(format!(
                "'{url}' must be https (http only on a loopback host such as 127.0.0.1): \
                 tokens and keys fetched over plain http could be forged"
            ));
        }
    }
    Ok(())
}
