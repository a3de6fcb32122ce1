//! One annotate + validate through the plugin host: the policy cost every proxied call pays.
//!
//! Measured three ways: as the proxy runs the two default plugins (`prefix-annotator`,
//! `intent-matrix`: embedded and stateless, so they reuse warm instances, and the
//! annotator's answer for a tool is remembered: `warm`); the same with the annotator asked
//! on every call (`warm-asked`, as for a tool seen for the first time or a plugin from
//! `--plugins`); and with a fresh instance per plugin call, asked every time
//! (`reuse_instance: false` chosen in the config, as a plugin from `--plugins DIR` runs by
//! default: `fresh`).

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use mcpproxy_plugin_host::{EngineOptions, Limits, PluginEngine, PluginSet, PluginSettings};
use mcpproxy_policy::{Annotator, Fault, Inference, OperationType, Pipeline, Tool};
use serde_json::json;

/// An annotator the pipeline asks on every call: it does not say it is pure, so its
/// answers are not remembered.
struct AskedEachTime(Arc<dyn Annotator>);

impl Annotator for AskedEachTime {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn infer(&self, tool: &Tool) -> Result<Option<Inference>, Fault> {
        self.0.infer(tool)
    }

    fn is_quick(&self) -> bool {
        self.0.is_quick()
    }
}

/// `pipeline` with every annotator asked on every call.
fn asked_each_time(pipeline: &Pipeline) -> Pipeline {
    let annotators = pipeline
        .annotators()
        .iter()
        .map(|a| Arc::new(AskedEachTime(a.clone())) as Arc<dyn Annotator>)
        .collect();
    Pipeline::new(annotators, pipeline.validators().to_vec())
}

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
        input_schema: json!({"type": "object", "properties": {"repo": {"type": "string"}}}).into(),
        annotations: None,
        meta: None,
        ..Default::default()
    };
    let args = json!({"repo": "test-repo"});

    for (label, warm, remembered) in [
        ("warm", true, true),
        ("warm-asked", true, false),
        ("fresh", false, false),
    ] {
        let set = plugins(&engine, warm);
        let pipeline = if remembered {
            set.pipeline()
        } else {
            asked_each_time(&set.pipeline())
        };
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
