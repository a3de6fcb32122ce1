//! Secrets recognised by what they are the value of: `password=...`, `"api_key": "..."`,
//! `AccountKey=...;`, `Authorization: Bearer ...`, and the password of a URL's user info
//! (`postgres://user:pass@host`). Names are compared lowercased with `_`, `-` and `.`
//! dropped, by their ending (`DB_PASSWORD`, `client-secret`, `stripe.apiKey`).
//!
//! A password-like key's value counts unless it looks like a placeholder (`********`,
//! `changeme`, `<password>`, `${DB_PASSWORD}`) or code (`password = get_password()`,
//! `password: string`). Any other secret-like key's value counts only when it looks
//! generated: 16 or more token characters, letters and digits, and high entropy.

use super::{Found, entropy, has_letters_and_digits};

/// The longest key looked at, in bytes.
const MAX_KEY: usize = 64;
/// The longest value redacted as one, in bytes.
const MAX_VALUE: usize = 4096;
/// Bits per character a generic secret's value must reach.
const MIN_ENTROPY: f64 = 3.0;

/// Endings of names whose value is a password.
const PASSWORD_KEYS: &[&str] = &["password", "passwd", "pwd", "passphrase"];
/// Endings of names whose value is a secret when it looks generated.
const SECRET_KEYS: &[&str] = &[
    "secret",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
    "secretkey",
    "signingkey",
    "encryptionkey",
    "masterkey",
    "authkey",
    "sessionkey",
    "credential",
    "credentials",
    "authorization",
    "auth",
];
/// Names that end like a secret's but are not (pagination cursors and the like).
const NOT_SECRET_KEYS: &[&str] = &["pagetoken", "synctoken", "continuationtoken", "cursortoken"];

