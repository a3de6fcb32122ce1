//! A call's outcome as one JSON document: what `POST /api/v1/tools/call` answers and what
//! `mcpproxy call` prints, whether the call ran in-process or through a server.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use mcpproxy_policy::{
    AnnotationSource, Annotations, Evaluation, OperationType, Outcome, SafetyClass,
};

use super::CallOutcome;

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// The upstream answered with a result.
    Success,
    /// The upstream answered with `isError: true`.
    ToolError,
    /// The policy rejected the call; nothing was sent.
    Blocked,
    /// Refused before the policy ran (unknown server or tool, unusable server).
    Refused,
    /// Held back by the trust rules: a quarantined server (the message is its security
    /// analysis) or a tool changed since approval.
    Held,
    /// The upstream could not be reached or failed.
    UpstreamError,
    /// A dry run: judged, recorded, not sent.
    DryRun,
}

/// Everything about one call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CallReport {
    pub outcome: Ending,
    /// `server:tool`.
    pub tool: String,
    /// The variant called, written `call_tool_read`, `call_tool_write` or
    /// `call_tool_destructive`.
    #[serde(with = "variant_name")]
    pub variant: OperationType,
    /// The rejection or error, when there is one.
    pub message: Option<String>,
    /// The upstream's result, unchanged.
    pub result: Option<Value>,
    /// The arguments as resolved.
    pub arguments: Value,
    /// The effective annotations, where they came from and why, and the safety class.
    pub annotations: Option<Annotations>,
    pub annotation_source: Option<AnnotationSource>,
    pub annotation_reason: Option<String>,
    pub safety_class: Option<SafetyClass>,
    /// The validator chain's verdict: decision, plugin, message, warnings.
    pub verdict: Option<Outcome>,
}

impl CallReport {
    pub fn new(
        tool: String,
        variant: OperationType,
        arguments: Value,
        outcome: &CallOutcome,
    ) -> Self {
        let mut report = Self {
            outcome: Ending::Refused,
            tool,
            variant,
            message: None,
            result: None,
            arguments,
            annotations: None,
            annotation_source: None,
            annotation_reason: None,
            safety_class: None,
            verdict: None,
        };
        match outcome {
            CallOutcome::Refused(message) => report.message = Some(message.clone()),
            CallOutcome::Limited(limited) => report.message = Some(limited.message.clone()),
            CallOutcome::Held { detail, .. } => {
                report.outcome = Ending::Held;
                report.message = Some(detail.clone());
            }
            CallOutcome::Blocked(evaluation) => {
                report.judged(evaluation);
                report.outcome = Ending::Blocked;
                report.message = evaluation.outcome.message.clone();
            }
            CallOutcome::DryRun(evaluation) => {
                report.judged(evaluation);
                report.outcome = Ending::DryRun;
                if !evaluation.outcome.is_allowed() {
                    report.message = evaluation.outcome.message.clone();
                }
            }
            CallOutcome::InputRequired { evaluation, .. } => {
                report.judged(evaluation);
                report.outcome = Ending::UpstreamError;
                report.message = Some(
                    "the server asked for input from the client first (2026-07-28 \
                     input_required), which only an MCP client can give: call it over MCP"
                        .to_owned(),
                );
            }
            CallOutcome::Task { evaluation, .. } => {
                report.judged(evaluation);
                report.outcome = Ending::UpstreamError;
                report.message = Some(
                    "the server runs the call as a task (the tasks extension), which only an MCP \
                     client can follow: call it over MCP"
                        .to_owned(),
                );
            }
            CallOutcome::Called { evaluation, result } => {
                report.judged(evaluation);
                match result {
                    Ok(result) => {
                        report.outcome = if result.is_error == Some(true) {
                            Ending::ToolError
                        } else {
                            Ending::Success
                        };
                        report.result = serde_json::to_value(result).ok();
                    }
                    Err(e) => {
                        report.outcome = Ending::UpstreamError;
                        report.message = Some(e.to_string());
                    }
                }
            }
        }
        report
    }

    fn judged(&mut self, evaluation: &Evaluation) {
        let judgement = evaluation.judgement();
        self.arguments = evaluation.request.args.clone();
        self.annotations = judgement.annotations;
        self.annotation_source = Some(judgement.annotation_source);
        self.annotation_reason = judgement.annotation_reason;
        self.safety_class = Some(judgement.safety_class);
        self.verdict = Some(judgement.verdict);
    }

    /// Whether the policy would let the call through (meaningful for dry runs).
    pub fn allowed(&self) -> bool {
        self.verdict.as_ref().is_some_and(Outcome::is_allowed)
    }
}

/// Serde for a variant written as its tool name (`"call_tool_read"`), as the audit record's
/// `tool_variant` is.
mod variant_name {
    use serde::{Deserializer, Serializer, de::Error as _};

    use mcpproxy_policy::{OperationType, variant_tool_name};

    pub(super) fn serialize<S: Serializer>(
        variant: &OperationType,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_str(variant.tool_name())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OperationType, D::Error> {
        variant_tool_name::deserialize(d)?
            .ok_or_else(|| D::Error::custom("the tool variant is missing"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variant_is_written_as_its_tool_name() {
        let refused = CallOutcome::Refused("unknown server".to_owned());
        let report = CallReport::new(
            "fx:echo".to_owned(),
            OperationType::Write,
            Value::Null,
            &refused,
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["variant"], "call_tool_write");
        let read: CallReport = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(read.variant, OperationType::Write);
        let mut odd = json;
        odd["variant"] = "call_tool_sideways".into();
        let error = serde_json::from_value::<CallReport>(odd).unwrap_err();
        assert!(
            error.to_string().contains("unknown tool variant"),
            "{error}"
        );
    }
}
