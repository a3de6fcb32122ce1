//! Unit tests of the exposition: names, labels, caps, and the dashboard's names.

use std::time::Duration;

use super::*;

#[test]
fn counters_and_gauges_show_in_the_exposition() {
    let metrics = Metrics::new();
    metrics.call(
        "fs",
        "call_tool_read",
        "success",
        "allow",
        Duration::from_millis(2),
    );
    metrics.call(
        "fs",
        "call_tool_read",
        "success",
        "allow",
        Duration::from_millis(3),
    );
    metrics.upstream_call("fs", Duration::from_micros(400));
    metrics.plugin_fault("intent-matrix", "deadline");
    metrics.journal_fsync();
    metrics.set_upstreams([UpstreamGauge {
        server: "fs".into(),
        state: "ready".into(),
        tools: 14,
    }]);
    metrics.set_sinks([SinkGauge {
        sink: "clickhouse-sink".into(),
        backlog: 7,
        lag: Duration::from_millis(1500),
        failures: 2,
        delivered: 40,
        dropped: 0,
    }]);
    let text = metrics.encode();
    assert!(
        text.contains(
            r#"mcpproxy_calls_total{server="fs",variant="call_tool_read",status="success",decision="allow"} 2"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"mcpproxy_call_duration_seconds_count{variant="call_tool_read"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"mcpproxy_upstream_call_duration_seconds_count{server="fs"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"mcpproxy_plugin_faults_total{plugin="intent-matrix",kind="deadline"} 1"#),
        "{text}"
    );
    assert!(text.contains("mcpproxy_journal_fsyncs_total 1\n"), "{text}");
    assert!(
        text.contains(r#"mcpproxy_upstream_state{server="fs",state="ready"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"mcpproxy_sink_lag_seconds{sink="clickhouse-sink"} 1.5"#),
        "{text}"
    );
    assert!(
        text.contains(r#"mcpproxy_sink_failures{sink="clickhouse-sink"} 2"#)
            && text.contains(r#"mcpproxy_sink_delivered_records{sink="clickhouse-sink"} 40"#),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");

    // A server that went away disappears from the gauges.
    metrics.set_upstreams([]);
    assert!(!metrics.encode().contains("upstream_state{"));
}

#[test]
fn the_journal_failing_shows_with_its_reason_and_goes_when_it_recovers() {
    let metrics = Metrics::new();
    metrics.set_journal_health(None);
    let text = metrics.encode();
    assert!(text.contains("mcpproxy_journal_failing 0\n"), "{text}");
    assert!(!text.contains("mcpproxy_journal_failure{"), "{text}");

    metrics.set_journal_health(Some("No space left on device"));
    let text = metrics.encode();
    assert!(text.contains("mcpproxy_journal_failing 1\n"), "{text}");
    assert!(
        text.contains(r#"mcpproxy_journal_failure{reason="No space left on device"} 1"#),
        "{text}"
    );

    metrics.set_journal_health(None);
    let text = metrics.encode();
    assert!(text.contains("mcpproxy_journal_failing 0\n"), "{text}");
    assert!(!text.contains("mcpproxy_journal_failure{"), "{text}");
}

#[test]
fn label_values_are_escaped() {
    let metrics = Metrics::new();
    metrics.plugin_fault("a\"b\nc", "trap");
    let text = metrics.encode();
    assert!(text.contains(r#"plugin="a\"b\nc""#), "{text}");
}

#[test]
fn tool_labels_are_capped_and_the_rest_count_as_other() {
    let metrics = Metrics::new();
    for i in 0..MAX_TOOL_LABEL_SETS + 5 {
        metrics.tool_call("fs", &format!("tool_{i}"));
    }
    metrics.tool_call("fs", "tool_0");
    let text = metrics.encode();
    assert!(
        text.contains(r#"mcpproxy_tool_calls_total{server="fs",tool="tool_0"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"mcpproxy_tool_calls_total{server="fs",tool="other"} 5"#),
        "{text}"
    );
    assert_eq!(
        text.matches("mcpproxy_tool_calls_total{").count(),
        MAX_TOOL_LABEL_SETS + 1
    );
}

#[test]
fn build_info_and_open_things_show() {
    let metrics = Metrics::new();
    let guard = metrics.opened(Open::Stream, "activity");
    metrics.probe_sessions("http", Box::new(|| 3));
    let text = metrics.encode();
    assert!(
        text.contains(r#"mcpproxy_open_streams{kind="activity"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"mcpproxy_sessions{kind="http"} 3"#),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            r#"mcpproxy_build_info{{version="{}""#,
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );
    drop(guard);
    assert!(
        metrics
            .encode()
            .contains(r#"mcpproxy_open_streams{kind="activity"} 0"#)
    );
}

#[test]
fn the_grafana_dashboard_reads_only_metrics_that_exist() {
    let dashboard = include_str!("../../../../docs/grafana-dashboard.json");
    // Every family with a sample (an empty one is not exposed).
    let metrics = Metrics::new();
    metrics.call(
        "fs",
        "call_tool_read",
        "success",
        "allow",
        Duration::from_millis(1),
    );
    metrics.upstream_call("fs", Duration::from_millis(1));
    metrics.plugin_fault("intent-matrix", "trap");
    metrics.guard_action("secret-redactor", "redact", "jwt", 1);
    metrics.set_upstreams([UpstreamGauge {
        server: "fs".into(),
        state: "ready".into(),
        tools: 1,
    }]);
    metrics.set_sinks([SinkGauge {
        sink: "s".into(),
        backlog: 1,
        lag: Duration::from_secs(1),
        failures: 1,
        delivered: 1,
        dropped: 1,
    }]);
    metrics.tool_call("fs", "read");
    metrics.plugin_ran("intent-matrix", "allow", Duration::from_micros(5), true);
    metrics.upstream_connecting("fs", true);
    metrics.upstream_restarted("fs");
    let _session = metrics.opened(Open::Session, "stdio");
    let _stream = metrics.opened(Open::Stream, "activity");
    let exposed = metrics.encode();
    let mut names: Vec<&str> = dashboard
        .match_indices("mcpproxy_")
        .map(|(at, _)| {
            let rest = &dashboard[at..];
            let end = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    assert!(names.len() > 15, "{names:?}");
    for name in names {
        let family = ["_bucket", "_count", "_sum", "_total", "_info"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .unwrap_or(name);
        assert!(
            exposed.contains(&format!("# TYPE {family} ")),
            "the dashboard reads {name}, which mcpproxy does not expose: {}",
            exposed
                .lines()
                .filter(|l| l.starts_with("# TYPE"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}
