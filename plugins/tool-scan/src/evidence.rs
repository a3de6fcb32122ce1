//! Quoting evidence in details: a match with a little context before it ([`quote`]), names
//! and URLs cut short ([`clip`]), and control and invisible characters written as `\u{..}`
//! so that nothing in a detail can drive a terminal or hide from the reviewer.

use std::fmt::Write as _;

use super::finding::QUOTE_CHARS;
use super::invisible::is_hidden;

/// Characters of context a quote shows before the match.
const QUOTE_BEFORE: usize = 20;

fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Quotes `text[start..end]` in single quotes with a little context before it, at most
/// [`QUOTE_CHARS`] characters, `...` where cut, control and invisible characters escaped.
pub(crate) fn quote(text: &str, start: usize, end: usize) -> String {
    let start = floor_boundary(text, start);
    let end = ceil_boundary(text, end).max(start);
    let mut from = start;
    for (n, (i, _)) in text[..start].char_indices().rev().enumerate() {
        if n >= QUOTE_BEFORE {
            break;
        }
        from = i;
    }
    // Start at a word when the context begins mid-word, unless that leaves hardly any.
    if from > 0
        && !text[..from]
            .chars()
            .next_back()
            .is_some_and(char::is_whitespace)
        && let Some((i, ws)) = text[from..start]
            .char_indices()
            .find(|&(_, ch)| ch.is_whitespace())
        && text[from + i..start].chars().count() > 8
    {
        from += i + ws.len_utf8();
    }
    // A long match: give up context before it so as much of the match as possible shows.
    let span = text[from..end].chars().count();
    if span > QUOTE_CHARS {
        let skip = (span - QUOTE_CHARS).min(text[from..start].chars().count());
        from = text[from..]
            .char_indices()
            .nth(skip)
            .map_or(start, |(i, _)| from + i);
    }
    let to = text[from..]
        .char_indices()
        .nth(QUOTE_CHARS)
        .map_or(text.len(), |(i, _)| from + i);
    let mut out = String::from("'");
    if from > 0 {
        out.push_str("...");
    }
    escape_into(&mut out, &text[from..to]);
    if to < text.len() {
        out.push_str("...");
    }
    out.push('\'');
    out
}

/// `s` escaped and cut to `max` characters (with `...`), for names and URLs in details.
pub(crate) fn clip(s: &str, max: usize) -> String {
    let cut = s.char_indices().nth(max).map(|(i, _)| i);
    let mut out = String::new();
    escape_into(&mut out, &s[..cut.unwrap_or(s.len())]);
    if cut.is_some() {
        out.push_str("...");
    }
    out
}

pub(crate) fn needs_escape(c: char) -> bool {
    c.is_control() || is_hidden(c) || matches!(c, '\u{2028}' | '\u{2029}')
}

/// Writes `s` with control and invisible characters as `\u{..}` (runs longer than four are
/// shortened) and `\u{` written out in the text as `\\u{`, so nothing in a detail can drive a
/// terminal or pass for an escape.
fn escape_into(out: &mut String, s: &str) {
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let ch = chars[i];
        if needs_escape(ch) {
            let run = chars[i..].iter().take_while(|&&c| needs_escape(c)).count();
            let shown = if run > 4 { 2 } else { run };
            for c in &chars[i..i + shown] {
                let _ = write!(out, "\\u{{{:x}}}", *c as u32);
            }
            if run > shown {
                let _ = write!(out, "[+{} more escaped]", run - shown);
            }
            i += run;
        } else {
            if ch == '\\' && chars.get(i + 1) == Some(&'u') && chars.get(i + 2) == Some(&'{') {
                out.push('\\');
            }
            out.push(ch);
            i += 1;
        }
    }
}
