//! The call pipeline: effective annotations for a tool (the server's own, else the
//! annotator chain), then the validator chain, combined into one outcome.
//!
//! Any reject stops the chain; warnings are collected. A plugin fault rejects the call
//! (fail closed) and names the plugin. Annotations are taken from the tool passed in, which
//! callers read from the live upstream registry at call time.

mod types;

use std::sync::Arc;

use serde::Serialize;

use crate::plugin::{Plugin, PluginFault, PluginKind, PluginSet};

pub use types::*;

/// The active annotators and validators, in the order they run.
#[derive(Debug, Clone, Default)]
pub struct Pipeline {
    annotators: Vec<Arc<Plugin>>,
    validators: Vec<Arc<Plugin>>,
}

/// A warning from one validator: the call went through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    pub plugin: String,
    pub message: String,
}

/// The combined verdict of the validator chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub decision: Decision,
    /// The plugin that rejected, or the last one that warned.
    pub plugin: Option<String>,
    /// The rejection, or the last warning.
    pub message: Option<String>,
    pub warnings: Vec<Warning>,
}

impl Outcome {
    fn allow() -> Self {
        Self {
            decision: Decision::Allow,
            plugin: None,
            message: None,
            warnings: Vec::new(),
        }
    }

    fn rejected(plugin: &str, message: String, warnings: Vec<Warning>) -> Self {
        Self {
            decision: Decision::Reject,
            plugin: Some(plugin.to_owned()),
            message: Some(message),
            warnings,
        }
    }

    pub fn is_allowed(&self) -> bool {
        self.decision != Decision::Reject
    }
}

/// A judged call: the request as the validators saw it, and their combined outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub request: CallRequest,
    pub outcome: Outcome,
}

impl Pipeline {
    pub fn new(annotators: Vec<Arc<Plugin>>, validators: Vec<Arc<Plugin>>) -> Self {
        Self {
            annotators,
            validators,
        }
    }

    /// Every annotator and validator of the set, in load order.
    pub fn from_set(set: &PluginSet) -> Self {
        Self::new(
            set.of_kind(PluginKind::Annotator).cloned().collect(),
            set.of_kind(PluginKind::Validator).cloned().collect(),
        )
    }

    pub fn annotators(&self) -> &[Arc<Plugin>] {
        &self.annotators
    }

    pub fn validators(&self) -> &[Arc<Plugin>] {
        &self.validators
    }

    /// The annotations in force for a tool. The server's own annotations always win; the
    /// first annotator that answers supplies the safety class (and, for unannotated tools,
    /// the annotations).
    pub fn annotate(&self, tool: &Tool) -> Result<EffectiveAnnotations, PluginFault> {
        let server = tool.annotations.filter(Annotations::is_any_set);
        let mut inferred = None;
        for annotator in &self.annotators {
            if let Some(inference) = annotator.infer(tool)? {
                inferred = Some((annotator.name(), inference));
                break;
            }
        }
        Ok(match (server, inferred) {
            (Some(annotations), Some((_, inference))) => EffectiveAnnotations {
                annotations: Some(annotations),
                source: AnnotationSource::Server,
                reason: Some(inference.why),
                safety_class: inference.safety_class,
            },
            (Some(annotations), None) => EffectiveAnnotations {
                annotations: Some(annotations),
                source: AnnotationSource::Server,
                reason: None,
                safety_class: class_of(&annotations),
            },
            (None, Some((plugin, inference))) => EffectiveAnnotations {
                annotations: Some(inference.annotations).filter(Annotations::is_any_set),
                source: match inference.basis {
                    InferenceBasis::Meta => AnnotationSource::Meta,
                    // A `server` basis without server annotations is the plugin's own claim.
                    InferenceBasis::Server | InferenceBasis::Inferred => {
                        AnnotationSource::Plugin(plugin.to_owned())
                    }
                },
                reason: Some(inference.why),
                safety_class: inference.safety_class,
            },
            (None, None) => EffectiveAnnotations::unknown(),
        })
    }

    /// Judges one call: annotate, then run every validator.
    pub fn evaluate(
        &self,
        variant: OperationType,
        tool: Tool,
        intent: Option<Intent>,
        args: serde_json::Value,
    ) -> Evaluation {
        let (effective, annotate_fault) = match self.annotate(&tool) {
            Ok(effective) => (effective, None),
            Err(fault) => (EffectiveAnnotations::unknown(), Some(fault)),
        };
        let request = CallRequest {
            variant,
            tool,
            intent,
            effective,
            args,
        };
        let outcome = match annotate_fault {
            Some(fault) => Outcome::rejected(&fault.plugin, fail_closed(&fault), Vec::new()),
            None => self.validate(&request),
        };
        Evaluation { request, outcome }
    }

    /// Runs the validator chain on a prepared request.
    pub fn validate(&self, request: &CallRequest) -> Outcome {
        let mut warnings = Vec::new();
        for validator in &self.validators {
            match validator.validate(request) {
                Ok(Verdict::Allow) => {}
                Ok(Verdict::Warn(message)) => warnings.push(Warning {
                    plugin: validator.name().to_owned(),
                    message,
                }),
                Ok(Verdict::Reject(message)) => {
                    return Outcome::rejected(validator.name(), message, warnings);
                }
                Err(fault) => {
                    tracing::warn!(plugin = validator.name(), "plugin fault: {fault}");
                    return Outcome::rejected(validator.name(), fail_closed(&fault), warnings);
                }
            }
        }
        match warnings.last() {
            None => Outcome::allow(),
            Some(last) => Outcome {
                decision: Decision::Warn,
                plugin: Some(last.plugin.clone()),
                message: Some(last.message.clone()),
                warnings,
            },
        }
    }
}

/// The rejection text for a call whose plugin faulted.
fn fail_closed(fault: &PluginFault) -> String {
    format!("Call blocked because the {fault}; the proxy fails closed when a policy plugin faults")
}

/// The safety class implied by server annotations when no annotator answered.
fn class_of(annotations: &Annotations) -> SafetyClass {
    if annotations.is_destructive() {
        SafetyClass::Dangerous
    } else if annotations.is_read_only() {
        SafetyClass::ReadOnly
    } else {
        SafetyClass::WriteCapable
    }
}
