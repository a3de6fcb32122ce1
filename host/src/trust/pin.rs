//! A tool's fingerprint, and what changed between a pinned tool and the listed one.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::policy::{Annotations, Tool};

use super::PinnedTool;

/// SHA-256 (hex) over the tool's name, description, input schema and annotations, as JSON
/// with sorted keys: the same tool always gives the same fingerprint, however the server
/// orders its keys.
pub fn fingerprint(tool: &Tool) -> String {
    let value = serde_json::json!({
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "annotations": tool.annotations,
    });
    let mut text = String::new();
    canonical(&value, &mut text);
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// JSON text with object keys sorted at every depth.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// What differs between a pinned tool and the tool as listed now: each field that changed,
/// as (pinned, now).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolDiff {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<(String, String)>,
    #[serde(
        default,
        rename = "inputSchema",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_schema: Option<(Value, Value)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<(Option<Annotations>, Option<Annotations>)>,
}

impl ToolDiff {
    pub fn between(pinned: &PinnedTool, now: &Tool) -> Self {
        let mut pinned_schema = String::new();
        let mut now_schema = String::new();
        canonical(&pinned.input_schema, &mut pinned_schema);
        canonical(&now.input_schema, &mut now_schema);
        Self {
            description: (pinned.description != now.description)
                .then(|| (pinned.description.clone(), now.description.clone())),
            input_schema: (pinned_schema != now_schema)
                .then(|| (pinned.input_schema.clone(), now.input_schema.clone())),
            annotations: (pinned.annotations != now.annotations)
                .then_some((pinned.annotations, now.annotations)),
        }
    }

    /// The changed fields, named.
    pub fn fields(&self) -> Vec<&'static str> {
        let mut fields = Vec::new();
        if self.description.is_some() {
            fields.push("description");
        }
        if self.input_schema.is_some() {
            fields.push("inputSchema");
        }
        if self.annotations.is_some() {
            fields.push("annotations");
        }
        fields
    }

    /// One line per changed field, `field: was … now …`, upstream text escaped.
    pub fn lines(&self) -> Vec<String> {
        let q = |s: &str| super::quote(s);
        let ann = |a: &Option<Annotations>| {
            a.and_then(|a| serde_json::to_string(&a).ok())
                .unwrap_or_else(|| "none".to_owned())
        };
        let mut lines = Vec::new();
        if let Some((was, now)) = &self.description {
            lines.push(format!(
                "description was \"{}\", now \"{}\"",
                q(was),
                q(now)
            ));
        }
        if let Some((was, now)) = &self.input_schema {
            lines.push(format!("inputSchema was {was}, now {now}"));
        }
        if let Some((was, now)) = &self.annotations {
            lines.push(format!("annotations were {}, now {}", ann(was), ann(now)));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_change_the_fingerprint_but_content_does() {
        let mut a = Tool {
            name: "t".into(),
            description: "d".into(),
            input_schema: serde_json::from_str(
                r#"{"type":"object","properties":{"x":{"type":"string"},"a":{"type":"number"}}}"#,
            )
            .unwrap(),
            ..Default::default()
        };
        let b = Tool {
            input_schema: serde_json::from_str(
                r#"{"properties":{"a":{"type":"number"},"x":{"type":"string"}},"type":"object"}"#,
            )
            .unwrap(),
            ..a.clone()
        };
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_eq!(fingerprint(&a).len(), 64);
        let before = fingerprint(&a);
        a.annotations = Some(Annotations {
            read_only_hint: Some(true),
            ..Default::default()
        });
        assert_ne!(fingerprint(&a), before);
        a.input_schema = json!({"type": "object"});
        let c = Tool {
            server: "another-server".into(),
            ..a.clone()
        };
        assert_eq!(
            fingerprint(&a),
            fingerprint(&c),
            "the server's name is not part of it"
        );
    }

    #[test]
    fn a_diff_names_each_changed_field() {
        let tool = Tool {
            name: "t".into(),
            description: "old".into(),
            input_schema: json!({"type": "object"}),
            ..Default::default()
        };
        let pinned = PinnedTool::of(&tool, "t0");
        let now = Tool {
            description: "new\nline".into(),
            ..tool.clone()
        };
        let diff = ToolDiff::between(&pinned, &now);
        assert_eq!(diff.fields(), vec!["description"]);
        assert_eq!(
            diff.lines(),
            vec!["description was \"old\", now \"new\\u{a}line\"".to_owned()]
        );
        assert_eq!(ToolDiff::between(&pinned, &tool), ToolDiff::default());
    }
}
