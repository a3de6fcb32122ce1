//! What a tool scanner reports: a [`Finding`] of some [`Severity`] about one tool, and the
//! [`ToolScanner`] trait a scanner plugin is run through for the security analysis a
//! reviewer reads before approving a server.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{Fault, Tool};

/// How much a finding should worry a reviewer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Danger,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Info => "info",
            Self::Warning => "warning",
            Self::Danger => "danger",
        })
    }
}

/// One thing a scanner found in one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The tool's name on its server.
    pub tool: String,
    /// `hidden-instructions`, `credential-access`, `url`, ...
    pub kind: String,
    pub severity: Severity,
    /// What was found, in words, quoting the text behind it.
    pub detail: String,
}

/// Reviews a server's tools (the host runs a scanner plugin through this).
pub trait ToolScanner: Send + Sync {
    fn name(&self) -> &str;
    /// `tools` are one server's; `other_tools` name the other servers' as `server:tool`.
    fn scan(&self, tools: &[Tool], other_tools: &[String]) -> Result<Vec<Finding>, Fault>;
}
