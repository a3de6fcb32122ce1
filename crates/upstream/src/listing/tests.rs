//! Tests of the paged, entry-by-entry tool listing.

use super::*;

/// A fake server's pages: page `i` (cursor `p{i}`, none for the first) answers
/// `pages[i]`.
async fn list(pages: Vec<serde_json::Value>, warned: &Warned) -> (Vec<String>, usize) {
    let asked = std::cell::Cell::new(0);
    let fetch = |cursor: Option<String>| {
        asked.set(asked.get() + 1);
        let at = cursor.map_or(0, |c| c.trim_start_matches('p').parse().unwrap_or(0));
        let page = pages.get(at).cloned().unwrap_or_default();
        async move {
            serde_json::from_value::<rmcp::model::ServerResult>(page).map_err(|e| e.to_string())
        }
    };
    let tools = list_pages(fetch, "fx", warned).await.unwrap();
    (
        tools.iter().map(|t| t.name.to_string()).collect(),
        asked.get(),
    )
}

fn tool(name: &str) -> serde_json::Value {
    serde_json::json!({"name": name, "inputSchema": {"type": "object"}})
}

#[tokio::test]
async fn every_page_is_listed_and_a_malformed_entry_is_left_out_of_its_page_only() {
    let warned = Warned::default();
    let pages = vec![
        serde_json::json!({"tools": [tool("a"), tool("b")], "nextCursor": "p1"}),
        serde_json::json!({
            "tools": [tool("c"), {"inputSchema": {}}, {"name": "d", "inputSchema": {}, "annotations": {"readOnlyHint": "true"}}],
            "nextCursor": "p2"
        }),
        serde_json::json!({"tools": [tool("e")]}),
    ];
    let (names, asked) = list(pages.clone(), &warned).await;
    assert_eq!(names, ["a", "b", "c", "d", "e"]);
    assert_eq!(asked, 3);
    // The problems were warned (and are not warned again).
    assert!(!warned.first_time("leaving out the tool at position 4: it has no name"));
    assert!(!warned.first_time(
        "tool 'd': ignoring annotations.readOnlyHint, which is a string instead of true or false; the MCP spec's default applies"
    ));
}

#[tokio::test]
async fn paging_stops_at_a_repeated_or_unusable_cursor_and_at_the_page_bound() {
    let warned = Warned::default();
    let looping = vec![
        serde_json::json!({"tools": [tool("a")], "nextCursor": "p1"}),
        serde_json::json!({"tools": [tool("b")], "nextCursor": "p1"}),
    ];
    let (names, asked) = list(looping, &warned).await;
    assert_eq!((names, asked), (vec!["a".to_owned(), "b".to_owned()], 2));

    let odd_cursor = vec![serde_json::json!({"tools": [tool("a")], "nextCursor": 7})];
    let (names, _) = list(odd_cursor, &warned).await;
    assert_eq!(names, ["a"]);

    let endless: Vec<serde_json::Value> = (0..MAX_LIST_PAGES + 5)
        .map(|i| serde_json::json!({"tools": [], "nextCursor": format!("p{}", i + 1)}))
        .collect();
    let (_, asked) = list(endless, &warned).await;
    assert_eq!(asked, MAX_LIST_PAGES);
}

#[tokio::test]
async fn an_answer_that_is_no_listing_fails_the_listing() {
    let fetch = |_| async { Ok(rmcp::model::ServerResult::empty(())) };
    let err = list_pages(fetch, "fx", &Warned::default())
        .await
        .unwrap_err();
    assert!(err.contains("has no `tools` list"), "{err}");
}

#[test]
fn tools_with_names_that_could_forge_output_or_not_be_called_are_not_listed() {
    assert!(is_listable_tool_name("fs", "read_file"));
    assert!(is_listable_tool_name("fs", "lire_données"));
    for bad in [
        "",
        "x\r01FAKE",
        "x\n",
        "\u{1b}[2J",
        "rev\u{202e}txt",
        "zero\u{200b}w",
    ] {
        assert!(!is_listable_tool_name("fs", bad), "{bad:?}");
    }
    let longest = "a".repeat(MAX_QUALIFIED_NAME_BYTES - "fs:".len());
    assert!(is_listable_tool_name("fs", &longest));
    assert!(!is_listable_tool_name("fs", &format!("{longest}a")));
}
