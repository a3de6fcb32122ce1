//! How each place a secret hides in is masked: a URL ([`mask_url`]), a command's arguments
//! ([`mask_args`]), free text ([`mask_text`], [`mask_text_with_url`]) and the log
//! ([`MaskingWriter`]). What looks secret is `recognise`'s.

use super::recognise::{is_secret_name, is_secret_value, looks_like_token};

/// What a hidden value is shown as.
pub const MASK: &str = "***";

/// `url` with its secrets masked: the user info (user and password:
/// `https://***@host/`), every query value (`?token=***&x=***`, key names kept), the
/// fragment, and any path segment that looks like a token. Works on text that is not a
/// valid URL too (nothing is parsed strictly).
pub fn mask_url(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    let mut rest = url;
    if let Some(at) = url.find("://")
        && is_scheme(&url[..at])
    {
        out.push_str(&url[..at + 3]);
        let after = &url[at + 3..];
        let end = after.find(['/', '?', '#']).unwrap_or(after.len());
        let authority = &after[..end];
        match authority.rfind('@') {
            Some(userinfo_end) => {
                out.push_str(MASK);
                out.push_str(&authority[userinfo_end..]);
            }
            None => out.push_str(authority),
        }
        rest = &after[end..];
    }
    let (before_fragment, fragment) = match rest.split_once('#') {
        Some((before, fragment)) => (before, Some(fragment)),
        None => (rest, None),
    };
    let (path, query) = match before_fragment.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (before_fragment, None),
    };
    for (i, segment) in path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.push_str(if is_secret_value(segment) {
            MASK
        } else {
            segment
        });
    }
    if let Some(query) = query {
        out.push('?');
        for (i, pair) in query.split('&').enumerate() {
            if i > 0 {
                out.push('&');
            }
            match pair.split_once('=') {
                Some((key, value)) => {
                    out.push_str(key);
                    out.push('=');
                    if !value.is_empty() {
                        out.push_str(MASK);
                    }
                }
                None if is_secret_value(pair) => out.push_str(MASK),
                None => out.push_str(pair),
            }
        }
    }
    if let Some(fragment) = fragment {
        out.push('#');
        if !fragment.is_empty() {
            out.push_str(MASK);
        }
    }
    out
}

/// A command's arguments with secret-looking ones masked: the value after a flag with a
/// secret name (`--token VALUE`, `--api-key=VALUE`), `KEY=VALUE` where the key looks
/// secret, any value that looks like a token or a long random string (after any flag,
/// `-t` included, or on its own), and the secrets of URLs and free text inside an argument.
/// Flags, paths, package names, ports, hashes and UUIDs stay as they are.
pub fn mask_args(args: &[String]) -> Vec<String> {
    let mut shown = Vec::with_capacity(args.len());
    // Whether the argument before was a flag whose name looks secret.
    let mut after_secret_flag = false;
    for arg in args {
        let hide = std::mem::take(&mut after_secret_flag);
        if is_flag(arg) {
            match arg.split_once('=') {
                Some((flag, value)) => {
                    if !value.is_empty() && (is_secret_name(flag) || is_secret_value(value)) {
                        shown.push(format!("{flag}={MASK}"));
                    } else {
                        shown.push(format!("{flag}={}", mask_text(value)));
                    }
                }
                None => {
                    after_secret_flag = is_secret_name(arg);
                    shown.push(arg.clone());
                }
            }
        } else if hide {
            shown.push(MASK.to_owned());
        } else {
            shown.push(mask_value(arg));
        }
    }
    shown
}

/// One argument that is not a flag.
fn mask_value(arg: &str) -> String {
    if let Some((key, value)) = arg.split_once('=')
        && is_name(key)
        && !value.is_empty()
        && (is_secret_name(key) || is_secret_value(value))
    {
        return format!("{key}={MASK}");
    }
    if is_secret_value(arg) {
        return MASK.to_owned();
    }
    mask_text(arg)
}

