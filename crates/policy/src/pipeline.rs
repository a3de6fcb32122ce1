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
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;

    /// An annotator that answers from a fixed inference (or not at all), and counts calls.
    struct FixedAnnotator {
        name: &'static str,
        answer: Option<Inference>,
        fault: bool,
        pure: bool,
        calls: Mutex<usize>,
    }

    impl FixedAnnotator {
        fn new(name: &'static str, answer: Option<Inference>) -> Arc<Self> {
            Arc::new(Self {
                name,
                answer,
                fault: false,
                pure: false,
                calls: Mutex::new(0),
            })
        }

        /// As `new`, but saying its answers depend only on the tool.
        fn pure(name: &'static str, answer: Option<Inference>) -> Arc<Self> {
            Arc::new(Self {
                name,
                answer,
                fault: false,
                pure: true,
                calls: Mutex::new(0),
            })
        }

        fn faulty(name: &'static str) -> Arc<Self> {
            Arc::new(Self {
                name,
                answer: None,
                fault: true,
                pure: true,
                calls: Mutex::new(0),
            })
        }

        fn calls(&self) -> usize {
            *self.calls.lock().unwrap()
        }
    }

    impl Annotator for FixedAnnotator {
        fn name(&self) -> &str {
            self.name
        }

        fn infer(&self, _tool: &Tool) -> Result<Option<Inference>, Fault> {
            *self.calls.lock().unwrap() += 1;
            if self.fault {
                return Err(fault(self.name));
            }
            Ok(self.answer.clone())
        }

        fn is_pure(&self) -> bool {
            self.pure
        }
    }

    /// A validator that allows everything and says it is quick.
    struct QuickAllow;

    impl Validator for QuickAllow {
        fn name(&self) -> &str {
            "quick"
        }

        fn validate(&self, _request: &CallRequest) -> Result<Verdict, Fault> {
            Ok(Verdict::Allow)
        }

        fn is_quick(&self) -> bool {
            true
        }
    }

    #[test]
    fn a_pipeline_is_quick_only_when_every_stage_is() {
        assert!(Pipeline::new(vec![], vec![Arc::new(QuickAllow)]).is_quick());
        let slow_annotator = FixedAnnotator::new("a", None);
        assert!(
            !Pipeline::new(vec![slow_annotator], vec![Arc::new(QuickAllow)]).is_quick(),
            "stages are not quick unless they say so"
        );
    }

    /// A validator that always gives one verdict (or faults), and counts calls.
    struct FixedValidator {
        name: &'static str,
        verdict: Result<Verdict, ()>,
        calls: Mutex<usize>,
    }

    impl FixedValidator {
        fn new(name: &'static str, verdict: Result<Verdict, ()>) -> Arc<Self> {
            Arc::new(Self {
                name,
                verdict,
                calls: Mutex::new(0),
            })
        }

        fn calls(&self) -> usize {
            *self.calls.lock().unwrap()
        }
    }

    impl Validator for FixedValidator {
        fn name(&self) -> &str {
            self.name
        }

        fn validate(&self, _request: &CallRequest) -> Result<Verdict, Fault> {
            *self.calls.lock().unwrap() += 1;
            self.verdict.clone().map_err(|()| fault(self.name))
        }
    }

    fn fault(stage: &str) -> Fault {
        Fault {
            stage: stage.to_owned(),
            detail: format!("validator plugin '{stage}' trapped: unreachable"),
            kind: FaultKind::Trap,
        }
    }

    fn inference(class: SafetyClass, basis: InferenceBasis, why: &str) -> Inference {
        Inference {
            annotations: Annotations {
                destructive_hint: Some(class == SafetyClass::Dangerous),
                ..Default::default()
            },
            safety_class: class,
            basis,
            why: why.to_owned(),
        }
    }

    fn tool(annotations: Option<Annotations>) -> Tool {
        Tool {
            server: "fs".into(),
            name: "delete_file".into(),
            annotations,
            ..Default::default()
        }
    }

    fn read_only() -> Annotations {
        Annotations {
            read_only_hint: Some(true),
            ..Default::default()
        }
    }

    fn annotators(list: Vec<Arc<FixedAnnotator>>) -> Vec<Arc<dyn Annotator>> {
        list.into_iter().map(|a| a as Arc<dyn Annotator>).collect()
    }

    fn validators(list: Vec<Arc<FixedValidator>>) -> Vec<Arc<dyn Validator>> {
        list.into_iter().map(|v| v as Arc<dyn Validator>).collect()
    }

    fn evaluate(pipeline: &Pipeline, tool: Tool) -> Evaluation {
        pipeline.evaluate(OperationType::Read, tool, None, json!({}))
    }

    #[test]
    fn server_annotations_beat_meta_and_annotators() {
        let meta = FixedAnnotator::new(
            "meta-reader",
            Some(inference(
                SafetyClass::Dangerous,
                InferenceBasis::Meta,
                "_meta",
            )),
        );
        let pipeline = Pipeline::new(annotators(vec![meta]), Vec::new());
        let effective = pipeline.annotate(&tool(Some(read_only()))).unwrap();
        assert_eq!(
            effective.annotations,
            Some(read_only().with_spec_defaults())
        );
        assert_eq!(effective.source, AnnotationSource::Server);
        // The annotator still supplies the class and its reason.
        assert_eq!(effective.safety_class, SafetyClass::Dangerous);
        assert_eq!(effective.reason.as_deref(), Some("_meta"));
    }

    /// An annotator that keeps the tool it was shown and does not answer.
    #[derive(Default)]
    struct Witness(Mutex<Option<Tool>>);

    impl Annotator for Witness {
        fn name(&self) -> &str {
            "witness"
        }

        fn infer(&self, tool: &Tool) -> Result<Option<Inference>, Fault> {
            *self.0.lock().unwrap() = Some(tool.clone());
            Ok(None)
        }
    }

    #[test]
    fn an_annotations_object_without_hints_takes_every_spec_default() {
        let witness = Arc::new(Witness::default());
        let pipeline = Pipeline::new(vec![witness.clone() as Arc<dyn Annotator>], Vec::new());
        let mut titled = tool(Some(Annotations::default()));
        titled.annotations_title = Some("Harmless".into());
        let effective = pipeline.annotate(&titled).unwrap();
        let defaults = Annotations {
            read_only_hint: Some(false),
            destructive_hint: Some(true),
            idempotent_hint: Some(false),
            open_world_hint: Some(true),
        };
        assert_eq!(effective.annotations, Some(defaults));
        assert_eq!(effective.source, AnnotationSource::Server);
        assert_eq!(effective.safety_class, SafetyClass::Dangerous);
        assert_eq!(
            witness.0.lock().unwrap().as_ref().unwrap().annotations,
            Some(defaults),
            "annotators see the defaults, so the class they derive agrees"
        );
        // No annotations object at all stays "none".
        let bare = pipeline.annotate(&tool(None)).unwrap();
        assert_eq!(bare, EffectiveAnnotations::unknown());
    }

    #[test]
    fn server_annotations_alone_imply_the_class() {
        let silent = FixedAnnotator::new("silent", None);
        let pipeline = Pipeline::new(annotators(vec![silent]), Vec::new());
        let effective = pipeline.annotate(&tool(Some(read_only()))).unwrap();
        assert_eq!(effective.source, AnnotationSource::Server);
        assert_eq!(effective.safety_class, SafetyClass::ReadOnly);
        assert_eq!(effective.reason, None);
    }

    #[test]
    fn meta_beats_name_inference_and_the_first_annotator_that_answers_wins() {
        let silent = FixedAnnotator::new("silent", None);
        let meta = FixedAnnotator::new(
            "meta-reader",
            Some(inference(
                SafetyClass::ReadOnly,
                InferenceBasis::Meta,
                "_meta says so",
            )),
        );
        let names = FixedAnnotator::new(
            "names",
            Some(inference(
                SafetyClass::Dangerous,
                InferenceBasis::Inferred,
                "prefix",
            )),
        );
        let pipeline = Pipeline::new(
            annotators(vec![silent.clone(), meta, names.clone()]),
            Vec::new(),
        );
        let effective = pipeline.annotate(&tool(None)).unwrap();
        assert_eq!(effective.source, AnnotationSource::Meta);
        assert_eq!(effective.safety_class, SafetyClass::ReadOnly);
        assert_eq!(effective.reason.as_deref(), Some("_meta says so"));
        assert_eq!(silent.calls(), 1);
        assert_eq!(names.calls(), 0, "the chain stops at the first answer");

        let pipeline = Pipeline::new(annotators(vec![names]), Vec::new());
        let effective = pipeline.annotate(&tool(None)).unwrap();
        assert_eq!(effective.source, AnnotationSource::Plugin("names".into()));
        assert_eq!(effective.safety_class, SafetyClass::Dangerous);
    }

    #[test]
    fn nobody_answering_leaves_the_tool_unknown() {
        let pipeline = Pipeline::new(
            annotators(vec![FixedAnnotator::new("silent", None)]),
            Vec::new(),
        );
        let effective = pipeline.annotate(&tool(None)).unwrap();
        assert_eq!(effective, EffectiveAnnotations::unknown());
    }

    #[test]
    fn a_reject_stops_the_chain_and_keeps_earlier_warnings() {
        let warner = FixedValidator::new("warner", Ok(Verdict::Warn("careful".into())));
        let rejecter = FixedValidator::new("rejecter", Ok(Verdict::Reject("no".into())));
        let after = FixedValidator::new("after", Ok(Verdict::Allow));
        let pipeline = Pipeline::new(
            Vec::new(),
            validators(vec![warner, rejecter, after.clone()]),
        );
        let outcome = evaluate(&pipeline, tool(None)).outcome;
        assert_eq!(outcome.decision, Decision::Reject);
        assert_eq!(outcome.plugin.as_deref(), Some("rejecter"));
        assert_eq!(outcome.message.as_deref(), Some("no"));
        assert_eq!(
            outcome.warnings,
            vec![Warning {
                plugin: "warner".into(),
                message: "careful".into()
            }]
        );
        assert!(!outcome.is_allowed());
        assert_eq!(after.calls(), 0);
    }

    #[test]
    fn warnings_are_collected_and_the_last_one_speaks() {
        let first = FixedValidator::new("first", Ok(Verdict::Warn("one".into())));
        let quiet = FixedValidator::new("quiet", Ok(Verdict::Allow));
        let second = FixedValidator::new("second", Ok(Verdict::Warn("two".into())));
        let pipeline = Pipeline::new(Vec::new(), validators(vec![first, quiet, second]));
        let outcome = evaluate(&pipeline, tool(None)).outcome;
        assert_eq!(outcome.decision, Decision::Warn);
        assert!(outcome.is_allowed());
        assert_eq!(outcome.plugin.as_deref(), Some("second"));
        assert_eq!(outcome.message.as_deref(), Some("two"));
        assert_eq!(outcome.warnings.len(), 2);
    }

    #[test]
    fn no_validator_allows() {
        let outcome = evaluate(&Pipeline::default(), tool(None)).outcome;
        assert_eq!(outcome, Outcome::allow());
    }

    #[test]
    fn a_validator_fault_rejects_naming_it() {
        let faulty = FixedValidator::new("faulty", Err(()));
        let after = FixedValidator::new("after", Ok(Verdict::Allow));
        let pipeline = Pipeline::new(Vec::new(), validators(vec![faulty, after.clone()]));
        let outcome = evaluate(&pipeline, tool(None)).outcome;
        assert_eq!(outcome.decision, Decision::Reject);
        assert_eq!(outcome.plugin.as_deref(), Some("faulty"));
        let message = outcome.message.unwrap();
        assert!(message.starts_with("Call blocked because the validator plugin 'faulty'"));
        assert!(message.ends_with("fails closed when a policy plugin faults"));
        assert_eq!(after.calls(), 0);
    }

    #[test]
    fn an_annotator_fault_rejects_before_any_validator_runs() {
        let validator = FixedValidator::new("v", Ok(Verdict::Allow));
        let pipeline = Pipeline::new(
            annotators(vec![FixedAnnotator::faulty("broken")]),
            validators(vec![validator.clone()]),
        );
        let evaluation = evaluate(&pipeline, tool(None));
        assert_eq!(evaluation.outcome.decision, Decision::Reject);
        assert_eq!(evaluation.outcome.plugin.as_deref(), Some("broken"));
        assert_eq!(
            evaluation.request.effective,
            EffectiveAnnotations::unknown()
        );
        assert_eq!(validator.calls(), 0);
    }

    #[test]
    fn pure_annotators_are_asked_once_per_tool_definition() {
        let answer = inference(SafetyClass::Dangerous, InferenceBasis::Inferred, "delete_");
        let first = FixedAnnotator::pure("a", None);
        let second = FixedAnnotator::pure("b", Some(answer));
        let pipeline = Pipeline::new(annotators(vec![first.clone(), second.clone()]), vec![]);
        let unannotated = tool(None);
        let once = pipeline.annotate(&unannotated).unwrap();
        for _ in 0..3 {
            assert_eq!(pipeline.annotate(&unannotated).unwrap(), once);
        }
        assert_eq!((first.calls(), second.calls()), (1, 1));
        assert_eq!(once.source, AnnotationSource::Plugin("b".into()));
        assert_eq!(once.safety_class, SafetyClass::Dangerous);

        // A changed definition is annotated afresh, and so is the old one's return.
        let mut changed = unannotated.clone();
        changed.description = "now it does something else".into();
        pipeline.annotate(&changed).unwrap();
        assert_eq!((first.calls(), second.calls()), (2, 2));
        let annotated = tool(Some(read_only()));
        let by_server = pipeline.annotate(&annotated).unwrap();
        assert_eq!(by_server.source, AnnotationSource::Server);
        assert_eq!(pipeline.annotate(&annotated).unwrap(), by_server);
        assert_eq!((first.calls(), second.calls()), (3, 3));
    }

    #[test]
    fn an_impure_annotator_is_asked_every_time_and_faults_are_never_remembered() {
        let pure = FixedAnnotator::pure("pure", None);
        let impure = FixedAnnotator::new("impure", None);
        let pipeline = Pipeline::new(annotators(vec![pure.clone(), impure.clone()]), vec![]);
        for _ in 0..3 {
            pipeline.annotate(&tool(None)).unwrap();
        }
        assert_eq!(
            (pure.calls(), impure.calls()),
            (3, 3),
            "one impure stage: no memo"
        );

        let faulty = FixedAnnotator::faulty("broken");
        let pipeline = Pipeline::new(annotators(vec![faulty.clone()]), vec![]);
        for _ in 0..3 {
            assert!(pipeline.annotate(&tool(None)).is_err());
        }
        assert_eq!(faulty.calls(), 3);
    }

    #[test]
    fn the_judgement_projects_annotations_and_verdict() {
        let pipeline = Pipeline::new(
            Vec::new(),
            validators(vec![FixedValidator::new(
                "w",
                Ok(Verdict::Warn("hm".into())),
            )]),
        );
        let judgement = evaluate(&pipeline, tool(Some(read_only()))).judgement();
        assert_eq!(
            judgement.annotations,
            Some(read_only().with_spec_defaults())
        );
        assert_eq!(judgement.annotation_source, AnnotationSource::Server);
        assert_eq!(judgement.safety_class, SafetyClass::ReadOnly);
        assert_eq!(judgement.verdict.decision, Decision::Warn);
    }

    #[test]
    fn the_verdict_json_leaves_out_unset_fields() {
        assert_eq!(
            serde_json::to_value(Outcome::allow()).unwrap(),
            json!({"decision": "allow", "warnings": []})
        );
    }
}
