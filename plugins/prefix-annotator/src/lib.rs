//! `prefix-annotator`: mcpproxy's default annotator, a WebAssembly component of the
//! `annotator-plugin` world. It gives every tool annotations and a safety class: the
//! server's own annotations, else `_meta.safety_class`, else a class inferred from the name
//! prefix (the table in `docs/plugins.md`). The logic lives in [`classify`]; this file only
//! converts between the WIT types and the classifier's.

mod classify;

use classify::{Basis, Class, Hints, ToolInfo};

wit_bindgen::generate!({
    path: "../../wit",
    world: "annotator-plugin",
});

use exports::mcpproxy::plugin::annotator::{self, Inference};
use exports::mcpproxy::plugin::metadata::{self, PluginInfo};
use mcpproxy::plugin::host::{self, LogLevel};
use mcpproxy::plugin::types::{Annotations, SafetyClass, Tool};

struct PrefixAnnotator;

impl metadata::Guest for PrefixAnnotator {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "prefix-annotator".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            description:
                "Infers a tool's annotations and safety class from its _meta or its name prefix"
                    .to_string(),
        }
    }
}

impl annotator::Guest for PrefixAnnotator {
    fn infer(tool: Tool) -> Option<Inference> {
        let outcome = classify::infer(&ToolInfo {
            server: &tool.server,
            name: &tool.name,
            annotations: tool.annotations.map(from_wit),
            meta: tool.meta.as_deref(),
        });
        if let Some(warning) = &outcome.warning {
            host::log(LogLevel::Warn, warning);
        }
        let inference = outcome.inference;
        Some(Inference {
            annotations: to_wit(inference.hints),
            safety_class: match inference.class {
                Class::ReadOnly => SafetyClass::ReadOnly,
                Class::WriteCapable => SafetyClass::WriteCapable,
                Class::Subprocess => SafetyClass::Subprocess,
                Class::Dangerous => SafetyClass::Dangerous,
                Class::Unknown => SafetyClass::Unknown,
            },
            basis: match inference.basis {
                Basis::Server => annotator::Basis::Server,
                Basis::Meta => annotator::Basis::Meta,
                Basis::Inferred => annotator::Basis::Inferred,
            },
            why: inference.why,
        })
    }
}

fn from_wit(a: Annotations) -> Hints {
    Hints {
        read_only: a.read_only_hint,
        destructive: a.destructive_hint,
        idempotent: a.idempotent_hint,
        open_world: a.open_world_hint,
    }
}

fn to_wit(h: Hints) -> Annotations {
    Annotations {
        read_only_hint: h.read_only,
        destructive_hint: h.destructive,
        idempotent_hint: h.idempotent,
        open_world_hint: h.open_world,
    }
}

/// The component's exports: wit-bindgen's glue from the canonical ABI to [`PrefixAnnotator`].
#[allow(
    unsafe_code,
    reason = "the glue `export!` expands to is unsafe by nature (it reads the guest's memory as \
              the canonical ABI lays it out); the code of this crate has none"
)]
mod component_exports {
    use super::PrefixAnnotator;

    crate::export!(PrefixAnnotator with_types_in crate);
}
