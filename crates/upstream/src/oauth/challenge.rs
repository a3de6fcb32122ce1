//! What a server's `401` or `403` asked for ([`Challenge`]), what the authorization server
//! refused for good ([`Refusal`]), and the HTTP client wrapper that notices them
//! ([`Watched`]): every request of an upstream session goes through it, so a rejected token,
//! a refresh the authorization server refused or a step-up to more scopes is seen wherever
//! it happens (at `initialize`, in a call, on the event stream) and the upstream can say
//! "login required" instead of reconnecting in a loop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::AuthError;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Error as SseError, Sse};

/// The longest `WWW-Authenticate` value kept (a hostile server may send anything).
const MAX_HEADER_BYTES: usize = 4096;

/// A server's `401` (a login is needed) or `403 insufficient_scope` (more access is), or
/// the authorization server's refusal of the stored login (its `header` then may be empty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// The `WWW-Authenticate` header, cut to [`MAX_HEADER_BYTES`]: it seeds discovery (its
    /// `resource_metadata`) and the scopes asked for at the next login.
    pub header: String,
    /// `403 insufficient_scope`: the token is good but does not reach far enough.
    pub insufficient_scope: bool,
    /// The authorization server refused the stored login's token request for good.
    pub refused: Option<Refusal>,
}

/// The RFC 6749 §5.2 errors of a token request that no retry gets past: the authorization
/// server no longer accepts the registration (`invalid_client`, `unauthorized_client`) or
/// the grant (`invalid_grant`) the stored login holds.
const REFUSALS: [&str; 3] = ["invalid_client", "unauthorized_client", "invalid_grant"];

/// The authorization server refused a token request of the stored login (a refresh) with
/// one of [`REFUSALS`]: the login must be made again, registering anew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The error code the authorization server answered.
    pub error: &'static str,
    /// The client id of the refused login (the stored registration).
    pub client_id: String,
}

impl Refusal {
    /// The refusal rmcp's error reports, if it is one: a refresh answered with one of
    /// [`REFUSALS`]. rmcp keeps the token endpoint's answer as oauth2's text of it,
    /// `Server returned error response: CODE[: description]`; a refresh that failed for
    /// another reason (the network, the server's own error) is not one.
    pub fn of(error: &AuthError, client_id: &str) -> Option<Self> {
        let (AuthError::TokenRefreshFailed(text) | AuthError::TokenRefreshRejected(text)) = error
        else {
            return None;
        };
        let answer = text.strip_prefix("Server returned error response: ")?;
        let code = answer.split([':', ' ']).next()?;
        Self::named(code, client_id)
    }

    /// The refusal with the error code `code`, if it is one of [`REFUSALS`].
    pub fn named(code: &str, client_id: &str) -> Option<Self> {
        REFUSALS.iter().find(|c| **c == code).map(|error| Self {
            error,
            client_id: client_id.to_owned(),
        })
    }

    /// Why a login is needed.
    pub fn reason(&self) -> String {
        match self.error {
            "invalid_grant" => format!(
                "the authorization server no longer accepts this login ({}: revoked or expired): log in again",
                self.error
            ),
            _ => format!(
                "the authorization server no longer knows this client ({}): log in again to register anew",
                self.error
            ),
        }
    }
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
            refused: None,
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
        if let Some(refusal) = &self.refused {
            return refusal.reason();
        }
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
    mcpproxy_auth::install_crypto_providers();
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

/// Where a session's HTTP client leaves the last challenge it met, and the authorization
/// server's refusal of the stored login.
#[derive(Debug, Default)]
pub struct ChallengeSlot(Mutex<Seen>);

#[derive(Debug, Default)]
struct Seen {
    challenge: Option<Challenge>,
    refusal: Option<Refusal>,
}

impl ChallengeSlot {
    fn put(&self, challenge: Challenge) {
        mcpproxy_support::lock(&self.0).challenge = Some(challenge);
    }

    /// Notes that the authorization server refused the stored login for good; kept until
    /// the slot is cleared, whatever challenge comes after it.
    pub fn refuse(&self, refusal: Refusal) {
        mcpproxy_support::lock(&self.0).refusal = Some(refusal);
    }

    /// The last challenge met since the slot was last cleared, with the refusal if there
    /// was one (a refusal alone is a challenge without a header).
    pub fn get(&self) -> Option<Challenge> {
        let seen = mcpproxy_support::lock(&self.0);
        if seen.challenge.is_none() && seen.refusal.is_none() {
            return None;
        }
        Some(Challenge {
            refused: seen.refusal.clone(),
            ..seen.challenge.clone().unwrap_or_default()
        })
    }

