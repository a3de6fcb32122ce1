//! What a server's `401` or `403` asked for ([`Challenge`]), and the HTTP client wrapper
//! that notices them ([`Watched`]): every request of an upstream session goes through it, so
//! a rejected token, a refresh that failed or a step-up to more scopes is seen wherever it
//! happens (at `initialize`, in a call, on the event stream) and the upstream can say
//! "login required" instead of reconnecting in a loop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Error as SseError, Sse};

/// The longest `WWW-Authenticate` value kept (a hostile server may send anything).
const MAX_HEADER_BYTES: usize = 4096;

/// A server's `401` (a login is needed) or `403 insufficient_scope` (more access is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// The `WWW-Authenticate` header, cut to [`MAX_HEADER_BYTES`]: it seeds discovery (its
    /// `resource_metadata`) and the scopes asked for at the next login.
    pub header: String,
    /// `403 insufficient_scope`: the token is good but does not reach far enough.
    pub insufficient_scope: bool,
}

impl Challenge {
    fn new(header: &str, insufficient_scope: bool) -> Self {
        let mut end = header.len().min(MAX_HEADER_BYTES);
        while !header.is_char_boundary(end) {
            end -= 1;
        }
        Self {
            header: header[..end].to_owned(),
            insufficient_scope,
        }
    }

    /// The challenge of an HTTP client error, if it is one.
    pub fn of<E: std::error::Error + Send + Sync + 'static>(
        error: &StreamableHttpError<E>,
    ) -> Option<Self> {
        match error {
            StreamableHttpError::AuthRequired(e) => {
                Some(Self::new(&e.www_authenticate_header, false))
            }
            StreamableHttpError::InsufficientScope(e) => {
                Some(Self::new(&e.www_authenticate_header, true))
            }
            _ => None,
        }
    }

    /// The `scope` the challenge names, if any.
    pub fn scope(&self) -> Option<String> {
        parameter(&self.header, "scope")
    }

    /// Why a login is needed, for statuses and errors (the scope quoted: it is the
    /// server's text).
    pub fn reason(&self) -> String {
        match (self.insufficient_scope, self.scope()) {
            (true, Some(scope)) => format!(
                "the server asks for more access (scope {})",
                mcpproxy_support::quote(&scope)
            ),
            (true, None) => "the server asks for more access than the login gave".to_owned(),
            (false, _) => "the server asks for a login".to_owned(),
        }
    }
}

/// The value of `name="..."` (or `name=token`) in a `WWW-Authenticate` header.
fn parameter(header: &str, name: &str) -> Option<String> {
    let mut rest = header;
    while let Some(at) = rest.find(name) {
        let before = rest[..at].chars().last();
        let after = &rest[at + name.len()..];
        rest = after;
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let Some(value) = after.trim_start().strip_prefix('=') else {
            continue;
        };
        let value = value.trim_start();
        return Some(match value.strip_prefix('"') {
            Some(quoted) => quoted.split('"').next().unwrap_or_default().to_owned(),
            None => value
                .split([',', ' '])
                .next()
                .unwrap_or_default()
                .to_owned(),
        });
    }
    None
}

/// The HTTP client an upstream session sends its requests with, built as rmcp builds its
/// default one: no idle connection pooling (a reused connection whose previous answer was
/// not read to its end stalls ~40 ms on Linux's delayed ACK), and redirects followed only
/// within the server's own origin (a token never follows a redirect elsewhere).
pub fn upstream_http_client() -> reqwest::Client {
    let same_origin = reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt.previous().first().map(reqwest::Url::origin);
        if attempt.previous().len() > 5 || first != Some(attempt.url().origin()) {
            attempt.stop()
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(same_origin)
        .build()
        .unwrap_or_default()
}

/// Where a session's HTTP client leaves the last challenge it met.
#[derive(Debug, Default)]
pub struct ChallengeSlot(Mutex<Option<Challenge>>);

impl ChallengeSlot {
    fn put(&self, challenge: Challenge) {
        *mcpproxy_support::lock(&self.0) = Some(challenge);
    }

    /// The last challenge met since the slot was last cleared.
    pub fn get(&self) -> Option<Challenge> {
        mcpproxy_support::lock(&self.0).clone()
    }

    /// Forgets the challenge (a login finished, or a session began with the tokens).
    pub fn clear(&self) {
        *mcpproxy_support::lock(&self.0) = None;
    }
}

/// An HTTP client that leaves every challenge it meets in a [`ChallengeSlot`].
#[derive(Clone)]
pub struct Watched<C> {
    inner: C,
    slot: Arc<ChallengeSlot>,
}

impl<C> Watched<C> {
    pub fn new(inner: C, slot: Arc<ChallengeSlot>) -> Self {
        Self { inner, slot }
    }

    fn seen<T, E: std::error::Error + Send + Sync + 'static>(
        &self,
        result: Result<T, StreamableHttpError<E>>,
    ) -> Result<T, StreamableHttpError<E>> {
        if let Err(error) = &result
            && let Some(challenge) = Challenge::of(error)
        {
            self.slot.put(challenge);
        }
        result
    }
}

type Stream = BoxStream<'static, Result<Sse, SseError>>;

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for Watched<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let result = self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        self.seen(result)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let result = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.seen(result)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let result = self
            .inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await;
        self.seen(result)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<Stream, StreamableHttpError<Self::Error>> {
        let result = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        self.seen(result)
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<Stream, StreamableHttpError<Self::Error>> {
        let result = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.seen(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scope_is_read_quoted_or_bare_and_not_from_a_longer_name() {
        let quoted = Challenge::new(
            r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="http://127.0.0.1/x""#,
            true,
        );
        assert_eq!(quoted.scope().as_deref(), Some("mcp:basic mcp:write"));
        let bare = Challenge::new("Bearer realm=x, scope=files:read", false);
        assert_eq!(bare.scope().as_deref(), Some("files:read"));
        let other = Challenge::new(r#"Bearer xscope="no""#, false);
        assert_eq!(other.scope(), None);
    }

    #[test]
    fn a_hostile_header_is_cut_and_its_scope_quoted_when_shown() {
        let long = format!("Bearer scope=\"a\u{1b}[2J\", {}", "x".repeat(10_000));
        let challenge = Challenge::new(&long, true);
        assert!(challenge.header.len() <= MAX_HEADER_BYTES);
        assert!(
            !challenge.reason().contains('\u{1b}'),
            "{}",
            challenge.reason()
        );
        assert_eq!(
            Challenge::new("Bearer", false).reason(),
            "the server asks for a login"
        );
    }
}
