//! Policy plugins timed and counted: each annotator and validator wrapped so that every run
//! adds to `mcpproxy_plugin_duration_seconds{plugin}` and
//! `mcpproxy_plugin_decisions_total{plugin,decision}` (and to
//! `mcpproxy_plugin_timeouts_total{plugin}` when it ran past its deadline). The wrapper
//! answers exactly as the plugin does, so the pipeline cannot tell it is there.

use std::sync::Arc;
use std::time::Instant;

use mcpproxy_policy::{
    Annotator, CallRequest, Fault, FaultKind, Inference, Tool, Validator, Verdict,
};

use super::Metrics;

struct Timed<S: ?Sized> {
    stage: Arc<S>,
    metrics: Arc<Metrics>,
}

fn fault_of<T>(result: &Result<T, Fault>) -> Option<&Fault> {
    result.as_ref().err()
}

impl<S: ?Sized> Timed<S> {
    fn count<T>(&self, name: &str, started: Instant, result: &Result<T, Fault>, decision: &str) {
        let timed_out = fault_of(result).is_some_and(|f| f.kind == FaultKind::Deadline);
        let decision = if result.is_err() { "fault" } else { decision };
        self.metrics
            .plugin_ran(name, decision, started.elapsed(), timed_out);
    }
}

impl Annotator for Timed<dyn Annotator> {
    fn name(&self) -> &str {
        self.stage.name()
    }

    fn infer(&self, tool: &Tool) -> Result<Option<Inference>, Fault> {
        let started = Instant::now();
        let result = self.stage.infer(tool);
        let decision = match &result {
            Ok(Some(_)) => "annotated",
            _ => "abstained",
        };
        self.count(self.stage.name(), started, &result, decision);
        result
    }

    fn is_quick(&self) -> bool {
        self.stage.is_quick()
    }

    fn is_pure(&self) -> bool {
        self.stage.is_pure()
    }
}

impl Validator for Timed<dyn Validator> {
    fn name(&self) -> &str {
        self.stage.name()
    }

    fn validate(&self, request: &CallRequest) -> Result<Verdict, Fault> {
        let started = Instant::now();
        let result = self.stage.validate(request);
        let decision = result
            .as_ref()
            .map_or("fault", |verdict| verdict.decision().as_str());
        self.count(self.stage.name(), started, &result, decision);
        result
    }

    fn is_quick(&self) -> bool {
        self.stage.is_quick()
    }
}

/// `annotators`, each timed and counted into `metrics`.
pub fn timed_annotators(
    annotators: Vec<Arc<dyn Annotator>>,
    metrics: &Arc<Metrics>,
) -> Vec<Arc<dyn Annotator>> {
    annotators
        .into_iter()
        .map(|stage| {
            Arc::new(Timed {
                stage,
                metrics: metrics.clone(),
            }) as Arc<dyn Annotator>
        })
        .collect()
}

/// `validators`, each timed and counted into `metrics`.
pub fn timed_validators(
    validators: Vec<Arc<dyn Validator>>,
    metrics: &Arc<Metrics>,
) -> Vec<Arc<dyn Validator>> {
    validators
        .into_iter()
        .map(|stage| {
            Arc::new(Timed {
                stage,
                metrics: metrics.clone(),
            }) as Arc<dyn Validator>
        })
        .collect()
}
