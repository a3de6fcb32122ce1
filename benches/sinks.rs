//! Sink delivery throughput: the same 1,000-record batches, as the journal hands them to a sink
//! (each record's stored JSON), delivered through the sink plugins (wasi:http through the
//! host's grant check; the instance kept between the batches of a backlog, or a fresh one)
//! and posted natively (reqwest, the same bytes), into an in-process NDJSON receiver and into
//! a real ClickHouse.
//!
//! `cargo bench --bench sinks`. The ClickHouse pair runs when `clickhouse-server` is installed
//! (the server is started on loopback by the bench). Criterion reports records/s (one element
//! per record). Without `--bench` (e.g. `cargo test --benches`) each case runs once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, Throughput};
use mcpproxy_activity::{ActivityRecord, SinkBatch};
use mcpproxy_plugin_host::{
    EngineOptions, Limits, Plugin, PluginEngine, PluginSettings, PluginSource,
};

#[path = "../tests/support/clickhouse.rs"]
mod clickhouse_util;
#[path = "common.rs"]
mod common;
/// The ClickHouse sink's own row builder, so the native baseline sends the same bytes.
#[path = "../plugins/clickhouse-sink/src/schema.rs"]
#[allow(
    unused,
    reason = "the bench uses only the row builder of the sink's schema module"
)]
mod schema;

const BATCH: usize = 1000;

fn batch() -> Vec<ActivityRecord> {
    let mut rng = common::Rng(0x51ce_5eed);
    let start = 1_790_000_000_000u64;
    (0..BATCH as u64)
        .map(|i| {
            let ms = start + i;
            let id = ulid::Ulid::from_parts(ms, u128::from(rng.next())).to_string();
            common::record(&mut rng, ms, id)
        })
        .collect()
}

fn load(engine: &PluginEngine, crate_name: &str, settings: serde_json::Value) -> Plugin {
    let path = plugin_artifacts::artifact(crate_name);
    let bytes = std::fs::read(&path).expect("plugin artifact");
    let mut plugin = Plugin::load(engine, &bytes, PluginSource::File(path), Limits::default())
        .expect("load sink");
    plugin.configure(&PluginSettings {
        limits: Limits {
            timeout: Duration::from_secs(30),
            memory_bytes: 64 << 20,
            reuse_instance: false,
        },
        settings,
        reuse_chosen: true,
    });
    plugin
}

/// An NDJSON endpoint that counts the lines it gets.
async fn receiver(lines: Arc<AtomicU64>) -> String {
    use axum::routing::post;
    let app = axum::Router::new().route(
        "/ingest",
        post(move |body: axum::body::Bytes| {
            let lines = lines.clone();
            async move {
                lines.fetch_add(
                    body.iter().filter(|b| **b == b'\n').count() as u64,
                    Ordering::Relaxed,
                );
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/ingest")
}

fn deliver(plugin: &Plugin, batch: &SinkBatch) {
    match plugin.deliver(batch) {
        Ok(Ok(())) => {}
        Ok(Err(reason)) => panic!("{} refused the batch: {reason}", plugin.name()),
        Err(fault) => panic!("{fault}"),
    }
}

async fn post(http: &reqwest::Client, url: &str, body: Vec<u8>) {
    let response = http.post(url).body(body).send().await.expect("POST");
    let status = response.status();
    assert!(
        status.is_success(),
        "{status}: {}",
        response.text().await.unwrap_or_default()
    );
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(8))
        .configure_from_args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let _guard = rt.enter();
    let engine = PluginEngine::new(EngineOptions::default()).expect("engine");
    let records = batch();
    // As the journal hands a batch over while a backlog drains (more records behind it: the
    // sink keeps its instance between batches), and as a single batch (a fresh instance).
    let backlog = SinkBatch {
        more: true,
        ..SinkBatch::of(&records).expect("encode")
    };
    let single = SinkBatch {
        more: false,
        ..backlog.clone()
    };
    let ndjson = backlog.ndjson();
    mcpproxy_auth::install_crypto_providers();
    let http = reqwest::Client::new();

    let lines = Arc::new(AtomicU64::new(0));
    let url = rt.block_on(receiver(lines.clone()));
    let http_sink = load(&engine, "http_sink", serde_json::json!({"url": url}));
    // One delivery outside the timings, checked, so a filter that skips this group
    // (`-- clickhouse`) does not skip the check.
    deliver(&http_sink, &single);
    assert!(lines.load(Ordering::Relaxed) >= BATCH as u64);
    let mut group = c.benchmark_group("sink_ndjson_receiver");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("http-sink plugin, backlog", |b| {
        b.iter(|| deliver(&http_sink, &backlog))
    });
    group.bench_function("http-sink plugin, fresh instance", |b| {
        b.iter(|| deliver(&http_sink, &single))
    });
    group.bench_function("native reqwest", |b| {
        b.iter(|| rt.block_on(post(&http, &url, ndjson.clone())))
    });
    group.finish();

    let Some(ch) = rt.block_on(clickhouse_util::ClickHouse::start()) else {
        eprintln!("sinks bench: clickhouse-server is not installed; skipping the ClickHouse pair");
        return;
    };
    let table = "bench_activity";
    let sink = load(
        &engine,
        "clickhouse_sink",
        serde_json::json!({"url": ch.url(), "table": table}),
    );
    deliver(&sink, &SinkBatch::of(&records[..1]).expect("encode")); // creates the table
    let mut rows = Vec::new();
    for r in &records {
        let json = serde_json::to_string(r).expect("json");
        let ms = ulid::Ulid::from_string(&r.id).map_or(0, |u| u.timestamp_ms());
        schema::push_row(&mut rows, &r.id, ms, &json);
    }
    let insert_url = format!(
        "{}/?query={}",
        ch.url(),
        schema::insert("default", table)
            .replace('%', "%25")
            .replace(' ', "%20")
            .replace('`', "%60")
    );
    let mut group = c.benchmark_group("sink_clickhouse");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("clickhouse-sink plugin", |b| {
        b.iter(|| deliver(&sink, &backlog))
    });
    group.bench_function("native reqwest", |b| {
        b.iter(|| rt.block_on(post(&http, &insert_url, rows.clone())))
    });
    group.finish();
    let count = rt.block_on(ch.query(&format!("SELECT count() FROM default.{table}")));
    eprintln!("sinks bench: {} rows in ClickHouse", count.trim());
}
