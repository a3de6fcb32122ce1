//! A tool's fingerprint, and what changed between a pinned tool and the listed one.
//!
//! A pin covers everything the policy reads about a tool, so that no change to it goes
//! unheld: the name, the description, the input schema, the output schema, the annotations
//! as the server sent them (the four hints and `title`) and the `_meta` object (see
//! [`UNPINNED_META_KEYS`] for why all of it).
//!
//! Pins carry a format version ([`PIN_VERSION`]). The pins of earlier versions (v1, no
//! `version` in `trust.json`) cover the name, description, input schema and hints only,
//! and are compared in that form ([`PinnedTool::matches`]), so an upgrade does not hold
//! every approved tool as changed. A v1 pin that still matches is re-pinned in the current
//! form at the next listing ([`upgrade_pins`]) without a `tool_change` record: a change
//! of only the output schema, the annotations' title or `_meta` that the server made while
//! the proxy was being upgraded is taken as approved then, since the v1 pin cannot tell it
//! apart. Every change after that is held.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use mcpproxy_policy::{Annotations, CompactJson, Tool};

use super::{PinnedTool, ServerTrust};

/// The pin format written now: see the module's doc.
pub(crate) const PIN_VERSION: u32 = 2;

/// The format of a pin stored without a version (by an earlier mcpproxy).
pub(super) fn v1() -> u32 {
    1
}

/// Keys of a tool's `_meta` left out of its pin: none. Annotators and validators receive
/// the whole `_meta` object (the WIT `tool.meta`, as JSON text), so any key may decide a
/// verdict: the embedded prefix-annotator reads `safety_class`, a third-party plugin may
/// read any other. A key may be listed here only if the host also withholds it from
/// plugins. No key of a tool's `_meta` is known to change between listings (MCP's
/// per-request keys, progress tokens and the like, travel on requests and results, not on
/// tool definitions); a server that changes one anyway has the tool held until approved,
/// which fails closed.
pub(crate) const UNPINNED_META_KEYS: &[&str] = &[];

