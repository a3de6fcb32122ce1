//! Text from outside made safe to show: [`quote`] escapes what a terminal would hide or
//! interpret (control, zero-width and bidirectional characters) and bounds the length.
//! A leaf: it imports nothing, and every crate above may use it.

/// A string from an upstream or a plugin, made safe to print: control characters (newlines
/// and escape sequences included), bidirectional controls and zero-width characters are
/// written as `\u{..}`, and it is cut at 2,000 characters.
pub fn quote(text: &str) -> String {
    const MAX_CHARS: usize = 2000;
    let mut out = String::with_capacity(text.len().min(MAX_CHARS));
    for (i, c) in text.chars().enumerate() {
        if i == MAX_CHARS {
            out.push('…');
            break;
        }
        if is_unprintable(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Control characters (newlines and escape sequences included) and the invisible ones of
/// [`is_invisible`]: what [`quote`] escapes, and what a call's tool name may not contain.
pub fn is_unprintable(c: char) -> bool {
    c.is_control() || is_invisible(c)
}

/// Zero-width, bidirectional-control and tag characters: invisible in a terminal, yet able
/// to reorder or hide what is shown.
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{2069}'
        | '\u{FEFF}'
        | '\u{E0000}'..='\u{E007F}')
}

/// `text` cut to at most `max` bytes on a character boundary, `…` marking a cut.
pub fn cut_to(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod cut_tests {
    use super::cut_to;

    #[test]
    fn cuts_on_a_character_boundary() {
        assert_eq!(cut_to("short", 10), "short");
        assert_eq!(cut_to("abcdef", 3), "abc…");
        // 'é' is two bytes: a cut inside it backs off to before it.
        assert_eq!(cut_to("aé", 2), "a…");
    }
}
