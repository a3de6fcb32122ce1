//! Conversions from what upstreams send to the proxy's policy types: one `tools/list` entry
//! (raw JSON) into rmcp's [`mcp::Tool`], leniently, and rmcp's tool into the policy's.

use rmcp::model as mcp;
use serde_json::{Map, Value};

use mcpproxy_policy::{Annotations, CompactJson, Tool};

/// The annotation hints, by their MCP names: each must be `true` or `false`.
const HINTS: [&str; 4] = [
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];

/// An upstream tool as the policy sees it. Hints are read one by one: rmcp's helpers apply
/// the MCP defaults (an unset destructiveHint counts as destructive), the matrix must not.
/// An annotations object without any hint stays `Some` (the pipeline then applies the
/// spec's defaults to every hint); no annotations object is `None`.
pub fn tool_from_mcp(server: &str, tool: &mcp::Tool) -> Tool {
    Tool {
        server: server.to_owned(),
        name: tool.name.to_string(),
        description: tool.description.as_deref().unwrap_or_default().to_owned(),
        input_schema: CompactJson::from_object(&tool.input_schema),
        annotations: tool.annotations.as_ref().map(|a| Annotations {
            read_only_hint: a.read_only_hint,
            destructive_hint: a.destructive_hint,
            idempotent_hint: a.idempotent_hint,
            open_world_hint: a.open_world_hint,
        }),
        annotations_title: tool.annotations.as_ref().and_then(|a| a.title.clone()),
        output_schema: tool.output_schema.as_deref().map(CompactJson::from_object),
        meta: tool
            .meta
            .as_ref()
            .and_then(|m| serde_json::to_value(m).ok())
            .filter(|v| v.as_object().is_some_and(|o| !o.is_empty())),
    }
}

/// What was wrong with one entry of a `tools/list` answer. Every text in it is safe to
/// print: upstream strings are escaped ([`mcpproxy_support::quote`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum WireToolProblem {
    /// The entry cannot be used at all: it is left out of the listing.
    #[error("leaving out {tool}: {why}")]
    LeftOut {
        /// `tool 'NAME'`, or `the tool at position N` when it has no usable name.
        tool: String,
        why: String,
    },
    /// A hint that is not `true` or `false`: taken as absent, the tool is kept.
    #[error(
        "tool '{tool}': ignoring annotations.{hint}, which is {found} instead of true or false; the MCP spec's default applies"
    )]
    BadHint {
        tool: String,
        hint: &'static str,
        found: &'static str,
    },
}

/// One entry of a `tools/list` answer made usable: a hint of the wrong JSON type is dropped
/// (treated as absent, so with an annotations object present the spec's default applies),
/// and an entry that still is not an MCP tool (not an object, no name, a name that is not
/// a string, an `inputSchema` that is not an object, any other field rmcp refuses) is
/// refused. `position` counts entries from 0 across pages, to name a tool without a name.
///
/// A hint given as `null` is taken as absent without a problem: rmcp reads it so too.
pub(super) fn tool_from_wire(
    raw: Value,
    position: usize,
) -> (Result<mcp::Tool, WireToolProblem>, Vec<WireToolProblem>) {
    let unnamed = || format!("the tool at position {position}");
    let Value::Object(mut entry) = raw else {
        return (
            Err(WireToolProblem::LeftOut {
                tool: unnamed(),
                why: format!("it is {}, not a JSON object", json_type(&raw)),
            }),
            Vec::new(),
        );
    };
    let name = match entry.get("name") {
        Some(Value::String(name)) => mcpproxy_support::quote(name),
        Some(other) => {
            return (
                Err(WireToolProblem::LeftOut {
                    tool: unnamed(),
                    why: format!("its name is {}, not a string", json_type(other)),
                }),
                Vec::new(),
            );
        }
        None => {
            return (
                Err(WireToolProblem::LeftOut {
                    tool: unnamed(),
                    why: "it has no name".to_owned(),
                }),
                Vec::new(),
            );
        }
    };
    let mut problems = Vec::new();
    if let Some(Value::Object(annotations)) = entry.get_mut("annotations") {
        drop_bad_hints(annotations, &name, &mut problems);
    }
    let tool = serde_json::from_value::<mcp::Tool>(Value::Object(entry)).map_err(|e| {
        WireToolProblem::LeftOut {
            tool: format!("tool '{name}'"),
            why: format!(
                "it is not a valid MCP tool ({})",
                mcpproxy_support::quote(&e.to_string())
            ),
        }
    });
    (tool, problems)
}

