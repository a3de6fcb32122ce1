//! Activity journal benchmarks.
//!
//! Builds a journal of 1,000,000 records (5 servers, 50 tools, mixed variants / statuses /
//! intents, timestamps spread over 30 days) with the bulk path, then measures with criterion:
//! filtered first pages and `get` by id; and with plain timed loops (printed as lines starting
//! with `journal:`): group-commit write throughput at 1, 16 and 256 concurrent appenders in
//! Sync and Async mode, and the latency one Sync `append` adds (p50 / p99).
//!
//! `cargo bench --bench journal`. Without `--bench` (e.g. `cargo test --benches`) it runs a
//! 20,000-record smoke version. `JOURNAL_BENCH_RECORDS` overrides the record count.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use mcpproxy::activity::{
    ActivityRecord, ClientRecord, Decision, Durability, Filter, IntentRecord, Journal,
    JournalOptions, RecordType, Retention, Source, Status, VerdictRecord, WarningRecord,
    format_timestamp,
};

const DAY_MS: u64 = 86_400_000;
const SERVERS: [&str; 5] = ["github", "filesystem", "postgres", "slack", "jira"];

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A realistic record (~700 bytes of JSON) at `ms`.
fn record(rng: &mut Rng, ms: u64, id: String) -> ActivityRecord {
    let server = SERVERS[rng.below(5) as usize];
    let tool = format!("{server}_tool_{}", rng.below(10));
    let variant = match rng.below(10) {
        0 => "destructive",
        1..=3 => "write",
        _ => "read",
    };
    let status = match rng.below(20) {
        0 => Status::Blocked,
        1 | 2 => Status::Error,
        _ => Status::Success,
    };
    let intent = (rng.below(5) == 0).then(|| IntentRecord {
        operation_type: Some(variant.to_string()),
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
        tool_variant: Some(format!("call_tool_{variant}")),
        intent,
        annotations: Some(serde_json::json!({
            "readOnlyHint": variant == "read",
            "destructiveHint": variant == "destructive",
        })),
        annotation_source: "server".into(),
        safety_class: if variant == "read" {
            "read-only".into()
        } else {
            variant.into()
        },
        verdict: VerdictRecord {
            decision: if blocked {
                Decision::Reject
            } else {
                Decision::Allow
            },
            plugin: blocked.then(|| "intent-check".to_string()),
            message: blocked.then(|| "declared intent does not match the tool".to_string()),
            warnings: if rng.below(10) == 0 {
                vec![WarningRecord {
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
    }
}

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
                    let (id, ms) = mcpproxy::activity::new_id();
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
    let end_ms = mcpproxy::activity::record::now_ms() - DAY_MS;
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
        status: s("blocked"),
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
    for (label, durability) in [
        ("sync", Durability::Sync),
        (
            "async(flush=1s)",
            Durability::Async {
                flush: Duration::from_secs(1),
            },
        ),
    ] {
        let journal = Journal::open(&path, options(durability)).expect("reopen");
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
            let (id, ms) = mcpproxy::activity::new_id();
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
