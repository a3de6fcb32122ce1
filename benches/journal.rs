//! Activity journal benchmarks.
//!
//! Builds a journal of 1,000,000 records (5 servers, 50 tools, mixed variants / statuses /
//! intents, timestamps spread over 30 days) with the bulk path, then measures with criterion:
//! filtered first pages and `get` by id; and with plain timed loops (printed as lines starting
//! with `journal:`): group-commit write throughput at 1, 16 and 256 concurrent appenders in
//! Sync mode (with its write-ahead log, and without: every batch a full commit) and Async
//! mode, and the latency one Sync `append` adds (p50 / p99).
//!
//! `cargo bench --bench journal`. Without `--bench` (e.g. `cargo test --benches`) it runs a
//! 20,000-record smoke version. `JOURNAL_BENCH_RECORDS` overrides the record count.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;

#[path = "common.rs"]
mod common;
use common::{Rng, record};
use mcpproxy_activity::{Durability, Filter, Journal, JournalOptions, Retention, Status};

const DAY_MS: u64 = 86_400_000;
/// Fills `journal` with `n` records over the 30 days ending `end_ms`; returns a sample of ids.
fn fill(journal: &Journal, n: u64, end_ms: u64) -> Vec<String> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let start_ms = end_ms - 30 * DAY_MS;
    let step = (30 * DAY_MS) as f64 / n as f64;
    let mut sample = Vec::new();
    let mut chunk = Vec::with_capacity(10_000);
    for i in 0..n {
        let ms = start_ms + (i as f64 * step) as u64;
        let id = ulid::Ulid::from_parts(ms, u128::from(rng.next()) << 16 | u128::from(i as u16))
            .to_string();
        if i % 997 == 0 {
            sample.push(id.clone());
        }
        chunk.push(record(&mut rng, ms, id));
        if chunk.len() == 10_000 || i + 1 == n {
            journal.bulk_load(&chunk).expect("bulk load");
            chunk.clear();
        }
    }
    sample
}

fn options(durability: Durability) -> JournalOptions {
    JournalOptions {
        durability,
        retention: Retention {
            max_age: Duration::ZERO,
            max_records: 0,
            max_bytes: 0,
            max_undelivered_bytes: 0,
            ..Retention::default()
        },
        ..JournalOptions::default()
    }
}

