//! A `tools/call` result read off the wire into a [`CallAnswer`], for calls made on a
//! stdio session's call lane ([`super::lane`]), which hands over the server's result as
//! JSON text instead of rmcp's decoded [`ServerResult`].
//!
//! rmcp decodes every result by trying each kind it knows in turn (an untagged enum); a
//! tool call's answer is nearly always a tool result, so the fields are looked at once and
//! the result decoded straight as the kind they name. What names no kind is decoded as rmcp
//! decodes it, so what is not a tool result is refused alike on both paths.

use rmcp::model::ServerResult;
use serde_json::value::RawValue;

use super::CallAnswer;

/// The longest part of a decoding error quoted back (it may quote the server's text).
const MAX_ERROR_CHARS: usize = 200;

/// The answer `result` carries: a task or a request for input by its `resultType`, a tool
/// result when it has a tool result's fields; else an error saying why it is none of them.
pub(super) fn read(result: &RawValue) -> Result<CallAnswer, String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Shape<'a> {
        #[serde(borrow, default)]
        result_type: Option<std::borrow::Cow<'a, str>>,
        #[serde(default)]
        content: Option<serde::de::IgnoredAny>,
        #[serde(default)]
        structured_content: Option<serde::de::IgnoredAny>,
        #[serde(default)]
        is_error: Option<serde::de::IgnoredAny>,
    }
    let text = result.get();
    let shape: Shape<'_> = serde_json::from_str(text).map_err(unreadable)?;
    let answer = match shape.result_type.as_deref() {
        Some("task") => CallAnswer::Task(serde_json::from_str(text).map_err(unreadable)?),
        Some("input_required") => {
            CallAnswer::InputRequired(serde_json::from_str(text).map_err(unreadable)?)
        }
        _ if shape.content.is_some()
            || shape.structured_content.is_some()
            || shape.is_error.is_some() =>
        {
            CallAnswer::Complete(serde_json::from_str(text).map_err(unreadable)?)
        }
        _ => match serde_json::from_str::<ServerResult>(text).map_err(unreadable)? {
            ServerResult::CallToolResult(result) => CallAnswer::Complete(result),
            _ => return Err("the server answered tools/call with another kind of result".into()),
        },
    };
    Ok(answer)
}

/// Why a result cannot be decoded, in at most [`MAX_ERROR_CHARS`] characters.
fn unreadable(e: serde_json::Error) -> String {
    let mut why = e.to_string();
    if let Some((cut, _)) = why.char_indices().nth(MAX_ERROR_CHARS) {
        why.truncate(cut);
        why.push('…');
    }
    format!("its result cannot be read: {why}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> Result<CallAnswer, String> {
        let raw: Box<RawValue> = serde_json::from_str(text).expect("JSON");
        read(&raw)
    }

    #[test]
    fn a_tool_result_is_read_whole() {
        let Ok(CallAnswer::Complete(result)) = read_text(
            r#"{"content":[{"type":"text","text":"hi"}],"structuredContent":{"n":1},"isError":false,"_meta":{"k":"v"}}"#,
        ) else {
            panic!("not a tool result");
        };
        assert_eq!(result.content.len(), 1);
        assert_eq!(result.structured_content, Some(serde_json::json!({"n": 1})));
        assert_eq!(result.is_error, Some(false));
        assert!(result.meta.is_some());
        // Any one of the fields makes a tool result; `content` defaults to empty.
        let Ok(CallAnswer::Complete(result)) = read_text(r#"{"isError":true}"#) else {
            panic!("not a tool result");
        };
        assert!(result.content.is_empty());
        // A present `structuredContent: null` is kept, as rmcp keeps it.
        let Ok(CallAnswer::Complete(result)) = read_text(r#"{"structuredContent":null}"#) else {
            panic!("not a tool result");
        };
        assert_eq!(result.structured_content, Some(serde_json::Value::Null));
    }

    #[test]
    fn tasks_and_requests_for_input_are_told_by_their_result_type() {
        let task = r#"{"resultType":"task","taskId":"t-1","status":"working","createdAt":"2026-11-25T00:00:00Z","lastUpdatedAt":"2026-11-25T00:00:00Z","ttlMs":null}"#;
        let Ok(CallAnswer::Task(task)) = read_text(task) else {
            panic!("not a task");
        };
        assert_eq!(task.task.task_id, "t-1");
        let Ok(CallAnswer::InputRequired(input)) =
            read_text(r#"{"resultType":"input_required","requestState":"s-1"}"#)
        else {
            panic!("not a request for input");
        };
        assert_eq!(input.request_state.as_deref(), Some("s-1"));
    }

    #[test]
    fn what_is_not_a_tool_result_is_refused_with_the_reason() {
        assert_eq!(
            read_text(r#"{"tools":[]}"#).err().as_deref(),
            Some("the server answered tools/call with another kind of result")
        );
        assert_eq!(
            read_text("{}").err().as_deref(),
            Some("the server answered tools/call with another kind of result")
        );
        let bad = read_text(r#"{"content":"not a list"}"#).expect_err("refused");
        assert!(bad.starts_with("its result cannot be read: "), "{bad}");
        assert!(read_text("[1,2]").is_err());
        // A task without its fields is refused, not taken for something else.
        let bad = read_text(r#"{"resultType":"task"}"#).expect_err("refused");
        assert!(bad.starts_with("its result cannot be read: "), "{bad}");
    }

    #[test]
    fn a_decoding_error_does_not_quote_a_long_text_whole() {
        let long = "x".repeat(10_000);
        let text = format!(r#"{{"content":[{{"type":"{long}","text":"hi"}}]}}"#);
        let bad = read_text(&text).expect_err("refused");
        assert!(bad.chars().count() < 300, "{} chars", bad.chars().count());
    }
}
