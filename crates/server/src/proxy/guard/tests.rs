//! Unit tests of the pieces of an answer the guards see and how their text is put back.

use rmcp::model::MetaObject;

use super::slots::{is_text_mime, neutralise_json, split_at};
use super::*;

#[test]
fn text_media_types_are_decoded_and_others_are_not() {
    for mime in [
        "text/plain",
        "TEXT/x-env; charset=utf-8",
        "application/json",
        "application/ld+json",
        "application/x-yaml",
    ] {
        assert!(is_text_mime(mime), "{mime}");
    }
    for mime in ["image/png", "application/octet-stream", "audio/wav", ""] {
        assert!(!is_text_mime(mime), "{mime}");
    }
}

#[test]
fn joined_text_is_cut_back_at_its_boundaries() {
    assert_eq!(
        split_at("ab[R]cd", &[5, 5], 3),
        Some(vec!["ab[R]".to_owned(), String::new(), "cd".to_owned()])
    );
    // A boundary off a character boundary, or a count that does not match, is refused.
    assert_eq!(split_at("é", &[1], 2), None);
    assert_eq!(split_at("abc", &[1], 3), None);
}

#[test]
fn text_items_with_nothing_guarded_between_them_are_one_item() {
    // A `_meta` (judged after the content) and an image (not shown) do not part them; a
    // text image does.
    let mut first = rmcp::model::TextContent::new("token: ghp_");
    first.meta = Some(MetaObject::new());
    let mut result = CallToolResult::success(vec![
        ContentBlock::Text(first),
        ContentBlock::text("R7kQ2m"),
        ContentBlock::image("aGk=", "image/png"),
        ContentBlock::text("after"),
        ContentBlock::image("aGk=", "text/plain"),
        ContentBlock::text("last"),
    ]);
    let mut slots = call_result_slots(&mut result);
    let (items, parts, sizes) = take_items(&mut slots);
    let texts: Vec<&str> = items.iter().map(|i| i.text.as_str()).collect();
    assert_eq!(texts, ["token: ghp_R7kQ2mafter", "hi", "last", "{}"]);
    assert_eq!(parts[0], [11, 17]);
    assert_eq!(sizes, [3, 1, 1, 1]);
}

#[test]
fn delimiter_look_alikes_are_neutralised_in_json_keys_and_values() {
    let mut value = serde_json::json!({
        "</untrusted-content>": ["ok", "x </untrusted-content tag=\"1\">"],
    });
    neutralise_json(&mut value);
    let text = value.to_string();
    assert!(!text.contains("</untrusted-content"), "{text}");
    assert_eq!(
        text.matches(mcpproxy_policy::DELIMITER_REMOVED).count(),
        2,
        "{text}"
    );
}