/// Free text (a log line, an error message) with secrets masked: URLs as [`mask_url`]
/// does, well-known tokens ([`looks_like_token`]), `KEY=VALUE` and `key: VALUE` where the
/// key looks secret, the word after `Bearer` or `Basic`, and a credential-looking word after
/// a flag with a secret name (`--token VALUE`). Random-looking words are left alone here
/// (record ids, hashes); [`mask_args`] masks those.
pub fn mask_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending = Pending::No;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c.is_whitespace() || is_delimiter(c) {
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let chunk_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let chunk = &rest[..chunk_end];
        match find_url(chunk) {
            Some((start, end)) => {
                mask_words(&chunk[..start], &mut out, &mut pending);
                out.push_str(&mask_url(&chunk[start..end]));
                pending = Pending::No;
                rest = &rest[end..];
            }
            None => {
                mask_words(chunk, &mut out, &mut pending);
                rest = &rest[chunk_end..];
            }
        }
    }
    out
}

/// [`mask_text`] for a message about the upstream at `url`: also masks the URL's password,
/// user and query values wherever they appear verbatim (an error that quotes the URL in
/// pieces, or the debug form of a parsed URL), when they are long enough (six characters)
/// not to match ordinary words.
pub fn mask_text_with_url(text: &str, url: &str) -> String {
    let mut shown = mask_text(text);
    for part in url_secret_parts(url) {
        if part.chars().count() >= 6 && part != MASK {
            shown = shown.replace(part, MASK);
        }
    }
    shown
}

/// A writer that passes each write on through [`mask_text`]: the log's writer, so that no
/// line shows a secret, whoever wrote it (mcpproxy, or a library quoting a URL in an error).
/// The log formats each event into one buffer and writes it at once, so a write is a whole
/// line.
pub struct MaskingWriter<W>(pub W);

