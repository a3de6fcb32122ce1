//! The pipeline: effective annotations for a tool (the server's own, else the annotator
//! chain), then the validator chain, combined into one outcome.
//!
//! Any reject stops the chain; warnings are collected. A stage fault rejects the call
//! (fail closed) and names the stage. Annotations are taken from the tool passed in, which
//! callers read from the live upstream registry at call time.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::memo::AnnotationMemo;
use super::stage::{Annotator, Fault, FaultKind, Validator};
use super::types::*;

/// The active annotators and validators, in the order they run.
#[derive(Clone, Default)]
pub struct Pipeline {
    annotators: Vec<Arc<dyn Annotator>>,
    validators: Vec<Arc<dyn Validator>>,
    /// Annotations worked out so far, when every annotator is pure.
    memo: Option<AnnotationMemo>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |n: Vec<&str>| n.join(", ");
        f.debug_struct("Pipeline")
            .field(
                "annotators",
                &names(self.annotators.iter().map(|a| a.name()).collect()),
            )
            .field(
                "validators",
                &names(self.validators.iter().map(|v| v.name()).collect()),
            )
            .finish()
    }
}

/// A warning from one validator: the call went through.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// The validator that raised it.
    #[serde(default)]
    pub plugin: String,
    /// What it said.
    #[serde(default)]
    pub message: String,
}

/// The combined verdict of the validator chain. Its JSON is the `verdict` object of the
/// audit record and the call report (unset `plugin` and `message` are left out).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    #[serde(default)]
    pub decision: Decision,
    /// The plugin that rejected, or the last one that warned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// The rejection, or the last warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Every warning, in validator order.
    #[serde(default)]
    pub warnings: Vec<Warning>,
}

impl Outcome {
    fn allow() -> Self {
        Self::default()
    }

    /// A reject by `plugin` (a stage, or the proxy itself), after `warnings`.
    pub fn rejected(plugin: &str, message: String, warnings: Vec<Warning>) -> Self {
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
    /// The stage fault the call was rejected for, if one was.
    pub fault: Option<Fault>,
}

/// What an [`Evaluation`] comes to for the people reading it later: the effective
/// annotations with their provenance, the safety class and the verdict. The audit record
/// and the call report both show this projection.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub annotations: Option<Annotations>,
    pub annotation_source: AnnotationSource,
    pub annotation_reason: Option<String>,
    pub safety_class: SafetyClass,
    pub verdict: Outcome,
}

impl Evaluation {
    /// The projection records and reports show.
    pub fn judgement(&self) -> Judgement {
        let effective = &self.request.effective;
        Judgement {
            annotations: effective.annotations,
            annotation_source: effective.source.clone(),
            annotation_reason: effective.reason.clone(),
            safety_class: effective.safety_class,
            verdict: self.outcome.clone(),
        }
    }
}

impl Pipeline {
    pub fn new(annotators: Vec<Arc<dyn Annotator>>, validators: Vec<Arc<dyn Validator>>) -> Self {
        let pure = !annotators.is_empty() && annotators.iter().all(|a| a.is_pure());
        Self {
            annotators,
            validators,
            memo: pure.then(AnnotationMemo::default),
        }
    }

    pub fn annotators(&self) -> &[Arc<dyn Annotator>] {
        &self.annotators
    }

    pub fn validators(&self) -> &[Arc<dyn Validator>] {
        &self.validators
    }

    /// The annotations in force for a tool. The server's own annotations always win, with
    /// the MCP spec's defaults for the hints it left out
    /// ([`Annotations::with_spec_defaults`]), whenever it sent an annotations object, even
    /// one with no hint at all (`{"title": "Harmless"}` is a destructive tool); the first
    /// annotator that answers supplies the safety class (and, for tools without an
    /// annotations object, the annotations).
    ///
    /// When every annotator is pure ([`Annotator::is_pure`]: the embedded ones), the answer
    /// for a tool definition is remembered and the annotators are not asked again until the
    /// definition changes (see `memo`). A fault is never remembered.
    pub fn annotate(&self, tool: &Tool) -> Result<EffectiveAnnotations, Fault> {
        let Some(memo) = &self.memo else {
            return self.ask_annotators(tool);
        };
        if let Some(effective) = memo.get(tool) {
            return Ok(effective);
        }
        let effective = self.ask_annotators(tool)?;
        memo.put(tool, &effective);
        Ok(effective)
    }

