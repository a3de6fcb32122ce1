//! Asking a client: a server-to-client request (elicitation, sampling) sent on the stream of
//! the client request that caused it, within a deadline ([`ask_client`]), and the record of
//! each one for the audit trail ([`ForwardedRequest`], [`RequestObserver`]).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ClientResult, GetExtensions, ServerRequest};
use rmcp::service::OriginatingRequestId;

use super::calls::CallOrigin;
use super::channel::BackChannel;

/// What a server-to-client request was, for the audit trail.
#[derive(Debug, Clone)]
pub struct ForwardedRequest {
    pub server: String,
    /// `elicitation/create`, `sampling/createMessage`.
    pub method: &'static str,
    /// The request's parameters (capped and redacted by the observer).
    pub params: serde_json::Value,
    /// The call it belonged to, if one was found.
    pub origin: Option<CallOrigin>,
    /// Why it was not forwarded, or what went wrong; `None` when the client answered.
    pub error: Option<String>,
    /// The client's answer (`accept`, `decline`, `cancel` for an elicitation).
    pub outcome: Option<String>,
    pub duration: Duration,
}

/// Told about every server-to-client request the back channel handled (the proxy records them).
pub trait RequestObserver: Send + Sync {
    fn forwarded(&self, request: ForwardedRequest);
}

/// Judges what an upstream sends a client on its own (a log message's logger and data, a
/// progress message) before it is relayed: the proxy's result guards.
pub trait RelayGuard: Send + Sync {
    /// `values` as they may be relayed (redacted, marked), or `None` when they must not be.
    /// `what` names what they are (`notifications/message`).
    fn guard<'a>(
        &'a self,
        server: &'a str,
        what: &'static str,
        values: Vec<serde_json::Value>,
    ) -> futures::future::BoxFuture<'a, Option<Vec<serde_json::Value>>>;
}

impl BackChannel {
    /// Sets who is told about server-to-client requests; only the first call counts.
    pub fn set_observer(&self, observer: Arc<dyn RequestObserver>) {
        let _ = self.observer.set(observer);
    }

    /// Sets what judges relayed log and progress messages; only the first call counts.
    pub fn set_relay_guard(&self, guard: Arc<dyn RelayGuard>) {
        let _ = self.outboxes.relay_guard.set(guard);
    }

    pub fn observe(&self, request: ForwardedRequest) {
        if let Some(observer) = self.observer.get() {
            observer.forwarded(request);
        }
    }
}

/// Why a server-to-client request got no answer from the client.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("{client} did not answer within {} s", timeout.as_secs())]
    Timeout { client: String, timeout: Duration },
    #[error("{client} could not be asked: {message}")]
    Failed { client: String, message: String },
}

/// Sends `request` to the client of `origin` on the stream of the request that caused
/// it, and waits at most `timeout` for the answer. Also ends when the client cancels the
/// call.
pub async fn ask_client(
    origin: &CallOrigin,
    mut request: ServerRequest,
    timeout: Duration,
) -> Result<ClientResult, AskError> {
    request
        .extensions_mut()
        .insert(OriginatingRequestId(origin.request_id.clone()));
    let peer = origin.peer.clone();
    let client = origin.describe_client();
    // A task of its own: rmcp marks a request sent from inside a request handler with that
    // handler's request id, which here would be the upstream's, not the client's.
    let sent = tokio::spawn(async move { peer.send_request(request).await });
    let abort = sent.abort_handle();
    let result = tokio::select! {
        joined = tokio::time::timeout(timeout, sent) => joined,
        () = origin.cancelled.cancelled() => {
            abort.abort();
            return Err(AskError::Failed {
                client,
                message: "the call was cancelled".into(),
            });
        }
    };
    match result {
        Err(_) => {
            abort.abort();
            Err(AskError::Timeout { client, timeout })
        }
        Ok(Err(join)) => Err(AskError::Failed {
            client,
            message: join.to_string(),
        }),
        Ok(Ok(Err(e))) => Err(AskError::Failed {
            client,
            message: e.to_string(),
        }),
        Ok(Ok(Ok(answer))) => Ok(answer),
    }
}
