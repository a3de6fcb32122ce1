//! The secret detector as plain Rust on plain strings, free of the component bindings so it
//! can be unit-tested (and measured on corpora) natively. `lib.rs` converts to WIT.
//!
//! [`find`] returns the byte spans to redact, each with its kind:
//!
//! | kind | what |
//! |---|---|
//! | `aws-access-key` | `AKIA`/`ASIA`/... followed by 16 upper-case letters and digits |
//! | `aws-secret-key` | 40 base64 characters after a key named like `aws_secret_access_key`, or within a few lines after an access key ID |
//! | `gcp-api-key` | `AIza` followed by 35 URL-safe base64 characters |
//! | `azure-storage-key` | the value of `AccountKey=` (88 base64 characters) |
//! | `azure-client-secret` | Entra ID client secrets (`xxx8Q~...`, 40 characters) |
//! | `github-token` | `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_` tokens and `github_pat_` fine-grained tokens |
//! | `gitlab-token` | `glpat-`, `gldt-`, `glrt-`, `glptt-`, `glcbt-` tokens |
//! | `slack-token` | `xoxb-`, `xoxp-`, `xoxa-`, `xoxr-`, `xoxs-`, `xoxe-` tokens and `hooks.slack.com` webhook URLs |
//! | `stripe-key` | `sk_live_`, `sk_test_`, `rk_live_`, `rk_test_` secret and restricted keys |
//! | `openai-key` | `sk-proj-`, `sk-svcacct-`, `sk-admin-` keys and legacy `sk-...T3BlbkFJ...` keys |
//! | `anthropic-key` | `sk-ant-` keys |
//! | `private-key` | a PEM `-----BEGIN ... PRIVATE KEY-----` block (also inside JSON, with `\n` escapes) |
//! | `jwt` | `eyJ...` `.` `eyJ...` `.` signature |
//! | `password` | the value of a key named like `password`, `passwd`, `pwd`, `passphrase`, and the password of a URL's user info |
//! | `secret` | a high-entropy value of a key named like `secret`, `token`, `api_key`, `access_key`, `private_key`, `client_secret`, `authorization` |
//!
//! Settings (the host's `config()` JSON): `ignore_kinds`, a list of the kinds above to leave
//! alone.

mod pairs;
mod pem;
mod tokens;

#[cfg(test)]
mod tests;

/// One span to redact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub start: usize,
    pub end: usize,
    pub kind: &'static str,
}

/// Every kind the detector reports.
pub(crate) const KINDS: &[&str] = &[
    "aws-access-key",
    "aws-secret-key",
    "gcp-api-key",
    "azure-storage-key",
    "azure-client-secret",
    "github-token",
    "gitlab-token",
    "slack-token",
    "stripe-key",
    "openai-key",
    "anthropic-key",
    "private-key",
    "jwt",
    "password",
    "secret",
];

/// The detector's settings.
#[derive(Debug, Clone, Default)]
pub(crate) struct Settings {
    ignore: Vec<&'static str>,
}

impl Settings {
    /// Reads `{"ignore_kinds": [...]}` (other keys are ignored).
    pub(crate) fn parse(json: &str) -> Result<Self, String> {
        let value: serde_json::Value =
            serde_json::from_str(json).map_err(|e| format!("not JSON: {e}"))?;
        let mut settings = Self::default();
        let Some(list) = value.get("ignore_kinds") else {
            return Ok(settings);
        };
        let list = list
            .as_array()
            .ok_or("'ignore_kinds' must be a list of kinds")?;
        for kind in list {
            let kind = kind
                .as_str()
                .ok_or("'ignore_kinds' must be a list of kinds")?;
            let known = KINDS.iter().find(|k| **k == kind).ok_or_else(|| {
                format!(
                    "'ignore_kinds' names '{kind}', which is no kind of this guard (kinds: {})",
                    KINDS.join(", ")
                )
            })?;
            settings.ignore.push(known);
        }
        Ok(settings)
    }
}

/// Where `text` holds secrets: non-overlapping spans, in order. When detectors overlap,
/// the more specific kind (a token format) wins over a generic one (`secret`, `password`).
pub(crate) fn find(text: &str, settings: &Settings) -> Vec<Found> {
    let mut found = Vec::new();
    tokens::find(text, &mut found);
    pem::find(text, &mut found);
    pairs::find(text, &mut found);
    if found.is_empty() {
        return found;
    }
    found.retain(|f| !settings.ignore.contains(&f.kind));
    found.sort_by_key(|f| (f.start, generic(f.kind), std::cmp::Reverse(f.end)));
    let mut kept: Vec<Found> = Vec::with_capacity(found.len());
    for f in found {
        match kept.last_mut() {
            Some(last) if f.start < last.end => {
                // Overlaps: keep the earlier one, grown to cover both.
                last.end = last.end.max(f.end);
            }
            _ => kept.push(f),
        }
    }
    kept
}

/// Generic kinds sort after specific ones starting at the same byte.
fn generic(kind: &str) -> bool {
    matches!(kind, "secret" | "password")
}

/// Characters of the tokens the formats above are made of.
pub(crate) const fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Shannon entropy of `s` in bits per byte.
pub(crate) fn entropy(s: &[u8]) -> f64 {
    if s.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in s {
        counts[usize::from(b)] += 1;
    }
    let len = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / len;
            -p * p.log2()
        })
        .sum()
}

/// Whether `s` mixes character classes the way generated secrets do: letters and digits.
pub(crate) fn has_letters_and_digits(s: &[u8]) -> bool {
    s.iter().any(u8::is_ascii_digit) && s.iter().any(u8::is_ascii_alphabetic)
}