    /// [`Pipeline::annotate`] without the memo: runs the annotator chain.
    fn ask_annotators(&self, tool: &Tool) -> Result<EffectiveAnnotations, Fault> {
        let server = tool.annotations.map(Annotations::with_spec_defaults);
        // Annotators see the server's hints with the defaults filled in, so the class they
        // derive agrees with the annotations in force.
        let completed;
        let seen = match server {
            Some(annotations) if tool.annotations != Some(annotations) => {
                completed = Tool {
                    annotations: Some(annotations),
                    ..tool.clone()
                };
                &completed
            }
            _ => tool,
        };
        let mut inferred = None;
        for annotator in &self.annotators {
            let span = plugin_span("annotate", annotator.name());
            let inferred_here = span.in_scope(|| annotator.infer(seen));
            if inferred_here.is_err() {
                span.record("otel.status_code", "ERROR");
            }
            if let Some(inference) = inferred_here? {
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

    /// Whether every stage answers in microseconds, always ([`Annotator::is_quick`]): then
    /// a call is judged on the thread that serves it, not handed to a blocking thread and
    /// back (two thread wake-ups, tens of microseconds, for a judgement of a few).
    pub fn is_quick(&self) -> bool {
        self.annotators.iter().all(|a| a.is_quick()) && self.validators.iter().all(|v| v.is_quick())
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
        let (outcome, fault) = match annotate_fault {
            Some(fault) => (
                Outcome::rejected(&fault.stage, fail_closed(&fault), Vec::new()),
                Some(fault),
            ),
            None => self.judge(&request),
        };
        Evaluation {
            request,
            outcome,
            fault,
        }
    }

    /// Runs the validator chain on a prepared request.
    pub fn validate(&self, request: &CallRequest) -> Outcome {
        self.judge(request).0
    }

    /// The validator chain's outcome, and the fault it was rejected for, if any.
    fn judge(&self, request: &CallRequest) -> (Outcome, Option<Fault>) {
        let mut warnings = Vec::new();
        for validator in &self.validators {
            let span = plugin_span("validate", validator.name());
            let verdict = span.in_scope(|| validator.validate(request));
            span.record(
                "mcpproxy.verdict",
                match &verdict {
                    Ok(Verdict::Allow) => "allow",
                    Ok(Verdict::Warn(_)) => "warn",
                    Ok(Verdict::Reject(_)) => "reject",
                    Err(_) => "fault",
                },
            );
            if verdict.is_err() {
                span.record("otel.status_code", "ERROR");
            }
            match verdict {
                Ok(Verdict::Allow) => {}
                Ok(Verdict::Warn(message)) => warnings.push(Warning {
                    plugin: validator.name().to_owned(),
                    message,
                }),
                Ok(Verdict::Reject(message)) => {
                    return (Outcome::rejected(validator.name(), message, warnings), None);
                }
                Err(fault) => {
                    tracing::warn!(plugin = validator.name(), "plugin fault: {fault}");
                    let outcome =
                        Outcome::rejected(validator.name(), fail_closed(&fault), warnings);
                    return (outcome, Some(fault));
                }
            }
        }
        let outcome = match warnings.last() {
            None => Outcome::allow(),
            Some(last) => Outcome {
                decision: Decision::Warn,
                plugin: Some(last.plugin.clone()),
                message: Some(last.message.clone()),
                warnings,
            },
        };
        (outcome, None)
    }
}

/// The rejection text for a call whose plugin faulted.
fn fail_closed(fault: &Fault) -> String {
    if fault.kind == FaultKind::Overloaded {
        return format!(
            "Call refused because mcpproxy is overloaded: {fault}, so the call could not be judged \
             and was not made; retry in a moment or send fewer calls at once"
        );
    }
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

/// The span of one annotator's or validator's run (see [`crate::spans`]).
fn plugin_span(stage: &'static str, plugin: &str) -> tracing::Span {
    tracing::info_span!(
        target: crate::spans::TARGET,
        "plugin",
        otel.name = %format_args!("{stage} {plugin}"),
        otel.status_code = tracing::field::Empty,
        mcpproxy.stage = stage,
        mcpproxy.plugin = plugin,
        mcpproxy.verdict = tracing::field::Empty,
    )
}

#[cfg(test)]
mod tests;
