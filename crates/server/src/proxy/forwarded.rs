//! The audit record of each request an upstream sent to a client through the proxy
//! (elicitation, sampling): what was asked (capped and redacted like call arguments), for
//! which call, and what the client answered or why it was not asked.

use std::sync::Arc;

use serde_json::json;

use mcpproxy_activity::{ActivityRecord, Journal, RecordType, Source, Status};
use mcpproxy_upstream::back_channel::{ForwardedRequest, RequestObserver};

use super::ActivitySettings;

/// Writes a `server_request` record for every forwarded request.
pub(super) struct Recorder {
    pub(super) journal: Arc<Journal>,
    pub(super) settings: ActivitySettings,
}

impl RequestObserver for Recorder {
    fn forwarded(&self, request: ForwardedRequest) {
        self.journal.submit(record(&request, &self.settings));
    }
}

fn record(request: &ForwardedRequest, settings: &ActivitySettings) -> ActivityRecord {
    let mut record = ActivityRecord::new(
        RecordType::ServerRequest,
        Source::Mcp,
        request.server.as_str(),
        request.method,
    );
    settings.keep_arguments(&mut record, &request.params);
    record.duration_ms = u64::try_from(request.duration.as_millis()).unwrap_or(u64::MAX);
    match &request.error {
        None => record.status = Status::Success,
        Some(message) => {
            record.status = Status::Error;
            record.error_message = Some(message.chars().take(1000).collect());
        }
    }
    if let Some(origin) = &request.origin {
        record.session_id = origin.session_id.clone();
        record.request_id = Some(origin.request_id.to_string());
        record.client = origin.client.clone();
    }
    record.details = Some(json!({
        "answer": request.outcome,
        "routed_to_call": request.origin.is_some(),
    }));
    record
}