/// Appends from `producers` tasks for about `run`; returns records/s until all are durable.
fn throughput(
    rt: &tokio::runtime::Runtime,
    journal: &Arc<Journal>,
    producers: usize,
    run: Duration,
) -> f64 {
    rt.block_on(async {
        let start = Instant::now();
        let deadline = start + run;
        let mut tasks = Vec::new();
        for p in 0..producers {
            let journal = journal.clone();
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng(0x1234_5678 + p as u64);
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let (id, ms) = mcpproxy_activity::new_id();
                    journal
                        .append(record(&mut rng, ms, id))
                        .await
                        .expect("append");
                    n += 1;
                }
                n
            }));
        }
        let mut total = 0;
        for task in tasks {
            total += task.await.expect("producer");
        }
        journal.flush().await.expect("flush");
        total as f64 / start.elapsed().as_secs_f64()
    })
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let n: u64 = std::env::var("JOURNAL_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if full { 1_000_000 } else { 20_000 });
    let run = if full {
        Duration::from_secs(3)
    } else {
        Duration::from_millis(200)
    };
    let latency_samples = if full { 2000 } else { 50 };

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("activity.redb");
    let end_ms = mcpproxy_activity::now_ms() - DAY_MS;
    let journal = Journal::open(&path, options(Durability::Sync)).expect("open");
    let t = Instant::now();
    let sample = fill(&journal, n, end_ms);
    let stats = journal.stats().expect("stats");
    println!(
        "journal: filled {n} records in {:.1} s ({:.0} records/s); file {} MiB, data {} MiB",
        t.elapsed().as_secs_f64(),
        n as f64 / t.elapsed().as_secs_f64(),
        stats.file_bytes >> 20,
        stats.data_bytes >> 20,
    );

    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let s = |v: &str| Some(v.to_string());
    let destructive = Filter {
        intent_type: s("destructive"),
        ..Filter::default()
    };
    let day_start = end_ms - 15 * DAY_MS;
    let server_day = Filter {
        server: s("postgres"),
        start_ms: Some(day_start),
        end_ms: Some(day_start + DAY_MS),
        ..Filter::default()
    };
    let tool_only = Filter {
        tool: s("slack_tool_3"),
        ..Filter::default()
    };
    let blocked_destructive = Filter {
        status: Some(Status::Blocked),
        intent_type: s("destructive"),
        ..Filter::default()
    };
    for (name, filter) in [
        ("query/none/limit50", Filter::default()),
        ("query/intent_type=destructive/limit50", destructive),
        ("query/server=postgres+1day/limit50", server_day),
        ("query/tool=slack_tool_3(no server)/limit50", tool_only),
        (
            "query/intent=destructive+status=blocked/limit50",
            blocked_destructive,
        ),
    ] {
        let page = journal.query(&filter, 50, 0).expect("query");
        assert_eq!(page.records.len(), 50, "{name}");
        c.bench_function(name, |b| {
            b.iter(|| black_box(journal.query(&filter, 50, 0).expect("query")))
        });
    }
    let mut next = 0;
    c.bench_function("get/by_id", |b| {
        b.iter(|| {
            next = (next + 7919) % sample.len();
            black_box(journal.get(&sample[next]).expect("get"))
        })
    });
    drop(journal);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    for (label, durability, log_capacity) in [
        (
            "sync",
            Durability::Sync,
            mcpproxy_activity::DEFAULT_LOG_CAPACITY,
        ),
        // Every batch a full redb commit: what sync mode cost before the write-ahead log.
        ("sync(no log)", Durability::Sync, 0),
        (
            "async(flush=1s)",
            Durability::Async {
                flush: Duration::from_secs(1),
            },
            0,
        ),
    ] {
        let journal = Journal::open(
            &path,
            JournalOptions {
                log_capacity,
                ..options(durability)
            },
        )
        .expect("reopen");
        for producers in [1, 16, 256] {
            let rate = throughput(&rt, &journal, producers, run);
            println!("journal: append {label} x{producers:>3} producers: {rate:>8.0} records/s");
        }
    }

    let journal = Journal::open(&path, options(Durability::Sync)).expect("reopen");
    let mut rng = Rng(42);
    let mut lat: Vec<Duration> = rt.block_on(async {
        let mut lat = Vec::with_capacity(latency_samples);
        for _ in 0..latency_samples {
            let (id, ms) = mcpproxy_activity::new_id();
            let rec = record(&mut rng, ms, id);
            let t = Instant::now();
            journal.append(rec).await.expect("append");
            lat.push(t.elapsed());
        }
        lat
    });
    lat.sort_unstable();
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    println!(
        "journal: sync append latency over {latency_samples} sequential appends: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        lat[lat.len() - 1].as_secs_f64() * 1e3,
    );
    let len = journal.len().expect("len");
    drop(journal);

    // Retention: delete the oldest 100k (or a tenth in the smoke run), 10k per transaction.
    let delete = if full { 100_000 } else { len / 10 };
    let mut opts = options(Durability::Sync);
    opts.retention.max_records = len - delete;
    let journal = Journal::open(&path, opts).expect("reopen");
    let t = Instant::now();
    let deleted = journal.run_retention().expect("retention");
    println!(
        "journal: retention deleted {deleted} of {len} records in {:.2} s ({:.0} records/s)",
        t.elapsed().as_secs_f64(),
        deleted as f64 / t.elapsed().as_secs_f64(),
    );
    c.final_summary();
}
