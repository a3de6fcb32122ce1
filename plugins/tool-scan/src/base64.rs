//! `encoded-data` from base64: runs of 40+ base64 characters that look like encoded data,
//! decoded when they decode to readable text ([`readable`] also serves the variation
//! selectors of `invisible-unicode`).

use super::collect::{Collector, Location};
use super::evidence::clip;
use super::finding::{ENCODED_DATA, Severity};

/// Runs of 40+ base64 characters (standard or URL-safe alphabet) that look like encoded data:
/// upper case, lower case and digits mixed, not plain hex, not inside a URL.
pub(crate) fn base64_runs(
    c: &mut Collector,
    location: &Location,
    text: &str,
    urls: &[(usize, usize)],
) {
    let b = text.as_bytes();
    let is_b64 = |ch: u8| ch.is_ascii_alphanumeric() || b"+/=-_".contains(&ch);
    let mut i = 0;
    while i < b.len() {
        if !is_b64(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && is_b64(b[i]) {
            i += 1;
        }
        let run = &text[start..i];
        if run.len() < 40 || urls.iter().any(|&(s, e)| start < e && s < i) {
            continue;
        }
        let upper = run.bytes().filter(u8::is_ascii_uppercase).count();
        let lower = run.bytes().filter(u8::is_ascii_lowercase).count();
        let digits = run.bytes().filter(u8::is_ascii_digit).count();
        let hex = run
            .strip_prefix("0x")
            .or_else(|| run.strip_prefix("0X"))
            .unwrap_or(run)
            .bytes()
            .all(|ch| ch.is_ascii_hexdigit());
        if hex || upper == 0 || lower == 0 || digits == 0 || (upper + digits) * 4 < run.len() {
            continue;
        }
        let decoded = base64_decode(run).and_then(|bytes| readable(&bytes));
        c.add(
            ENCODED_DATA,
            Severity::Warning,
            run.to_string(),
            || match decoded {
                Some(plain) => format!(
                    "{} contains a {}-character base64 string that decodes to readable text: '{}' \
                 decodes to '{}'.",
                    location.subject(),
                    run.len(),
                    clip(run, 40),
                    clip(&plain, 60)
                ),
                None => format!(
                    "{} contains a {}-character base64-like string of opaque data: '{}'.",
                    location.subject(),
                    run.len(),
                    clip(run, 60)
                ),
            },
        );
    }
}

/// Decodes base64 (either alphabet, padding ignored).
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut buf, mut bits) = (0u32, 0u32);
    for ch in s.bytes() {
        let v = match ch {
            b'A'..=b'Z' => ch - b'A',
            b'a'..=b'z' => ch - b'a' + 26,
            b'0'..=b'9' => ch - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => continue,
            _ => return None,
        };
        buf = (buf << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
            buf &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// The bytes as text, when they are UTF-8 and nearly all printable.
pub(crate) fn readable(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?;
    let total = text.chars().count();
    let printable = text
        .chars()
        .filter(|ch| !ch.is_control() || matches!(ch, '\n' | '\r' | '\t'))
        .count();
    (total >= 4 && printable * 100 >= total * 95).then(|| text.to_string())
}
