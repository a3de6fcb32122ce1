//! The policy vocabulary: operation types, safety classes, annotations, tools, intents and
//! verdicts. These are the proxy's own types; `plugin::conv` maps them to and from the WIT
//! types, so nothing outside `plugin` sees generated bindings.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What a call says it does: the variant used (`call_tool_read`, ...) and
/// `intent.operation_type` are both one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OperationType {
    Read,
    Write,
    Destructive,
}

impl OperationType {
    pub const ALL: [OperationType; 3] = [Self::Read, Self::Write, Self::Destructive];

    /// `read`, `write` or `destructive`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Destructive => "destructive",
        }
    }

    /// The built-in MCP tool for this variant, e.g. `call_tool_read`.
    pub fn tool_name(self) -> &'static str {
        match self {
            Self::Read => "call_tool_read",
            Self::Write => "call_tool_write",
            Self::Destructive => "call_tool_destructive",
        }
    }
}

impl fmt::Display for OperationType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An `intent.operation_type` that is not one of the three.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid intent.operation_type '{0}': must be read, write, or destructive")]
pub struct InvalidOperationType(pub String);

impl FromStr for OperationType {
    type Err = InvalidOperationType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "read" => Ok(Self::Read),
            "write" => Ok(Self::Write),
            "destructive" => Ok(Self::Destructive),
            other => Err(InvalidOperationType(other.to_owned())),
        }
    }
}

/// Seed 002's safety classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SafetyClass {
    ReadOnly,
    WriteCapable,
    Subprocess,
    Dangerous,
    Unknown,
}

impl SafetyClass {
    pub const ALL: [SafetyClass; 5] = [
        Self::ReadOnly,
        Self::WriteCapable,
        Self::Subprocess,
        Self::Dangerous,
        Self::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::WriteCapable => "write-capable",
            Self::Subprocess => "subprocess",
            Self::Dangerous => "dangerous",
            Self::Unknown => "unknown",
        }
    }
}

impl fmt::Display for SafetyClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// MCP tool annotations; `None` means the hint was not given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

impl Annotations {
    /// True when at least one hint is given.
    pub fn is_any_set(&self) -> bool {
        self.read_only_hint.is_some()
            || self.destructive_hint.is_some()
            || self.idempotent_hint.is_some()
            || self.open_world_hint.is_some()
    }

    /// `destructiveHint: true`, whatever `readOnlyHint` says (both true counts as destructive).
    pub fn is_destructive(&self) -> bool {
        self.destructive_hint == Some(true)
    }

    /// `readOnlyHint: true` and not destructive.
    pub fn is_read_only(&self) -> bool {
        self.read_only_hint == Some(true) && !self.is_destructive()
    }
}

/// The variant a caller should use for a tool with these effective annotations (seed 003):
/// destructive → `call_tool_destructive`, read-only → `call_tool_read`, otherwise
/// `call_tool_write`, the safe default.
pub fn call_with(annotations: Option<&Annotations>) -> OperationType {
    match annotations {
        Some(a) if a.is_destructive() => OperationType::Destructive,
        Some(a) if a.is_read_only() => OperationType::Read,
        _ => OperationType::Write,
    }
}

/// An upstream tool as the proxy knows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub server: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of the tool's arguments.
    #[serde(default, rename = "inputSchema")]
    pub input_schema: serde_json::Value,
    /// The annotations the server itself gave.
    #[serde(default)]
    pub annotations: Option<Annotations>,
    /// The tool's `_meta` object.
    #[serde(default, rename = "_meta")]
    pub meta: Option<serde_json::Value>,
}

impl Tool {
    /// `server:tool`, the name callers use.
    pub fn qualified_name(&self) -> String {
        format!("{}:{}", self.server, self.name)
    }
}

/// What a caller declared about a call. Sensitivity and reason are kept as sent; the
/// validators judge them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_type: Option<OperationType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_sensitivity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where the effective annotations of a call came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnnotationSource {
    /// The upstream server's own annotations.
    Server,
    /// An explicit `safety_class` in the tool's `_meta`.
    Meta,
    /// Inferred by the named annotator plugin.
    Plugin(String),
    /// Nobody said anything.
    None,
}

impl AnnotationSource {
    /// `server`, `meta`, the plugin's name, or `none`: the form plugins and records use.
    pub fn label(&self) -> &str {
        match self {
            Self::Server => "server",
            Self::Meta => "meta",
            Self::Plugin(name) => name,
            Self::None => "none",
        }
    }
}

/// The annotations in force for a tool, with their provenance.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectiveAnnotations {
    pub annotations: Option<Annotations>,
    pub source: AnnotationSource,
    /// Why the annotator decided what it did, e.g. `name prefix 'delete_'`.
    pub reason: Option<String>,
    pub safety_class: SafetyClass,
}

impl EffectiveAnnotations {
    /// No annotations, unknown class: what a tool gets when nothing can be said.
    pub fn unknown() -> Self {
        Self {
            annotations: None,
            source: AnnotationSource::None,
            reason: None,
            safety_class: SafetyClass::Unknown,
        }
    }
}

/// What an annotator's inference rests on, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InferenceBasis {
    /// The server's own annotations; the annotator only derived the safety class.
    Server,
    /// An explicit `safety_class` in the tool's `_meta`.
    Meta,
    /// Inferred by the annotator, e.g. from the tool's name.
    Inferred,
}

/// One annotator's answer about a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inference {
    pub annotations: Annotations,
    pub safety_class: SafetyClass,
    pub basis: InferenceBasis,
    /// Why, in words a user understands, e.g. `name prefix 'delete_'`.
    pub why: String,
}

/// Everything a validator sees about one call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRequest {
    pub variant: OperationType,
    pub tool: Tool,
    /// `None` when the caller sent no intent at all.
    pub intent: Option<Intent>,
    pub effective: EffectiveAnnotations,
    /// The call's arguments (a JSON object).
    pub args: serde_json::Value,
}

/// One validator's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Warn(String),
    Reject(String),
}

impl Verdict {
    pub fn decision(&self) -> Decision {
        match self {
            Self::Allow => Decision::Allow,
            Self::Warn(_) => Decision::Warn,
            Self::Reject(_) => Decision::Reject,
        }
    }
}

/// The kind of answer, without its message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    #[default]
    Allow,
    Warn,
    Reject,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Warn => "warn",
            Self::Reject => "reject",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_type_parse_error_has_the_documented_text() {
        let err = "x".parse::<OperationType>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "Invalid intent.operation_type 'x': must be read, write, or destructive"
        );
        assert_eq!("write".parse(), Ok(OperationType::Write));
    }

    #[test]
    fn call_with_follows_seed_003() {
        let destructive = Annotations {
            destructive_hint: Some(true),
            read_only_hint: Some(true),
            ..Default::default()
        };
        let read = Annotations {
            read_only_hint: Some(true),
            ..Default::default()
        };
        let idempotent = Annotations {
            idempotent_hint: Some(true),
            ..Default::default()
        };
        assert_eq!(call_with(Some(&destructive)), OperationType::Destructive);
        assert_eq!(call_with(Some(&read)), OperationType::Read);
        assert_eq!(call_with(Some(&idempotent)), OperationType::Write);
        assert_eq!(call_with(None), OperationType::Write);
    }

    #[test]
    fn annotations_serialize_with_mcp_names_and_skip_unset_hints() {
        let a = Annotations {
            read_only_hint: Some(true),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            r#"{"readOnlyHint":true}"#
        );
    }
}
