//! `group-gate`: a validator (`validator-plugin` world) that decides by *who* is asking.
//! Its rules (`plugins.settings.group-gate.rules`) name calls (servers, tools, operation
//! types) and the groups or subjects that may make them; a call a rule matches goes through
//! only for a logged-in caller (`host.caller`) in one of the rule's groups or subjects.
//! Not embedded: load it with `--plugins DIR` and list it in `plugins.validators`. The rules
//! live in [`rules`]; this file only converts the WIT types.

mod rules;

wit_bindgen::generate!({
    path: "../../wit",
    world: "validator-plugin",
});

use exports::mcpproxy::plugin::metadata::{self, PluginInfo};
use exports::mcpproxy::plugin::validator;
use mcpproxy::plugin::host::{self, LogLevel};
use mcpproxy::plugin::types::{CallRequest, OperationType, Verdict};

struct GroupGate;

impl metadata::Guest for GroupGate {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "group-gate".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            description: "Lets calls through by the caller's groups: rules name servers, tools \
                          and operation types, and the groups or subjects that may call them"
                .to_string(),
        }
    }
}

impl validator::Guest for GroupGate {
    fn validate(request: CallRequest) -> Verdict {
        let rules = match rules::Rules::parse(&host::config()) {
            Ok(rules) => rules,
            // Fail closed: a gate whose rules cannot be read lets nothing through.
            Err(problem) => return Verdict::Reject(problem),
        };
        let operation = match request.variant {
            OperationType::Read => rules::Operation::Read,
            OperationType::Write => rules::Operation::Write,
            OperationType::Destructive => rules::Operation::Destructive,
        };
        let caller = host::caller().map(|c| rules::Who {
            subject: c.subject,
            groups: c.groups,
        });
        let call = rules::Call {
            server: &request.tool.server,
            tool: &request.tool.name,
            operation,
        };
        match rules.judge(&call, caller.as_ref()) {
            None => Verdict::Allow,
            Some(message) => {
                host::log(
                    LogLevel::Debug,
                    &format!("rejected {}:{}: {message}", call.server, call.tool),
                );
                Verdict::Reject(message)
            }
        }
    }
}

/// The component's exports: wit-bindgen's glue from the canonical ABI to [`GroupGate`].
#[allow(
    unsafe_code,
    reason = "the glue `export!` expands to is unsafe by nature (it reads the guest's memory as \
              the canonical ABI lays it out); the code of this crate has none"
)]
mod component_exports {
    use super::GroupGate;

    crate::export!(GroupGate with_types_in crate);
}
