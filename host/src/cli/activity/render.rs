//! The labels every view of a record uses (`list`'s table, `watch`'s lines): the intent
//! with its icon (or what a record that is not a call is), the status, and the reason.

use mcpproxy_activity::{ActivityRecord, RecordType};
use mcpproxy_policy::{Decision, OperationType};

use super::record::ShownRecord;

/// The STATUS column: the record's status, or `dry-run` for a dry run (which never reached
/// the upstream, whatever the policy said).
pub(super) fn status_label(record: &ActivityRecord) -> String {
    if record.dry_run {
        "dry-run".to_owned()
    } else {
        record.status.as_str().to_owned()
    }
}

/// The REASON column: why the policy warned or rejected, else the error; empty for a plain
/// success.
pub(super) fn reason(record: &ActivityRecord) -> String {
    match (record.verdict.decision, &record.verdict.message) {
        (Decision::Warn | Decision::Reject, Some(message)) => message.clone(),
        _ => record.error_message.clone().unwrap_or_default(),
    }
}

/// `📖 read`, `✏️ write`, `⚠️ destructive` (or the word alone); for records that are not
/// calls, what they are: `🚨 alert`, `💬 prompt`, `🔤 completion`, `🔔 subscribe`,
/// `🔕 unsubscribe`, `📡 listen`; a summarised record's label ends in `(summarised)`.
pub(super) fn intent_label(shown: &ShownRecord, icons: bool) -> String {
    let label = intent_word(shown, icons);
    if shown.record.summarised {
        format!("{label} (summarised)")
    } else {
        label
    }
}

fn intent_word(shown: &ShownRecord, icons: bool) -> String {
    if let Some((icon, word)) = kind_label(shown) {
        return if icons {
            format!("{icon} {word}")
        } else {
            word.to_owned()
        };
    }
    let operation = shown.record.intent.as_ref().and_then(|i| i.operation_type);
    let op = operation.map_or("-", OperationType::as_str);
    if !icons {
        return op.to_owned();
    }
    let icon = match operation {
        Some(OperationType::Read) => "📖",
        Some(OperationType::Write) => "✏️",
        Some(OperationType::Destructive) => "⚠️",
        None => "•",
    };
    format!("{icon} {op}")
}

/// The icon and word of a record that is not a call and carries no intent; `None` for calls
/// (and types shown by their intent).
fn kind_label(shown: &ShownRecord) -> Option<(&'static str, &'static str)> {
    Some(match shown.record_type()? {
        RecordType::Alert => ("🚨", "alert"),
        RecordType::PromptGet => ("💬", "prompt"),
        RecordType::Completion => ("🔤", "completion"),
        RecordType::Subscription => match subscription_method(&shown.record) {
            Some("resources/unsubscribe") => ("🔕", "unsubscribe"),
            Some("subscriptions/listen") => ("📡", "listen"),
            _ => ("🔔", "subscribe"),
        },
        RecordType::ServerChange => ("🛠", "server"),
        RecordType::Egress => ("🌐", "egress"),
        _ => return None,
    })
}

/// What a `subscription` record did (`resources/subscribe`, `resources/unsubscribe`,
/// `subscriptions/listen`), from its free-form `details`.
pub(super) fn subscription_method(record: &ActivityRecord) -> Option<&str> {
    record.details.as_ref()?.get("method")?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn records_that_are_not_calls_say_what_they_are() {
        use serde_json::json;
        let label = |record: Value| {
            let shown = ShownRecord::read(&record).unwrap();
            (intent_label(&shown, true), intent_label(&shown, false))
        };
        let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        assert_eq!(
            label(json!({"type": "tool_call", "intent": {"operation_type": "read"}})),
            pair("📖 read", "read")
        );
        assert_eq!(label(json!({"type": "alert"})), pair("🚨 alert", "alert"));
        assert_eq!(
            label(json!({"type": "prompt_get"})),
            pair("💬 prompt", "prompt")
        );
        assert_eq!(
            label(json!({"type": "completion", "summarised": true})),
            pair("🔤 completion (summarised)", "completion (summarised)")
        );
        let subscription =
            |method: &str| json!({"type": "subscription", "details": {"method": method}});
        assert_eq!(
            label(subscription("resources/subscribe")),
            pair("🔔 subscribe", "subscribe")
        );
        assert_eq!(
            label(subscription("resources/unsubscribe")),
            pair("🔕 unsubscribe", "unsubscribe")
        );
        assert_eq!(
            label(subscription("subscriptions/listen")),
            pair("📡 listen", "listen")
        );
        assert_eq!(
            label(json!({"type": "server_change"})),
            pair("🛠 server", "server")
        );
        // A type this build does not know is shown by its intent, as before.
        assert_eq!(label(json!({"type": "future_kind"})), pair("• -", "-"));
    }
}
