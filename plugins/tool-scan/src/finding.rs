//! What the scanner reports: a [`Finding`] of some kind and [`Severity`] in one tool, the
//! kind names, the parts of a tool it reads ([`ToolText`]) and the limits on what it reports.

/// How much a finding should worry a reviewer (the WIT `severity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Worth knowing (a URL in a description, say).
    Info,
    /// Unusual for a tool; read it before approving.
    Warning,
    /// Reads like an attack on the model or the user.
    Danger,
}

/// One thing worth a reviewer's attention in one tool (the WIT `finding`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The tool's name; empty for a `scanner-error`, which concerns the whole scan.
    pub tool: String,
    /// What was found: one of the kind names (`hidden-instructions`, `url`, ...).
    pub kind: &'static str,
    /// How much it should worry a reviewer.
    pub severity: Severity,
    /// One line saying what was found and where, quoting the text it rests on.
    pub detail: String,
}

/// The parts of a tool the scanner reads.
#[derive(Clone, Copy, Debug)]
pub struct ToolText<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// The tool's description.
    pub description: &'a str,
    /// The input schema as JSON text.
    pub input_schema: &'a str,
}

pub(crate) const HIDDEN_INSTRUCTIONS: &str = "hidden-instructions";
pub(crate) const CREDENTIAL_ACCESS: &str = "credential-access";
pub(crate) const URL: &str = "url";
pub(crate) const EMAIL: &str = "email";
pub(crate) const ENCODED_DATA: &str = "encoded-data";
pub(crate) const INVISIBLE_UNICODE: &str = "invisible-unicode";
pub(crate) const CROSS_SERVER_REFERENCE: &str = "cross-server-reference";
/// The settings are unusable; nothing was scanned.
pub const SCANNER_ERROR: &str = "scanner-error";
/// The last finding of a tool that had more than [`MAX_PER_TOOL`].
pub(crate) const MORE_FINDINGS: &str = "more-findings";

/// The kinds `ignore_kinds` may name.
pub(crate) const KINDS: [&str; 7] = [
    HIDDEN_INSTRUCTIONS,
    CREDENTIAL_ACCESS,
    URL,
    EMAIL,
    ENCODED_DATA,
    INVISIBLE_UNICODE,
    CROSS_SERVER_REFERENCE,
];

/// At most this many findings per tool, the last of them a [`MORE_FINDINGS`] when cut.
pub(crate) const MAX_PER_TOOL: usize = 20;
/// A detail quotes at most this many characters of the text behind it.
pub(crate) const QUOTE_CHARS: usize = 80;
