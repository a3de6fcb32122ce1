//! What looks secret: a name (a flag, `KEY=`, a query key, a header) that says it holds a
//! secret ([`is_secret_name`]), and a value that is one on its own ([`is_secret_value`]: a
//! well-known token or a long random-looking string).

/// Words that make a name secret when it contains one (normalised: lower case, letters and
/// digits only).
const SECRET_NAME_WORDS: [&str; 11] = [
    "password",
    "passwd",
    "passphrase",
    "token",
    "secret",
    "apikey",
    "authorization",
    "cookie",
    "privatekey",
    "credential",
    "accesskey",
];

/// Normalised words that contain a secret word but name a count, a tool or a setting.
const NOT_SECRET_WORDS: [&str; 6] = [
    "maxtokens",
    "numtokens",
    "tokenizer",
    "tokencount",
    "tokenlimit",
    "tokenbudget",
];

/// Endings of a normalised name that says where a secret is, not what it is
/// (`--token-file PATH`, `--password-env VAR`).
const REFERENCE_SUFFIXES: [&str; 7] = ["file", "path", "dir", "env", "name", "id", "url"];

/// Beginnings of a normalised name that turn a secret word into a switch (`--no-auth`).
const SWITCH_PREFIXES: [&str; 3] = ["no", "disable", "skip"];

/// Prefixes of well-known tokens. A value is a token when it starts with one and at least
/// eight token characters follow, with a digit among them or twenty or more of them.
pub(super) const TOKEN_PREFIXES: [&str; 25] = [
    "sk-",         // OpenAI (sk-proj-...), Anthropic (sk-ant-...)
    "sk_live_",    // Stripe secret keys
    "sk_test_",    //
    "rk_live_",    // Stripe restricted keys
    "rk_test_",    //
    "pk_live_",    // Stripe publishable keys
    "whsec_",      // Stripe webhook secrets
    "ghp_",        // GitHub personal access token
    "gho_",        // GitHub OAuth token
    "ghs_",        // GitHub app server token
    "ghu_",        // GitHub app user token
    "ghr_",        // GitHub refresh token
    "github_pat_", // GitHub fine-grained token
    "glpat-",      // GitLab personal access token
    "xoxa-",       // Slack tokens
    "xoxb-",       //
    "xoxp-",       //
    "xoxr-",       //
    "xoxs-",       //
    "xapp-",       // Slack app-level token
    "hf_",         // Hugging Face
    "npm_",        // npm
    "AIza",        // Google API key
    "SG.",         // SendGrid
    "dop_v1_",     // DigitalOcean
];

/// The shortest value [`is_high_entropy`] considers.
pub(super) const MIN_RANDOM_CHARS: usize = 20;

/// Whether a flag, environment variable, query key or header named `name` holds a secret
/// (see the module doc).
pub(super) fn is_secret_name(name: &str) -> bool {
    let mut key: String = name
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    if key.is_empty()
        || REFERENCE_SUFFIXES.iter().any(|s| key.ends_with(s))
        || SWITCH_PREFIXES.iter().any(|p| {
            key.strip_prefix(p).is_some_and(|rest| {
                SECRET_NAME_WORDS.iter().any(|w| rest.starts_with(w)) || rest == "auth"
            })
        })
    {
        return false;
    }
    for word in NOT_SECRET_WORDS {
        key = key.replace(word, "");
    }
    SECRET_NAME_WORDS.iter().any(|w| key.contains(w))
        || key.ends_with("key")
        || key.ends_with("auth")
}

/// A value that looks like a secret on its own: a token ([`looks_like_token`]) or a long
/// random string ([`is_high_entropy`]).
pub(super) fn is_secret_value(value: &str) -> bool {
    looks_like_token(value) || is_high_entropy(value)
}

/// A well-known token: one of [`TOKEN_PREFIXES`] followed by at least eight token
/// characters (with a digit, or at least twenty of them), an AWS access key id, or a JWT.
pub(super) fn looks_like_token(word: &str) -> bool {
    let token_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let prefixed = TOKEN_PREFIXES.iter().any(|prefix| {
        word.strip_prefix(prefix).is_some_and(|rest| {
            let n = rest.chars().count();
            n >= 8
                && rest.chars().all(token_char)
                && (n >= 20 || rest.chars().any(|c| c.is_ascii_digit()))
        })
    });
    prefixed || is_aws_key_id(word) || is_jwt(word)
}

