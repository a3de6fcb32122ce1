//! `safety-routing`: a strict routing policy as a validator (`validator-plugin` world). It
//! judges the call's variant against the tool's effective safety class: unknown tools are
//! always blocked, dangerous ones need `call_tool_destructive`, write-capable and subprocess
//! ones need `call_tool_write` or `call_tool_destructive`, read-only ones pass.
//! Opt-in: load it with `--plugins DIR` and list it in `plugins.validators` after
//! `intent-matrix`. The rules live in [`routing`]; this file only converts the WIT types.

mod routing;

use routing::{Class, Variant};

wit_bindgen::generate!({
    path: "../../wit",
    world: "validator-plugin",
});

use exports::mcpproxy::plugin::metadata::{self, PluginInfo};
use exports::mcpproxy::plugin::validator;
use mcpproxy::plugin::host::{self, LogLevel};
use mcpproxy::plugin::types::{CallRequest, OperationType, SafetyClass, Verdict};

struct SafetyRouting;

impl metadata::Guest for SafetyRouting {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "safety-routing".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            description: "Routes by safety class: unknown tools are blocked, dangerous ones need \
                          call_tool_destructive, write-capable and subprocess ones need write or \
                          destructive"
                .to_string(),
        }
    }
}

impl validator::Guest for SafetyRouting {
    fn validate(request: CallRequest) -> Verdict {
        let variant = match request.variant {
            OperationType::Read => Variant::Read,
            OperationType::Write => Variant::Write,
            OperationType::Destructive => Variant::Destructive,
        };
        let class = match request.safety_class {
            SafetyClass::ReadOnly => Class::ReadOnly,
            SafetyClass::WriteCapable => Class::WriteCapable,
            SafetyClass::Subprocess => Class::Subprocess,
            SafetyClass::Dangerous => Class::Dangerous,
            SafetyClass::Unknown => Class::Unknown,
        };
        let (server, tool) = (&request.tool.server, &request.tool.name);
        match routing::route(variant, class, server, tool) {
            None => Verdict::Allow,
            Some(message) => {
                host::log(
                    LogLevel::Debug,
                    &format!("rejected {server}:{tool} ({}): {message}", class.word()),
                );
                Verdict::Reject(message)
            }
        }
    }
}

/// The component's exports: wit-bindgen's glue from the canonical ABI to [`SafetyRouting`].
#[allow(
    unsafe_code,
    reason = "the glue `export!` expands to is unsafe by nature (it reads the guest's memory as \
              the canonical ABI lays it out); the code of this crate has none"
)]
mod component_exports {
    use super::SafetyRouting;

    crate::export!(SafetyRouting with_types_in crate);
}