pub(super) fn find(text: &str, found: &mut Vec<Found>) {
    let bytes = text.as_bytes();
    for i in memchr::memchr2_iter(b'=', b':', bytes) {
        if bytes[i] == b':' && bytes[i + 1..].starts_with(b"//") {
            url_password(bytes, i + 3, found);
        } else {
            pair_at(bytes, i, found);
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    Password,
    AwsSecret,
    AzureAccountKey,
    Secret,
}

fn pair_at(bytes: &[u8], sep: usize, found: &mut Vec<Found>) {
    // `==`, `!=`, `<=`, `>=`, `::` are no assignments.
    let prev = sep.checked_sub(1).map(|p| bytes[p]);
    let next = bytes.get(sep + 1).copied();
    if matches!(prev, Some(b'=' | b'!' | b'<' | b'>' | b':')) || matches!(next, Some(b'=' | b':')) {
        return;
    }
    let Some(kind) = key_before(bytes, sep) else {
        return;
    };
    let mut at = sep + 1;
    if next == Some(b'>') {
        at += 1; // `'password' => '...'`
    }
    let Some((mut start, mut end, quoted)) = value_after(bytes, at) else {
        return;
    };
    if kind == KeyKind::Secret && !quoted {
        // `Authorization: Bearer <token>`: the token is the value.
        let scheme = &bytes[start..end];
        if [&b"bearer"[..], b"basic", b"token"]
            .iter()
            .any(|s| scheme.eq_ignore_ascii_case(s))
        {
            let Some((s, e, _)) = value_after(bytes, end) else {
                return;
            };
            (start, end) = (s, e);
        }
    }
    let value = &bytes[start..end];
    if !quoted && looks_like_code(value, bytes.get(end).copied()) {
        return;
    }
    if constant_name(value) {
        return;
    }
    let kind = match kind {
        KeyKind::Password => password_value(value, quoted).then_some("password"),
        KeyKind::AwsSecret if aws_secret(value) => Some("aws-secret-key"),
        KeyKind::AzureAccountKey if value.len() >= 40 && base64ish(value) => {
            Some("azure-storage-key")
        }
        _ => generated(value).then_some("secret"),
    };
    if let Some(kind) = kind {
        found.push(Found { start, end, kind });
    }
}

/// The kind of secret the name before the separator at `sep` calls for, if any.
fn key_before(bytes: &[u8], sep: usize) -> Option<KeyKind> {
    let mut end = sep;
    while end > 0 && matches!(bytes[end - 1], b' ' | b'\t') && sep - end < 4 {
        end -= 1;
    }
    if end > 0 && matches!(bytes[end - 1], b'"' | b'\'' | b'`') {
        end -= 1;
    }
    // Every name looked for ends in one of these letters: most keys are ruled out here.
    if end == 0
        || !matches!(
            bytes[end - 1].to_ascii_lowercase(),
            b'd' | b'e' | b't' | b'n' | b'y' | b'l' | b's' | b'h'
        )
    {
        return None;
    }
    let mut start = end;
    while start > 0
        && end - start < MAX_KEY
        && (bytes[start - 1].is_ascii_alphanumeric()
            || matches!(bytes[start - 1], b'_' | b'-' | b'.'))
    {
        start -= 1;
    }
    if start == end {
        return None;
    }
    let key = &bytes[start..end];
    let ends = |suffixes: &[&str]| suffixes.iter().any(|s| ends_with_name(key, s.as_bytes()));
    if ends(PASSWORD_KEYS) {
        return Some(KeyKind::Password);
    }
    if ends_with_name(key, b"secretaccesskey")
        || (ends_with_name(key, b"secretkey")
            && key.windows(3).any(|w| w.eq_ignore_ascii_case(b"aws")))
    {
        return Some(KeyKind::AwsSecret);
    }
    if key.eq_ignore_ascii_case(b"accountkey") {
        return Some(KeyKind::AzureAccountKey);
    }
    (ends(SECRET_KEYS) && !ends(NOT_SECRET_KEYS)).then_some(KeyKind::Secret)
}

/// Whether `key`, lowercased with everything but letters and digits dropped, ends with
/// `name` (lowercase letters): `DB_PASSWORD` and `client-secret` end with `password` and
/// `secret`.
fn ends_with_name(key: &[u8], name: &[u8]) -> bool {
    let mut k = key.iter().rev().filter(|b| b.is_ascii_alphanumeric());
    name.iter()
        .rev()
        .all(|&n| k.next().is_some_and(|&b| b.to_ascii_lowercase() == n))
}

/// The value starting at `at` (after blanks): `(start, end, quoted)`.
fn value_after(bytes: &[u8], at: usize) -> Option<(usize, usize, bool)> {
    let mut start = at;
    while start < bytes.len() && matches!(bytes[start], b' ' | b'\t') && start - at < 8 {
        start += 1;
    }
    let quote = *bytes.get(start)?;
    if matches!(quote, b'"' | b'\'' | b'`') {
        let from = start + 1;
        let len = bytes[from..]
            .iter()
            .take(MAX_VALUE)
            .position(|&b| b == quote || b == b'\\' || b == b'\n')?;
        return (len > 0).then_some((from, from + len, true));
    }
    let len = bytes[start..]
        .iter()
        .take(MAX_VALUE)
        .position(|&b| {
            b.is_ascii_whitespace()
                || matches!(
                    b,
                    b',' | b';' | b'&' | b')' | b'}' | b']' | b'"' | b'\'' | b'<' | b'>' | b'\\'
                )
        })
        .unwrap_or_else(|| (bytes.len() - start).min(MAX_VALUE));
    (len > 0).then_some((start, start + len, false))
}

/// Whether an unquoted value is code rather than data: a path (`crate::Type`,
/// `mem::MaybeUninit`), a generic or a call (`Option<P>`, `get()`), a field access
/// (`node.colon2_token`), a snake_case name (`x25519_generate_private_key`) or a type name
/// (`CString`, `Curve25519SeedBin`). `next` is the byte after the value.
fn looks_like_code(value: &[u8], next: Option<u8>) -> bool {
    if matches!(next, Some(b'<' | b'(')) || value.windows(2).any(|w| w == b"::") {
        return true;
    }
    let ident = |part: &[u8]| {
        !part.is_empty()
            && (part[0].is_ascii_alphabetic() || part[0] == b'_')
            && part.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
    };
    let lower_snake = |part: &[u8]| {
        part.iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
    };
    // `node.colon2_token`, `self.config.api_key`
    if value.contains(&b'.')
        && value
            .split(|b| *b == b'.')
            .all(|p| ident(p) && lower_snake(p))
    {
        return true;
    }
    // `x25519_generate_private_key`
    if value.contains(&b'_') && ident(value) && lower_snake(value) {
        return true;
    }
    // `CString`, `Curve25519SeedBin`: a capital, then lowercase somewhere, no `_`/`-`.
    value[0].is_ascii_uppercase()
        && value.iter().all(u8::is_ascii_alphanumeric)
        && value.iter().any(u8::is_ascii_lowercase)
        && value.iter().filter(|b| b.is_ascii_digit()).count() <= 5
        && value.len() <= 32
        && entropy(value) < 3.8
}

/// `CLIENT_TRAFFIC_SECRET_0`: the name of a constant or variable, not its value.
fn constant_name(value: &[u8]) -> bool {
    value.contains(&b'_')
        && value[0].is_ascii_uppercase()
        && value
            .iter()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
}

/// Whether a password-like key's value is a password: at least 6 bytes, no placeholder,
/// and (unquoted) not a piece of code or a type name.
fn password_value(value: &[u8], quoted: bool) -> bool {
    if value.len() < 6 || placeholder(value) {
        return false;
    }
    if matches!(
        value[0],
        b'$' | b'%' | b'{' | b'[' | b'(' | b'<' | b'@' | b'!' | b'&' | b'*' | b'?'
    ) || value.iter().any(|b| matches!(b, b'(' | b'{' | b'['))
    {
        return false;
    }
    // Unquoted and all lowercase letters, `_` and `.`: a variable, a type or a word.
    quoted
        || !value
            .iter()
            .all(|b| b.is_ascii_lowercase() || matches!(b, b'_' | b'.'))
}

/// Values that stand in for a secret rather than being one.
fn placeholder(value: &[u8]) -> bool {
    let lower = value.to_ascii_lowercase();
    let first = value[0];
    if value.iter().all(|&b| b == first) {
        return true; // `********`, `xxxxxxxx`
    }
    const WORDS: &[&str] = &[
        "redacted",
        "xxxx",
        "****",
        "changeme",
        "change_me",
        "placeholder",
        "example",
        "your_",
        "yourpass",
        "dummy",
        "sample",
        "<",
        "...",
    ];
    const EXACT: &[&str] = &[
        "secret",
        "password",
        "passwd",
        "string",
        "required",
        "optional",
        "undefined",
        "null",
        "none",
        "true",
        "false",
        "masked",
        "hidden",
    ];
    EXACT.iter().any(|w| lower == w.as_bytes())
        || WORDS
            .iter()
            .any(|w| lower.windows(w.len()).any(|win| win == w.as_bytes()))
}

fn base64ish(value: &[u8]) -> bool {
    value
        .iter()
        .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
}

fn aws_secret(value: &[u8]) -> bool {
    value.len() == 40 && base64ish(value) && has_letters_and_digits(value) && !placeholder(value)
}

/// Whether a value looks generated: 16+ token characters, letters and digits, high entropy.
fn generated(value: &[u8]) -> bool {
    value.len() >= 16
        && value.iter().all(|&b| {
            b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+' | b'/' | b'=' | b'.' | b'~')
        })
        && has_letters_and_digits(value)
        && entropy(value) >= MIN_ENTROPY
        && !placeholder(value)
}

/// The password in `scheme://user:password@host`, starting at `at` (after `//`).
fn url_password(bytes: &[u8], at: usize, found: &mut Vec<Found>) {
    let authority_end = bytes[at..]
        .iter()
        .take(512)
        .position(|&b| {
            matches!(b, b'/' | b'?' | b'#' | b'"' | b'\'' | b'<' | b'>' | b'\\')
                || b.is_ascii_whitespace()
        })
        .map_or((bytes.len()).min(at + 512), |n| at + n);
    let authority = &bytes[at..authority_end];
    let Some(amp) = authority.iter().rposition(|&b| b == b'@') else {
        return;
    };
    let userinfo = &authority[..amp];
    let Some(colon) = userinfo.iter().position(|&b| b == b':') else {
        return;
    };
    let password = &userinfo[colon + 1..];
    let host = &authority[amp + 1..];
    if password.len() < 4
        || placeholder(password)
        || example_host(host)
        || password.starts_with(b"$")
        || password.starts_with(b"{")
    {
        return;
    }
    found.push(Found {
        start: at + colon + 1,
        end: at + amp,
        kind: "password",
    });
}

/// Hosts reserved for documentation and tests (RFC 2606 and 6761): `example.com`,
/// `foo.example`, `x.test`, `y.invalid`, with any port.
fn example_host(host: &[u8]) -> bool {
    let host = host.split(|b| *b == b':').next().unwrap_or_default();
    let host = host.to_ascii_lowercase();
    host == b"example.com"
        || host.ends_with(b".example.com")
        || host == b"example.org"
        || host == b"example.net"
        || host.ends_with(b".example")
        || host.ends_with(b".test")
        || host.ends_with(b".invalid")
}
