//! The pattern engine phrases are matched with. [`Norm`] is the normalised copy of a text
//! (lowercased, whitespace collapsed, invisible characters dropped, curly quotes and
//! full-width ASCII folded) that maps every byte back to the original; [`tokenize`] cuts it
//! into words and single characters; token patterns are compiled into [`Rules`] and found
//! with [`find_rules`]; [`find_bounded`] finds a needle that is not part of a longer word.

use std::collections::BTreeSet;

use super::evidence::quote;
use super::invisible::is_hidden;

/// A lowercased, whitespace-collapsed copy of a text without invisible characters, with the
/// original byte range of every byte.
pub(crate) struct Norm<'a> {
    orig: &'a str,
    pub(crate) text: String,
    from: Vec<usize>,
    to: Vec<usize>,
}

impl<'a> Norm<'a> {
    pub(crate) fn new(orig: &'a str) -> Norm<'a> {
        let mut norm = Norm {
            orig,
            text: String::with_capacity(orig.len()),
            from: Vec::with_capacity(orig.len()),
            to: Vec::with_capacity(orig.len()),
        };
        for (i, c) in orig.char_indices() {
            let end = i + c.len_utf8();
            if is_hidden(c) {
                continue;
            }
            if c.is_whitespace() {
                if !norm.text.is_empty() && !norm.text.ends_with(' ') {
                    norm.push(' ', i, end);
                }
                continue;
            }
            let c = match c {
                '\u{2018}' | '\u{2019}' | '\u{201B}' | '\u{2032}' | '\u{02BC}' => '\'',
                '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{2033}' => '"',
                '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
                _ => c,
            };
            for lower in c.to_lowercase() {
                norm.push(lower, i, end);
            }
        }
        norm
    }

    fn push(&mut self, c: char, from: usize, to: usize) {
        let before = self.text.len();
        self.text.push(c);
        for _ in before..self.text.len() {
            self.from.push(from);
            self.to.push(to);
        }
    }

    /// The original byte range behind `a..b` of the normalised text.
    fn span(&self, a: usize, b: usize) -> (usize, usize) {
        if a >= b || b > self.text.len() {
            return (0, 0);
        }
        (self.from[a], self.to[b - 1])
    }

    /// Quotes the original text behind `a..b` of the normalised text.
    pub(crate) fn quote(&self, a: usize, b: usize) -> String {
        let (start, end) = self.span(a, b);
        quote(self.orig, start, end)
    }
}

/// A word (letters and digits, with inner apostrophes) or a single other character, by byte
/// range in the normalised text.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tok {
    pub(crate) a: usize,
    pub(crate) b: usize,
    pub(crate) word: bool,
    /// `.`, `!`, `?` or `;` followed by a space or the end: a sentence ends here.
    pub(crate) stop: bool,
}

pub(crate) fn tokenize(text: &str) -> Vec<Tok> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let end_of = |j: usize| chars.get(j).map_or(text.len(), |&(p, _)| p);
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&(p, c)) = chars.get(i) {
        if c == ' ' {
            i += 1;
        } else if c.is_alphanumeric() {
            let mut j = i + 1;
            while let Some(&(_, d)) = chars.get(j) {
                if d.is_alphanumeric() {
                    j += 1;
                } else if d == '\'' && chars.get(j + 1).is_some_and(|&(_, e)| e.is_alphanumeric()) {
                    j += 2;
                } else {
                    break;
                }
            }
            out.push(Tok {
                a: p,
                b: end_of(j),
                word: true,
                stop: false,
            });
            i = j;
        } else {
            let b = end_of(i + 1);
            let spaced = b >= text.len() || text.as_bytes()[b] == b' ';
            out.push(Tok {
                a: p,
                b,
                word: false,
                stop: matches!(c, '.' | '!' | '?' | ';') && spaced,
            });
            i += 1;
        }
    }
    out
}

pub(crate) fn tok_text<'t>(text: &'t str, tok: &Tok) -> &'t str {
    &text[tok.a..tok.b]
}

/// One position of a token pattern: alternatives (each a token sequence), optional or not,
/// or a gap of up to `gap` words.
struct Slot {
    alts: Vec<Vec<&'static str>>,
    optional: bool,
    gap: usize,
}

