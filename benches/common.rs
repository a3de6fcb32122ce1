//! What the benches share: a deterministic generator of realistic activity records.

#![allow(
    dead_code,
    reason = "shared helpers: each bench uses a different subset"
)]

use mcpproxy_activity::{
    ActivityRecord, ClientRecord, RecordType, Source, Status, format_timestamp,
};
use mcpproxy_policy::{
    AnnotationSource, Annotations, Decision, Intent, OperationType, Outcome, SafetyClass, Warning,
};

const SERVERS: [&str; 5] = ["github", "filesystem", "postgres", "slack", "jira"];

/// xorshift64*: deterministic and dependency-free.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A realistic record (~700 bytes of JSON) at `ms`.
pub(crate) fn record(rng: &mut Rng, ms: u64, id: String) -> ActivityRecord {
    let server = SERVERS[rng.below(5) as usize];
    let tool = format!("{server}_tool_{}", rng.below(10));
    let variant = match rng.below(10) {
        0 => OperationType::Destructive,
        1..=3 => OperationType::Write,
        _ => OperationType::Read,
    };
    let status = match rng.below(20) {
        0 => Status::Blocked,
        1 | 2 => Status::Error,
        _ => Status::Success,
    };
    let intent = (rng.below(5) == 0).then(|| Intent {
        operation_type: Some(variant),
        data_sensitivity: Some("internal".into()),
        reason: Some("user asked to update the tracking issue".into()),
    });
    let blocked = status == Status::Blocked;
    ActivityRecord {
        id,
        record_type: if rng.below(50) == 0 {
            RecordType::PolicyDecision
        } else {
            RecordType::ToolCall
        },
        source: Source::Mcp,
        server_name: server.to_string(),
        tool_name: tool,
        tool_variant: Some(variant),
        intent,
        annotations: Some(Annotations {
            read_only_hint: Some(variant == OperationType::Read),
            destructive_hint: Some(variant == OperationType::Destructive),
            ..Default::default()
        }),
        annotation_source: AnnotationSource::Server,
        safety_class: match variant {
            OperationType::Read => SafetyClass::ReadOnly,
            OperationType::Write => SafetyClass::WriteCapable,
            OperationType::Destructive => SafetyClass::Dangerous,
        },
        verdict: Outcome {
            decision: if blocked {
                Decision::Reject
            } else {
                Decision::Allow
            },
            plugin: blocked.then(|| "intent-check".to_string()),
            message: blocked.then(|| "declared intent does not match the tool".to_string()),
            warnings: if rng.below(10) == 0 {
                vec![Warning {
                    plugin: "pii".into(),
                    message: "email address".into(),
                }]
            } else {
                Vec::new()
            },
        },
        arguments: Some(serde_json::json!({
            "path": format!("/home/user/project/src/file_{}.rs", rng.below(1000)),
            "query": "SELECT id, name FROM users WHERE created_at > now() - interval '1 day'",
            "limit": rng.below(100),
        })),
        arguments_truncated: false,
        response_bytes: rng.below(100_000),
        status,
        error_message: (status == Status::Error).then(|| "upstream timed out".to_string()),
        duration_ms: rng.below(2000),
        timestamp: format_timestamp(ms),
        session_id: Some(format!("sess-{:08x}", rng.below(1 << 32))),
        request_id: Some(rng.below(1_000_000).to_string()),
        client: Some(ClientRecord {
            name: "claude-code".into(),
            version: "2.1.0".into(),
        }),
        dry_run: false,
        details: None,
        guards: Vec::new(),
        summarised: false,
        parent_id: None,
        identity: None,
        replica: None,
        approval: None,
    }
}
