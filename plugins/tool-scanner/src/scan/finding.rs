//! What the scanner reports: a [`Finding`] of some kind and [`Severity`] in one tool, the
//! kind names, the parts of a tool it reads ([`ToolText`]) and the limits on what it reports.

/// How much a finding should worry a reviewer (the WIT `severity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Info,
    Warning,
    Danger,
}

/// One thing worth a reviewer's attention in one tool (the WIT `finding`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The tool's name; empty for a `scanner-error`, which concerns the whole scan.
    pub tool: String,
    pub kind: &'static str,
    pub severity: Severity,
    pub detail: String,
}

/// The parts of a tool the scanner reads.
#[derive(Clone, Copy, Debug)]
pub struct ToolText<'a> {
    pub name: &'a str,
    pub description: &'a str,
    /// The input schema as JSON text.
    pub input_schema: &'a str,
}

pub(super) const HIDDEN_INSTRUCTIONS: &str = "hidden-instructions";
pub(super) const CREDENTIAL_ACCESS: &str = "credential-access";
pub(super) const URL: &str = "url";
pub(super) const EMAIL: &str = "email";
pub(super) const ENCODED_DATA: &str = "encoded-data";
pub(super) const INVISIBLE_UNICODE: &str = "invisible-unicode";
pub(super) const CROSS_SERVER_REFERENCE: &str = "cross-server-reference";
/// The settings are unusable; nothing was scanned.
pub const SCANNER_ERROR: &str = "scanner-error";
/// The last finding of a tool that had more than [`MAX_PER_TOOL`].
pub(super) const MORE_FINDINGS: &str = "more-findings";

/// The kinds `ignore_kinds` may name.
pub(super) const KINDS: [&str; 7] = [
    HIDDEN_INSTRUCTIONS,
    CREDENTIAL_ACCESS,
    URL,
    EMAIL,
    ENCODED_DATA,
    INVISIBLE_UNICODE,
    CROSS_SERVER_REFERENCE,
];

/// At most this many findings per tool, the last of them a [`MORE_FINDINGS`] when cut.
pub(super) const MAX_PER_TOOL: usize = 20;
/// A detail quotes at most this many characters of the text behind it.
pub(super) const QUOTE_CHARS: usize = 80;
