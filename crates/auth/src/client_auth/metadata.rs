//! The protected resource metadata (RFC 9728) the proxy serves for `/mcp`, and the
//! `WWW-Authenticate` challenge of a `401` that points a client at it (as the MCP
//! authorization spec asks).

use http::HeaderMap;
use serde_json::{Value, json};

use mcpproxy_config::AuthConfig;

/// Where the metadata of `/mcp` is served (RFC 9728 §3.1: the well-known path, then the
/// resource's path).
pub const WELL_KNOWN_PATH: &str = "/.well-known/oauth-protected-resource/mcp";

/// The URL of `/mcp` as clients name it: `auth.resource` when set, otherwise built from
/// the request's `Host` (which the Host rule of [`crate::access`] has already allowed).
pub fn resource_url(auth: &AuthConfig, headers: &HeaderMap) -> String {
    if let Some(resource) = &auth.resource {
        return resource.clone();
    }
    format!("{}/mcp", base_url(headers))
}

/// `http://HOST` of this request (`127.0.0.1` when it has no usable `Host`).
fn base_url(headers: &HeaderMap) -> String {
    let host = headers
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-.:[]".contains(c))
        })
        .unwrap_or("127.0.0.1");
    format!("http://{host}")
}

/// The metadata URL for this request: beside `auth.resource` when set, else on this host.
fn metadata_url(auth: &AuthConfig, headers: &HeaderMap) -> String {
    match &auth.resource {
        Some(resource) => match url_origin(resource) {
            Some(origin) => format!("{origin}{WELL_KNOWN_PATH}"),
            None => format!("{}{WELL_KNOWN_PATH}", base_url(headers)),
        },
        None => format!("{}{WELL_KNOWN_PATH}", base_url(headers)),
    }
}

/// `scheme://authority` of a URL.
fn url_origin(url: &str) -> Option<&str> {
    let scheme_end = url.find("://")? + 3;
    let end = url[scheme_end..]
        .find('/')
        .map_or(url.len(), |i| scheme_end + i);
    Some(&url[..end])
}

/// The RFC 9728 document.
pub fn document(auth: &AuthConfig, headers: &HeaderMap) -> Value {
    json!({
        "resource": resource_url(auth, headers),
        "authorization_servers": [auth.issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "mcpproxy",
    })
}

/// The `WWW-Authenticate` value of a `401`: the metadata URL, and `error="invalid_token"`
/// when a token was given but refused.
pub fn challenge(auth: &AuthConfig, headers: &HeaderMap, invalid: bool) -> String {
    let url = metadata_url(auth, headers);
    if invalid {
        format!("Bearer resource_metadata=\"{url}\", error=\"invalid_token\"")
    } else {
        format!("Bearer resource_metadata=\"{url}\"")
    }
}
