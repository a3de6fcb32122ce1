//! Logging in to upstream servers that ask for an OAuth login: `POST
//! /api/v1/upstreams/{name}/login` starts one (the authorization URL to open),
//! `POST .../login/callback` finishes it with the URL the browser was redirected to, and
//! `DELETE .../login` forgets the server's tokens. `GET /oauth/callback` is the redirect
//! target of a login started without a `redirect_uri` (the page's "Log in" button): the
//! browser lands there with the code, and the login finishes in this process.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;

use super::{ApiError, ApiState, ok};
use mcpproxy_upstream::LoginError;

/// The path of the proxy's own redirect target.
pub(super) const CALLBACK_PATH: &str = "/oauth/callback";

/// The longest redirect URL or URI taken.
const MAX_URL_BYTES: usize = 8192;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BeginBody {
    /// Where the browser is sent back; absent: this listener's `/oauth/callback`.
    #[serde(default)]
    redirect_uri: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FinishBody {
    /// The whole URL the browser was redirected to (code, state, iss).
    redirect: String,
}

fn login_error(e: LoginError) -> ApiError {
    if e.is_unknown_server() {
        ApiError::not_found(e.to_string())
    } else {
        ApiError::bad_request(e.to_string())
    }
}

/// Whether `uri` is a loopback `http` URL: the only redirect a login of this proxy uses.
fn is_loopback_redirect(uri: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(uri) else {
        return false;
    };
    let host = url.host_str().unwrap_or_default();
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    url.scheme() == "http" && loopback && url.port().is_some()
}

/// `POST /upstreams/{name}/login` with `{"redirect_uri": "http://127.0.0.1:PORT/..."}`
/// (optional): `{"authorization_url": ...}`.
pub(super) async fn begin(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    headers: http::HeaderMap,
    body: Option<Json<Value>>,
) -> Result<Response, ApiError> {
    let body: BeginBody = match body {
        None => BeginBody::default(),
        Some(Json(value)) => serde_json::from_value(value).map_err(|e| {
            ApiError::bad_request(format!(
                "the body must look like {{\"redirect_uri\": \"http://127.0.0.1:PORT/callback\"}} (optional): {e}"
            ))
        })?,
    };
    let redirect_uri = match body.redirect_uri {
        Some(uri) => uri,
        None => {
            let host = headers
                .get(http::header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or_default();
            format!("http://{host}{CALLBACK_PATH}")
        }
    };
    if redirect_uri.len() > MAX_URL_BYTES || !is_loopback_redirect(&redirect_uri) {
        return Err(ApiError::bad_request(format!(
            "the redirect URI must be http://127.0.0.1:PORT/... (or localhost, [::1]) with a port: the browser comes back to this machine, never elsewhere; got {}",
            mcpproxy_support::quote(&redirect_uri)
        )));
    }
    let url = state
        .proxy
        .upstreams()
        .begin_login(&name, &redirect_uri)
        .await
        .map_err(login_error)?;
    Ok(ok(
        json!({"authorization_url": url, "redirect_uri": redirect_uri}),
    ))
}

/// `POST /upstreams/{name}/login/callback` with `{"redirect": URL}`.
pub(super) async fn finish(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    body: Option<Json<Value>>,
) -> Result<Response, ApiError> {
    let body: FinishBody = body
        .and_then(|Json(v)| serde_json::from_value(v).ok())
        .ok_or_else(|| {
            ApiError::bad_request(
                "the body must look like {\"redirect\": \"http://127.0.0.1:PORT/callback?code=...&state=...\"}",
            )
        })?;
    if body.redirect.len() > MAX_URL_BYTES {
        return Err(ApiError::bad_request(format!(
            "the redirect URL is over {MAX_URL_BYTES} bytes"
        )));
    }
    state
        .proxy
        .upstreams()
        .finish_login(&name, &body.redirect)
        .await
        .map_err(login_error)?;
    Ok(ok(json!({"logged_in": true})))
}

/// `DELETE /upstreams/{name}/login`: `{"forgot": true}` when there were tokens.
pub(super) async fn logout(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let forgot = state
        .proxy
        .upstreams()
        .logout(&name)
        .await
        .map_err(login_error)?;
    Ok(ok(json!({"forgot": forgot})))
}

/// `GET /oauth/callback?code=...&state=...`: the browser's way back from a login the page
/// started. No API key (a browser follows a redirect): the `state` of a login in progress
/// is what lets it in.
pub(super) async fn callback(
    State(state): State<ApiState>,
    Query(query): Query<HashMap<String, String>>,
    uri: http::Uri,
    headers: http::HeaderMap,
) -> Response {
    let page = |status: StatusCode, title: &str, text: &str| {
        let body = format!(
            "<!doctype html><meta charset=utf-8><title>mcpproxy: {title}</title><h1>{title}</h1><p>{}</p>",
            html_escape(text)
        );
        (status, Html(body)).into_response()
    };
    let Some(login_state) = query.get("state") else {
        return page(
            StatusCode::BAD_REQUEST,
            "Not a login",
            "This address takes the browser back from a login; it needs the 'state' the login sent.",
        );
    };
    let upstreams = state.proxy.upstreams();
    let Some(server) = upstreams.login_by_state(login_state).await else {
        return page(
            StatusCode::BAD_REQUEST,
            "No login in progress",
            "No login waits for this redirect (it may have expired). Start again from the page or with `mcpproxy upstream login NAME`.",
        );
    };
    let host = headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    let redirect = format!("http://{host}{uri}");
    match upstreams.finish_login(&server, &redirect).await {
        Ok(()) => page(
            StatusCode::OK,
            "Logged in",
            &format!("mcpproxy is logged in to '{server}'. You can close this tab."),
        ),
        Err(e) => page(StatusCode::BAD_REQUEST, "Login failed", &e.to_string()),
    }
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
