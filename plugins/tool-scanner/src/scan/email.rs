//! `email`: each distinct e-mail address outside a URL, example domains excepted.

use super::collect::{Collector, Location};
use super::evidence::clip;
use super::finding::{EMAIL, QUOTE_CHARS, Severity};
use super::url::is_example_host;

pub(super) fn emails(c: &mut Collector, location: &Location, text: &str, urls: &[(usize, usize)]) {
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
