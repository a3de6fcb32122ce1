//! {{name}}: an mcpproxy validator. Rejects calls to the tools its settings block:
//! `{"blocked_tools": ["server:tool", ...]}`.

wit_bindgen::generate!({
    path: "wit",
    world: "validator-plugin",
});

use exports::mcpproxy::plugin::{metadata, validator};
use mcpproxy::plugin::host;
use mcpproxy::plugin::types::{CallRequest, Verdict};

struct Plugin;

impl metadata::Guest for Plugin {
    fn info() -> metadata::PluginInfo {
        metadata::PluginInfo {
            name: "{{name}}".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Rejects calls to the tools its settings block".into(),
        }
    }
}

impl validator::Guest for Plugin {
    fn validate(req: CallRequest) -> Verdict {
        let settings: serde_json::Value = match serde_json::from_str(&host::config()) {
            Ok(settings) => settings,
            Err(e) => return Verdict::Reject(format!("{{name}}: invalid settings: {e}")),
        };
        let tool = format!("{}:{}", req.tool.server, req.tool.name);
        let blocked = settings["blocked_tools"]
            .as_array()
            .is_some_and(|list| list.iter().any(|t| t.as_str() == Some(tool.as_str())));
        if blocked {
            return Verdict::Reject(format!(
                "Tool '{tool}' is blocked by {{name}}; ask an operator to unblock it"
            ));
        }
        Verdict::Allow
    }
}

export!(Plugin);
