//! The static page's routes (`/`, `/ui/app.js`, `/ui/app.css`), embedded in the binary.

use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use mcpproxy_auth::access::Access;

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// `/`, `/ui/app.js` and `/ui/app.css`.
pub fn router(access: Arc<Access>) -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX) }),
        )
        .route(
            "/ui/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/ui/app.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
        .layer(axum::middleware::from_fn(move |request, next| {
            check_host_and_origin(access.clone(), request, next)
        }))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

async fn check_host_and_origin(access: Arc<Access>, request: Request, next: Next) -> Response {
    match access.check(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(message) => (StatusCode::FORBIDDEN, message).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_script_and_style() {
        assert!(INDEX.contains(r#"<script src="/ui/app.js" defer></script>"#));
        assert!(
            !INDEX.contains("<script>"),
            "no inline script: the CSP forbids it"
        );
        assert!(
            !SCRIPT.contains("innerHTML"),
            "record text is set as text only"
        );
        assert!(
            !INDEX.contains("http://") && !INDEX.contains("https://"),
            "no CDN"
        );
    }
}
