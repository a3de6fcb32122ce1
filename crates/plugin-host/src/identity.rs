//! What a plugin is: the world it implements ([`PluginKind`]), where it was
//! loaded from ([`PluginSource`]) and what `plugins list` shows about it ([`PluginInfo`]).

use std::fmt;
use std::path::PathBuf;

use mcpproxy_policy::Limits;
use serde::Serialize;

use crate::CacheOutcome;

/// The plugin worlds of `wit/worlds.wit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginKind {
    Annotator,
    Validator,
    Sink,
    Scanner,
    /// `result-guard-plugin`: judges what upstreams return.
    #[serde(rename = "result-guard")]
    ResultGuard,
}

impl PluginKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Annotator => "annotator",
            Self::Validator => "validator",
            Self::Sink => "sink",
            Self::Scanner => "scanner",
            Self::ResultGuard => "result-guard",
        }
    }

    /// The deadline a plugin of this kind gets unless its `plugin_limits` entry sets one:
    /// validators, annotators and result guards are on every call's path; sinks and scanners are not.
    pub fn default_timeout(self) -> std::time::Duration {
        match self {
            Self::Annotator | Self::Validator | Self::ResultGuard => Limits::DEFAULT_TIMEOUT,
            Self::Sink => Limits::DEFAULT_SINK_TIMEOUT,
            Self::Scanner => Limits::DEFAULT_SCANNER_TIMEOUT,
        }
    }

    /// `a validator`, `an annotator`, `a sink`.
    pub fn with_article(self) -> &'static str {
        match self {
            Self::Annotator => "an annotator",
            Self::Validator => "a validator",
            Self::Sink => "a sink",
            Self::Scanner => "a scanner",
            Self::ResultGuard => "a result guard",
        }
    }
}

impl fmt::Display for PluginKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a plugin was loaded from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSource {
    /// Built into the binary.
    Embedded,
    /// Loaded from a file.
    File(PathBuf),
}

impl fmt::Display for PluginSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Embedded => f.write_str("embedded"),
            Self::File(path) => write!(f, "{}", path.display()),
        }
    }
}

impl Serialize for PluginSource {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// What `plugins list` shows about a plugin.
#[derive(Debug, Clone, Serialize)]
pub struct PluginInfo {
    pub name: String,
    pub kind: PluginKind,
    pub version: String,
    pub description: String,
    pub source: PluginSource,
    pub size_bytes: usize,
    /// Whether this start compiled the component or found it in the cache.
    pub compile: CacheOutcome,
    /// An embedded plugin that is active only when the config names it (the sinks, the
    /// strict `safety-routing` validator).
    pub opt_in: bool,
}
