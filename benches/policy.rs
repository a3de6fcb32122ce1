//! One annotate + validate through the plugin host: the policy cost every proxied call pays.
//!
//! Measured twice: as the proxy runs the two default plugins (`prefix-annotator`,
//! `intent-matrix`: embedded and stateless, so they reuse warm instances), and with a fresh
//! instance per plugin call (`reuse_instance: false` chosen in the config, as a plugin from
//! `--plugins DIR` runs by default).

use criterion::{Criterion, criterion_group, criterion_main};
use mcpproxy::plugin::{EngineOptions, Limits, PluginEngine, PluginSet, PluginSettings};
use mcpproxy::policy::{OperationType, Pipeline, Tool};
use serde_json::json;

/// The default plugins with their default settings (warm instances), or with
/// `reuse_instance: false` chosen for each (a fresh instance per call).
fn plugins(engine: &PluginEngine, warm: bool) -> PluginSet {
    let settings = move |_: &str, _| {
        if warm {
            PluginSettings::default()
        } else {
            PluginSettings {
                limits: Limits {
                    reuse_instance: false,
                    ..Limits::default()
                },
                reuse_chosen: true,
                ..PluginSettings::default()
            }
        }
    };
    PluginSet::load(engine, None, &settings).expect("plugins")
}

/// The per-call distribution over 20,000 calls (criterion reports means).
fn distribution(label: &str, pipeline: &Pipeline, tool: &Tool, args: &serde_json::Value) {
    for (verdict, variant) in [
        ("allow", OperationType::Destructive),
        ("reject", OperationType::Read),
    ] {
        let mut samples: Vec<u128> = (0..20_000)
            .map(|_| {
                let start = std::time::Instant::now();
                std::hint::black_box(pipeline.evaluate(variant, tool.clone(), None, args.clone()));
                start.elapsed().as_nanos()
            })
            .collect();
        samples.sort_unstable();
        let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize] as f64 / 1000.0;
        println!(
            "policy/{label} annotate+validate ({verdict}) per call over {} calls: p50 {:.1} µs, p90 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
            samples.len(),
            at(0.5),
            at(0.9),
            at(0.99),
            at(1.0)
        );
    }
}

fn annotate_and_validate(c: &mut Criterion) {
    let engine = PluginEngine::new(EngineOptions::default()).expect("engine");
    let tool = Tool {
        server: "github".into(),
        name: "delete_repo".into(),
        description: "Delete a repository".into(),
        input_schema: json!({"type": "object", "properties": {"repo": {"type": "string"}}}),
        annotations: None,
        meta: None,
    };
    let args = json!({"repo": "test-repo"});

    for (label, warm) in [("warm", true), ("fresh", false)] {
        let set = plugins(&engine, warm);
        let pipeline = set.pipeline();
        let mut group = c.benchmark_group(format!("policy/{label}"));
        group.bench_function("annotate+validate (allow)", |b| {
            b.iter(|| {
                pipeline.evaluate(OperationType::Destructive, tool.clone(), None, args.clone())
            })
        });
        group.bench_function("annotate+validate (reject)", |b| {
            b.iter(|| pipeline.evaluate(OperationType::Read, tool.clone(), None, args.clone()))
        });
        let annotator = &pipeline.annotators()[0];
        group.bench_function("annotate only", |b| b.iter(|| annotator.infer(&tool)));
        group.finish();
        distribution(label, &pipeline, &tool, &args);
    }
}

criterion_group!(benches, annotate_and_validate);
criterion_main!(benches);