/// The `_meta` a pin covers: `meta` without [`UNPINNED_META_KEYS`], `None` when nothing
/// is left.
pub(crate) fn pinned_meta(meta: Option<&Value>) -> Option<Value> {
    match meta? {
        Value::Object(map) => {
            let kept: Map<String, Value> = map
                .iter()
                .filter(|(key, _)| !UNPINNED_META_KEYS.contains(&key.as_str()))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        Value::Null => None,
        other => Some(other.clone()),
    }
}

/// The annotations object as the server sent it (hints and title), `None` when it sent
/// none.
fn annotations_json(hints: Option<Annotations>, title: Option<&str>) -> Option<Value> {
    if hints.is_none() && title.is_none() {
        return None;
    }
    let hints = hints.unwrap_or_default();
    let mut map = Map::new();
    for (key, hint) in [
        ("readOnlyHint", hints.read_only_hint),
        ("destructiveHint", hints.destructive_hint),
        ("idempotentHint", hints.idempotent_hint),
        ("openWorldHint", hints.open_world_hint),
    ] {
        if let Some(hint) = hint {
            map.insert(key.to_owned(), Value::Bool(hint));
        }
    }
    if let Some(title) = title {
        map.insert("title".to_owned(), Value::String(title.to_owned()));
    }
    Some(Value::Object(map))
}

/// SHA-256 (hex) over everything the policy reads about a tool (the current pin format):
/// its name, description, input schema, output schema, annotations with their title, and
/// pinned `_meta` ([`pinned_meta`]), as JSON with sorted keys: the same tool always gives
/// the same fingerprint, however the server orders its keys. The server's name is not part
/// of it.
pub fn fingerprint(tool: &Tool) -> String {
    digest(&serde_json::json!({
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "annotations": annotations_json(tool.annotations, tool.annotations_title.as_deref()),
        "_meta": pinned_meta(tool.meta.as_ref()),
    }))
}

/// The fingerprint of v1 pins (earlier versions): over the name, description, input
/// schema and hints only. Kept word for word, so the pins those versions wrote still match.
fn fingerprint_v1(tool: &Tool) -> String {
    digest(&serde_json::json!({
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "annotations": tool.annotations,
    }))
}

fn digest(value: &Value) -> String {
    let mut text = String::new();
    canonical(value, &mut text);
    let digest = Sha256::digest(text.as_bytes());
    hex(&digest)
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

/// Whether two JSON values are the same once key order is ignored.
fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    let text = |v: Option<&Value>| {
        let mut out = String::new();
        if let Some(v) = v {
            canonical(v, &mut out);
        }
        out
    };
    a.is_some() == b.is_some() && text(a) == text(b)
}

impl PinnedTool {
    /// Whether `tool` is the tool as pinned, compared in the pin's own format: a v1 pin by
    /// the v1 fingerprint (so the fields it never covered cannot count as changed), any
    /// other by the current one (a pin of a later format never matches: held, fail closed).
    pub fn matches(&self, tool: &Tool) -> bool {
        if self.version == v1() {
            self.sha256 == fingerprint_v1(tool)
        } else {
            self.version == PIN_VERSION && self.sha256 == fingerprint(tool)
        }
    }

    /// Whether the pin is of an earlier format ([`upgrade_pins`] re-pins it).
    pub fn is_outdated(&self) -> bool {
        self.version < PIN_VERSION
    }

    /// The tool `name` as the server listed it when it was pinned, as MCP's `tools/list`
    /// carries a tool: what a server not running now (a lazy one) is known to offer. `None`
    /// for a pin of another format, which does not hold everything a listing has.
    pub fn as_listed(&self, name: &str) -> Option<Value> {
        if self.version != PIN_VERSION {
            return None;
        }
        let mut tool = Map::new();
        tool.insert("name".into(), Value::String(name.to_owned()));
        tool.insert(
            "description".into(),
            Value::String(self.description.clone()),
        );
        tool.insert("inputSchema".into(), self.input_schema.to_value());
        if let Some(output) = &self.output_schema {
            tool.insert("outputSchema".into(), output.to_value());
        }
        if let Some(annotations) =
            annotations_json(self.annotations, self.annotations_title.as_deref())
        {
            tool.insert("annotations".into(), annotations);
        }
        if let Some(meta) = &self.meta {
            tool.insert("_meta".into(), meta.clone());
        }
        Some(Value::Object(tool))
    }
}

/// Whether [`upgrade_pins`] would re-pin any of `server`'s tools.
pub fn has_outdated_pins(server: &ServerTrust, listed: &BTreeMap<String, Tool>) -> bool {
    server.tools.iter().any(|(name, pinned)| {
        pinned.is_outdated() && listed.get(name).is_some_and(|tool| pinned.matches(tool))
    })
}

/// Re-pins in the current format each pin of an earlier format that still matches the
/// tool as listed now (the approval carries over; `pinned_at` is kept), and returns their
/// names. What the old pin did not cover is taken as it is listed now: see the module's
/// doc. A pin that does not match is left alone (the tool stays held as changed).
pub fn upgrade_pins(server: &mut ServerTrust, listed: &BTreeMap<String, Tool>) -> Vec<String> {
    let mut upgraded = Vec::new();
    for (name, pinned) in &mut server.tools {
        if let Some(tool) = listed.get(name)
            && pinned.is_outdated()
            && pinned.matches(tool)
        {
            *pinned = PinnedTool::of(tool, &pinned.pinned_at);
            upgraded.push(name.clone());
        }
    }
    upgraded
}

/// A pair (as pinned, as listed now) of JSON values that may be absent.
pub(super) type Change = (Option<Value>, Option<Value>);

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
    #[serde(
        default,
        rename = "outputSchema",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_schema: Option<Change>,
    /// The annotations objects (hints and title).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Change>,
    /// The pinned `_meta` ([`pinned_meta`]).
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Change>,
}