/// `AKIA` or `ASIA` and sixteen upper-case letters or digits.
fn is_aws_key_id(word: &str) -> bool {
    word.len() == 20
        && (word.starts_with("AKIA") || word.starts_with("ASIA"))
        && word[4..]
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// Three (JWS) or five (JWE) base64url segments, the first a JSON header (`eyJ`).
fn is_jwt(word: &str) -> bool {
    let segments: Vec<&str> = word.split('.').collect();
    let base64url = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '='))
    };
    matches!(segments.len(), 3 | 5)
        && segments[0].starts_with("eyJ")
        && segments[0].len() >= 10
        && !segments[1].is_empty()
        && segments.iter().all(|s| base64url(s))
}

/// A long random-looking string, as API keys and passwords generated by tools are, told
/// apart from identifiers people write (`TestProject2024ReleaseCandidate`,
/// `Qwen2-Coder-32B-Instruct`), hex hashes and UUIDs (which stay visible). All of:
/// - at least [`MIN_RANDOM_CHARS`] characters, only letters, digits and `+/=_-`, not
///   starting with `-` or `/`, and not hex digits (and dashes) alone;
/// - upper-case letters, lower-case letters and digits all present;
/// - at most one `-` or `_` per ten characters (words joined by dashes are names);
/// - fewer than 35% vowels among the letters (random letters have ~19%, English ~40%);
/// - the character class (lower, upper, digit, other) changes between at least 35% of
///   neighbours (CamelCase words change rarely);
/// - Shannon entropy at least 0.8 × log2 of the length (capped at 64).
///
/// Measured on 20,000 random strings each: caught 90% of 20-character alphanumeric
/// strings, 97% of 32, 98% of 40, 99.5% of 64, 97% of 40-character base64 and 94% of
/// 32-character base64url; passed 98.7% of 34,000 synthetic identifiers of 20 characters or
/// more made of English words, numbers and separators.
pub(super) fn is_high_entropy(value: &str) -> bool {
    let chars: Vec<char> = value.chars().collect();
    let n = chars.len();
    if n < MIN_RANDOM_CHARS
        || !chars
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '_' | '-'))
        || value.starts_with(['-', '/'])
        || chars.iter().all(|c| c.is_ascii_hexdigit() || *c == '-')
    {
        return false;
    }
    let has = |f: fn(&char) -> bool| chars.iter().any(f);
    if !(has(char::is_ascii_lowercase)
        && has(char::is_ascii_uppercase)
        && has(char::is_ascii_digit))
    {
        return false;
    }
    let separators = chars.iter().filter(|c| matches!(c, '-' | '_')).count();
    if separators * 10 > n {
        return false;
    }
    let letters = chars.iter().filter(|c| c.is_ascii_alphabetic()).count();
    let vowels = chars
        .iter()
        .filter(|c| matches!(c.to_ascii_lowercase(), 'a' | 'e' | 'i' | 'o' | 'u'))
        .count();
    if vowels * 100 >= letters * 35 {
        return false;
    }
    let class = |c: &char| match c {
        'a'..='z' => 0,
        'A'..='Z' => 1,
        '0'..='9' => 2,
        _ => 3,
    };
    let changes = chars
        .windows(2)
        .filter(|w| class(&w[0]) != class(&w[1]))
        .count();
    if changes * 100 < (n - 1) * 35 {
        return false;
    }
    shannon_entropy(&chars) >= 0.8 * (n.min(64) as f64).log2()
}

/// Bits per character of the characters' frequencies.
fn shannon_entropy(chars: &[char]) -> f64 {
    let mut counts = std::collections::HashMap::<char, usize>::new();
    for c in chars {
        *counts.entry(*c).or_default() += 1;
    }
    let n = chars.len() as f64;
    counts
        .values()
        .map(|&k| {
            let p = k as f64 / n;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests;
