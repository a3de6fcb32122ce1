//! One annotate + validate through the plugin host, a fresh instance per plugin call:
//! the policy cost every proxied call pays.

use criterion::{Criterion, criterion_group, criterion_main};
use mcpproxy::plugin::{EngineOptions, PluginEngine, PluginSet, PluginSettings};
use mcpproxy::policy::{OperationType, Tool};
use serde_json::json;

fn annotate_and_validate(c: &mut Criterion) {
    let engine = PluginEngine::new(EngineOptions::default()).expect("engine");
    let set = PluginSet::load(&engine, None, &|_, _| PluginSettings::default()).expect("plugins");
    let pipeline = set.pipeline();
    let tool = Tool {
        server: "github".into(),
        name: "delete_repo".into(),
        description: "Delete a repository".into(),
        input_schema: json!({"type": "object", "properties": {"repo": {"type": "string"}}}),
        annotations: None,
        meta: None,
    };
    let args = json!({"repo": "test-repo"});

    let mut group = c.benchmark_group("policy");
    group.bench_function("annotate+validate (allow)", |b| {
        b.iter(|| pipeline.evaluate(OperationType::Destructive, tool.clone(), None, args.clone()))
    });
    group.bench_function("annotate+validate (reject)", |b| {
        b.iter(|| pipeline.evaluate(OperationType::Read, tool.clone(), None, args.clone()))
    });
    let annotator = &pipeline.annotators()[0];
    group.bench_function("annotate only", |b| b.iter(|| annotator.infer(&tool)));
    group.finish();

    // Criterion reports means; the per-call distribution (median and p99) is printed here.
    for (label, variant) in [
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
            "policy/annotate+validate ({label}) per call over {} calls: p50 {:.1} µs, p90 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
            samples.len(),
            at(0.5),
            at(0.9),
            at(0.99),
            at(1.0)
        );
    }
}

criterion_group!(benches, annotate_and_validate);
criterion_main!(benches);