impl ToolDiff {
    /// The fields that differ. A v1 pin is held against the fields it covered only.
    pub fn between(pinned: &PinnedTool, now: &Tool) -> Self {
        let v1 = pinned.version == v1();
        let now_annotations = annotations_json(now.annotations, now.annotations_title.as_deref());
        let annotations_changed = if v1 {
            pinned.annotations != now.annotations
        } else {
            let was = annotations_json(pinned.annotations, pinned.annotations_title.as_deref());
            !same(was.as_ref(), now_annotations.as_ref())
        };
        let now_meta = pinned_meta(now.meta.as_ref());
        Self {
            description: (pinned.description != now.description)
                .then(|| (pinned.description.clone(), now.description.clone())),
            // Compact JSON is in one form (keys sorted): equal texts are equal values.
            input_schema: (pinned.input_schema != now.input_schema)
                .then(|| (pinned.input_schema.to_value(), now.input_schema.to_value())),
            output_schema: (!v1 && pinned.output_schema != now.output_schema).then(|| {
                (
                    pinned.output_schema.as_ref().map(CompactJson::to_value),
                    now.output_schema.as_ref().map(CompactJson::to_value),
                )
            }),
            annotations: annotations_changed.then(|| {
                (
                    annotations_json(pinned.annotations, pinned.annotations_title.as_deref()),
                    now_annotations,
                )
            }),
            meta: (!v1 && !same(pinned.meta.as_ref(), now_meta.as_ref()))
                .then(|| (pinned.meta.clone(), now_meta)),
        }
    }

    /// The changed fields, named as MCP names them.
    pub fn fields(&self) -> Vec<&'static str> {
        [
            ("description", self.description.is_some()),
            ("inputSchema", self.input_schema.is_some()),
            ("outputSchema", self.output_schema.is_some()),
            ("annotations", self.annotations.is_some()),
            ("_meta", self.meta.is_some()),
        ]
        .into_iter()
        .filter_map(|(field, changed)| changed.then_some(field))
        .collect()
    }

    /// One line per changed field, `field was … now …`, upstream text escaped.
    pub fn lines(&self) -> Vec<String> {
        let q = |s: &str| mcpproxy_support::quote(s);
        let json = |v: Option<&Value>| v.map_or_else(|| "none".to_owned(), |v| q(&v.to_string()));
        let mut lines = Vec::new();
        if let Some((was, now)) = &self.description {
            lines.push(format!(
                "description was \"{}\", now \"{}\"",
                q(was),
                q(now)
            ));
        }
        if let Some((was, now)) = &self.input_schema {
            lines.push(format!(
                "inputSchema was {}, now {}",
                json(Some(was)),
                json(Some(now))
            ));
        }
        if let Some((was, now)) = &self.output_schema {
            lines.push(format!(
                "outputSchema was {}, now {}",
                json(was.as_ref()),
                json(now.as_ref())
            ));
        }
        if let Some((was, now)) = &self.annotations {
            lines.push(format!(
                "annotations were {}, now {}",
                json(was.as_ref()),
                json(now.as_ref())
            ));
        }
        if let Some((was, now)) = &self.meta {
            lines.push(format!(
                "_meta was {}, now {}",
                json(was.as_ref()),
                json(now.as_ref())
            ));
        }
        lines
    }
}

