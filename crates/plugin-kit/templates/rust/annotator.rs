//! {{name}}: an mcpproxy annotator. Marks tools whose name starts with `query_` read-only;
//! says nothing about the others (the next annotator is asked).

wit_bindgen::generate!({
    path: "wit",
    world: "annotator-plugin",
});

use exports::mcpproxy::plugin::annotator::{self, Basis, Inference};
use exports::mcpproxy::plugin::metadata;
use mcpproxy::plugin::types::{Annotations, SafetyClass, Tool};

struct Plugin;

impl metadata::Guest for Plugin {
    fn info() -> metadata::PluginInfo {
        metadata::PluginInfo {
            name: "{{name}}".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Marks query_ tools read-only".into(),
        }
    }
}

impl annotator::Guest for Plugin {
    fn infer(tool: Tool) -> Option<Inference> {
        if !tool.name.starts_with("query_") {
            return None;
        }
        Some(Inference {
            annotations: Annotations {
                read_only_hint: Some(true),
                destructive_hint: Some(false),
                idempotent_hint: None,
                open_world_hint: None,
            },
            safety_class: SafetyClass::ReadOnly,
            basis: Basis::Inferred,
            why: "name prefix 'query_'".into(),
        })
    }
}

export!(Plugin);
