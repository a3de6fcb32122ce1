//! `invisible-unicode`: zero-width characters, bidi controls, tag characters, runs of
//! variation selectors and Hangul fillers, counted by name, with what tag characters and
//! variation selectors spell. [`is_hidden`] also decides what the normalised text drops and
//! what quotes escape.

use std::fmt::Write as _;

use super::base64::readable;
use super::collect::{Collector, Location};
use super::evidence::{clip, quote};
use super::finding::{INVISIBLE_UNICODE, Severity};

/// Characters that render as nothing (or reorder text): dropped from the normalised text and
/// escaped in quotes.
pub(crate) fn is_hidden(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x034F
            | 0x061C
            | 0x115F
            | 0x1160
            | 0x17B4
            | 0x17B5
            | 0x180B..=0x180F
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
            | 0xFFF9..=0xFFFB
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
    )
}

/// The name of a flagged invisible character (tags and variation selectors are grouped).
fn invisible_name(c: char) -> Option<&'static str> {
    Some(match c as u32 {
        0x200B => "U+200B zero width space",
        0x200C => "U+200C zero width non-joiner",
        0x200D => "U+200D zero width joiner",
        0x200E => "U+200E left-to-right mark",
        0x200F => "U+200F right-to-left mark",
        0x2060 => "U+2060 word joiner",
        0x2061 => "U+2061 function application",
        0x2062 => "U+2062 invisible times",
        0x2063 => "U+2063 invisible separator",
        0x2064 => "U+2064 invisible plus",
        0xFEFF => "U+FEFF zero width no-break space",
        0x202A => "U+202A left-to-right embedding",
        0x202B => "U+202B right-to-left embedding",
        0x202C => "U+202C pop directional formatting",
        0x202D => "U+202D left-to-right override",
        0x202E => "U+202E right-to-left override",
        0x2066 => "U+2066 left-to-right isolate",
        0x2067 => "U+2067 right-to-left isolate",
        0x2068 => "U+2068 first strong isolate",
        0x2069 => "U+2069 pop directional isolate",
        0x061C => "U+061C arabic letter mark",
        0x180E => "U+180E mongolian vowel separator",
        0x115F => "U+115F hangul choseong filler",
        0x1160 => "U+1160 hangul jungseong filler",
        0x3164 => "U+3164 hangul filler",
        0xFFA0 => "U+FFA0 halfwidth hangul filler",
        0xE0000..=0xE007F => "tag characters U+E0000..U+E007F",
        0xFE00..=0xFE0F | 0xE0100..=0xE01EF => "variation selectors",
        _ => return None,
    })
}

fn is_variation_selector(c: char) -> bool {
    matches!(c as u32, 0xFE00..=0xFE0F | 0xE0100..=0xE01EF)
}

/// Emoji and pictographs, between which a zero width joiner is ordinary.
fn is_pictograph(c: char) -> bool {
    matches!(c as u32, 0x2190..=0x21FF | 0x2300..=0x27BF | 0x2B00..=0x2BFF | 0x1F000..=0x1FAFF)
}

pub(crate) fn invisible(c: &mut Collector, location: &Location, text: &str) {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let letter = |k: Option<&(usize, char)>| {
        k.is_some_and(|&(_, ch)| ch as u32 >= 0x370 && ch.is_alphabetic())
    };
    // The emoji before a joiner, past skin tones and VS16.
    let pictograph_before = |mut k: usize| {
        while k > 0 {
            k -= 1;
            let ch = chars[k].1;
            if !matches!(ch as u32, 0xFE0F | 0x1F3FB..=0x1F3FF) {
                return is_pictograph(ch);
            }
        }
        false
    };
    let mut counts: Vec<(&'static str, usize)> = Vec::new();
    let mut first = None;
    let mut total = 0;
    let mut tags = String::new();
    let mut vs_bytes: Vec<u8> = Vec::new();
    let mut k = 0;
    while k < chars.len() {
        let (pos, ch) = chars[k];
        let mut width = 1;
        let flagged = match ch as u32 {
            0xFEFF if pos == 0 => false,
            0x200C | 0x200D
                if letter(k.checked_sub(1).and_then(|j| chars.get(j)))
                    && letter(chars.get(k + 1)) =>
            {
                false
            }
            0x200D
                if pictograph_before(k)
                    && chars.get(k + 1).is_some_and(|&(_, n)| is_pictograph(n)) =>
            {
                false
            }
            _ if is_variation_selector(ch) => {
                while chars
                    .get(k + width)
                    .is_some_and(|&(_, n)| is_variation_selector(n))
                {
                    width += 1;
                }
                if width >= 2 {
                    for &(_, v) in &chars[k..k + width] {
                        let v = v as u32;
                        vs_bytes.push(if v <= 0xFE0F {
                            (v - 0xFE00) as u8
                        } else {
                            (v - 0xE0100 + 16) as u8
                        });
                    }
                }
                width >= 2
            }
            _ => invisible_name(ch).is_some(),
        };
        if flagged {
            let name = invisible_name(ch).unwrap_or("invisible characters");
            match counts.iter_mut().find(|(n, _)| *n == name) {
                Some((_, n)) => *n += width,
                None => counts.push((name, width)),
            }
            total += width;
            first.get_or_insert(pos);
            if let 0xE0020..=0xE007E = ch as u32 {
                tags.push(char::from_u32(ch as u32 - 0xE0000).unwrap_or('?'));
            }
        }
        k += width;
    }
    let Some(first) = first else { return };
    let listed: Vec<String> = counts
        .iter()
        .take(6)
        .map(|(name, n)| format!("{name} x{n}"))
        .collect();
    let more = if counts.len() > 6 {
        format!(" and {} other kinds", counts.len() - 6)
    } else {
        String::new()
    };
    let mut hidden = String::new();
    if !tags.is_empty() {
        let _ = write!(
            hidden,
            "; the tag characters spell out '{}'",
            clip(&tags, 60)
        );
    }
    if let Some(plain) = readable(&vs_bytes) {
        let _ = write!(
            hidden,
            "; the variation selectors encode '{}'",
            clip(&plain, 60)
        );
    }
    let end = first + text[first..].chars().next().map_or(0, char::len_utf8);
    c.add(
        INVISIBLE_UNICODE,
        Severity::Danger,
        location.phrase(),
        || {
            format!(
                "{} contains {total} invisible character{} ({}{more}) that can hide text from a \
             reviewer or reorder what they see: {}{hidden}.",
                location.subject(),
                if total == 1 { "" } else { "s" },
                listed.join(", "),
                quote(text, first, end)
            )
        },
    );
}
