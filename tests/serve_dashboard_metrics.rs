//! End-to-end: the metrics a dashboard needs move with real calls. Per-plugin decisions and
//! time, per-tool calls, HTTP sessions and the live feed's streams, upstream connects,
//! reconnects and restarts, and the build info, scraped from `/metrics` of a running serve.

use std::time::Duration;

use serde_json::json;

use crate::support::mcp::{Proxy, call, config_with, connect, stdio_fixture};

/// The value of the sample `series` (its name and labels exactly as exposed), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
}

#[tokio::test(flavor = "multi_thread")]
async fn dashboard_series_move_with_real_calls() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let proxy = Proxy::builder(&config_with(vec![stdio_fixture("fx", log.path())])).start();
    let key = proxy.api_key();
    let http = reqwest::Client::new();
    let scrape = || async {
        http.get(format!("{}/metrics", proxy.base()))
            .header("x-api-key", &key)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let before = scrape().await;
    assert_eq!(
        sample(&before, r#"mcpproxy_build_info{version="0.1.0"}"#).or_else(|| before
            .lines()
            .find(|l| l.starts_with("mcpproxy_build_info{version=\"0.1.0\""))
            .map(|_| 1.0)),
        Some(1.0),
        "{before}"
    );
    assert_eq!(
        sample(&before, r#"mcpproxy_upstream_connects_total{server="fx"}"#),
        Some(1.0),
        "{before}"
    );

    let client = connect(&proxy.url).await;
    for i in 0..3 {
        call(
            &client,
            "call_tool_read",
            json!({"name": "fx:echo", "args": {"text": format!("m{i}")}}),
        )
        .await
        .unwrap();
    }
    // Refused by intent-matrix: it is marked destructive.
    call(
        &client,
        "call_tool_read",
        json!({"name": "fx:delete_note", "args": {"id": "n"}}),
    )
    .await
    .unwrap();
    // The live feed, held open while scraping.
    let feed = http
        .get(format!(
            "{}/api/v1/activity/stream?apikey={key}",
            proxy.base()
        ))
        .send()
        .await
        .unwrap();
    assert!(feed.status().is_success());

    let text = scrape().await;
    assert_eq!(
        sample(
            &text,
            r#"mcpproxy_tool_calls_total{server="fx",tool="echo"}"#
        ),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"mcpproxy_tool_calls_total{server="fx",tool="delete_note"}"#
        ),
        None,
        "a refused call never reached the tool"
    );
    assert_eq!(
        sample(
            &text,
            r#"mcpproxy_plugin_decisions_total{plugin="intent-matrix",decision="reject"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert!(
        sample(
            &text,
            r#"mcpproxy_plugin_decisions_total{plugin="intent-matrix",decision="allow"}"#
        )
        .is_some_and(|n| n >= 3.0),
        "{text}"
    );
    assert!(
        sample(
            &text,
            r#"mcpproxy_plugin_duration_seconds_count{plugin="intent-matrix"}"#
        )
        .is_some_and(|n| n >= 4.0),
        "{text}"
    );
    assert!(
        sample(&text, r#"mcpproxy_sessions{kind="http"}"#).is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, r#"mcpproxy_open_streams{kind="activity"}"#),
        Some(1.0),
        "{text}"
    );
    drop(feed);
    client.cancel().await.unwrap();

    // A restart: counted, and its new connection is a reconnect.
    let restarted = http
        .post(format!("{}/api/v1/upstreams/fx/restart", proxy.base()))
        .header("x-api-key", &key)
        .send()
        .await
        .unwrap();
    assert!(restarted.status().is_success(), "{}", restarted.status());
    let text = crate::support::poll::until_value(
        "fx's reconnect counted",
        Duration::from_secs(30),
        || async {
            let text = scrape().await;
            let reconnected = sample(&text, r#"mcpproxy_upstream_reconnects_total{server="fx"}"#)
                .is_some_and(|n| n >= 1.0);
            if reconnected { Ok(text) } else { Err(text) }
        },
    )
    .await;
    assert!(
        sample(&text, r#"mcpproxy_upstream_reconnects_total{server="fx"}"#)
            .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, r#"mcpproxy_upstream_restarts_total{server="fx"}"#),
        Some(1.0),
        "{text}"
    );
}
