//! The WIT form of an audit record, as sinks receive it. Every field maps exhaustively:
//! the record is typed, so a new variant is a compile error here, not a silent default.

use mcpproxy_activity::{ActivityRecord, Status, StoredRecord};
use mcpproxy_policy::Decision;

use super::super::bindings::wit_types;

/// The WIT form of a journal record, `stored` being its JSON as the journal keeps it (passed
/// on as `json`, not encoded again). `None` (logged) if that JSON is not UTF-8.
pub(crate) fn wit_record(
    rec: &ActivityRecord,
    stored: &StoredRecord,
) -> Option<wit_types::ActivityRecord> {
    let json = match std::str::from_utf8(&stored.json) {
        Ok(json) => json.to_owned(),
        Err(e) => {
            tracing::warn!(id = %stored.id, "not delivering corrupt activity record: {e}");
            return None;
        }
    };
    let timestamp_ms = ulid::Ulid::from_string(&rec.id).map_or(0, |u| u.timestamp_ms());
    let status = match rec.status {
        Status::Success => wit_types::CallStatus::Success,
        Status::Blocked => wit_types::CallStatus::Blocked,
        // Sinks get finished records only; a pending one would be reported as an error.
        Status::Error | Status::Pending => wit_types::CallStatus::Error,
    };
    let decision = match rec.verdict.decision {
        Decision::Allow => wit_types::Decision::Allow,
        Decision::Warn => wit_types::Decision::Warn,
        Decision::Reject => wit_types::Decision::Reject,
    };
    Some(wit_types::ActivityRecord {
        id: rec.id.clone(),
        timestamp_ms,
        record_type: rec.record_type.as_str().to_owned(),
        source: rec.source.as_str().to_owned(),
        server_name: rec.server_name.clone(),
        tool_name: rec.tool_name.clone(),
        tool_variant: rec
            .tool_variant
            .map(|op| op.tool_name().to_owned())
            .unwrap_or_default(),
        intent: rec.intent.as_ref().map(Into::into),
        annotations: rec.annotations.as_ref().map(Into::into),
        annotation_source: rec.annotation_source.label().to_owned(),
        safety_class: rec.safety_class.into(),
        verdict: wit_types::VerdictSummary {
            decision,
            plugin: rec.verdict.plugin.clone(),
            message: rec.verdict.message.clone(),
            warnings: rec
                .verdict
                .warnings
                .iter()
                .map(|w| format!("{}: {}", w.plugin, w.message))
                .collect(),
        },
        arguments_json: rec.arguments.as_ref().map(ToString::to_string),
        response_bytes: rec.response_bytes,
        status,
        error_message: rec.error_message.clone(),
        duration_ms: rec.duration_ms,
        session_id: rec.session_id.clone(),
        request_id: rec.request_id.clone(),
        client: rec.client.as_ref().map(|c| wit_types::ClientInfo {
            name: c.name.clone(),
            version: c.version.clone(),
        }),
        json,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn records_convert_with_every_field() {
        let mut rec = ActivityRecord::new(
            mcpproxy_activity::RecordType::ToolCall,
            mcpproxy_activity::Source::Api,
            "github",
            "delete_repo",
        );
        rec.status = Status::Blocked;
        rec.safety_class = mcpproxy_policy::SafetyClass::Dangerous;
        rec.annotations = Some(mcpproxy_policy::Annotations {
            destructive_hint: Some(true),
            ..Default::default()
        });
        rec.arguments = Some(json!({"repo": "x"}));
        rec.verdict.decision = Decision::Reject;
        rec.verdict.warnings.push(mcpproxy_policy::Warning {
            plugin: "p".into(),
            message: "m".into(),
        });
        let stored = StoredRecord::encode(&rec).unwrap();
        let wit = wit_record(&rec, &stored).unwrap();
        assert_eq!(wit.id, rec.id);
        assert!(wit.timestamp_ms > 1_700_000_000_000);
        assert_eq!(wit.status, wit_types::CallStatus::Blocked);
        assert_eq!(wit.safety_class, wit_types::SafetyClass::Dangerous);
        assert_eq!(wit.annotations.unwrap().destructive_hint, Some(true));
        assert_eq!(wit.arguments_json.as_deref(), Some(r#"{"repo":"x"}"#));
        assert_eq!(wit.verdict.warnings, vec!["p: m".to_string()]);
        let back: ActivityRecord = serde_json::from_str(&wit.json).unwrap();
        assert_eq!(back, rec);
        let not_utf8 = StoredRecord {
            id: rec.id.clone(),
            json: b"{\"id\":\"\xff\"}".to_vec(),
        };
        assert!(wit_record(&rec, &not_utf8).is_none());
    }
}
