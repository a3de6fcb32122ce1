//! `credential-access`: key and credential files (`~/.ssh`, `id_rsa`, `.env`, `mcp.json`,
//! ...), a secret (API key, password, ...) or the environment as the object of a verb such as
//! read, send or include, and secret-looking schema properties whose description says to copy
//! them from a file.

use std::sync::OnceLock;

use serde_json::Value;

use super::collect::{Collector, Location};
use super::evidence::clip;
use super::finding::{CREDENTIAL_ACCESS, Severity};
use super::pattern::{Norm, Rules, Tok, find_bounded, find_rules, tok_is, tok_text, tokenize};

/// Files and names that hold credentials: (needle on the normalised text, what it is).
const CREDENTIAL_FILES: &[(&str, &str)] = &[
    (".ssh", "the SSH directory, where private keys live"),
    ("id_rsa", "an SSH private key"),
    ("id_dsa", "an SSH private key"),
    ("id_ecdsa", "an SSH private key"),
    ("id_ed25519", "an SSH private key"),
    (
        "authorized_keys",
        "the SSH authorized_keys file, which grants logins",
    ),
    ("/etc/passwd", "the system's account list"),
    ("/etc/shadow", "the system's password hashes"),
    ("/etc/sudoers", "the system's sudo rules"),
    (".aws/credentials", "the AWS credentials file"),
    ("aws_secret_access_key", "an AWS secret key"),
    ("aws_session_token", "an AWS session token"),
    (".netrc", "a .netrc file of stored logins"),
    ("_netrc", "a .netrc file of stored logins"),
    (".npmrc", "an npm config file, which holds registry tokens"),
    (
        ".pypirc",
        "a PyPI config file, which holds upload credentials",
    ),
    (".git-credentials", "Git's stored credentials"),
    (".docker/config.json", "Docker's registry credentials"),
    (".kube/config", "Kubernetes credentials"),
    ("gh/hosts.yml", "the GitHub CLI's stored tokens"),
    (".config/gcloud", "the Google Cloud CLI's credentials"),
    (".azure/", "the Azure CLI's credentials"),
    (".pgpass", "a PostgreSQL password file"),
    (".gnupg", "the GnuPG directory, where private keys live"),
    (
        ".env",
        "an environment file, which usually holds API keys and passwords",
    ),
    (
        ".envrc",
        "an environment file, which usually holds API keys and passwords",
    ),
    (
        "/proc/self/environ",
        "the process environment, which usually holds secrets",
    ),
    (
        "mcp.json",
        "an MCP client configuration, which holds other servers' commands and API keys",
    ),
    (
        "mcp_config.json",
        "an MCP client configuration, which holds other servers' commands and API keys",
    ),
    (
        "claude_desktop_config",
        "the Claude Desktop configuration, which holds other servers' commands and API keys",
    ),
];

pub(crate) fn credential_files(c: &mut Collector, location: &Location, norm: &Norm<'_>) {
    for &(needle, what) in CREDENTIAL_FILES {
        let Some(at) = find_bounded(&norm.text, needle, char::is_alphanumeric) else {
            continue;
        };
        c.add(
            CREDENTIAL_ACCESS,
            Severity::Danger,
            needle.to_string(),
            || {
                format!(
                    "{} refers to {what} ('{needle}'): {}.",
                    location.subject(),
                    norm.quote(at, at + needle.len())
                )
            },
        );
    }
}

/// Secrets, as token patterns.
const SECRET_TERMS: &[&str] = &[
    "api _|-? key|keys",
    "apikey|apikeys",
    "secret _|-? key|keys",
    "access _|-? token|tokens|key|keys",
    "auth|bearer|session|refresh|oauth|personal+access _|-? token|tokens",
    "github|gh|gitlab|slack|discord|npm|pypi|openai|anthropic|huggingface|hf|aws|stripe|api|bot|jwt _|-? token|tokens",
    "password|passwords|passwd|passphrase",
    "private _|-? key|keys",
    "privatekey|privatekeys",
    "credentials",
    "client _|-? secret|secrets",
    "seed|recovery|mnemonic phrase|phrases|words",
];

/// Verbs that move or expose a secret when it is their object.
#[rustfmt::skip]
const SECRET_VERBS: &[&str] = &[
    "read", "send", "include", "pass", "upload", "forward", "copy", "paste", "share", "attach",
    "append", "post", "transmit", "exfiltrate", "leak", "extract", "collect", "gather", "dump",
    "cat", "output", "print", "reveal", "embed", "steal", "harvest", "grab",
];

/// Words between the verb and the secret that make the secret not its object
/// ("send the request with the access token").
const SECRET_BLOCKERS: &[&str] = &[
    "with", "using", "via", "by", "without", "for", "require", "requires", "required", "need",
    "needs",
];

/// Words before the verb that negate it ("never include your password").
#[rustfmt::skip]
const NEGATIONS: &[&str] = &[
    "not", "never", "don't", "dont", "no", "cannot", "can't", "shouldn't", "mustn't", "avoid",
];

/// Words before the verb that make it a description, not a request ("the token is read from").
const PASSIVE: &[&str] = &["is", "are", "was", "were", "be", "been", "being"];

/// Words after the secret that make it something else ("send a password reset e-mail").
#[rustfmt::skip]
const SECRET_NOT_AFTER: &[&str] = &[
    "reset", "change", "changes", "policy", "policies", "strength", "protected", "requirement",
    "requirements", "rule", "rules", "field", "fields", "expiry", "expiration", "rotation", "hint",
    "hints", "manager", "recovery", "prompt", "length", "complexity", "form", "dialog", "input",
    "less", "update", "updates", "header", "headers", "id", "ids", "name", "names", "prefix",
    "format",
];

