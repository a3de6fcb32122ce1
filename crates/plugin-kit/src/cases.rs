//! An author's own test table for `mcpproxy plugins check FILE --cases CASES.json`: calls
//! (variant, tool with annotations, intent, arguments, optional settings) and the verdict
//! each must get (allow, warn or reject, optionally with a piece of the message).
//!
//! The file is a JSON array of objects:
//!
//! ```json
//! [
//!   {"name": "a key in the arguments is refused",
//!    "variant": "write",
//!    "tool": {"server": "github", "name": "create_issue",
//!             "annotations": {"readOnlyHint": false, "destructiveHint": false}},
//!    "intent": {"operation_type": "write", "data_sensitivity": "internal"},
//!    "args": {"body": "AKIAIOSFODNN7EXAMPLE"},
//!    "settings": {"warn_only": false},
//!    "caller": {"subject": "alice", "groups": ["sre"]},
//!    "expect": "reject", "message": "AWS access key"}
//! ]
//! ```
//!
//! `caller` is who asks (what `host.caller()` answers during the case; absent: no one
//! logged in). Parsing is strict: an unknown key or a wrong type is an error naming the case's index
//! (from 0) and the key. [`run`] runs them as the matrix suite runs its own cases
//! (`suite::MatrixCase::run`), after the default annotator has annotated each tool.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use mcpproxy_plugin_host::{Plugin, PluginEngine, PluginSet, PluginSettings};
use mcpproxy_policy::{
    Annotations, CallRequest, Caller, CompactJson, EffectiveAnnotations, Intent, OperationType,
    Pipeline, Tool,
};

use crate::suite::{CaseResult, Expect, MatrixCase, Text};

/// Why a cases file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CasesError {
    #[error("cannot read {file}: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file} is not valid JSON: {reason}")]
    Syntax { file: String, reason: String },
    #[error(
        "{file} must hold a JSON array of cases, like \
         [{{\"variant\": \"read\", \"tool\": {{\"name\": \"list_items\"}}, \"expect\": \"allow\"}}]"
    )]
    NotAnArray { file: String },
    #[error("{file} holds no cases")]
    Empty { file: String },
    #[error("{file}: case {index}{name}: key `{key}`: {reason}")]
    Case {
        file: String,
        index: usize,
        /// ` ("the case's name")`, or nothing.
        name: String,
        key: String,
        reason: String,
    },
}

/// One case, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    #[serde(default)]
    name: Option<String>,
    variant: OperationType,
    tool: RawTool,
    #[serde(default)]
    intent: Option<RawIntent>,
    #[serde(default)]
    args: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    settings: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    caller: Option<RawCaller>,
    expect: Decision,
    #[serde(default)]
    message: Option<String>,
}

