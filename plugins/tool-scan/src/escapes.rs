//! `encoded-data` from escapes: runs of 6+ `\uXXXX`, `\u{X}` or `\xXX` escapes written out
//! as text, with what they spell.

use super::collect::{Collector, Location};
use super::evidence::{clip, quote};
use super::finding::{ENCODED_DATA, Severity};

/// Runs of 6+ `\uXXXX`, `\u{X}` or `\xXX` escapes written out as text.
pub(crate) fn escape_runs(c: &mut Collector, location: &Location, text: &str) {
    const MIN_RUN: usize = 6;
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        let start = i;
        let mut units: Vec<u32> = Vec::new();
        let mut letter = None;
        while let Some((next, unit, l)) = parse_escape(b, i) {
            if letter.is_some_and(|prev| prev != l) {
                break;
            }
            letter = Some(l);
            units.push(unit);
            i = next;
        }
        if units.len() < MIN_RUN {
            i = start + 1;
            continue;
        }
        let decoded = if letter == Some(b'x') {
            let bytes: Vec<u8> = units.iter().map(|&u| u as u8).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        } else {
            let mut s = String::new();
            let mut pending: Vec<u16> = Vec::new();
            for &u in &units {
                if u <= 0xFFFF {
                    pending.push(u as u16);
                } else {
                    s.extend(
                        char::decode_utf16(pending.drain(..)).map(|r| r.unwrap_or('\u{FFFD}')),
                    );
                    s.push(char::from_u32(u).unwrap_or('\u{FFFD}'));
                }
            }
            s.extend(char::decode_utf16(pending.drain(..)).map(|r| r.unwrap_or('\u{FFFD}')));
            s
        };
        let run = &text[start..i];
        let escape = if letter == Some(b'x') { "\\x" } else { "\\u" };
        c.add(ENCODED_DATA, Severity::Warning, run.to_string(), || {
            format!(
                "{} contains {} consecutive {escape} escape sequences that spell out '{}': {}.",
                location.subject(),
                units.len(),
                clip(&decoded, 60),
                quote(text, start, i)
            )
        });
    }
}

/// One escape at `i`: (index after it, its value, `u` or `x`).
fn parse_escape(b: &[u8], i: usize) -> Option<(usize, u32, u8)> {
    if b.get(i) != Some(&b'\\') {
        return None;
    }
    let hex = |from: usize, len: usize| -> Option<u32> {
        let digits = b.get(from..from + len)?;
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    };
    match b.get(i + 1)? {
        b'u' if b.get(i + 2) == Some(&b'{') => {
            let close = (i + 3..(i + 10).min(b.len())).find(|&j| b[j] == b'}')?;
            let value = hex(i + 3, close - (i + 3)).filter(|_| close > i + 3)?;
            Some((close + 1, value, b'u'))
        }
        b'u' => Some((i + 6, hex(i + 2, 4)?, b'u')),
        b'x' => Some((i + 4, hex(i + 2, 2)?, b'x')),
        _ => None,
    }
}