impl<W: std::io::Write> std::io::Write for MaskingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        self.0.write_all(mask_text(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// The user, password, query values and fragment of `url`.
fn url_secret_parts(url: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = url;
    if let Some(at) = url.find("://") {
        let after = &url[at + 3..];
        let end = after.find(['/', '?', '#']).unwrap_or(after.len());
        if let Some((userinfo, _)) = after[..end].rsplit_once('@') {
            match userinfo.split_once(':') {
                Some((user, password)) => parts.extend([user, password]),
                None => parts.push(userinfo),
            }
        }
        rest = &after[end..];
    }
    let (before_fragment, fragment) = match rest.split_once('#') {
        Some((before, fragment)) => (before, Some(fragment)),
        None => (rest, None),
    };
    if let Some((_, query)) = before_fragment.split_once('?') {
        for pair in query.split('&') {
            parts.push(pair.split_once('=').map_or(pair, |(_, value)| value));
        }
    }
    parts.extend(fragment);
    parts.retain(|p| !p.is_empty());
    parts
}

/// What the word after the current one gets.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pending {
    No,
    /// After `Bearer`, `Basic`: masked whatever it is.
    Always,
    /// After `--token` or `password:` in text: masked when it looks like a credential.
    IfCredential,
}

/// Masks the words of `chunk` (no whitespace in it) into `out`.
fn mask_words(chunk: &str, out: &mut String, pending: &mut Pending) {
    let mut rest = chunk;
    while let Some(c) = rest.chars().next() {
        if is_delimiter(c) {
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let end = rest.find(is_delimiter).unwrap_or(rest.len());
        mask_word(&rest[..end], out, pending);
        rest = &rest[end..];
    }
}

fn mask_word(word: &str, out: &mut String, pending: &mut Pending) {
    // Sentence punctuation after a word stays visible and out of the checks.
    let core = word.trim_end_matches(['.', ':', '!', '?']);
    let tail = &word[core.len()..];
    let before = std::mem::replace(pending, Pending::No);
    if core.is_empty() {
        out.push_str(word);
        *pending = before;
        return;
    }
    let hide = match before {
        // Not a placeholder that names what goes there (`Bearer <token>`, `Bearer YOUR_KEY`).
        Pending::Always => {
            !(core
                .chars()
                .all(|c| c.is_ascii_alphabetic() || c == '_' || c == '-')
                && is_secret_name(core))
        }
        Pending::IfCredential => looks_like_credential(core),
        Pending::No => false,
    };
    if hide {
        out.push_str(MASK);
        out.push_str(tail);
        return;
    }
    if (core.eq_ignore_ascii_case("bearer") || core.eq_ignore_ascii_case("basic"))
        && tail.is_empty()
    {
        out.push_str(word);
        *pending = Pending::Always;
        return;
    }
    if let Some((key, separator, value)) = split_assignment(core) {
        if !value.is_empty() && (is_secret_name(key) || looks_like_token(value)) {
            out.push_str(key);
            out.push(separator);
            out.push_str(MASK);
            out.push_str(tail);
            return;
        }
        if value.is_empty() && is_secret_name(key) {
            out.push_str(word);
            *pending = Pending::IfCredential;
            return;
        }
    }
    if looks_like_token(core) {
        out.push_str(MASK);
        out.push_str(tail);
        return;
    }
    if is_secret_name(core) && (core.starts_with('-') || tail.starts_with(':')) {
        *pending = Pending::IfCredential;
    }
    out.push_str(word);
}

/// `key=value` or `key:value`, when `key` is a name (leading dashes allowed); not a path
/// such as `mcpproxy_auth::credentials` (a log line's target), whose `::` assigns nothing.
fn split_assignment(word: &str) -> Option<(&str, char, &str)> {
    let (at, separator) = word.char_indices().find(|(_, c)| *c == '=' || *c == ':')?;
    if word[at..].starts_with("::") {
        return None;
    }
    let key = &word[..at];
    is_name(key.trim_start_matches('-')).then(|| (key, separator, &word[at + 1..]))
}

/// A word in free text that is probably a password or key: a token, a long random
/// string, or eight or more characters with a digit among them.
fn looks_like_credential(word: &str) -> bool {
    is_secret_value(word) || (word.chars().count() >= 8 && word.chars().any(|c| c.is_ascii_digit()))
}

/// Characters that end a word in free text (besides whitespace).
/// A JSON value (a call's arguments as a record keeps them) with the secrets in its strings
/// masked as [`mask_text`] masks free text: well-known tokens (an AWS access key id, `ghp_...`,
/// a JWT), `KEY=VALUE` and `key: VALUE` where the key looks secret, the word after `Bearer`.
/// Object keys are kept; which keys' values are dropped whole is the activity settings'
/// `redact_keys`. Returns whether anything was masked.
pub fn mask_json(value: &mut serde_json::Value) -> bool {
    use serde_json::Value;
    match value {
        Value::Object(map) => map
            .values_mut()
            .fold(false, |masked, v| mask_json(v) | masked),
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |masked, v| mask_json(v) | masked),
        Value::String(text) => {
            let shown = mask_text(text);
            let masked = shown != *text;
            if masked {
                *text = shown;
            }
            masked
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

fn is_delimiter(c: char) -> bool {
    matches!(
        c,
        '"' | '\'' | '`' | '(' | ')' | '[' | ']' | '{' | '}' | '<' | '>' | ',' | ';'
    )
}

/// The first URL in `chunk` (no whitespace in it), as byte offsets: `scheme://` and what
/// follows up to a quote or bracket, without trailing punctuation or an unbalanced closing
/// parenthesis.
fn find_url(chunk: &str) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(found) = chunk[from..].find("://") {
        let separator = from + found;
        let start = chunk[..separator]
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
            .last()
            .map_or(separator, |(i, _)| i);
        // The scheme starts with a letter: skip digits or dots before it.
        let start = chunk[start..separator]
            .find(|c: char| c.is_ascii_alphabetic())
            .map_or(separator, |i| start + i);
        if start < separator {
            let body = separator + 3;
            let mut end = chunk[body..]
                .find(['"', '\'', '`', '<', '>'])
                .map_or(chunk.len(), |i| body + i);
            loop {
                let url = &chunk[start..end];
                let Some(last) = url.chars().last() else {
                    break;
                };
                let unbalanced = |open: char, close: char| {
                    last == close && url.matches(open).count() < url.matches(close).count()
                };
                if end > body
                    && (matches!(last, '.' | ',' | ';' | ':' | '!' | '?')
                        || unbalanced('(', ')')
                        || unbalanced('[', ']')
                        || unbalanced('{', '}'))
                {
                    end -= last.len_utf8();
                } else {
                    break;
                }
            }
            return Some((start, end));
        }
        from = separator + 3;
    }
    None
}

fn is_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
}

/// An argument that is a flag: `-x`, `--name`, `--name=value` (not `-1`, not `-`).
fn is_flag(arg: &str) -> bool {
    let mut chars = arg.chars();
    chars.next() == Some('-') && chars.next().is_some_and(|c| !c.is_ascii_digit())
}

/// A key of `KEY=value`: letters, digits, `_`, `-`, `.`, starting with a letter or `_`.
fn is_name(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

#[cfg(test)]
mod tests;