/// Compiles a token pattern: slots separated by spaces; `a|b` alternatives; `a+b` a sequence
/// of tokens; a trailing `?` makes a slot optional; `*N` skips up to N words.
fn compile(pattern: &'static str) -> Vec<Slot> {
    pattern
        .split(' ')
        .filter(|s| !s.is_empty())
        .map(|slot| {
            if let Some(n) = slot.strip_prefix('*') {
                return Slot {
                    alts: Vec::new(),
                    optional: false,
                    gap: n.parse().unwrap_or(0),
                };
            }
            let (body, optional) = match slot.strip_suffix('?') {
                Some(body) if !body.is_empty() => (body, true),
                _ => (slot, false),
            };
            Slot {
                alts: body
                    .split('|')
                    .map(|alt| alt.split('+').collect())
                    .collect(),
                optional,
                gap: 0,
            }
        })
        .collect()
}

/// Matches `slots` at token `ti`; the token index after the match.
fn match_at(slots: &[Slot], toks: &[Tok], text: &str, ti: usize) -> Option<usize> {
    let Some((slot, rest)) = slots.split_first() else {
        return Some(ti);
    };
    if slot.gap > 0 {
        for k in 0..=slot.gap {
            if k > 0 && !toks.get(ti + k - 1)?.word {
                return None;
            }
            if let Some(end) = match_at(rest, toks, text, ti + k) {
                return Some(end);
            }
        }
        return None;
    }
    for alt in &slot.alts {
        let fits = alt
            .iter()
            .enumerate()
            .all(|(k, want)| toks.get(ti + k).is_some_and(|t| tok_text(text, t) == *want));
        if fits && let Some(end) = match_at(rest, toks, text, ti + alt.len()) {
            return Some(end);
        }
    }
    if slot.optional {
        return match_at(rest, toks, text, ti);
    }
    None
}

/// Compiled token patterns, with the tokens they can start with.
pub(crate) struct Rules {
    rules: Vec<Vec<Slot>>,
    starts: BTreeSet<&'static str>,
}

impl Rules {
    /// Compiles `patterns`; each must start with a plain (not optional, not gap) slot.
    pub(crate) fn new<'p>(patterns: impl Iterator<Item = &'p &'static str>) -> Rules {
        let rules: Vec<Vec<Slot>> = patterns.map(|p| compile(p)).collect();
        let starts = rules
            .iter()
            .filter_map(|slots| slots.first())
            .flat_map(|slot| slot.alts.iter().filter_map(|alt| alt.first().copied()))
            .collect();
        Rules { rules, starts }
    }
}

/// Finds every non-overlapping match of any of `rules` (first rule wins at a position):
/// (rule index, first token, token after the last).
pub(crate) fn find_rules(rules: &Rules, toks: &[Tok], text: &str) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    let mut ti = 0;
    while ti < toks.len() {
        if !rules.starts.contains(tok_text(text, &toks[ti])) {
            ti += 1;
            continue;
        }
        let hit = rules
            .rules
            .iter()
            .enumerate()
            .find_map(|(r, slots)| match_at(slots, toks, text, ti).map(|end| (r, end)));
        match hit {
            Some((r, end)) if end > ti => {
                out.push((r, ti, end));
                ti = end;
            }
            _ => ti += 1,
        }
    }
    out
}

/// Whether `toks[i]` is one of `words`.
pub(crate) fn tok_is(toks: &[Tok], text: &str, i: usize, words: &[&str]) -> bool {
    toks.get(i)
        .is_some_and(|t| t.word && words.contains(&tok_text(text, t)))
}

/// The first occurrence of `needle` in `hay` not preceded or followed by a `word` character
/// (checked only where the needle itself starts or ends with one).
pub(crate) fn find_bounded(hay: &str, needle: &str, word: fn(char) -> bool) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    let first_word = needle.chars().next().is_some_and(word);
    let last_word = needle.chars().next_back().is_some_and(word);
    hay.match_indices(needle).map(|(i, _)| i).find(|&i| {
        let before = hay[..i].chars().next_back();
        let after = hay[i + needle.len()..].chars().next();
        let before_ok = !(first_word || needle.starts_with('.')) || !before.is_some_and(word);
        let after_ok = !last_word || !after.is_some_and(word);
        before_ok && after_ok
    })
}
