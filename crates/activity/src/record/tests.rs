//! Unit tests of the activity record: its JSON, ids and timestamps, the argument cap,
//! redaction, bounding and summarising.

use super::*;
use mcpproxy_policy::{Decision, Warning};
use serde_json::json;

fn full_record() -> ActivityRecord {
    ActivityRecord {
        id: "01KAMXH0VBSJ2QX6F6R4VZ7P3M".into(),
        record_type: RecordType::ToolCall,
        source: Source::Mcp,
        server_name: "github".into(),
        tool_name: "create_issue".into(),
        tool_variant: Some(OperationType::Write),
        intent: Some(Intent {
            operation_type: Some(OperationType::Write),
            data_sensitivity: None,
            reason: Some("file a bug".into()),
        }),
        annotations: Some(Annotations {
            read_only_hint: Some(false),
            destructive_hint: Some(false),
            ..Default::default()
        }),
        annotation_source: AnnotationSource::Server,
        safety_class: SafetyClass::WriteCapable,
        verdict: Outcome {
            decision: Decision::Warn,
            plugin: None,
            message: None,
            warnings: vec![Warning {
                plugin: "pii".into(),
                message: "email".into(),
            }],
        },
        arguments: Some(json!({"title": "x"})),
        arguments_truncated: false,
        response_bytes: 1234,
        status: Status::Success,
        error_message: None,
        duration_ms: 87,
        timestamp: "2026-11-22T04:10:00.123Z".into(),
        session_id: Some("s1".into()),
        request_id: Some("7".into()),
        client: Some(ClientRecord {
            name: "claude".into(),
            version: "1.0".into(),
        }),
        dry_run: false,
        details: None,
        summarised: false,
        guards: Vec::new(),
        parent_id: None,
        identity: None,
        replica: None,
        approval: None,
    }
}

#[test]
fn the_replica_is_absent_unless_set_and_reads_back() {
    let rec = full_record();
    let v = serde_json::to_value(&rec).unwrap();
    assert!(v.get("replica").is_none(), "absent when unset: {v}");
    let rec = ActivityRecord {
        replica: Some("replica-1".into()),
        ..full_record()
    };
    let v = serde_json::to_value(&rec).unwrap();
    assert_eq!(v["replica"], "replica-1");
    let back: ActivityRecord = serde_json::from_value(v).unwrap();
    assert_eq!(back, rec);
    // A record written before the field existed reads with none.
    let mut old = serde_json::to_value(full_record()).unwrap();
    old.as_object_mut().unwrap().remove("replica");
    let back: ActivityRecord = serde_json::from_value(old).unwrap();
    assert_eq!(back.replica, None);
}

