//! {{name}}: an mcpproxy result guard. Blocks any result (tool result, prompt or resource)
//! that holds one of its marker words: `{"marker_words": ["CONFIDENTIAL"]}` (the default).

wit_bindgen::generate!({
    path: "wit",
    world: "result-guard-plugin",
});

use exports::mcpproxy::plugin::metadata;
use exports::mcpproxy::plugin::result_guard::{
    self, Answer, Block, GuardContext, Item, ItemAction,
};
use mcpproxy::plugin::host;

struct Plugin;

impl metadata::Guest for Plugin {
    fn info() -> metadata::PluginInfo {
        metadata::PluginInfo {
            name: "{{name}}".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Blocks results that hold a marker word".into(),
        }
    }
}

impl result_guard::Guest for Plugin {
    fn guard(context: GuardContext, items: Vec<Item>) -> Answer {
        let settings: serde_json::Value = match serde_json::from_str(&host::config()) {
            Ok(settings) => settings,
            Err(e) => {
                return Answer::Block(Block {
                    kind: "settings".into(),
                    reason: format!("{{name}}: invalid settings: {e}"),
                });
            }
        };
        let words: Vec<String> = match settings.get("marker_words") {
            None => vec!["CONFIDENTIAL".into()],
            Some(list) => list
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|w| w.as_str().map(str::to_owned))
                .collect(),
        };
        for item in &items {
            if let Some(word) = words.iter().find(|w| item.text.contains(w.as_str())) {
                return Answer::Block(Block {
                    kind: "marker-word".into(),
                    reason: format!(
                        "the result of {}:{} is marked {word}; ask its owner for a copy you may share",
                        context.server, context.name
                    ),
                });
            }
        }
        Answer::Items(items.iter().map(|_| ItemAction::Pass).collect())
    }
}

export!(Plugin);
