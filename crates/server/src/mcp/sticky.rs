//! Sticky sessions behind a load balancer: every `/mcp` answer names the replica that gave
//! it, in the `Mcpproxy-Replica` header and the `mcpproxy_replica` cookie (`cluster.replica`).
//!
//! A client of a 2026-07-28 stateless exchange may land on any replica. A session of an
//! earlier protocol version (`Mcp-Session-Id`) lives in one replica's memory, so its next
//! requests must reach the same one: a load balancer keys on the session id it learned from
//! the answer (the most robust: every MCP client sends it back), or on this cookie (clients
//! that keep cookies, HAProxy's `cookie mcpproxy_replica` with `server ... cookie NAME`).
//! docs/deploy-team.md shows both.

use axum::Router;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http::HeaderValue;
use http::header::SET_COOKIE;

/// The header naming the replica that answered.
pub const REPLICA_HEADER: &str = "mcpproxy-replica";
/// The cookie a load balancer may route on.
pub const REPLICA_COOKIE: &str = "mcpproxy_replica";

/// `router` with every answer marked as `replica`'s. `replica` is a validated
/// `cluster.replica` (letters, digits, `-`, `_`, `.`), so it is a valid header value and
/// cookie value as it is; a name that somehow is not leaves answers unmarked.
pub fn mark(router: Router, replica: &str) -> Router {
    let (Ok(header), Ok(cookie)) = (
        HeaderValue::from_str(replica),
        HeaderValue::from_str(&format!(
            "{REPLICA_COOKIE}={replica}; Path=/mcp; HttpOnly; SameSite=Lax"
        )),
    ) else {
        tracing::warn!("cluster.replica cannot be sent in a header; answers are not marked");
        return router;
    };
    router.layer(axum::middleware::from_fn(
        move |request: Request, next: Next| {
            let header = header.clone();
            let cookie = cookie.clone();
            async move {
                let mut response: Response = next.run(request).await;
                let headers = response.headers_mut();
                headers.insert(REPLICA_HEADER, header);
                headers.append(SET_COOKIE, cookie);
                response
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use tower::ServiceExt;

    #[tokio::test]
    async fn answers_name_the_replica_in_a_header_and_a_cookie() {
        let app = mark(
            Router::new().route("/mcp", axum::routing::post(|| async { "ok" })),
            "replica-2",
        );
        let response = app
            .oneshot(Request::post("/mcp").body(Body::empty()).expect("request"))
            .await
            .expect("answer");
        assert_eq!(response.headers()[REPLICA_HEADER], "replica-2");
        assert_eq!(
            response.headers()[SET_COOKIE],
            "mcpproxy_replica=replica-2; Path=/mcp; HttpOnly; SameSite=Lax"
        );
    }

    #[tokio::test]
    async fn an_unsendable_name_leaves_answers_unmarked() {
        let app = mark(
            Router::new().route("/mcp", axum::routing::post(|| async { "ok" })),
            "bad\nname",
        );
        let response = app
            .oneshot(Request::post("/mcp").body(Body::empty()).expect("request"))
            .await
            .expect("answer");
        assert!(response.headers().get(REPLICA_HEADER).is_none());
        assert!(response.headers().get(SET_COOKIE).is_none());
    }
}