fn secret_rules() -> &'static Rules {
    static RULES: OnceLock<Rules> = OnceLock::new();
    RULES.get_or_init(|| Rules::new(SECRET_TERMS.iter()))
}

/// The environment, where secrets usually are; "pass environment variables to the container"
/// is ordinary, so its verbs are fewer.
const ENV_TERMS: &[&str] = &["environment|env variables|variable|vars|var"];

#[rustfmt::skip]
const ENV_VERBS: &[&str] = &[
    "read", "send", "include", "upload", "forward", "copy", "share", "attach", "post", "transmit",
    "exfiltrate", "leak", "collect", "gather", "dump", "reveal", "steal", "harvest", "grab",
];

fn env_rules() -> &'static Rules {
    static RULES: OnceLock<Rules> = OnceLock::new();
    RULES.get_or_init(|| Rules::new(ENV_TERMS.iter()))
}

/// A secret that is the object of a verb such as read, send or include.
pub(crate) fn credential_verbs(
    c: &mut Collector,
    location: &Location,
    norm: &Norm<'_>,
    toks: &[Tok],
) {
    let text = norm.text.as_str();
    let secrets = find_rules(secret_rules(), toks, text)
        .into_iter()
        .map(|hit| (hit, SECRET_VERBS));
    let env = find_rules(env_rules(), toks, text)
        .into_iter()
        .map(|hit| (hit, ENV_VERBS));
    for ((_, first, end), verbs) in secrets.chain(env) {
        if tok_is(toks, text, end, SECRET_NOT_AFTER)
            || (toks.get(end).is_some_and(|t| !t.word)
                && tok_is(toks, text, end + 1, SECRET_NOT_AFTER))
        {
            continue;
        }
        let mut verb = None;
        for k in (first.saturating_sub(7)..first).rev() {
            let tok = &toks[k];
            if tok.stop || tok_is(toks, text, k, SECRET_BLOCKERS) {
                break;
            }
            if tok_is(toks, text, k, verbs) {
                let negated = (k.saturating_sub(2)..k).any(|n| tok_is(toks, text, n, NEGATIONS))
                    || (k > 0 && tok_is(toks, text, k - 1, PASSIVE));
                if !negated {
                    verb = Some(k);
                }
                break;
            }
        }
        let Some(v) = verb else { continue };
        let term: String = text[toks[first].a..toks[end - 1].b]
            .chars()
            .map(|ch| if ch == '_' || ch == '-' { ' ' } else { ch })
            .collect();
        let verb_word = tok_text(text, &toks[v]);
        let (a, b) = (toks[v].a, toks[end - 1].b);
        c.add(CREDENTIAL_ACCESS, Severity::Danger, term.clone(), || {
            format!(
                "{} says to {verb_word} a secret ({term}): {}.",
                location.subject(),
                norm.quote(a, b)
            )
        });
    }
}

/// A schema property that asks for a secret and whose description says to copy it from a file.
pub(crate) fn secret_property(c: &mut Collector, name: &str, schema: &Value, path: &str) {
    let squashed: String = name
        .chars()
        .filter(|ch| ch.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect();
    #[rustfmt::skip]
    const SECRET_NAMES: [&str; 16] = [
        "password", "passwd", "passphrase", "apikey", "secret", "credential", "privatekey",
        "accesskey", "accesstoken", "authtoken", "bearertoken", "sessiontoken", "refreshtoken",
        "mnemonic", "seedphrase", "sshkey",
    ];
    if !SECRET_NAMES.iter().any(|s| squashed.contains(s)) {
        return;
    }
    let Value::Object(map) = schema else { return };
    for field in ["description", "title"] {
        let Some(Value::String(text)) = map.get(field) else {
            continue;
        };
        let norm = Norm::new(text);
        let toks = tokenize(&norm.text);
        let Some((a, b)) = copy_from_file(&norm.text, &toks) else {
            continue;
        };
        c.add(
            CREDENTIAL_ACCESS,
            Severity::Danger,
            format!("property:{}", name.to_lowercase()),
            || {
                format!(
                    "The input schema asks for '{}' (at {}) and its {field} says to copy it from a \
                 file: {}.",
                    clip(name, 40),
                    clip(path, 60),
                    norm.quote(a, b)
                )
            },
        );
        return;
    }
}

/// "copy it from ~/.aws/credentials", "paste the contents of the .env file": the span from
/// the verb to the file.
fn copy_from_file(text: &str, toks: &[Tok]) -> Option<(usize, usize)> {
    const ACTIONS: &[&str] = &[
        "copy", "paste", "read", "cat", "take", "load", "extract", "get", "grab", "fetch",
        "include",
    ];
    const LINKS: &[&str] = &["from", "of", "in", "inside", "at"];
    #[rustfmt::skip]
    const FILES: &[&str] = &[
        "file", "files", "dotfile", "config", "configuration", "env", "json", "yaml", "yml", "toml",
        "ini", "pem", "netrc", "npmrc", "pypirc", "credentials", "ssh", "keychain",
    ];
    for (i, tok) in toks.iter().enumerate() {
        if !tok_is(toks, text, i, ACTIONS) {
            continue;
        }
        let limit = (i + 9).min(toks.len());
        let Some(link) = (i + 1..limit).find(|&k| tok_is(toks, text, k, LINKS)) else {
            continue;
        };
        let limit = (link + 7).min(toks.len());
        for k in link + 1..limit {
            if toks[k].stop {
                break;
            }
            if tok_is(toks, text, k, FILES) || tok_text(text, &toks[k]) == "~" {
                return Some((tok.a, toks[k].b));
            }
        }
    }
    None
}
