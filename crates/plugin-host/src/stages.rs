//! Components as policy stages: a loaded annotator or validator plugin is a
//! [`policy::Annotator`] or [`policy::Validator`], and a [`PluginSet`] gives the pipeline of
//! every loaded one. A plugin fault becomes the stage fault the pipeline fails closed on.
//! A scanner plugin is the [`ToolScanner`] behind the security analysis of the proxy's `trust` module.

use std::sync::Arc;

use mcpproxy_policy::{self as policy, CallRequest, FaultKind, Inference, Pipeline, Tool, Verdict};
use mcpproxy_policy::{Finding, Severity, ToolScanner};

use super::bindings::wit_scanner;

use super::{Plugin, PluginFault, PluginKind, PluginSet};

impl From<PluginFault> for policy::Fault {
    fn from(fault: PluginFault) -> Self {
        let detail = match fault.fault {
            super::CallFault::Overloaded { slots, wait } => format!(
                "all {slots} WebAssembly instance slots were busy for {} s",
                wait.as_secs()
            ),
            _ => fault.to_string(),
        };
        let kind = match fault.fault {
            super::CallFault::Deadline(_) => FaultKind::Deadline,
            super::CallFault::Memory(_) => FaultKind::Memory,
            super::CallFault::Trap(_) => FaultKind::Trap,
            super::CallFault::Instantiate(_) => FaultKind::Start,
            super::CallFault::Overloaded { .. } => FaultKind::Overloaded,
        };
        Self {
            stage: fault.plugin.clone(),
            detail,
            kind,
        }
    }
}

impl policy::Annotator for Plugin {
    fn name(&self) -> &str {
        Plugin::name(self)
    }

    fn infer(&self, tool: &Tool) -> Result<Option<Inference>, policy::Fault> {
        Plugin::infer(self, tool).map_err(Into::into)
    }

    fn is_quick(&self) -> bool {
        self.is_quick()
    }

    fn is_pure(&self) -> bool {
        self.keeps_no_state()
    }
}

impl policy::Validator for Plugin {
    fn name(&self) -> &str {
        Plugin::name(self)
    }

    fn validate(&self, request: &CallRequest) -> Result<Verdict, policy::Fault> {
        Plugin::validate(self, request).map_err(|fault| {
            tracing::warn!(plugin = %fault.plugin, "plugin fault: {fault}");
            fault.into()
        })
    }

    fn is_quick(&self) -> bool {
        self.is_quick()
    }
}

impl ToolScanner for Plugin {
    fn name(&self) -> &str {
        Plugin::name(self)
    }

    fn scan(&self, tools: &[Tool], other_tools: &[String]) -> Result<Vec<Finding>, policy::Fault> {
        let findings = Plugin::scan(self, tools, other_tools)?;
        Ok(findings
            .into_iter()
            .map(|f| Finding {
                tool: f.tool,
                kind: f.kind,
                severity: match f.severity {
                    wit_scanner::Severity::Info => Severity::Info,
                    wit_scanner::Severity::Warning => Severity::Warning,
                    wit_scanner::Severity::Danger => Severity::Danger,
                },
                detail: f.detail,
            })
            .collect())
    }
}

/// Plugins as annotator stages, in order.
pub fn annotators(plugins: &[Arc<Plugin>]) -> Vec<Arc<dyn policy::Annotator>> {
    plugins
        .iter()
        .map(|p| p.clone() as Arc<dyn policy::Annotator>)
        .collect()
}

/// Plugins as result-guard stages, in order.
pub fn result_guards(plugins: &[Arc<Plugin>]) -> Vec<Arc<dyn policy::ResultGuard>> {
    plugins
        .iter()
        .map(|p| p.clone() as Arc<dyn policy::ResultGuard>)
        .collect()
}

/// Plugins as validator stages, in order.
pub fn validators(plugins: &[Arc<Plugin>]) -> Vec<Arc<dyn policy::Validator>> {
    plugins
        .iter()
        .map(|p| p.clone() as Arc<dyn policy::Validator>)
        .collect()
}

impl PluginSet {
    /// The pipeline of every loaded annotator and validator, in load order, less the
    /// embedded opt-in ones (what `serve` runs when the config names none).
    pub fn pipeline(&self) -> Pipeline {
        let of_kind = |kind| {
            self.of_kind(kind)
                .filter(|p| !p.info().opt_in)
                .cloned()
                .collect::<Vec<_>>()
        };
        Pipeline::new(
            annotators(&of_kind(PluginKind::Annotator)),
            validators(&of_kind(PluginKind::Validator)),
        )
    }
}
