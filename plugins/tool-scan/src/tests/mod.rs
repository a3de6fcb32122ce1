//! The scanner's unit tests, split by area (one file per finding kind, plus clean tools,
//! whole attacks, what the driver reads, details, settings and robustness), and the helpers
//! they share.

mod attacks;
mod benign;
mod credential;
mod cross;
mod details;
mod encoded;
mod hidden;
mod invisible;
mod robustness;
mod schema;
mod settings;
mod url_email;

use super::evidence::{needs_escape, quote};
use super::finding::{
    CREDENTIAL_ACCESS, CROSS_SERVER_REFERENCE, EMAIL, ENCODED_DATA, HIDDEN_INSTRUCTIONS,
    INVISIBLE_UNICODE, MAX_PER_TOOL, MORE_FINDINGS, QUOTE_CHARS, URL,
};
use super::*;

const OBJECT: &str = r#"{"type":"object","properties":{}}"#;

fn tool<'a>(name: &'a str, description: &'a str, schema: &'a str) -> ToolText<'a> {
    ToolText {
        name,
        description,
        input_schema: schema,
    }
}

/// Scans, and checks what every scan must hold: details are one clean line each.
fn scan_all(tools: &[ToolText<'_>], others: &[&str]) -> Vec<Finding> {
    let found = scan(tools, others, &Settings::default());
    for f in &found {
        assert!(
            !f.detail.chars().any(needs_escape),
            "unescaped character in {:?}",
            f.detail
        );
        assert!(
            !f.detail.is_empty() && f.detail.ends_with('.'),
            "{:?}",
            f.detail
        );
    }
    found
}

fn scan_desc(description: &str) -> Vec<Finding> {
    scan_all(&[tool("some_tool", description, OBJECT)], &[])
}

fn of_kind<'f>(found: &'f [Finding], kind: &str) -> Vec<&'f Finding> {
    found.iter().filter(|f| f.kind == kind).collect()
}

fn kinds(found: &[Finding]) -> Vec<&'static str> {
    let mut kinds: Vec<&'static str> = found.iter().map(|f| f.kind).collect();
    kinds.sort_unstable();
    kinds.dedup();
    kinds
}

fn b64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    while !out.len().is_multiple_of(4) {
        out.push('=');
    }
    out
}