    /// Forgets the challenge and the refusal (a login finished, or a session began with
    /// the tokens).
    pub fn clear(&self) {
        *mcpproxy_support::lock(&self.0) = Seen::default();
    }
}

/// An HTTP client that leaves every challenge it meets in a [`ChallengeSlot`], and every
/// refusal of the stored login's refresh.
#[derive(Clone)]
pub struct Watched<C> {
    inner: C,
    slot: Arc<ChallengeSlot>,
    /// The client id of the stored login whose tokens `inner` sends, when it sends any.
    client_id: Option<String>,
}

impl<C> Watched<C> {
    pub fn new(inner: C, slot: Arc<ChallengeSlot>) -> Self {
        Self {
            inner,
            slot,
            client_id: None,
        }
    }

    /// `inner` sends the tokens of the stored login of client `client_id`.
    pub fn with_login(mut self, client_id: &str) -> Self {
        self.client_id = Some(client_id.to_owned());
        self
    }

    fn seen<T, E: std::error::Error + Send + Sync + 'static>(
        &self,
        result: Result<T, StreamableHttpError<E>>,
    ) -> Result<T, StreamableHttpError<E>> {
        if let Err(error) = &result {
            if let Some(challenge) = Challenge::of(error) {
                self.slot.put(challenge);
            } else if let (StreamableHttpError::Auth(auth), Some(client_id)) =
                (error, &self.client_id)
                && let Some(refusal) = Refusal::of(auth, client_id)
            {
                tracing::debug!(
                    error = refusal.error,
                    "the authorization server refused the stored login's refresh"
                );
                self.slot.refuse(refusal);
            }
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

    fn refresh_failed(answer: &str) -> AuthError {
        AuthError::TokenRefreshFailed(format!("Server returned error response: {answer}"))
    }

    #[test]
    fn a_refresh_refused_for_good_is_told_apart_from_one_that_may_succeed_later() {
        let forgot = Refusal::of(
            &refresh_failed("invalid_client: client authentication failed"),
            "c1",
        )
        .expect("invalid_client is a refusal");
        assert_eq!(forgot.error, "invalid_client");
        assert_eq!(forgot.client_id, "c1");
        assert_eq!(
            forgot.reason(),
            "the authorization server no longer knows this client (invalid_client): log in again to register anew"
        );
        assert!(Refusal::of(&refresh_failed("unauthorized_client"), "c1").is_some());
        let revoked = Refusal::of(
            &AuthError::TokenRefreshRejected(
                "Server returned error response: invalid_grant: grant request is invalid".into(),
            ),
            "c1",
        )
        .expect("invalid_grant is a refusal");
        assert!(revoked.reason().contains("(invalid_grant"), "{revoked:?}");
        for passing in [
            refresh_failed("server_error: try later"),
            refresh_failed("temporarily_unavailable"),
            refresh_failed("invalid_clientele"),
            AuthError::TokenRefreshFailed("Request failed".into()),
            AuthError::TokenRefreshFailed("invalid_client".into()),
            AuthError::AuthorizationRequired,
            AuthError::TokenExchangeFailed("Server returned error response: invalid_client".into()),
        ] {
            assert_eq!(Refusal::of(&passing, "c1"), None, "{passing}");
        }
    }

    #[test]
    fn a_refused_refresh_is_kept_in_the_slot_over_later_challenges_until_a_login() {
        let slot = Arc::new(ChallengeSlot::default());
        let anonymous = Watched::new((), slot.clone());
        let refused: Result<(), StreamableHttpError<std::io::Error>> =
            Err(StreamableHttpError::Auth(refresh_failed("invalid_client")));
        assert!(anonymous.seen(refused).is_err());
        assert_eq!(slot.get(), None, "no stored login, nothing refused");

        let watched = Watched::new((), slot.clone()).with_login("c1");
        let refused: Result<(), StreamableHttpError<std::io::Error>> = Err(
            StreamableHttpError::Auth(refresh_failed("invalid_client: gone")),
        );
        assert!(watched.seen(refused).is_err());
        let alone = slot.get().expect("the refusal is a challenge");
        assert_eq!(alone.header, "");
        assert!(alone.reason().contains("invalid_client"), "{alone:?}");

        let challenged: Result<(), StreamableHttpError<std::io::Error>> =
            Err(StreamableHttpError::AuthRequired(
                rmcp::transport::streamable_http_client::AuthRequiredError::new(
                    r#"Bearer scope="mcp:tools""#.to_owned(),
                ),
            ));
        assert!(watched.seen(challenged).is_err());
        let both = slot.get().expect("a challenge");
        assert_eq!(both.scope().as_deref(), Some("mcp:tools"));
        assert_eq!(
            both.refused.as_ref().map(|r| r.error),
            Some("invalid_client")
        );
        assert!(both.reason().contains("register anew"), "{both:?}");
        slot.clear();
        assert_eq!(slot.get(), None);
    }

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
