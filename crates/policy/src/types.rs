//! The policy vocabulary: operation types, safety classes, annotations, tools, intents and
//! verdicts. These are the proxy's own types; the plugin host maps them to and from the WIT
//! types, so nothing outside it sees generated bindings.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::CompactJson;

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

    /// The variant of a built-in tool name (`call_tool_read` -> `Read`).
    pub fn from_tool_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|op| op.tool_name() == name)
    }
}

/// Serde for an optional variant written as its tool name (`"call_tool_read"`), the form
/// the audit record's `tool_variant` uses.
pub mod variant_tool_name {
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    use super::OperationType;

    pub fn serialize<S: Serializer>(v: &Option<OperationType>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(op) => s.serialize_some(op.tool_name()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<OperationType>, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(None),
            Some(name) => OperationType::from_tool_name(&name).map(Some).ok_or_else(|| {
                D::Error::custom(format!(
                    "unknown tool variant '{name}': expected call_tool_read, call_tool_write or call_tool_destructive"
                ))
            }),
        }
    }
}

/// The values `intent.data_sensitivity` may take.
/// The longest qualified tool name (`server:tool`) the proxy lists or calls: a server name
/// (at most 64 bytes) and a tool name fit, with room beyond MCP's advised 128 for the tool.
pub const MAX_QUALIFIED_NAME_BYTES: usize = 256;

pub const DATA_SENSITIVITIES: [&str; 4] = ["public", "internal", "private", "unknown"];

/// Whether `value` is one of [`DATA_SENSITIVITIES`].
pub fn is_data_sensitivity(value: &str) -> bool {
    DATA_SENSITIVITIES.contains(&value)
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

/// What a tool may do, coarser than annotations: validators can route calls on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SafetyClass {
    ReadOnly,
    WriteCapable,
    Subprocess,
    Dangerous,
    #[default]
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

    /// The hints with the MCP spec's defaults for the ones left out: `readOnlyHint` false,
    /// `openWorldHint` true, and, for a tool that is not read-only, `destructiveHint` true
    /// and `idempotentHint` false (the spec gives those two meaning only then). So
    /// `{readOnlyHint: false}` alone is a destructive tool.
    pub fn with_spec_defaults(self) -> Self {
        let read_only = self.read_only_hint.unwrap_or(false);
        Self {
            read_only_hint: Some(read_only),
            destructive_hint: if read_only {
                self.destructive_hint
            } else {
                Some(self.destructive_hint.unwrap_or(true))
            },
            idempotent_hint: if read_only {
                self.idempotent_hint
            } else {
                Some(self.idempotent_hint.unwrap_or(false))
            },
            open_world_hint: Some(self.open_world_hint.unwrap_or(true)),
        }
    }
}

/// The variant a caller should use for a tool with these effective annotations:
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
    /// The JSON Schema of the tool's arguments, shared with the listing and the pin.
    #[serde(default, rename = "inputSchema")]
    pub input_schema: CompactJson,
    /// The annotations the server itself gave: `Some` whenever it sent an annotations
    /// object, even one without hints (the spec's defaults then apply to every hint).
    #[serde(default)]
    pub annotations: Option<Annotations>,
    /// `annotations.title`, as the server sent it. Not a hint, so not in [`Annotations`]
    /// (nor in what plugins see), but pinned with the rest.
    #[serde(
        default,
        rename = "annotationsTitle",
        skip_serializing_if = "Option::is_none"
    )]
    pub annotations_title: Option<String>,
    /// The JSON Schema of the tool's structured result (`outputSchema`), if it gave one.
    #[serde(
        default,
        rename = "outputSchema",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_schema: Option<CompactJson>,
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

/// Where the effective annotations of a call came from. Its JSON is the label
/// (`"server"`, `"meta"`, the plugin's name, `"none"`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AnnotationSource {
    /// The upstream server's own annotations.
    Server,
    /// An explicit `safety_class` in the tool's `_meta`.
    Meta,
    /// Inferred by the named annotator plugin.
    Plugin(String),
    /// Nobody said anything.
    #[default]
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

    /// The source a label names: the inverse of [`AnnotationSource::label`].
    pub fn from_label(label: &str) -> Self {
        match label {
            "server" => Self::Server,
            "meta" => Self::Meta,
            "none" | "" => Self::None,
            plugin => Self::Plugin(plugin.to_owned()),
        }
    }
}

impl Serialize for AnnotationSource {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.label())
    }
}

impl<'de> Deserialize<'de> for AnnotationSource {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(|label| Self::from_label(&label))
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
    fn call_with_picks_the_strictest_matching_variant() {
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
    fn variants_and_sources_round_trip_through_their_labels() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Row {
            #[serde(with = "variant_tool_name", default)]
            variant: Option<OperationType>,
            source: AnnotationSource,
        }
        for op in OperationType::ALL {
            let row = Row {
                variant: Some(op),
                source: AnnotationSource::Plugin("prefix-annotator".into()),
            };
            let json = serde_json::to_value(&row).unwrap();
            assert_eq!(json["variant"], op.tool_name());
            assert_eq!(json["source"], "prefix-annotator");
            assert_eq!(serde_json::from_value::<Row>(json).unwrap(), row);
        }
        let none: Row = serde_json::from_str(r#"{"variant": null, "source": "none"}"#).unwrap();
        assert_eq!(none.variant, None);
        assert_eq!(none.source, AnnotationSource::None);
        let err = serde_json::from_str::<Row>(r#"{"variant": "call_tool", "source": "meta"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown tool variant 'call_tool'"), "{err}");
    }

    #[test]
    fn missing_hints_take_the_spec_defaults() {
        let not_read_only = Annotations {
            read_only_hint: Some(false),
            ..Default::default()
        }
        .with_spec_defaults();
        assert!(not_read_only.is_destructive(), "{not_read_only:?}");
        assert_eq!(call_with(Some(&not_read_only)), OperationType::Destructive);
        assert_eq!(not_read_only.idempotent_hint, Some(false));
        assert_eq!(not_read_only.open_world_hint, Some(true));

        let write = Annotations {
            read_only_hint: Some(false),
            destructive_hint: Some(false),
            ..Default::default()
        }
        .with_spec_defaults();
        assert_eq!(call_with(Some(&write)), OperationType::Write);

        let read = Annotations {
            read_only_hint: Some(true),
            ..Default::default()
        }
        .with_spec_defaults();
        assert!(read.is_read_only());
        assert_eq!(read.destructive_hint, None);
        assert_eq!(call_with(Some(&read)), OperationType::Read);

        let only_open_world = Annotations {
            open_world_hint: Some(false),
            ..Default::default()
        }
        .with_spec_defaults();
        assert!(only_open_world.is_destructive());
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
