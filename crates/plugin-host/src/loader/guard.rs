//! Result-guard plugins (`result-guard-plugin`, `wit/result-guard.wit`): calling one under
//! the same limits as a validator (fresh or warm instance, deadline, memory cap), the
//! conversions between the WIT types and the policy crate's, and a loaded guard as the
//! policy's [`ResultGuard`] stage. A fault becomes the stage fault the guard chain withholds
//! the result on.

use std::sync::Arc;

use mcpproxy_policy::{
    self as policy, Block, GuardAnswer, GuardContext, GuardItem, ItemAction, ItemKind, Mark,
    Redaction, ResultGuard, ResultKind,
};
use wasmtime::component::InstancePre;

use super::{Plugin, Runner};
use crate::PluginFault;
use crate::bindings::{
    RESULT_GUARD_EXPORT, ResultGuardPlugin, ResultGuardPluginPre, wit_guard, wit_types,
};
use crate::host::PluginCtx;
use crate::warm_pool::WarmPool;

pub(super) type GuardPre = ResultGuardPluginPre<PluginCtx>;
pub(super) type GuardBindings = ResultGuardPlugin;
pub(super) const EXPORT: &str = RESULT_GUARD_EXPORT;

/// The runner of a component type-checked against the result-guard world.
pub(super) fn runner(pre: &InstancePre<PluginCtx>) -> wasmtime::Result<Runner> {
    Ok(Runner::Guard(
        ResultGuardPluginPre::new(pre.clone())?,
        WarmPool::new(),
    ))
}

impl Plugin {
    /// Asks the result guard about a result's items, with its configured settings.
    pub fn guard(
        &self,
        context: &GuardContext,
        items: &[GuardItem],
    ) -> Result<GuardAnswer, PluginFault> {
        self.guard_with_settings(context, items, &self.settings.clone())
    }

    /// Asks the result guard with settings given for this call only (used by `plugins check`).
    pub fn guard_with_settings(
        &self,
        context: &GuardContext,
        items: &[GuardItem],
        settings: &str,
    ) -> Result<GuardAnswer, PluginFault> {
        let Runner::Guard(pre, warm) = &self.runner else {
            return Err(self.not_a("a result guard"));
        };
        let wit_context = wit_context(context);
        let wit_items: Vec<wit_guard::Item> = items.iter().map(wit_item).collect();
        self.run(
            Arc::from(settings),
            mcpproxy_policy::current_caller(),
            |store| pre.instantiate(store),
            warm,
            |plugin, store| {
                plugin
                    .mcpproxy_plugin_result_guard()
                    .call_guard(store, &wit_context, &wit_items)
            },
        )
        .map(answer)
    }
}

impl ResultGuard for Plugin {
    fn name(&self) -> &str {
        Plugin::name(self)
    }

    fn guard(
        &self,
        context: &GuardContext,
        items: &[GuardItem],
    ) -> Result<GuardAnswer, policy::Fault> {
        Plugin::guard(self, context, items).map_err(|fault| {
            tracing::warn!(plugin = %fault.plugin, "result guard fault: {fault}");
            fault.into()
        })
    }

    fn is_quick(&self) -> bool {
        Plugin::is_quick(self)
    }
}

fn wit_context(c: &GuardContext) -> wit_guard::GuardContext {
    wit_guard::GuardContext {
        kind: match c.kind {
            ResultKind::ToolResult => wit_guard::ResultKind::ToolResult,
            ResultKind::Prompt => wit_guard::ResultKind::Prompt,
            ResultKind::Resource => wit_guard::ResultKind::Resource,
        },
        server: c.server.clone(),
        name: c.name.clone(),
        variant: c.variant.map(wit_types::OperationType::from),
        intent: c.intent.as_ref().map(Into::into),
        annotations: c.annotations.as_ref().map(Into::into),
    }
}

fn wit_item(item: &GuardItem) -> wit_guard::Item {
    wit_guard::Item {
        kind: match item.kind {
            ItemKind::Text => wit_guard::ItemKind::Text,
            ItemKind::ResourceText => wit_guard::ItemKind::ResourceText,
            ItemKind::Structured => wit_guard::ItemKind::Structured,
        },
        text: item.text.clone(),
        uri: item.uri.clone(),
    }
}

fn answer(a: wit_guard::Answer) -> GuardAnswer {
    match a {
        wit_guard::Answer::Block(b) => GuardAnswer::Block(Block {
            kind: b.kind,
            reason: b.reason,
        }),
        wit_guard::Answer::Items(actions) => GuardAnswer::Items(
            actions
                .into_iter()
                .map(|action| match action {
                    wit_guard::ItemAction::Pass => ItemAction::Pass,
                    wit_guard::ItemAction::Mark(m) => ItemAction::Mark(Mark {
                        kind: m.kind,
                        note: m.note,
                    }),
                    wit_guard::ItemAction::Redact(spans) => ItemAction::Redact(
                        spans
                            .into_iter()
                            .map(|r| Redaction {
                                start: r.start as usize,
                                end: r.end as usize,
                                kind: r.kind,
                                replacement: r.replacement,
                            })
                            .collect(),
                    ),
                })
                .collect(),
        ),
    }
}
