//! `secret-redactor`: a WebAssembly component of the `result-guard-plugin` world, on by
//! default. It finds secrets in what upstreams return (cloud keys, service tokens, private
//! key blocks, JWTs, `password=`-style pairs and high-entropy values next to secret-like
//! keys) and has each replaced with `[REDACTED:<kind>]` before the client (and the model
//! behind it) sees it. The logic lives in [`detect`]; this file only converts between the
//! WIT types and the detector's.

mod detect;

wit_bindgen::generate!({
    path: "../../wit",
    world: "result-guard-plugin",
});

use exports::mcpproxy::plugin::metadata::{self, PluginInfo};
use exports::mcpproxy::plugin::result_guard::{
    self, Answer, Block, GuardContext, Item, ItemAction, Redaction,
};
use mcpproxy::plugin::host;

struct SecretRedactor;

impl metadata::Guest for SecretRedactor {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "secret-redactor".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            description: "Redacts cloud keys, tokens, private keys, JWTs and passwords from \
                          tool results, prompts and resources"
                .to_string(),
        }
    }
}

impl result_guard::Guest for SecretRedactor {
    fn guard(_context: GuardContext, items: Vec<Item>) -> Answer {
        let settings = match detect::Settings::parse(&host::config()) {
            Ok(settings) => settings,
            Err(problem) => {
                return Answer::Block(Block {
                    kind: "settings".to_string(),
                    reason: format!("secret-redactor: invalid settings: {problem}"),
                });
            }
        };
        Answer::Items(
            items
                .iter()
                .map(|item| {
                    let found = detect::find(&item.text, &settings);
                    if found.is_empty() {
                        return ItemAction::Pass;
                    }
                    ItemAction::Redact(
                        found
                            .into_iter()
                            .map(|f| Redaction {
                                // Items are far below 4 GiB (the proxy's line cap is 16 MiB).
                                start: u32::try_from(f.start).unwrap_or(u32::MAX),
                                end: u32::try_from(f.end).unwrap_or(u32::MAX),
                                kind: f.kind.to_string(),
                                replacement: None,
                            })
                            .collect(),
                    )
                })
                .collect(),
        )
    }
}

/// The component's exports: wit-bindgen's glue from the canonical ABI to [`SecretRedactor`].
#[allow(
    unsafe_code,
    reason = "the glue `export!` expands to is unsafe by nature (it reads the guest's memory as \
              the canonical ABI lays it out); the code of this crate has none"
)]
mod component_exports {
    use super::SecretRedactor;

    crate::export!(SecretRedactor with_types_in crate);
}
