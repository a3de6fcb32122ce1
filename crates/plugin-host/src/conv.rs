//! Conversions between the proxy's policy types and the WIT-generated ones. Exhaustive
//! matches only, so a change to the contract is a compile error here and nowhere else.

use mcpproxy_policy::{
    Annotations, CallRequest, Inference, InferenceBasis, Intent, OperationType, SafetyClass, Tool,
    Verdict,
};

use super::bindings::{wit_annotator, wit_types};

impl From<OperationType> for wit_types::OperationType {
    fn from(op: OperationType) -> Self {
        match op {
            OperationType::Read => Self::Read,
            OperationType::Write => Self::Write,
            OperationType::Destructive => Self::Destructive,
        }
    }
}

impl From<SafetyClass> for wit_types::SafetyClass {
    fn from(class: SafetyClass) -> Self {
        match class {
            SafetyClass::ReadOnly => Self::ReadOnly,
            SafetyClass::WriteCapable => Self::WriteCapable,
            SafetyClass::Subprocess => Self::Subprocess,
            SafetyClass::Dangerous => Self::Dangerous,
            SafetyClass::Unknown => Self::Unknown,
        }
    }
}

impl From<wit_types::SafetyClass> for SafetyClass {
    fn from(class: wit_types::SafetyClass) -> Self {
        match class {
            wit_types::SafetyClass::ReadOnly => Self::ReadOnly,
            wit_types::SafetyClass::WriteCapable => Self::WriteCapable,
            wit_types::SafetyClass::Subprocess => Self::Subprocess,
            wit_types::SafetyClass::Dangerous => Self::Dangerous,
            wit_types::SafetyClass::Unknown => Self::Unknown,
        }
    }
}

impl From<&Annotations> for wit_types::Annotations {
    fn from(a: &Annotations) -> Self {
        Self {
            read_only_hint: a.read_only_hint,
            destructive_hint: a.destructive_hint,
            idempotent_hint: a.idempotent_hint,
            open_world_hint: a.open_world_hint,
        }
    }
}

impl From<wit_types::Annotations> for Annotations {
    fn from(a: wit_types::Annotations) -> Self {
        Self {
            read_only_hint: a.read_only_hint,
            destructive_hint: a.destructive_hint,
            idempotent_hint: a.idempotent_hint,
            open_world_hint: a.open_world_hint,
        }
    }
}

impl From<&Tool> for wit_types::Tool {
    fn from(t: &Tool) -> Self {
        Self {
            server: t.server.clone(),
            name: t.name.clone(),
            description: t.description.clone(),
            input_schema: t.input_schema.to_string(),
            annotations: t.annotations.as_ref().map(Into::into),
            meta: t.meta.as_ref().map(|m| m.to_string()),
        }
    }
}

impl From<&Intent> for wit_types::Intent {
    fn from(i: &Intent) -> Self {
        Self {
            operation_type: i.operation_type.map(Into::into),
            data_sensitivity: i.data_sensitivity.clone(),
            reason: i.reason.clone(),
        }
    }
}

impl From<&CallRequest> for wit_types::CallRequest {
    fn from(r: &CallRequest) -> Self {
        Self {
            variant: r.variant.into(),
            tool: (&r.tool).into(),
            intent: r.intent.as_ref().map(Into::into),
            effective: r.effective.annotations.as_ref().map(Into::into),
            annotation_source: r.effective.source.label().to_owned(),
            annotation_reason: r.effective.reason.clone(),
            safety_class: r.effective.safety_class.into(),
            args_json: r.args.to_string(),
        }
    }
}

impl From<wit_types::Verdict> for Verdict {
    fn from(v: wit_types::Verdict) -> Self {
        match v {
            wit_types::Verdict::Allow => Self::Allow,
            wit_types::Verdict::Warn(m) => Self::Warn(m),
            wit_types::Verdict::Reject(m) => Self::Reject(m),
        }
    }
}

impl From<wit_annotator::Basis> for InferenceBasis {
    fn from(b: wit_annotator::Basis) -> Self {
        match b {
            wit_annotator::Basis::Server => Self::Server,
            wit_annotator::Basis::Meta => Self::Meta,
            wit_annotator::Basis::Inferred => Self::Inferred,
        }
    }
}

impl From<wit_annotator::Inference> for Inference {
    fn from(i: wit_annotator::Inference) -> Self {
        Self {
            annotations: i.annotations.into(),
            safety_class: i.safety_class.into(),
            basis: i.basis.into(),
            why: i.why,
        }
    }
}
