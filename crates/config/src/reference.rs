//! References to values kept outside the config: `${env:NAME}` (mcpproxy's environment) and
//! `${secret:NAME}` (the credential store, set with `mcpproxy secret set NAME`). A header
//! value, an `env` value of a stdio server or a query value of a server's URL may hold them,
//! alone or inside other text (`Bearer ${secret:GITHUB_TOKEN}`); `$${` writes a literal
//! `${`. This module parses and checks them ([`check`], at load) and substitutes them
//! ([`resolve`], when a server is started); the config itself only ever holds the text.

use std::fmt;

/// The longest name, in bytes.
const MAX_NAME_BYTES: usize = 128;

/// One reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    /// `${env:NAME}`: the variable `NAME` of mcpproxy's environment.
    Env(String),
    /// `${secret:NAME}`: the stored secret `NAME`.
    Secret(String),
}

impl Reference {
    /// The credential store's key of a `${secret:NAME}`.
    pub fn store_key(name: &str) -> String {
        format!("secret/{name}")
    }

    /// How to provide the value when it is missing.
    pub fn fix(&self) -> String {
        match self {
            Reference::Env(name) => format!("set the environment variable {name} for mcpproxy"),
            Reference::Secret(name) => format!("run `mcpproxy secret set {name}`"),
        }
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reference::Env(name) => write!(f, "${{env:{name}}}"),
            Reference::Secret(name) => write!(f, "${{secret:{name}}}"),
        }
    }
}

/// A piece of a value: literal text or a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    /// `$${`: a literal `${`.
    Dollar,
    Ref(Reference),
}

/// Splits `value` into text and references; `Err` says what is malformed and how to write it.
fn pieces(value: &str) -> Result<Vec<Piece<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(at) = rest.find("${") {
        if at > 0 && rest.as_bytes()[at - 1] == b'$' {
            out.push(Piece::Text(&rest[..at - 1]));
            out.push(Piece::Dollar);
            rest = &rest[at + 2..];
            continue;
        }
        out.push(Piece::Text(&rest[..at]));
        let body_start = at + 2;
        let Some(len) = rest[body_start..].find('}') else {
            return Err(format!(
                "'{}' opens a reference with '${{' but never closes it with '}}': write \
                 ${{env:NAME}} or ${{secret:NAME}} (or $${{ for a literal '${{')",
                shorten(&rest[at..])
            ));
        };
        let body = &rest[body_start..body_start + len];
        out.push(Piece::Ref(reference(body)?));
        rest = &rest[body_start + len + 1..];
    }
    out.push(Piece::Text(rest));
    out.retain(|p| *p != Piece::Text(""));
    Ok(out)
}

/// The reference written `${body}`.
fn reference(body: &str) -> Result<Reference, String> {
    let Some((scheme, name)) = body.split_once(':') else {
        return Err(format!(
            "'${{{}}}' has no scheme: write ${{env:{0}}} for an environment variable or \
             ${{secret:{0}}} for a secret set with `mcpproxy secret set {0}`",
            shorten(body)
        ));
    };
    let (reference, valid) = match scheme {
        "env" => (
            Reference::Env(name.to_owned()),
            name.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
        ),
        "secret" => (
            Reference::Secret(name.to_owned()),
            name.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')),
        ),
        _ => {
            return Err(format!(
                "'${{{}}}' has the unknown scheme '{}': use ${{env:NAME}} or ${{secret:NAME}}",
                shorten(body),
                shorten(scheme)
            ));
        }
    };
    if name.is_empty() {
        return Err(format!(
            "'${{{scheme}:}}' names nothing: write the name after '{scheme}:', e.g. \
             ${{{scheme}:API_TOKEN}}"
        ));
    }
    if !valid || name.len() > MAX_NAME_BYTES {
        let rule = if scheme == "env" {
            "letters, digits and '_', not starting with a digit"
        } else {
            "letters, digits, '_', '-' and '.', starting with a letter, digit or '_'"
        };
        return Err(format!(
            "'${{{}}}' is not a valid {scheme} name: use up to {MAX_NAME_BYTES} {rule}",
            shorten(body)
        ));
    }
    Ok(reference)
}

/// Checks the `NAME` of a `${secret:NAME}` (for `mcpproxy secret set NAME`).
pub fn check_secret_name(name: &str) -> Result<(), String> {
    match reference(&format!("secret:{name}"))? {
        Reference::Secret(_) => Ok(()),
        Reference::Env(_) => Err(format!("'{}' is not a secret name", shorten(name))),
    }
}

/// `text` cut for an error message.
fn shorten(text: &str) -> String {
    let cut: String = text.chars().take(60).collect();
    let cut = mcpproxy_support::quote(&cut);
    if text.chars().count() > 60 {
        format!("{cut}...")
    } else {
        cut
    }
}

/// The references in `value`, or what is malformed (for the config's validation).
pub fn check(value: &str) -> Result<Vec<Reference>, String> {
    Ok(pieces(value)?
        .into_iter()
        .filter_map(|p| match p {
            Piece::Ref(r) => Some(r),
            _ => None,
        })
        .collect())
}

/// Whether `value` holds a reference (or a `$${` escape) and so must go through [`resolve`].
pub fn has_reference(value: &str) -> bool {
    value.contains("${")
}

/// Why a value could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveError {
    /// The text is malformed (the config's validation refuses it first).
    Malformed(String),
    /// No value for this reference.
    Missing(Reference),
    /// The lookup failed (the credential store could not be read); no value in it.
    Lookup(Reference, String),
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::Malformed(why) => f.write_str(why),
            // The name is said twice: a status masks text that looks like `secret:VALUE`.
            ResolveError::Missing(reference) => match reference {
                Reference::Env(name) => write!(
                    f,
                    "{reference}: the environment variable {name} is not set: {}",
                    reference.fix()
                ),
                Reference::Secret(name) => write!(
                    f,
                    "{reference}: no secret named '{name}' is stored: {}",
                    reference.fix()
                ),
            },
            ResolveError::Lookup(reference, why) => {
                write!(f, "cannot read {reference}: {why}")
            }
        }
    }
}

