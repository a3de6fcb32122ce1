//! Collecting a tool's findings: the [`Collector`] that keeps the first [`Hit`] per (kind,
//! matched phrase), [`cap`] that cuts a tool's findings to [`MAX_PER_TOOL`], and the
//! [`Location`] of a text in the tool, which starts every detail.

use std::collections::BTreeSet;

use super::evidence::clip;
use super::finding::{MAX_PER_TOOL, MORE_FINDINGS, Severity};

/// A finding before it is tied to its tool.
#[derive(Clone, Debug)]
pub(crate) struct Hit {
    pub(crate) kind: &'static str,
    pub(crate) severity: Severity,
    pub(crate) detail: String,
}

/// Keeps the first finding per (kind, matched phrase).
#[derive(Default)]
pub(crate) struct Collector {
    seen: BTreeSet<(&'static str, String)>,
    pub(crate) hits: Vec<Hit>,
}

impl Collector {
    pub(crate) fn add(
        &mut self,
        kind: &'static str,
        severity: Severity,
        key: String,
        detail: impl FnOnce() -> String,
    ) {
        if self.seen.insert((kind, key)) {
            self.hits.push(Hit {
                kind,
                severity,
                detail: detail(),
            });
        }
    }
}

/// Cuts a tool's findings (sorted, most severe first) to [`MAX_PER_TOOL`].
pub(crate) fn cap(mut hits: Vec<Hit>) -> Vec<Hit> {
    if hits.len() <= MAX_PER_TOOL {
        return hits;
    }
    let rest = hits.split_off(MAX_PER_TOOL - 1);
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for hit in &rest {
        match counts.iter_mut().find(|(kind, _)| *kind == hit.kind) {
            Some((_, n)) => *n += 1,
            None => counts.push((hit.kind, 1)),
        }
    }
    let counts: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    hits.push(Hit {
        kind: MORE_FINDINGS,
        severity: rest
            .iter()
            .map(|h| h.severity)
            .max()
            .unwrap_or(Severity::Info),
        detail: format!(
            "And {} more findings for this tool ({}) are not listed: the scanner lists at most \
             {MAX_PER_TOOL} per tool, most severe first.",
            rest.len(),
            counts.join(", ")
        ),
    });
    hits
}

#[derive(Clone, Debug)]
pub(crate) enum Location {
    Name,
    Description,
    /// A string value in the input schema, at this path.
    Schema(String),
    /// An object key in the input schema, at this path.
    SchemaKey(String),
    /// The input schema is not valid JSON and was read as plain text.
    RawSchema,
}

impl Location {
    /// "the description", "the input schema at properties.x.description", ...
    pub(crate) fn phrase(&self) -> String {
        match self {
            Location::Name => "the tool name".to_string(),
            Location::Description => "the description".to_string(),
            Location::Schema(path) => format!("the input schema at {}", show_path(path)),
            Location::SchemaKey(path) => format!("the input schema key at {}", show_path(path)),
            Location::RawSchema => "the input schema (not valid JSON, read as text)".to_string(),
        }
    }

    /// The phrase capitalised, to start a sentence.
    pub(crate) fn subject(&self) -> String {
        let phrase = self.phrase();
        let mut chars = phrase.chars();
        match chars.next() {
            Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
            None => phrase,
        }
    }
}

fn show_path(path: &str) -> String {
    if path.is_empty() {
        "its root".to_string()
    } else {
        clip(path, 60)
    }
}
