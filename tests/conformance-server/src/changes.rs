//! Change notifications for `subscriptions/listen` streams (protocol 2026-07-28): the
//! tools `test_trigger_tool_change`, `test_trigger_prompt_change` and
//! `touch_watched_resource` publish a [`Change`] to every open stream of this process,
//! and each stream forwards the changes its accepted filter allows, tagged with its
//! subscription ID by rmcp. The fixture's tool and prompt lists themselves are fixed:
//! the triggers announce a change so the stream can be observed.

use rmcp::{ErrorData as McpError, service::SubscriptionContext};
use tokio::sync::broadcast;

/// One change, as published to the open streams.
#[derive(Debug, Clone)]
pub enum Change {
    Tools,
    Prompts,
    ResourceUpdated(String),
}

/// The fan-out of changes to the open streams.
#[derive(Debug)]
pub struct Changes(broadcast::Sender<Change>);

impl Default for Changes {
    fn default() -> Self {
        Self(broadcast::channel(64).0)
    }
}

impl Changes {
    /// Publishes `change`; the number of open streams it reached.
    pub fn publish(&self, change: Change) -> usize {
        self.0.send(change).unwrap_or(0)
    }

    /// Serves one `subscriptions/listen` stream until the client cancels it.
    pub async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let mut changes = self.0.subscribe();
        loop {
            let change = tokio::select! {
                () = context.cancelled() => return Ok(()),
                change = changes.recv() => change,
            };
            let sink = context.sink();
            let sent = match change {
                Ok(Change::Tools) => sink.notify_tool_list_changed().await,
                Ok(Change::Prompts) => sink.notify_prompt_list_changed().await,
                Ok(Change::ResourceUpdated(uri)) => sink.notify_resource_updated(uri).await,
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "a listen stream fell behind");
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            };
            // A change outside the stream's filter is refused by rmcp: not sent, as intended.
            if let Err(error) = sent {
                tracing::debug!(%error, "change not sent on a listen stream");
            }
        }
    }
}