/// `value` with each reference replaced by what `lookup` finds for it, passed through
/// `encode` (the identity for headers and env values, percent-encoding for a URL's query).
/// `lookup` returns `Ok(None)` for a missing value.
pub fn resolve(
    value: &str,
    lookup: &mut dyn FnMut(&Reference) -> Result<Option<String>, String>,
    encode: &dyn Fn(&str) -> String,
) -> Result<String, ResolveError> {
    let mut out = String::with_capacity(value.len());
    for piece in pieces(value).map_err(ResolveError::Malformed)? {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Dollar => out.push_str("${"),
            Piece::Ref(reference) => match lookup(&reference) {
                Ok(Some(found)) => out.push_str(&encode(&found)),
                Ok(None) => return Err(ResolveError::Missing(reference)),
                Err(why) => return Err(ResolveError::Lookup(reference, why)),
            },
        }
    }
    Ok(out)
}

/// Percent-encodes everything but RFC 3986's unreserved characters: a value put into a
/// URL's query.
pub fn encode_query_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Checks a server URL's references: only query values may hold them (the host and path
/// decide where a request goes and are shown everywhere).
pub fn check_url(url: &str) -> Result<(), String> {
    let query_start = url.find('?').unwrap_or(url.len());
    let (base, query) = url.split_at(query_start);
    if has_reference(base) {
        return Err(format!(
            "'{}' has a reference outside its query: only a query value may be ${{env:NAME}} \
             or ${{secret:NAME}} (e.g. https://host/mcp?api_key=${{secret:API_KEY}}); put \
             credentials in 'headers' when the server accepts them there",
            shorten(url)
        ));
    }
    let query = query.split('#').next().unwrap_or("");
    for pair in query.trim_start_matches('?').split('&') {
        if let Some((name, _)) = pair.split_once('=')
            && has_reference(name)
        {
            return Err(format!(
                "the query parameter name '{}' holds a reference: only values may",
                shorten(name)
            ));
        }
    }
    check(query).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(reference: &Reference) -> Result<Option<String>, String> {
        Ok(match reference {
            Reference::Env(name) if name == "HOME_DIR" => Some("/home/me".to_owned()),
            Reference::Secret(name) if name == "TOKEN" => Some("a b&c".to_owned()),
            _ => None,
        })
    }

    fn resolved(value: &str) -> Result<String, ResolveError> {
        resolve(value, &mut lookup, &|v| v.to_owned())
    }

    #[test]
    fn references_are_replaced_inside_text_and_escapes_kept_literal() {
        assert_eq!(resolved("plain").unwrap(), "plain");
        assert_eq!(resolved("Bearer ${secret:TOKEN}").unwrap(), "Bearer a b&c");
        assert_eq!(
            resolved("${env:HOME_DIR}/x:${secret:TOKEN}").unwrap(),
            "/home/me/x:a b&c"
        );
        assert_eq!(
            resolved("cost $${env:HOME_DIR}").unwrap(),
            "cost ${env:HOME_DIR}"
        );
        assert_eq!(resolved("$5 and }").unwrap(), "$5 and }");
        assert_eq!(
            resolve("k=${secret:TOKEN}", &mut lookup, &encode_query_value).unwrap(),
            "k=a%20b%26c"
        );
    }

    #[test]
    fn a_missing_value_names_the_reference_and_the_fix() {
        let message = resolved("x ${secret:NOPE}").unwrap_err().to_string();
        assert_eq!(
            message,
            "${secret:NOPE}: no secret named 'NOPE' is stored: run `mcpproxy secret set NOPE`"
        );
        let message = resolved("${env:NOPE}").unwrap_err().to_string();
        assert!(
            message.contains("set the environment variable NOPE"),
            "{message}"
        );
    }

    #[test]
    fn malformed_references_are_refused_with_the_fix() {
        for (value, expected) in [
            ("${secret:}", "names nothing"),
            ("${env:}", "names nothing"),
            ("${vault:X}", "unknown scheme 'vault'"),
            ("${TOKEN}", "no scheme: write ${env:TOKEN}"),
            ("${env:1X}", "not a valid env name"),
            ("${env:A-B}", "not a valid env name"),
            ("${secret:a/b}", "not a valid secret name"),
            ("Bearer ${secret:X", "never closes it"),
        ] {
            let message = check(value).unwrap_err();
            assert!(message.contains(expected), "{value}: {message}");
        }
        assert_eq!(
            check("${secret:gh.token-1} ${env:_X}").unwrap(),
            [
                Reference::Secret("gh.token-1".to_owned()),
                Reference::Env("_X".to_owned())
            ]
        );
        let long = format!("${{secret:{}}}", "a".repeat(129));
        assert!(check(&long).unwrap_err().contains("up to 128"));
    }

    #[test]
    fn only_url_query_values_may_hold_references() {
        assert!(check_url("https://h/mcp?key=${secret:K}&x=1").is_ok());
        assert!(check_url("https://h/mcp").is_ok());
        assert!(
            check_url("https://${env:HOST}/mcp")
                .unwrap_err()
                .contains("outside its query")
        );
        assert!(
            check_url("https://h/mcp?${env:N}=1")
                .unwrap_err()
                .contains("only values")
        );
        assert!(check_url("https://h/mcp?k=${nope:K}").is_err());
    }
}
