//! `injection-marker`: a WebAssembly component of the `result-guard-plugin` world, opt-in
//! (`plugins.guards` must name it). It marks result items that carry instruction-like text
//! (an indirect prompt injection in a web page, an issue comment, a file): the proxy then
//! wraps each such item in untrusted-content delimiters with a note telling the model to
//! treat it as data. It reuses the detectors of `tool-scanner` (the `tool-scan` crate):
//! hidden instructions (phrases that tell the model to drop its
//! instructions, keep things from the user, read or send something first; `<IMPORTANT>`-style
//! tags and chat-template tokens), credential access, and invisible Unicode.
//!
//! Settings: `ignore_kinds` (as for `tool-scanner`), a list of finding kinds not to mark on.
//! Unusable settings block the result (fail closed).

mod marker;

wit_bindgen::generate!({
    path: "../../wit",
    world: "result-guard-plugin",
});

use exports::mcpproxy::plugin::metadata::{self, PluginInfo};
use exports::mcpproxy::plugin::result_guard::{
    self, Answer, Block, GuardContext, Item, ItemAction, Mark,
};
use mcpproxy::plugin::host;

struct InjectionMarker;

impl metadata::Guest for InjectionMarker {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "injection-marker".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            description: "Marks result items that carry instructions for the model as \
                          untrusted content"
                .to_string(),
        }
    }
}

impl result_guard::Guest for InjectionMarker {
    fn guard(context: GuardContext, items: Vec<Item>) -> Answer {
        let config = host::config();
        let mut actions = Vec::with_capacity(items.len());
        for item in &items {
            match marker::judge(&config, &item.text) {
                Err(problem) => {
                    return Answer::Block(Block {
                        kind: "settings".to_string(),
                        reason: problem,
                    });
                }
                Ok(None) => actions.push(ItemAction::Pass),
                Ok(Some(found)) => actions.push(ItemAction::Mark(Mark {
                    kind: found.kind.to_string(),
                    note: marker::note(&context.server, &context.name, &found.kinds),
                })),
            }
        }
        Answer::Items(actions)
    }
}

/// The component's exports: wit-bindgen's glue from the canonical ABI to [`InjectionMarker`].
#[allow(
    unsafe_code,
    reason = "the glue `export!` expands to is unsafe by nature (it reads the guest's memory as \
              the canonical ABI lays it out); the code of this crate has none"
)]
mod component_exports {
    use super::InjectionMarker;

    crate::export!(InjectionMarker with_types_in crate);
}
