//! Secrets recognised by their own format: a fixed prefix and a body of known length and
//! alphabet (cloud keys, service tokens, JWTs, Slack webhooks). The text is searched for
//! what the formats start with (`memchr`/`memmem`); only a token that starts there is read.

use super::{Found, has_letters_and_digits, is_token_byte};

/// AWS access key ID prefixes (IAM users, roles, temporary credentials, ...).
const AWS_PREFIXES: &[&[u8]] = &[
    b"AKIA", b"ASIA", b"ABIA", b"ACCA", b"AGPA", b"AIDA", b"AIPA", b"ANPA", b"ANVA", b"AROA",
    b"APKA",
];

/// How far after an access key ID its secret is looked for, in bytes.
const AWS_PAIR_WINDOW: usize = 400;

/// What every format starts with (`Q~` is the fifth and sixth byte of an Entra ID secret):
/// only where one of these stands does a token get a closer look.
const LEADS: &[&[u8]] = &[
    b"gh",
    b"github_pat_",
    b"gl",
    b"xox",
    b"sk",
    b"rk_",
    b"eyJ",
    b"hooks.slack.com/services/",
    b"Q~",
];

pub(super) fn find(text: &str, found: &mut Vec<Found>) {
    let bytes = text.as_bytes();
    let mut starts: Vec<usize> = memchr::memchr_iter(b'A', bytes).collect();
    for lead in LEADS {
        let back = if *lead == b"Q~" { 4 } else { 0 };
        starts.extend(
            memchr::memmem::find_iter(bytes, lead)
                .filter(|&at| at >= back)
                .map(|at| at - back),
        );
    }
    starts.sort_unstable();
    starts.dedup();
    let mut free = 0;
    for i in starts {
        // A format starts a token: at the start of the text or after a non-token byte.
        if i < free || (i > 0 && TOKEN[usize::from(bytes[i - 1])]) || !TOKEN[usize::from(bytes[i])]
        {
            continue;
        }
        free = token_at(bytes, i, found);
    }
}

/// Looks at the token starting at `i`; returns where the next one may start.
fn token_at(bytes: &[u8], i: usize, found: &mut Vec<Found>) -> usize {
    let b = bytes[i];
    let end = run_end(bytes, i, |b| TOKEN[usize::from(b)]);
    let token = &bytes[i..end];
    if let Some(kind) = classify(token) {
        found.push(Found {
            start: i,
            end,
            kind,
        });
        if kind == "aws-access-key" {
            aws_secret_after(bytes, end, found);
        }
    } else if b == b'e' && token.starts_with(b"eyJ") {
        if let Some(jwt_end) = jwt(bytes, i) {
            found.push(Found {
                start: i,
                end: jwt_end,
                kind: "jwt",
            });
            return jwt_end;
        }
    } else if b == b'h' && bytes[i..].starts_with(b"hooks.slack.com/services/") {
        let end = run_end(bytes, i, |b| is_token_byte(b) || b == b'/' || b == b'.');
        if end - i > 40 {
            found.push(Found {
                start: i,
                end,
                kind: "slack-token",
            });
        }
        return end;
    } else if token.len() == 5
        && token[3].is_ascii_digit()
        && token[4] == b'Q'
        && bytes.get(end) == Some(&b'~')
    {
        azure_client_secret(bytes, i, found);
    }
    end
}

/// [`is_token_byte`] as a table: the scan's inner loop.
static TOKEN: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = is_token_byte(b as u8);
        b += 1;
    }
    table
};

fn run_end(bytes: &[u8], from: usize, keep: impl Fn(u8) -> bool) -> usize {
    bytes[from..]
        .iter()
        .position(|&b| !keep(b))
        .map_or(bytes.len(), |n| from + n)
}

