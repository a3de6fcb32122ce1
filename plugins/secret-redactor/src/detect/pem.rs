//! PEM private key blocks: `-----BEGIN <anything> PRIVATE KEY-----` through the matching
//! `-----END ...-----` line, in plain text or inside a JSON string (where the newlines are
//! `\n` escapes). A block whose end is missing (a cut result) is redacted up to the first
//! blank line or the end of the text.

use super::Found;

const BEGIN: &str = "-----BEGIN ";
const END: &str = "-----END ";
const DASHES: &str = "-----";
/// The longest header line looked at (`-----BEGIN ENCRYPTED PRIVATE KEY-----` and kin).
const MAX_HEADER: usize = 64;

pub(super) fn find(text: &str, found: &mut Vec<Found>) {
    let mut from = 0;
    while let Some(at) = text[from..].find(BEGIN) {
        let start = from + at;
        let label_start = start + BEGIN.len();
        let Some(label_len) = text[label_start..].find(DASHES) else {
            return;
        };
        let label = &text[label_start..label_start + label_len];
        let after_header = label_start + label_len + DASHES.len();
        if label_len > MAX_HEADER
            || !label.ends_with("PRIVATE KEY") && !label.ends_with("PRIVATE KEY BLOCK")
        {
            from = after_header;
            continue;
        }
        // A key block's body starts on the next line (`\n`, or `\\n` inside a JSON
        // string); a header alone (in a pattern, a message) is no key.
        let rest = &text[after_header..];
        if !(rest.starts_with('\n') || rest.starts_with("\r\n") || rest.starts_with("\\n")) {
            from = after_header;
            continue;
        }
        let end = match text[after_header..].find(END) {
            Some(at) => {
                let end_label = after_header + at + END.len();
                match text[end_label..].find(DASHES) {
                    Some(n) if n <= MAX_HEADER => end_label + n + DASHES.len(),
                    _ => text.len(),
                }
            }
            None => blank_line_or_end(text, after_header),
        };
        found.push(Found {
            start,
            end,
            kind: "private-key",
        });
        from = end;
    }
}

fn blank_line_or_end(text: &str, from: usize) -> usize {
    [text[from..].find("\n\n"), text[from..].find("\\n\\n")]
        .into_iter()
        .flatten()
        .min()
        .map_or(text.len(), |n| from + n)
}
