//! Unit tests of `pipeline`.

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
        *mcpproxy_support::lock(&self.calls)
    }
}

impl Annotator for FixedAnnotator {
    fn name(&self) -> &str {
        self.name
    }

    fn infer(&self, _tool: &Tool) -> Result<Option<Inference>, Fault> {
        *mcpproxy_support::lock(&self.calls) += 1;
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
        *mcpproxy_support::lock(&self.calls)
    }
}

impl Validator for FixedValidator {
    fn name(&self) -> &str {
        self.name
    }

    fn validate(&self, _request: &CallRequest) -> Result<Verdict, Fault> {
        *mcpproxy_support::lock(&self.calls) += 1;
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
        *mcpproxy_support::lock(&self.0) = Some(tool.clone());
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
        mcpproxy_support::lock(&witness.0)
            .as_ref()
            .unwrap()
            .annotations,
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