/// The kind of a whole run of token characters, if its format is a known secret's.
fn classify(t: &[u8]) -> Option<&'static str> {
    let body = |prefix: &[u8], ok: fn(u8) -> bool| {
        t.len() > prefix.len() && t[prefix.len()..].iter().all(|&b| ok(b))
    };
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    match t.first()? {
        b'A' => {
            if t.len() == 20
                && AWS_PREFIXES.iter().any(|p| t.starts_with(p))
                && t[4..]
                    .iter()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
            {
                return Some("aws-access-key");
            }
            (t.len() == 39 && t.starts_with(b"AIza")).then_some("gcp-api-key")
        }
        b'g' => {
            for prefix in [&b"ghp_"[..], b"gho_", b"ghu_", b"ghs_", b"ghr_"] {
                if t.starts_with(prefix) && t.len() >= 40 && body(prefix, alnum) {
                    return Some("github-token");
                }
            }
            if t.starts_with(b"github_pat_") && t.len() >= 70 {
                return Some("github-token");
            }
            for prefix in [&b"glpat-"[..], b"gldt-", b"glrt-", b"glptt-", b"glcbt-"] {
                if t.starts_with(prefix) && t.len() >= prefix.len() + 20 {
                    return Some("gitlab-token");
                }
            }
            None
        }
        b'x' => {
            let slack = t.len() >= 20
                && t.starts_with(b"xox")
                && matches!(t.get(3), Some(b'a' | b'b' | b'p' | b'r' | b's' | b'e'))
                && t.get(4) == Some(&b'-')
                && has_letters_and_digits(&t[5..]);
            slack.then_some("slack-token")
        }
        b's' | b'r' => {
            for prefix in [&b"sk_live_"[..], b"sk_test_", b"rk_live_", b"rk_test_"] {
                if t.starts_with(prefix) && t.len() >= prefix.len() + 20 && body(prefix, alnum) {
                    return Some("stripe-key");
                }
            }
            if t.starts_with(b"sk-ant-") && t.len() >= 40 {
                return Some("anthropic-key");
            }
            for prefix in [&b"sk-proj-"[..], b"sk-svcacct-", b"sk-admin-"] {
                if t.starts_with(prefix) && t.len() >= prefix.len() + 40 {
                    return Some("openai-key");
                }
            }
            let legacy =
                t.starts_with(b"sk-") && t.len() >= 40 && t.windows(8).any(|w| w == b"T3BlbkFJ");
            legacy.then_some("openai-key")
        }
        _ => None,
    }
}

/// The end of a JWT starting at `start` (`eyJ...`), if one does: three base64url parts,
/// the first two JSON objects (`eyJ` is `{"` encoded), the signature at least 16 long.
fn jwt(bytes: &[u8], start: usize) -> Option<usize> {
    let b64 = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    let header_end = run_end(bytes, start, b64);
    if header_end - start < 10 || bytes.get(header_end) != Some(&b'.') {
        return None;
    }
    let payload = header_end + 1;
    if !bytes[payload..].starts_with(b"eyJ") {
        return None;
    }
    let payload_end = run_end(bytes, payload, b64);
    if payload_end - payload < 10 || bytes.get(payload_end) != Some(&b'.') {
        return None;
    }
    let signature = payload_end + 1;
    let end = run_end(bytes, signature, b64);
    (end - signature >= 16).then_some(end)
}

/// A 40-character base64 run (mixed case and digits) within a few lines after an AWS
/// access key ID: the secret of the pair.
fn aws_secret_after(bytes: &[u8], from: usize, found: &mut Vec<Found>) {
    let window = &bytes[from..bytes.len().min(from + AWS_PAIR_WINDOW)];
    let b64 = |b: u8| b.is_ascii_alphanumeric() || b == b'/' || b == b'+';
    let mut i = 0;
    while i < window.len() {
        if !b64(window[i]) || (i > 0 && b64(window[i - 1])) {
            i += 1;
            continue;
        }
        let end = run_end(window, i, b64);
        let run = &window[i..end];
        if run.len() == 40
            && run.iter().any(u8::is_ascii_lowercase)
            && run.iter().any(u8::is_ascii_uppercase)
            && run.iter().any(u8::is_ascii_digit)
        {
            found.push(Found {
                start: from + i,
                end: from + end,
                kind: "aws-secret-key",
            });
            return;
        }
        i = end;
    }
}

/// An Entra ID (Azure AD) client secret: 3 characters, a digit, `Q~`, then 31 to 34 of
/// `[A-Za-z0-9_~.-]` (40 in all), e.g. `abc8Q~...`.
fn azure_client_secret(bytes: &[u8], start: usize, found: &mut Vec<Found>) {
    let chars = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'~' | b'.' | b'-');
    let end = run_end(bytes, start, chars);
    let run = &bytes[start..end];
    let secret = (38..=41).contains(&run.len())
        && run[3].is_ascii_digit()
        && run[4] == b'Q'
        && run[5] == b'~'
        && run[..3].iter().all(u8::is_ascii_alphanumeric)
        && has_letters_and_digits(&run[6..]);
    if secret {
        found.push(Found {
            start,
            end,
            kind: "azure-client-secret",
        });
    }
}