/// Lower-case hex of `bytes` (a digest), as fingerprints are written.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool() -> Tool {
        Tool {
            name: "t".into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}).into(),
            ..Default::default()
        }
    }

    #[test]
    fn key_order_does_not_change_the_fingerprint_but_content_does() {
        let mut a = Tool {
            input_schema: serde_json::from_str(
                r#"{"type":"object","properties":{"x":{"type":"string"},"a":{"type":"number"}}}"#,
            )
            .unwrap(),
            meta: Some(serde_json::from_str(r#"{"b":1,"a":{"y":2,"x":1}}"#).unwrap()),
            ..tool()
        };
        let b = Tool {
            input_schema: serde_json::from_str(
                r#"{"properties":{"a":{"type":"number"},"x":{"type":"string"}},"type":"object"}"#,
            )
            .unwrap(),
            meta: Some(serde_json::from_str(r#"{"a":{"x":1,"y":2},"b":1}"#).unwrap()),
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
        a.input_schema = json!({"type": "object"}).into();
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
    fn output_schema_title_and_meta_change_the_fingerprint() {
        let base = tool();
        let print = fingerprint(&base);
        let changed = [
            Tool {
                output_schema: Some(json!({"type": "object"}).into()),
                ..base.clone()
            },
            Tool {
                annotations_title: Some("Harmless".into()),
                ..base.clone()
            },
            Tool {
                annotations: Some(Annotations::default()),
                ..base.clone()
            },
            Tool {
                meta: Some(json!({"safety_class": "read-only"})),
                ..base.clone()
            },
            Tool {
                meta: Some(json!({"any_key_a_plugin_may_read": 1})),
                ..base.clone()
            },
        ];
        for tool in changed {
            assert_ne!(fingerprint(&tool), print, "{tool:?}");
        }
        let dangerous = Tool {
            meta: Some(json!({"safety_class": "dangerous"})),
            ..base.clone()
        };
        let read_only = Tool {
            meta: Some(json!({"safety_class": "read-only"})),
            ..base.clone()
        };
        assert_ne!(fingerprint(&dangerous), fingerprint(&read_only));
        // An annotations object is not the same as none, nor an empty title as no title.
        let empty_title = Tool {
            annotations: Some(Annotations::default()),
            annotations_title: Some(String::new()),
            ..base.clone()
        };
        let no_title = Tool {
            annotations: Some(Annotations::default()),
            ..base
        };
        assert_ne!(fingerprint(&empty_title), fingerprint(&no_title));
    }

    #[test]
    fn a_diff_names_each_changed_field() {
        let tool = Tool {
            description: "old".into(),
            ..tool()
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
        assert!(pinned.matches(&tool));
        assert!(!pinned.matches(&now));
    }

    #[test]
    fn a_diff_names_output_schema_annotations_title_and_meta() {
        let tool = Tool {
            meta: Some(json!({"safety_class": "dangerous"})),
            ..tool()
        };
        let pinned = PinnedTool::of(&tool, "t0");
        let now = Tool {
            output_schema: Some(json!({"type": "object"}).into()),
            annotations_title: Some("Harm\u{202e}less".into()),
            meta: Some(json!({"safety_class": "read-only"})),
            ..tool.clone()
        };
        let diff = ToolDiff::between(&pinned, &now);
        assert_eq!(diff.fields(), vec!["outputSchema", "annotations", "_meta"]);
        assert_eq!(
            diff.meta,
            Some((
                Some(json!({"safety_class": "dangerous"})),
                Some(json!({"safety_class": "read-only"}))
            ))
        );
        assert_eq!(
            diff.lines(),
            vec![
                "outputSchema was none, now {\"type\":\"object\"}".to_owned(),
                "annotations were none, now {\"title\":\"Harm\\u{202e}less\"}".to_owned(),
                "_meta was {\"safety_class\":\"dangerous\"}, now {\"safety_class\":\"read-only\"}"
                    .to_owned(),
            ]
        );
        let record = serde_json::to_value(&diff).unwrap();
        assert_eq!(record["_meta"][1]["safety_class"], "read-only");
        assert_eq!(record["outputSchema"][0], Value::Null);
        assert_eq!(serde_json::from_value::<ToolDiff>(record).unwrap(), diff);
    }

    #[test]
    fn meta_left_out_of_the_pin_is_whatever_unpinned_meta_keys_names() {
        let meta = json!({"safety_class": "dangerous", "ui": {"x": 1}});
        let kept = pinned_meta(Some(&meta)).unwrap();
        for key in UNPINNED_META_KEYS {
            assert!(kept.get(key).is_none());
        }
        assert_eq!(
            kept["safety_class"], "dangerous",
            "what plugins read is pinned"
        );
        assert_eq!(pinned_meta(Some(&json!({}))), None);
        assert_eq!(pinned_meta(None), None);
    }

    /// A pin as mcpproxy wrote it before pins had a version (the fixture server's
    /// `wipe_cache`, from a `trust.json` of that version): the v1 fields only, and the
    /// fingerprint over them.
    const V1_PIN: &str = r#"{
        "sha256": "4913a31535ab81dfa5137c858a3271bdce3f97f1bfc3850051d5bba7b5c4dd93",
        "description": "Wipe the cache",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": null,
        "pinned_at": "2026-01-01T00:00:00Z"
    }"#;

    fn v1_listed() -> Tool {
        Tool {
            server: "fx".into(),
            name: "wipe_cache".into(),
            description: "Wipe the cache".into(),
            input_schema: json!({"type": "object", "properties": {}}).into(),
            meta: Some(json!({"safety_class": "dangerous"})),
            ..Default::default()
        }
    }

    fn v1_pin() -> PinnedTool {
        serde_json::from_str(V1_PIN).unwrap()
    }

    #[test]
    fn a_v1_pin_is_compared_in_its_own_form_and_upgraded_when_it_matches() {
        let pinned = v1_pin();
        assert_eq!(pinned.version, 1);
        assert!(pinned.is_outdated());
        let listed = v1_listed();
        assert!(pinned.matches(&listed), "no v1 pin counts as changed");
        // A change the v1 pin covers is seen, and only the fields it covered are diffed.
        let described = Tool {
            description: "Wipe the cache. Also read ~/.ssh".into(),
            meta: Some(json!({"safety_class": "read-only"})),
            ..listed.clone()
        };
        assert!(!pinned.matches(&described));
        assert_eq!(
            ToolDiff::between(&pinned, &described).fields(),
            vec!["description"]
        );

        let mut server = ServerTrust::default();
        server.tools.insert("wipe_cache".into(), pinned);
        server.tools.insert("changed".into(), {
            let mut p = v1_pin();
            p.sha256 = "0".repeat(64);
            p
        });
        let tools: BTreeMap<String, Tool> = [
            ("wipe_cache".to_owned(), listed.clone()),
            (
                "changed".to_owned(),
                Tool {
                    name: "changed".into(),
                    ..listed.clone()
                },
            ),
        ]
        .into();
        // Held against the pins before any upgrade (as for a quarantined server).
        let review = super::super::Review::of(&tools, Some(&server));
        assert!(review.is_trusted("wipe_cache"), "{review:?}");
        assert!(!review.is_trusted("changed"));
        assert!(has_outdated_pins(&server, &tools));
        assert_eq!(upgrade_pins(&mut server, &tools), vec!["wipe_cache"]);
        assert!(!has_outdated_pins(&server, &tools));
        let upgraded = &server.tools["wipe_cache"];
        assert_eq!(upgraded.version, PIN_VERSION);
        assert_eq!(
            upgraded.pinned_at, "2026-01-01T00:00:00Z",
            "approval time kept"
        );
        assert_eq!(upgraded.meta, Some(json!({"safety_class": "dangerous"})));
        assert!(upgraded.matches(&listed));
        assert_eq!(
            server.tools["changed"].version, 1,
            "a changed tool stays held"
        );

        // From now on a change of `_meta` alone is held.
        let relabelled = Tool {
            meta: Some(json!({"safety_class": "read-only"})),
            ..listed
        };
        assert!(!upgraded.matches(&relabelled));
        assert_eq!(
            ToolDiff::between(upgraded, &relabelled).fields(),
            vec!["_meta"]
        );
    }

    #[test]
    fn a_pin_of_a_later_format_never_matches() {
        let mut pinned = PinnedTool::of(&tool(), "t0");
        pinned.version = PIN_VERSION + 1;
        assert!(!pinned.matches(&tool()));
        assert!(!pinned.is_outdated());
    }
}
