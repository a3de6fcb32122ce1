//! `/mcp` with `auth`: who may call, and where a client learns how to log in. The gate of
//! [`super::http`] asks [`authenticate`] for each request; [`metadata_router`] serves the
//! protected resource metadata (RFC 9728) at the well-known paths, unauthenticated.
//!
//! How the two kinds of bearer token combine: a request whose token is the static
//! `http.auth_token` (when one is set) passes with no identity, as before (the owner's own
//! tools); any other token must be a valid access token of `auth.issuer`, and its identity
//! goes on every record of the request.

use std::sync::Arc;

use axum::Router;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};

use mcpproxy_auth::access::{Access, secret_matches};
use mcpproxy_auth::client_auth::{
    Identity, Rejection, Verifier, WELL_KNOWN_PATH, challenge, document,
};

/// `Ok(Some(identity))` for a valid access token, `Ok(None)` for the static token, else the
/// `401` (or `503` when the issuer's keys cannot be had) to answer.
pub(super) async fn authenticate(
    verifier: &Verifier,
    static_token: Option<&str>,
    headers: &HeaderMap,
) -> Result<Option<Identity>, Response> {
    let auth = verifier.config();
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = match (values.next(), values.next()) {
        (None, _) => {
            let rejection = Rejection::Missing {
                issuer: auth.issuer.clone(),
            };
            return Err(unauthorized(
                verifier,
                headers,
                false,
                &rejection.to_string(),
            ));
        }
        (Some(_), Some(_)) => {
            return Err(unauthorized(
                verifier,
                headers,
                true,
                "the request has more than one Authorization header; send exactly one",
            ));
        }
        (Some(value), None) => value,
    };
    let Some(token) = value.to_str().ok().and_then(|v| {
        let (scheme, token) = v.split_once(' ')?;
        scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim())
            .filter(|t| !t.is_empty())
    }) else {
        return Err(unauthorized(
            verifier,
            headers,
            true,
            "the Authorization header must be `Bearer <access token>`",
        ));
    };
    if let Some(expected) = static_token
        && secret_matches(expected, token)
    {
        return Ok(None);
    }
    let resource = mcpproxy_auth::client_auth::resource_url(auth, headers);
    match verifier.verify(token, &resource).await {
        Ok(identity) => Ok(Some(identity)),
        Err(e @ Rejection::Unavailable(_)) => {
            tracing::warn!("client login: {e}");
            Err((StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response())
        }
        Err(e) => Err(unauthorized(verifier, headers, true, &e.to_string())),
    }
}

fn unauthorized(
    verifier: &Verifier,
    headers: &HeaderMap,
    invalid: bool,
    message: &str,
) -> Response {
    let mut response = (StatusCode::UNAUTHORIZED, message.to_owned()).into_response();
    if let Ok(value) = HeaderValue::from_str(&challenge(verifier.config(), headers, invalid)) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// The metadata routes (none without `auth`).
pub(super) fn metadata_router(access: Access, verifier: Option<Arc<Verifier>>) -> Router {
    let Some(verifier) = verifier else {
        return Router::new();
    };
    let access = Arc::new(access);
    let handler = move |headers: HeaderMap| {
        let verifier = verifier.clone();
        let access = access.clone();
        async move {
            if let Err(message) = access.check(&headers) {
                return (StatusCode::FORBIDDEN, message).into_response();
            }
            axum::Json(document(verifier.config(), &headers)).into_response()
        }
    };
    Router::new()
        .route(WELL_KNOWN_PATH, axum::routing::get(handler.clone()))
        .route(
            "/.well-known/oauth-protected-resource",
            axum::routing::get(handler),
        )
}