/// Who asks, in a case.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCaller {
    subject: String,
    #[serde(default)]
    groups: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    #[serde(default = "default_server")]
    server: String,
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default, rename = "inputSchema")]
    input_schema: Option<Value>,
    #[serde(default)]
    annotations: Option<RawAnnotations>,
    #[serde(default, rename = "_meta")]
    meta: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawAnnotations {
    #[serde(default)]
    read_only_hint: Option<bool>,
    #[serde(default)]
    destructive_hint: Option<bool>,
    #[serde(default)]
    idempotent_hint: Option<bool>,
    #[serde(default)]
    open_world_hint: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIntent {
    #[serde(default)]
    operation_type: Option<OperationType>,
    #[serde(default)]
    data_sensitivity: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Decision {
    Allow,
    Warn,
    Reject,
}

fn default_server() -> String {
    "example".to_owned()
}

/// One case, ready to run once the tool's effective annotations are known.
#[derive(Debug, Clone)]
pub struct UserCase {
    pub name: String,
    pub variant: OperationType,
    pub tool: Tool,
    pub intent: Option<Intent>,
    pub args: Value,
    /// Settings for this case only; `None`: the `--settings` of the check.
    pub settings: Option<Value>,
    /// Who asks (`host.caller()`); `None`: no one logged in.
    pub caller: Option<Caller>,
    pub expect: Expect,
}

/// Runs an author's `cases` against the validator `plugin`: each tool is annotated by the
/// default annotators first (as the proxy would before asking a validator), and each case
/// without settings of its own gets `settings`.
pub fn run(
    engine: &PluginEngine,
    plugin: &Plugin,
    cases: Vec<UserCase>,
    settings: &Value,
) -> Result<Vec<CaseResult>, mcpproxy_plugin_host::Error> {
    let defaults = PluginSet::load(engine, None, &|_, _| PluginSettings::default())?;
    let pipeline = defaults.pipeline();
    Ok(cases
        .into_iter()
        .map(|case| case.into_matrix_case(&pipeline, settings).run(plugin))
        .collect())
}

impl UserCase {
    /// This case as the matrix suite's runner takes it, its tool annotated by `pipeline`.
    fn into_matrix_case(self, pipeline: &Pipeline, settings: &Value) -> MatrixCase {
        let effective = pipeline.annotate(&self.tool).unwrap_or_else(|fault| {
            tracing::warn!("the default annotator faulted on a case: {fault}");
            EffectiveAnnotations::unknown()
        });
        MatrixCase {
            name: self.name,
            settings: self.settings.unwrap_or_else(|| settings.clone()),
            request: CallRequest {
                variant: self.variant,
                tool: self.tool,
                intent: self.intent,
                effective,
                args: self.args,
            },
            caller: self.caller,
            expect: self.expect,
        }
    }
}

/// Reads and checks a cases file.
pub fn load(path: &Path) -> Result<Vec<UserCase>, CasesError> {
    load_items(path, case)
}

/// Parses the text of a cases file (`file` names it in errors).
pub fn parse(text: &str, file: &str) -> Result<Vec<UserCase>, CasesError> {
    parse_items(text, file, case)
}

/// Reads a cases file (a non-empty JSON array) and checks each item with `case`; shared by
/// the validator and annotator cases here and the result-guard cases.
pub(crate) fn load_items<T>(
    path: &Path,
    case: impl Fn(&Value, usize, &str) -> Result<T, CasesError>,
) -> Result<Vec<T>, CasesError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| CasesError::Read {
        file: file.clone(),
        source,
    })?;
    parse_items(&text, &file, case)
}

/// [`load_items`] on text already read (`file` names it in errors).
pub(crate) fn parse_items<T>(
    text: &str,
    file: &str,
    case: impl Fn(&Value, usize, &str) -> Result<T, CasesError>,
) -> Result<Vec<T>, CasesError> {
    let value: Value = serde_json::from_str(text).map_err(|e| CasesError::Syntax {
        file: file.to_owned(),
        reason: e.to_string(),
    })?;
    let Value::Array(items) = value else {
        return Err(CasesError::NotAnArray {
            file: file.to_owned(),
        });
    };
    if items.is_empty() {
        return Err(CasesError::Empty {
            file: file.to_owned(),
        });
    }
    items
        .iter()
        .enumerate()
        .map(|(index, item)| case(item, index, file))
        .collect()
}