#[test]
fn full_record_round_trips_with_wire_names() {
    let rec = full_record();
    let v = serde_json::to_value(&rec).unwrap();
    let obj = v.as_object().unwrap();
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut want = vec![
        "id",
        "type",
        "source",
        "server_name",
        "tool_name",
        "tool_variant",
        "intent",
        "annotations",
        "annotation_source",
        "safety_class",
        "verdict",
        "arguments",
        "arguments_truncated",
        "response_bytes",
        "status",
        "error_message",
        "duration_ms",
        "timestamp",
        "session_id",
        "request_id",
        "client",
        "dry_run",
    ];
    want.sort_unstable();
    assert_eq!(keys, want);
    assert_eq!(v["type"], "tool_call");
    assert_eq!(v["source"], "mcp");
    assert_eq!(v["status"], "success");
    assert_eq!(v["verdict"]["decision"], "warn");
    assert_eq!(v["tool_variant"], "call_tool_write");
    assert_eq!(v["annotation_source"], "server");
    assert_eq!(v["safety_class"], "write-capable");
    assert_eq!(
        v["annotations"],
        json!({"readOnlyHint": false, "destructiveHint": false})
    );
    assert_eq!(v["verdict"]["warnings"][0]["plugin"], "pii");
    assert!(
        v["verdict"].get("plugin").is_none(),
        "None verdict fields are skipped"
    );
    assert_eq!(
        v["intent"],
        json!({"operation_type": "write", "reason": "file a bug"})
    );
    assert_eq!(v["client"], json!({"name": "claude", "version": "1.0"}));
    assert_eq!(v["error_message"], Value::Null);
    let back: ActivityRecord = serde_json::from_value(v).unwrap();
    assert_eq!(back, rec);

    let rec = ActivityRecord {
        record_type: RecordType::PolicyDecision,
        source: Source::Api,
        status: Status::Blocked,
        verdict: Outcome {
            decision: Decision::Reject,
            ..Default::default()
        },
        ..full_record()
    };
    let v = serde_json::to_value(&rec).unwrap();
    assert_eq!(
        (
            &v["type"],
            &v["source"],
            &v["status"],
            &v["verdict"]["decision"]
        ),
        (
            &json!("policy_decision"),
            &json!("api"),
            &json!("blocked"),
            &json!("reject")
        )
    );
    // A sparse row still reads.
    let sparse: ActivityRecord = serde_json::from_str(r#"{"id":"x","status":"error"}"#).unwrap();
    assert_eq!(sparse.status, Status::Error);
}

#[test]
fn every_record_type_round_trips_by_its_wire_name() {
    // The match is exhaustive: a new type must be placed here, and so in `ALL`.
    let position = |t: RecordType| match t {
        RecordType::ToolCall => 0,
        RecordType::PolicyDecision => 1,
        RecordType::ToolChange => 2,
        RecordType::Approval => 3,
        RecordType::Alert => 4,
        RecordType::ResourceRead => 5,
        RecordType::ServerRequest => 6,
        RecordType::PromptGet => 7,
        RecordType::Completion => 8,
        RecordType::Subscription => 9,
        RecordType::ServerChange => 10,
        RecordType::CodeExecution => 11,
        RecordType::Egress => 12,
    };
    for (i, t) in RecordType::ALL.into_iter().enumerate() {
        assert_eq!(position(t), i, "{t:?} out of place in RecordType::ALL");
        let name = t.as_str();
        assert_eq!(serde_json::to_value(t).unwrap(), json!(name));
        assert_eq!(
            serde_json::from_value::<RecordType>(json!(name)).unwrap(),
            t
        );
        assert_eq!(RecordType::parse(name), Some(t));
        assert_eq!(RecordType::parse(&name.to_ascii_uppercase()), Some(t));
    }
    assert_eq!(
        RecordType::names().collect::<Vec<_>>()[7..],
        [
            "prompt_get",
            "completion",
            "subscription",
            "server_change",
            "code_execution",
            "egress"
        ]
    );
    assert_eq!(RecordType::parse("prompt"), None);
    // A record of each new type reads back whole, its details included.
    for t in [
        RecordType::PromptGet,
        RecordType::Completion,
        RecordType::Subscription,
    ] {
        let mut rec = ActivityRecord::new(t, Source::Mcp, "fx", "greeting");
        rec.details = Some(json!({"method": "resources/subscribe"}));
        let v = serde_json::to_value(&rec).unwrap();
        assert_eq!(v["type"], t.as_str());
        assert_eq!(serde_json::from_value::<ActivityRecord>(v).unwrap(), rec);
    }
}

#[test]
fn records_are_bounded_whatever_a_caller_sends() {
    let small = full_record();
    assert!(matches!(small.bounded(), std::borrow::Cow::Borrowed(_)));

    let huge = "é".repeat(2 << 20);
    let mut rec = full_record();
    rec.server_name = huge.clone();
    rec.tool_name = huge.clone();
    rec.client = Some(ClientRecord {
        name: huge.clone(),
        version: huge.clone(),
    });
    rec.intent.as_mut().unwrap().reason = Some(huge.clone());
    rec.error_message = Some(huge.clone());
    rec.verdict.message = Some(huge.clone());
    rec.verdict.warnings[0].message = huge.clone();
    rec.details = Some(json!({"diff": huge}));
    let bounded = rec.bounded();
    let json = serde_json::to_string(&*bounded).unwrap();
    assert!(json.len() < 100 << 10, "{} bytes", json.len());
    assert!(bounded.server_name.len() <= MAX_NAME_BYTES);
    assert!(bounded.server_name.ends_with("…[cut]"));
    assert!(bounded.error_message.as_ref().unwrap().len() <= MAX_TEXT_BYTES);
    assert_eq!(bounded.details.as_ref().unwrap()["_truncated"], true);
    // Untouched fields stay as they were.
    assert_eq!(bounded.id, rec.id);
    assert_eq!(bounded.arguments, rec.arguments);
}

#[test]
fn a_summarised_record_stays_under_2_kib_and_keeps_its_identity() {
    // 128 KiB of escapes and multi-byte text: twice the largest bound (`details`, 64 KiB).
    let huge = "\u{1}é\"".repeat(MAX_DETAILS_BYTES / 2);
    let mut rec = full_record();
    rec.server_name = huge.clone();
    rec.tool_name = huge.clone();
    rec.session_id = Some(huge.clone());
    rec.request_id = Some(huge.clone());
    rec.client = Some(ClientRecord {
        name: huge.clone(),
        version: huge.clone(),
    });
    let intent = rec.intent.as_mut().unwrap();
    intent.reason = Some(huge.clone());
    intent.data_sensitivity = Some(huge.clone());
    rec.error_message = Some(huge.clone());
    rec.verdict.plugin = Some(huge.clone());
    rec.verdict.message = Some(huge.clone());
    rec.verdict.warnings = vec![
        Warning {
            plugin: huge.clone(),
            message: huge.clone(),
        };
        100
    ];
    rec.arguments = Some(json!({"text": huge, "n": [1, 2, 3]}));
    rec.details = Some(json!({"diff": huge}));
    // The journal bounds first, then summarises: both orders must stay small.
    for summary in [rec.summarised(), rec.bounded().summarised()] {
        let json = serde_json::to_string(&summary).unwrap();
        assert!(json.len() <= 2048, "{} bytes: {json}", json.len());
        assert!(summary.summarised);
        assert!(summary.arguments_truncated);
        assert_eq!(summary.arguments.as_ref().unwrap()["_truncated"], true);
        assert_eq!(summary.details.as_ref().unwrap()["_truncated"], true);
        assert!(summary.error_message.as_ref().unwrap().ends_with("…[cut]"));
        assert_eq!(summary.verdict.warnings.len(), 1);
        // Identity stays.
        assert_eq!(summary.id, rec.id);
        assert_eq!(summary.record_type, rec.record_type);
        assert_eq!(summary.status, rec.status);
        assert_eq!(summary.tool_variant, rec.tool_variant);
        assert_eq!(summary.intent_type(), rec.intent_type());
        assert_eq!(summary.verdict.decision, rec.verdict.decision);
        assert_eq!(summary.timestamp, rec.timestamp);
        assert_eq!(summary.duration_ms, rec.duration_ms);
        let back: ActivityRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back, summary);
    }
    // Short identity fields are kept whole.
    let small = full_record().summarised();
    assert_eq!(small.server_name, "github");
    assert_eq!(small.session_id.as_deref(), Some("s1"));
    assert_eq!(small.arguments, full_record().arguments);
    assert!(!small.arguments_truncated);
    let v = serde_json::to_value(&small).unwrap();
    assert_eq!(v["summarised"], true);
    assert!(
        serde_json::to_value(full_record())
            .unwrap()
            .get("summarised")
            .is_none(),
        "absent unless set"
    );
}

