//! `oauth` of an HTTP server: how mcpproxy logs in to it when it answers `401` with an
//! OAuth challenge. Every key is checked here, with the fix in the message.

use super::Context;
use crate::Result;
use crate::model::OAuthConfig;
use crate::raw::RawOAuth;

/// The longest client id, secret, name or scope mcpproxy takes from the file.
const MAX_TEXT: usize = 2048;

/// `raw` (at `key`) as the server's OAuth settings.
pub(super) fn oauth_from(raw: &RawOAuth, key: &str, ctx: &Context<'_>) -> Result<OAuthConfig> {
    let at = |field: &str| format!("{key}.{field}");
    let text = |field: &str, value: &Option<String>| -> Result<Option<String>> {
        match value {
            None => Ok(None),
            Some(v) if v.trim().is_empty() => Err(ctx.err(
                &at(field),
                format!("'{field}' is empty: give a value or leave the key out"),
            )),
            Some(v) if v.len() > MAX_TEXT || v.chars().any(char::is_control) => Err(ctx.err(
                &at(field),
                format!("'{field}' must be one line of at most {MAX_TEXT} bytes"),
            )),
            Some(v) => Ok(Some(v.clone())),
        }
    };
    let client_id = text("client_id", &raw.client_id)?;
    let client_secret = text("client_secret", &raw.client_secret)?;
    if let Some(secret) = &client_secret {
        crate::reference::check(secret).map_err(|why| ctx.err(&at("client_secret"), why))?;
    }
    if client_secret.is_some() && client_id.is_none() {
        return Err(ctx.err(
            &at("client_secret"),
            "'client_secret' needs the 'client_id' it belongs to: add 'client_id', or drop the secret to let mcpproxy register itself",
        ));
    }
    let client_metadata_url = text("client_metadata_url", &raw.client_metadata_url)?;
    if let Some(url) = &client_metadata_url {
        let parsed = url::Url::parse(url).ok();
        let https_with_path = parsed
            .as_ref()
            .is_some_and(|u| u.scheme() == "https" && u.path() != "/" && !u.path().is_empty());
        if !https_with_path {
            return Err(ctx.err(
                &at("client_metadata_url"),
                format!("'{url}' is not an https URL with a path: a Client ID Metadata Document is served over https at a path such as https://example.com/mcpproxy.json"),
            ));
        }
    }
    let client_name = text("client_name", &raw.client_name)?;
    let mut scopes = Vec::new();
    for (i, scope) in raw.scopes.iter().flatten().enumerate() {
        let valid = !scope.is_empty()
            && scope.len() <= MAX_TEXT
            && scope
                .chars()
                .all(|c| c.is_ascii_graphic() && c != '"' && c != '\\');
        if !valid {
            return Err(ctx.err(
                &format!("{}[{i}]", at("scopes")),
                format!("'{}' is not an OAuth scope: a scope is printable ASCII without spaces, quotes or backslashes", mcpproxy_support::quote(scope)),
            ));
        }
        scopes.push(scope.clone());
    }
    if raw.redirect_port == Some(0) {
        return Err(ctx.err(
            &at("redirect_port"),
            "0 is not a port: give the port the client was registered with, or leave the key out to use any free port",
        ));
    }
    Ok(OAuthConfig {
        disabled: raw.enabled == Some(false),
        client_id,
        client_secret,
        client_metadata_url,
        client_name,
        scopes,
        redirect_port: raw.redirect_port,
    })
}