fn case(item: &Value, index: usize, file: &str) -> Result<UserCase, CasesError> {
    let name = item.get("name").and_then(Value::as_str).map(str::to_owned);
    let error = |key: String, reason: String| CasesError::Case {
        file: file.to_owned(),
        index,
        name: name
            .as_deref()
            .map(|n| format!(" ({n:?})"))
            .unwrap_or_default(),
        key,
        reason,
    };
    if !item.is_object() {
        return Err(error(
            ".".to_owned(),
            "a case is a JSON object with at least `variant`, `tool` and `expect`".to_owned(),
        ));
    }
    let raw: RawCase = serde_path_to_error::deserialize(item).map_err(|e| {
        let key = e.path().to_string();
        let reason = e.into_inner().to_string();
        // serde names a missing key in the message only; the path ends at its parent.
        let key = match (key.as_str(), missing_field(&reason)) {
            (".", Some(field)) => field,
            (path, Some(field)) => format!("{path}.{field}"),
            (path, None) => path.to_owned(),
        };
        error(key, reason)
    })?;
    let text = Text::Contains(raw.message.clone().into_iter().collect());
    let expect = match raw.expect {
        Decision::Allow if raw.message.is_some() => {
            return Err(error(
                "message".to_owned(),
                "an `allow` has no message: remove `message`, or expect warn or reject".to_owned(),
            ));
        }
        Decision::Allow => Expect::Allow,
        Decision::Warn => Expect::Warn(text),
        Decision::Reject => Expect::Reject(text),
    };
    let tool = Tool {
        server: raw.tool.server,
        name: raw.tool.name,
        description: raw.tool.description,
        input_schema: raw.tool.input_schema.map_or_else(
            || serde_json::json!({"type": "object"}).into(),
            CompactJson::from,
        ),
        annotations: raw.tool.annotations.map(|a| Annotations {
            read_only_hint: a.read_only_hint,
            destructive_hint: a.destructive_hint,
            idempotent_hint: a.idempotent_hint,
            open_world_hint: a.open_world_hint,
        }),
        meta: raw.tool.meta,
        ..Default::default()
    };
    Ok(UserCase {
        name: raw.name.unwrap_or_else(|| {
            format!(
                "case {index}: call_tool_{} of {}",
                raw.variant.as_str(),
                tool.qualified_name()
            )
        }),
        variant: raw.variant,
        tool,
        intent: raw.intent.map(|i| Intent {
            operation_type: i.operation_type,
            data_sensitivity: i.data_sensitivity,
            reason: i.reason,
        }),
        args: Value::Object(raw.args.unwrap_or_default()),
        settings: raw.settings.map(Value::Object),
        caller: raw.caller.map(|c| Caller {
            subject: c.subject,
            groups: c.groups,
        }),
        expect,
    })
}

/// The key a serde "missing field `x`" message names.
fn missing_field(reason: &str) -> Option<String> {
    let rest = reason.strip_prefix("missing field `")?;
    rest.split('`').next().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text, "c.json").unwrap_err().to_string()
    }

    #[test]
    fn a_full_case_parses() {
        let cases = parse(
            r#"[{"name": "n", "variant": "write",
                 "tool": {"server": "gh", "name": "create_issue",
                          "annotations": {"readOnlyHint": false}},
                 "intent": {"operation_type": "write"}, "args": {"a": 1},
                 "settings": {"x": true}, "expect": "reject", "message": "key"},
                {"variant": "read", "tool": {"name": "list"}, "expect": "allow"}]"#,
            "c.json",
        )
        .unwrap();
        assert_eq!(cases.len(), 2);
        assert_eq!(cases[0].tool.qualified_name(), "gh:create_issue");
        assert!(matches!(&cases[0].expect, Expect::Reject(Text::Contains(p)) if p == &["key"]));
        assert_eq!(cases[1].name, "case 1: call_tool_read of example:list");
        assert_eq!(cases[1].args, serde_json::json!({}));
    }

    #[test]
    fn errors_name_the_case_and_the_key() {
        let e = err(
            r#"[{"variant": "read", "tool": {"name": "a"}, "expect": "allow"},
                        {"name": "two", "variant": "read", "tool": {"name": "a"}, "expect": "rejct"}]"#,
        );
        assert!(
            e.starts_with("c.json: case 1 (\"two\"): key `expect`: unknown variant `rejct`"),
            "{e}"
        );
        let e = err(r#"[{"variant": "read", "tool": {"name": "a"}}]"#);
        assert!(
            e.contains("case 0: key `expect`: missing field `expect`"),
            "{e}"
        );
        let e = err(
            r#"[{"variant": "read", "tool": {"name": "a", "anotations": {}}, "expect": "allow"}]"#,
        );
        assert!(
            e.contains("case 0: key `tool.anotations`: unknown field"),
            "{e}"
        );
        let e =
            err(r#"[{"variant": "read", "tool": {"name": "a"}, "args": [1], "expect": "allow"}]"#);
        assert!(e.contains("case 0: key `args`"), "{e}");
        let e = err(
            r#"[{"variant": "read", "tool": {"name": "a"}, "expect": "allow", "message": "x"}]"#,
        );
        assert!(e.contains("case 0: key `message`"), "{e}");
        assert!(err("[]").contains("holds no cases"));
        assert!(err("{}").contains("must hold a JSON array"));
        assert!(err("[1,").contains("not valid JSON"));
        assert!(err("[1]").contains("case 0: key `.`"));
    }
}