#[test]
fn intent_type_prefers_declared_then_variant() {
    let mut rec = full_record();
    assert_eq!(rec.intent_type().as_deref(), Some("write"));
    rec.intent = None;
    rec.tool_variant = Some(OperationType::Destructive);
    assert_eq!(rec.intent_type().as_deref(), Some("destructive"));
    rec.tool_variant = None;
    assert_eq!(rec.intent_type(), None);
}

#[test]
fn ids_are_monotonic_and_timestamps_match() {
    let mut prev = String::new();
    for _ in 0..10_000 {
        let (id, ms) = new_id();
        assert_eq!(id.len(), 26);
        assert!(id > prev, "{id} <= {prev}");
        assert_eq!(ulid::Ulid::from_string(&id).unwrap().timestamp_ms(), ms);
        prev = id;
    }
    let rec = ActivityRecord::new(RecordType::ToolCall, Source::Cli, "s", "t");
    let ms = ulid::Ulid::from_string(&rec.id).unwrap().timestamp_ms();
    assert_eq!(parse_timestamp(&rec.timestamp).unwrap(), ms);
}

#[test]
fn timestamps_format_and_parse() {
    assert_eq!(format_timestamp(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(
        format_timestamp(1_795_320_600_123),
        "2026-11-22T04:10:00.123Z"
    );
    assert_eq!(format_timestamp(u64::MAX), "9999-12-31T23:59:59.999Z");
    assert_eq!(
        parse_timestamp("2026-11-22T04:10:00.123Z").unwrap(),
        1_795_320_600_123
    );
    assert_eq!(
        parse_timestamp("2026-11-22T06:10:00.123+02:00").unwrap(),
        1_795_320_600_123
    );
    assert_eq!(
        parse_timestamp("2026-11-21T23:10:00-05:00").unwrap(),
        1_795_320_600_000
    );
    assert_eq!(
        parse_timestamp("2026-11-22T04:10:00.123999Z").unwrap(),
        1_795_320_600_123
    );
    for bad in [
        "",
        "yesterday",
        "2026-11-22",
        "2026-11-22 04:10:00",
        "1969-12-31T23:59:59Z",
    ] {
        let err = parse_timestamp(bad).unwrap_err();
        assert!(err.contains(&format!("{bad:?}")), "{err}");
        if bad.starts_with("1969") {
            assert!(err.contains("before 1970"), "{err}");
        } else {
            assert!(err.contains("expected RFC 3339"), "{err}");
        }
    }
}

#[test]
fn cap_arguments_redacts_at_depth() {
    let args = json!({
        "Token": "abc",
        "nested": {"list": [{"PASSWORD": "p", "keep": 1}], "api_key": {"deep": true}},
        "keep": "yes"
    });
    let keys = vec![
        "token".to_string(),
        "Password".to_string(),
        "API_KEY".to_string(),
    ];
    let (out, truncated) = cap_arguments(&args, 10_000, &keys);
    assert!(!truncated);
    assert_eq!(
        out,
        json!({
            "Token": "[REDACTED]",
            "nested": {"list": [{"PASSWORD": "[REDACTED]", "keep": 1}], "api_key": "[REDACTED]"},
            "keep": "yes"
        })
    );
    assert_eq!(cap_arguments(&args, 0, &keys), (Value::Null, true));
}

#[test]
fn redaction_catches_spellings_of_a_secret_but_not_numbers() {
    let keys: Vec<String> = ["password", "token", "secret", "api_key", "cookie"]
        .iter()
        .map(|k| (*k).to_owned())
        .collect();
    let args = json!({
        "access_token": "t", "client_secret": "s", "apiKey": "k", "x-api-key": "k",
        "db_password": "p", "Cookie": "c", "max_tokens": 100, "tokenize": true,
        "path": "/tmp/x"
    });
    let (out, _) = cap_arguments(&args, 10_000, &keys);
    for redacted in [
        "access_token",
        "client_secret",
        "apiKey",
        "x-api-key",
        "db_password",
        "Cookie",
    ] {
        assert_eq!(out[redacted], "[REDACTED]", "{redacted}");
    }
    assert_eq!(out["max_tokens"], 100);
    assert_eq!(out["tokenize"], true);
    assert_eq!(out["path"], "/tmp/x");
}

#[test]
fn cap_arguments_truncates_at_char_boundary() {
    let args = json!({"text": "ééééé"}); // {"text":"ééééé"} = 9 ASCII + 10 bytes + 2
    let json = args.to_string();
    assert_eq!(json.len(), 21);
    assert_eq!(cap_arguments(&args, 21, &[]), (args.clone(), false));
    // 10 bytes ends inside the first 'é' (bytes 9..11): the cut moves back to 9.
    let (out, truncated) = cap_arguments(&args, 10, &[]);
    assert!(truncated);
    assert_eq!(out, json!({"_truncated": true, "_preview": "{\"text\":\""}));
    let (out, _) = cap_arguments(&args, 11, &[]);
    assert_eq!(out["_preview"], "{\"text\":\"é");
    // Redaction happens before measuring.
    let big = json!({"secret": "x".repeat(1000)});
    let (out, truncated) = cap_arguments(&big, 100, &["SECRET".into()]);
    assert!(!truncated);
    assert_eq!(out, json!({"secret": "[REDACTED]"}));
}
