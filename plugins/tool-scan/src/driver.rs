//! The scan itself: [`run`] reads the settings and scans; [`scan`] goes tool by tool, reads
//! each tool's name, description and every string of its input schema (values and keys, with
//! their paths: [`walk`]), runs every detector over each text ([`scan_text`]) and keeps the
//! findings that are not ignored, most severe first, capped.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::Value;

use super::base64::base64_runs;
use super::collect::{Collector, Hit, Location, cap};
use super::credential::{credential_files, credential_verbs, secret_property};
use super::cross::{Others, cross_references};
use super::escapes::escape_runs;
use super::finding::{Finding, SCANNER_ERROR, Severity, ToolText};
use super::hidden::{hidden_phrases, hidden_tags};
use super::invisible::invisible;
use super::pattern::{Norm, tokenize};
use super::settings::Settings;
use super::url_email::{emails, urls};

/// Reads the settings, then scans; unusable settings give a single `scanner-error` finding.
pub fn run(config: &str, tools: &[ToolText<'_>], other_tools: &[&str]) -> Vec<Finding> {
    match Settings::parse(config) {
        Ok(settings) => scan(tools, other_tools, &settings),
        Err(problem) => vec![Finding {
            tool: String::new(),
            kind: SCANNER_ERROR,
            severity: Severity::Danger,
            detail: format!(
                "The tool-scanner settings (plugins.settings.tool-scanner) are unusable, so no \
                 tool was scanned: {problem}."
            ),
        }],
    }
}

/// Reviews `tools` (all from one server); `other_tools` are the `server:tool` names of the
/// other servers. Findings come tool by tool, most severe first within a tool.
pub fn scan(tools: &[ToolText<'_>], other_tools: &[&str], settings: &Settings) -> Vec<Finding> {
    let others = Others::new(other_tools);
    let own: BTreeSet<String> = tools.iter().map(|t| t.name.to_lowercase()).collect();
    let mut out = Vec::new();
    for tool in tools {
        let mut hits = scan_tool(tool, &others, &own);
        hits.retain(|hit| !settings.ignore_kinds.contains(&hit.kind));
        hits.sort_by_key(|hit| std::cmp::Reverse(hit.severity));
        out.extend(cap(hits).into_iter().map(|hit| Finding {
            tool: tool.name.to_string(),
            kind: hit.kind,
            severity: hit.severity,
            detail: hit.detail,
        }));
    }
    out
}

fn scan_tool(tool: &ToolText<'_>, others: &Others, own: &BTreeSet<String>) -> Vec<Hit> {
    let mut c = Collector::default();
    scan_text(&mut c, &Location::Name, tool.name, None);
    let cross = Some((others, own));
    scan_text(&mut c, &Location::Description, tool.description, cross);
    if !tool.input_schema.trim().is_empty() {
        match serde_json::from_str::<Value>(tool.input_schema) {
            Ok(schema) => {
                let mut texts = Vec::new();
                walk(&schema, &mut String::new(), &mut texts, &mut c);
                for (location, text) in texts {
                    // A key is a name, not prose that could steer the agent.
                    let steer = if matches!(location, Location::SchemaKey(_)) {
                        None
                    } else {
                        cross
                    };
                    scan_text(&mut c, &location, text, steer);
                }
            }
            Err(_) => scan_text(&mut c, &Location::RawSchema, tool.input_schema, cross),
        }
    }
    c.hits
}

/// Collects every string of the schema (keys too) with its path, and checks secret-looking
/// properties on the way.
fn walk<'v>(
    value: &'v Value,
    path: &mut String,
    out: &mut Vec<(Location, &'v str)>,
    c: &mut Collector,
) {
    match value {
        Value::String(s) => out.push((Location::Schema(path.clone()), s)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                let _ = write!(path, "[{i}]");
                walk(item, path, out, c);
                path.truncate(len);
            }
        }
        Value::Object(map) => {
            if let Some(Value::Object(props)) = map.get("properties") {
                for (name, schema) in props {
                    let at = if path.is_empty() {
                        format!("properties.{name}")
                    } else {
                        format!("{path}.properties.{name}")
                    };
                    secret_property(c, name, schema, &at);
                }
            }
            for (key, item) in map {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                out.push((Location::SchemaKey(path.clone()), key));
                let reference = matches!(key.as_str(), "$schema" | "$id" | "$ref");
                if !(reference && item.is_string()) {
                    walk(item, path, out, c);
                }
                path.truncate(len);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Runs every detector over one text.
fn scan_text(
    c: &mut Collector,
    location: &Location,
    text: &str,
    cross: Option<(&Others, &BTreeSet<String>)>,
) {
    if text.is_empty() {
        return;
    }
    let norm = Norm::new(text);
    let toks = tokenize(&norm.text);
    hidden_tags(c, location, &norm);
    hidden_phrases(c, location, &norm, &toks);
    credential_files(c, location, &norm);
    credential_verbs(c, location, &norm, &toks);
    let urls = urls(c, location, text);
    emails(c, location, text, &urls);
    base64_runs(c, location, text, &urls);
    escape_runs(c, location, text);
    invisible(c, location, text);
    if let Some((others, own)) = cross {
        cross_references(c, location, &norm, others, own);
    }
}
