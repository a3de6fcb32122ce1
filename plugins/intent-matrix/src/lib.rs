//! `intent-matrix`: mcpproxy's default validator, a WebAssembly component of the
//! `validator-plugin` world. It checks each call's variant and declared intent against the
//! tool's annotations (the matrix in `docs/plugins.md`). The policy lives in [`policy`];
//! this file only converts between the WIT types and the policy's.

mod policy;

use policy::{Call, Hints, Intent, Op, Outcome};

wit_bindgen::generate!({
    path: "../../wit",
    world: "validator-plugin",
});

use exports::mcpproxy::plugin::metadata::{self, PluginInfo};
use exports::mcpproxy::plugin::validator;
use mcpproxy::plugin::host::{self, LogLevel};
use mcpproxy::plugin::types::{Annotations, CallRequest, OperationType, Verdict};

struct IntentMatrix;

impl metadata::Guest for IntentMatrix {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "intent-matrix".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            description:
                "Checks each call's variant and declared intent against the tool's annotations"
                    .to_string(),
        }
    }
}

impl validator::Guest for IntentMatrix {
    fn validate(request: CallRequest) -> Verdict {
        let call = to_call(request);
        match policy::decide(&host::config(), &call) {
            Outcome::Allow => Verdict::Allow,
            Outcome::Warn(message) => Verdict::Warn(message),
            Outcome::Reject(message) => {
                host::log(
                    LogLevel::Debug,
                    &format!("rejected {}:{}: {message}", call.server, call.tool),
                );
                Verdict::Reject(message)
            }
        }
    }
}

fn op(op: OperationType) -> Op {
    match op {
        OperationType::Read => Op::Read,
        OperationType::Write => Op::Write,
        OperationType::Destructive => Op::Destructive,
    }
}

fn hints(a: Annotations) -> Hints {
    Hints {
        read_only: a.read_only_hint,
        destructive: a.destructive_hint,
    }
}

fn to_call(request: CallRequest) -> Call {
    Call {
        variant: op(request.variant),
        server: request.tool.server,
        tool: request.tool.name,
        intent: request.intent.map(|i| Intent {
            operation_type: i.operation_type.map(op),
            data_sensitivity: i.data_sensitivity,
            reason: i.reason,
        }),
        effective: request.effective.map(hints),
        annotation_source: request.annotation_source,
        annotation_reason: request.annotation_reason,
    }
}

/// The component's exports: wit-bindgen's glue from the canonical ABI to [`IntentMatrix`].
#[allow(
    unsafe_code,
    reason = "the glue `export!` expands to is unsafe by nature (it reads the guest's memory as \
              the canonical ABI lays it out); the code of this crate has none"
)]
mod component_exports {
    use super::IntentMatrix;

    crate::export!(IntentMatrix with_types_in crate);
}
