//! A journal written by mcpproxy 0.1.0 (before the audit record became typed) opens and
//! reads the same today: every record, every field, as the same JSON.
//!
//! `tests/data/journal-0.1.0.redb` was written by the 0.1.0 release binary through
//! `mcpproxy call` against the fixture upstream (allowed, warned, rejected, tool-error,
//! dry-run and unknown-tool calls); `journal-0.1.0.json` is what that binary's
//! `activity list -o json` printed for it.

use std::path::Path;

use mcpproxy_activity::{Filter, Journal, JournalOptions, Status};
use mcpproxy_policy::{AnnotationSource, Decision, OperationType, SafetyClass};
use serde_json::Value;

fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

#[test]
fn a_journal_written_by_0_1_0_reads_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("activity.redb");
    std::fs::copy(data("journal-0.1.0.redb"), &path).unwrap();
    let expected: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(data("journal-0.1.0.json")).unwrap())
            .unwrap();
    assert!(
        expected.len() >= 8,
        "the fixture holds the calls it was made from"
    );

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    let journal = Journal::open(&path, JournalOptions::default()).unwrap();
    let page = journal.query(&Filter::default(), 1000, 0).unwrap();
    assert_eq!(page.records.len(), expected.len());
    for (record, want) in page.records.iter().zip(&expected) {
        let got = serde_json::to_value(record).unwrap();
        assert_eq!(&got, want, "record {}", record.id);
    }

    // And the typed fields hold what the strings said.
    let find = |tool: &str| {
        page.records
            .iter()
            .find(|r| r.tool_name == tool)
            .unwrap_or_else(|| panic!("a record for {tool}"))
    };
    let rejected = find("delete_note");
    assert_eq!(rejected.status, Status::Blocked);
    assert_eq!(rejected.tool_variant, Some(OperationType::Read));
    assert_eq!(rejected.verdict.decision, Decision::Reject);
    assert_eq!(rejected.verdict.plugin.as_deref(), Some("intent-matrix"));
    assert_eq!(rejected.annotation_source, AnnotationSource::Server);
    assert_eq!(rejected.safety_class, SafetyClass::Dangerous);
    assert_eq!(
        rejected.annotations.and_then(|a| a.destructive_hint),
        Some(true)
    );
    let warned = find("echo");
    assert_eq!(warned.verdict.decision, Decision::Warn);
    assert_eq!(warned.verdict.warnings.len(), 1);
    let intent = warned.intent.as_ref().unwrap();
    assert_eq!(intent.operation_type, Some(OperationType::Write));
    assert_eq!(intent.data_sensitivity.as_deref(), Some("internal"));
    let inferred = find("mystery_tool");
    assert_eq!(
        inferred.annotation_source,
        AnnotationSource::Plugin("prefix-annotator".into())
    );
    assert!(inferred.dry_run);
}
