//! `url` and `email`: each distinct `http(s)://` URL and each distinct e-mail address outside
//! a URL, reserved example domains excepted. The URLs' byte ranges go on to the e-mail and
//! base64 detectors, which skip what lies inside a URL.

use super::collect::{Collector, Location};
use super::evidence::clip;
use super::finding::{EMAIL, QUOTE_CHARS, Severity, URL};
use super::invisible::is_hidden;

/// Reports each distinct URL of `text`; their byte ranges.
pub(crate) fn urls(c: &mut Collector, location: &Location, text: &str) -> Vec<(usize, usize)> {
    let urls = url_spans(text);
    for &(start, end) in &urls {
        let url = &text[start..end];
        c.add(URL, Severity::Info, url.to_string(), || {
            format!(
                "{} contains a URL to {}: '{}'.",
                location.subject(),
                clip(&url_host(url), 60),
                clip(url, QUOTE_CHARS)
            )
        });
    }
    urls
}

/// Byte ranges of `http://` and `https://` URLs in `text`.
fn url_spans(text: &str) -> Vec<(usize, usize)> {
    let lower = text.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = lower[from..].find("http") {
        let start = from + found;
        from = start + 4;
        let scheme = if lower[start..].starts_with("https://") {
            8
        } else if lower[start..].starts_with("http://") {
            7
        } else {
            continue;
        };
        if text[..start]
            .chars()
            .next_back()
            .is_some_and(char::is_alphanumeric)
        {
            continue;
        }
        let mut end = text[start..]
            .char_indices()
            .find(|&(_, ch)| {
                ch.is_whitespace()
                    || ch.is_control()
                    || is_hidden(ch)
                    || matches!(
                        ch,
                        '"' | '\'' | '<' | '>' | '`' | '|' | '{' | '}' | '\\' | '^'
                    )
            })
            .map_or(text.len(), |(k, _)| start + k);
        // Trailing punctuation belongs to the sentence; a ')' only when unbalanced.
        while end > start + scheme {
            let last = text[..end].chars().next_back().unwrap_or(' ');
            let unbalanced_paren = last == ')'
                && text[start..end].matches('(').count() < text[start..end].matches(')').count();
            if matches!(last, '.' | ',' | ';' | ':' | '!' | '?' | ']' | '*') || unbalanced_paren {
                end -= 1;
            } else {
                break;
            }
        }
        if end <= start + scheme {
            continue;
        }
        from = end;
        if !is_example_host(&url_host(&text[start..end])) {
            out.push((start, end));
        }
    }
    out
}

/// The lowercased host of a URL.
fn url_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = if host.starts_with('[') {
        host.split_once(']')
            .map_or(host, |(h, _)| h)
            .trim_start_matches('[')
    } else {
        host.split(':').next().unwrap_or(host)
    };
    host.to_ascii_lowercase()
}

/// Reserved example domains (RFC 2606), which documentation uses as placeholders.
fn is_example_host(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    ["example.com", "example.org", "example.net"]
        .iter()
        .any(|d| host == *d || host.ends_with(&format!(".{d}")))
        || [".example", ".test", ".invalid"]
            .iter()
            .any(|d| host.ends_with(d))
        || matches!(host, "example" | "test" | "invalid")
}

pub(crate) fn emails(c: &mut Collector, location: &Location, text: &str, urls: &[(usize, usize)]) {
    let b = text.as_bytes();
    let local = |ch: u8| ch.is_ascii_alphanumeric() || b"._%+-".contains(&ch);
    let domain = |ch: u8| ch.is_ascii_alphanumeric() || ch == b'.' || ch == b'-';
    for (at, _) in text.match_indices('@') {
        if urls.iter().any(|&(s, e)| s <= at && at < e) {
            continue;
        }
        let mut start = at;
        while start > 0 && local(b[start - 1]) {
            start -= 1;
        }
        while start < at && !b[start].is_ascii_alphanumeric() {
            start += 1;
        }
        let mut end = at + 1;
        while end < b.len() && domain(b[end]) {
            end += 1;
        }
        while end > at + 1 && !b[end - 1].is_ascii_alphanumeric() {
            end -= 1;
        }
        if start == at || end <= at + 1 {
            continue;
        }
        let host = &text[at + 1..end];
        let labels: Vec<&str> = host.split('.').collect();
        let tld_ok = labels
            .last()
            .is_some_and(|tld| tld.len() >= 2 && tld.bytes().all(|ch| ch.is_ascii_alphabetic()));
        if labels.len() < 2 || labels.iter().any(|l| l.is_empty()) || !tld_ok {
            continue;
        }
        if is_example_host(&host.to_ascii_lowercase()) {
            continue;
        }
        let address = &text[start..end];
        c.add(EMAIL, Severity::Info, address.to_ascii_lowercase(), || {
            format!(
                "{} contains the e-mail address '{}'.",
                location.subject(),
                clip(address, QUOTE_CHARS)
            )
        });
    }
}
