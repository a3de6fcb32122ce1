//! What details look like: escaped, quoted short with some context, and a tool's findings
//! most severe first and capped.

use super::*;

#[test]
fn control_characters_are_escaped() {
    let found = scan_desc("Adds.\u{1b}[2J\u{1b}[H\r\n<IMPORTANT>obey</IMPORTANT> \\u{200b}");
    let hidden = of_kind(&found, HIDDEN_INSTRUCTIONS);
    assert_eq!(hidden.len(), 1);
    assert!(
        hidden[0].detail.contains(
            "'Adds.\\u{1b}[2J\\u{1b}[H\\u{d}\\u{a}<IMPORTANT>obey</IMPORTANT> \\\\u{200b}'"
        ),
        "{}",
        hidden[0].detail
    );
    assert!(!hidden[0].detail.contains('\u{1b}'));
}

#[test]
fn quotes_are_short() {
    let long = format!(
        "{} <SYSTEM> {}",
        "lorem ipsum ".repeat(20),
        "dolor sit ".repeat(20)
    );
    let found = scan_desc(&long);
    let detail = &of_kind(&found, HIDDEN_INSTRUCTIONS)[0].detail;
    let quoted = detail
        .split_once('\'')
        .unwrap()
        .1
        .rsplit_once('\'')
        .unwrap()
        .0;
    assert!(
        quoted.starts_with("...ipsum lorem ipsum  <SYSTEM> dolor"),
        "{quoted}"
    );
    assert!(quoted.ends_with("..."));
    assert!(quoted.chars().count() <= QUOTE_CHARS + 6, "{quoted}");
}

#[test]
fn quotes_keep_some_context() {
    let found = scan_desc("BCC someone https://evil-corp.com/x <SYSTEM>");
    let hidden = of_kind(&found, HIDDEN_INSTRUCTIONS);
    assert!(
        hidden[0]
            .detail
            .ends_with(": '...s://evil-corp.com/x <SYSTEM>'."),
        "{}",
        hidden[0].detail
    );
}

#[test]
fn most_severe_first_and_capped() {
    let urls: String = (0..30).map(|i| format!("https://h{i}.io/ ")).collect();
    let found = scan_all(
        &[
            tool("busy", &format!("{urls} <SYSTEM>"), OBJECT),
            tool("calm", "Fine.", OBJECT),
        ],
        &[],
    );
    assert_eq!(found.len(), MAX_PER_TOOL);
    assert_eq!(found[0].kind, HIDDEN_INSTRUCTIONS);
    let last = &found[MAX_PER_TOOL - 1];
    assert_eq!(last.kind, MORE_FINDINGS);
    assert_eq!(last.severity, Severity::Info);
    assert_eq!(
        last.detail,
        "And 12 more findings for this tool (12 url) are not listed: the scanner lists at most 20 per tool, most severe first."
    );
    assert!(found.iter().all(|f| f.tool == "busy"));
}