/// Removes each hint whose value is neither a boolean nor `null`.
fn drop_bad_hints(
    annotations: &mut Map<String, Value>,
    tool: &str,
    problems: &mut Vec<WireToolProblem>,
) {
    for hint in HINTS {
        let found = match annotations.get(hint) {
            None | Some(Value::Bool(_) | Value::Null) => continue,
            Some(other) => json_type(other),
        };
        annotations.remove(hint);
        problems.push(WireToolProblem::BadHint {
            tool: tool.to_owned(),
            hint,
            found,
        });
    }
}

/// `a string`, `a number`, ...: what a JSON value is, in words.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_hint_of_the_wrong_type_is_dropped_and_the_tool_kept() {
        for bad in [json!("true"), json!(1), json!({"x": true}), json!([true])] {
            let raw = json!({
                "name": "t",
                "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": bad, "destructiveHint": false, "title": "T"},
            });
            let (tool, problems) = tool_from_wire(raw, 0);
            let tool = tool.unwrap();
            let annotations = tool.annotations.as_ref().unwrap();
            assert_eq!(annotations.read_only_hint, None);
            assert_eq!(annotations.destructive_hint, Some(false));
            assert_eq!(annotations.title.as_deref(), Some("T"));
            assert_eq!(problems.len(), 1, "{problems:?}");
            let text = problems[0].to_string();
            assert!(text.starts_with("tool 't': ignoring annotations.readOnlyHint, which is "));
        }
        let (tool, problems) = tool_from_wire(
            json!({"name": "t", "inputSchema": {}, "annotations": {"openWorldHint": null}}),
            0,
        );
        assert_eq!(tool.unwrap().annotations.unwrap().open_world_hint, None);
        assert!(problems.is_empty(), "null is absent: {problems:?}");
    }

    #[test]
    fn an_entry_that_is_no_tool_is_left_out_naming_it_safely() {
        let cases = [
            (
                json!("just a string"),
                "the tool at position 3: it is a string",
            ),
            (
                json!({"inputSchema": {}}),
                "the tool at position 3: it has no name",
            ),
            (
                json!({"name": 7, "inputSchema": {}}),
                "the tool at position 3: its name is a number",
            ),
            (
                json!({"name": "evil\nline", "inputSchema": "x"}),
                "tool 'evil\\u{a}line': it is not a valid MCP tool",
            ),
            (
                json!({"name": "t", "inputSchema": {}, "description": 5}),
                "tool 't': it is not a valid MCP tool",
            ),
        ];
        for (raw, expected) in cases {
            let (tool, _) = tool_from_wire(raw, 3);
            let problem = tool.unwrap_err().to_string();
            assert!(
                problem.starts_with(&format!("leaving out {expected}")),
                "{problem}"
            );
            assert!(!problem.contains('\n'), "{problem}");
        }
    }

    #[test]
    fn annotations_present_without_hints_stay_present_with_their_title() {
        let (tool, _) = tool_from_wire(
            json!({
                "name": "t",
                "inputSchema": {"type": "object"},
                "outputSchema": {"type": "object"},
                "annotations": {"title": "Harmless"},
            }),
            0,
        );
        let tool = tool_from_mcp("fx", &tool.unwrap());
        assert_eq!(tool.annotations, Some(Annotations::default()));
        assert_eq!(tool.annotations_title.as_deref(), Some("Harmless"));
        assert_eq!(tool.output_schema, Some(json!({"type": "object"}).into()));
        let (bare, _) = tool_from_wire(json!({"name": "t", "inputSchema": {}}), 0);
        let bare = tool_from_mcp("fx", &bare.unwrap());
        assert_eq!(bare.annotations, None);
        assert_eq!(bare.annotations_title, None);
        assert_eq!(bare.output_schema, None);
    }
}
