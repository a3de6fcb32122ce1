//! The plugin host through the library API, against the compiled components.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mcpproxy_plugin_host::{
    CacheOutcome, EngineOptions, Limits, Plugin, PluginEngine, PluginSet, PluginSettings,
    PluginSource, annotators, validators,
};
use mcpproxy_plugin_kit::suite::{self, Suite};
use mcpproxy_policy::{
    AnnotationSource, Annotations, CallRequest, Decision, EffectiveAnnotations, Intent,
    OperationType, Pipeline, SafetyClass, Tool,
};
use serde_json::json;

// The compiled test plugins, built from source by the `plugin-artifacts` crate.
use plugin_artifacts::{artifact, artifact_bytes};

/// An engine whose compiled components are cached in the test build's temp dir, shared by
/// every test process (nextest starts one per test): what these tests check is what plugins
/// do, not their compilation. The cache itself is tested on purpose, with a dir of its own,
/// in `the_second_start_loads_compiled_plugins_from_the_cache`.
fn engine() -> PluginEngine {
    PluginEngine::new(EngineOptions {
        cache_dir: Some(Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-compile-cache")),
        ..EngineOptions::default()
    })
    .expect("engine")
}

/// The default limits with a deadline a loaded test machine cannot hit: for the tests of
/// what a plugin decides, not of how long it may take (the default 50 ms budget is for
/// production, where a call that slow is a fault; under a busy CI box it is not).
fn roomy() -> Limits {
    Limits {
        timeout: Duration::from_secs(10),
        ..Limits::default()
    }
}

fn load(engine: &PluginEngine, crate_name: &str, limits: Limits) -> Arc<Plugin> {
    let mut plugin = Plugin::load(
        engine,
        &artifact_bytes(crate_name),
        PluginSource::File(artifact(crate_name)),
        limits,
    )
    .unwrap_or_else(|e| panic!("load {crate_name}: {e}"));
    plugin.configure(&PluginSettings {
        limits,
        ..Default::default()
    });
    Arc::new(plugin)
}

fn tool(name: &str, annotations: Option<Annotations>) -> Tool {
    Tool {
        server: "fixture".into(),
        name: name.into(),
        description: format!("the {name} tool"),
        input_schema: json!({"type": "object"}).into(),
        annotations,
        meta: None,
        ..Default::default()
    }
}

#[track_caller]
fn assert_all_pass(results: &[suite::CaseResult]) {
    let failures: Vec<String> = results
        .iter()
        .filter(|r| !r.passed)
        .map(|r| format!("{}: expected {}, got {}", r.name, r.expected, r.got))
        .collect();
    assert!(
        failures.is_empty(),
        "failing cases:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_matrix_row_passes_through_the_compiled_intent_matrix() {
    let engine = engine();
    let plugin = load(&engine, "intent_matrix", roomy());
    let results = suite::run(Suite::Matrix, &plugin);
    // 4 annotation kinds x 3 variants x 2 (declared/absent) + 12 mismatches + the rest.
    assert!(results.len() >= 24 + 12 + 10, "{}", results.len());
    assert_all_pass(&results);
}

#[test]
fn every_prefix_row_passes_through_the_compiled_prefix_annotator() {
    let engine = engine();
    let plugin = load(&engine, "prefix_annotator", roomy());
    let results = suite::run(Suite::Prefix, &plugin);
    assert_eq!(
        results.len(),
        suite::PREFIXES.len() + 3 + SafetyClass::ALL.len() + 4
    );
    assert_all_pass(&results);
}

#[test]
fn the_suite_is_not_a_rubber_stamp() {
    // A validator that allows everything must fail every row that expects warn or reject.
    let engine = engine();
    let plugin = load(&engine, "allow_all", roomy());
    let results = suite::run(Suite::Matrix, &plugin);
    for (case, result) in suite::matrix_cases().iter().zip(&results) {
        assert_eq!(
            result.passed,
            case.decision() == Decision::Allow,
            "{}",
            case.name
        );
    }
}

#[test]
fn a_deadline_stops_its_own_call_and_never_one_whose_deadline_is_later() {
    // Deadlines are not ticks: a deadline that comes advances the engine's epoch, which
    // every running call sees, and each call's own deadline decides whether it stops.
    let engine = engine();
    let with_deadline = |ms| Limits {
        timeout: Duration::from_millis(ms),
        ..Limits::default()
    };
    let short = load(&engine, "spin_loop", with_deadline(40));
    let long = load(&engine, "spin_loop", with_deadline(700));
    let request = CallRequest {
        variant: OperationType::Read,
        tool: tool("spin", None),
        intent: None,
        effective: EffectiveAnnotations::unknown(),
        args: json!({}),
    };
    let long_call = {
        let request = request.clone();
        std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let fault = long.validate(&request).expect_err("it loops").to_string();
            (fault, started.elapsed())
        })
    };
    // Calls with a sooner deadline come and go while the long one runs; each is stopped
    // at its own deadline (never before it) and advances the epoch the long one sees.
    for _ in 0..4 {
        let started = std::time::Instant::now();
        let fault = short.validate(&request).expect_err("it loops").to_string();
        assert!(fault.contains("ran past its deadline of 40 ms"), "{fault}");
        assert!(
            started.elapsed() >= Duration::from_millis(40),
            "stopped early"
        );
    }
    let (fault, took) = long_call.join().expect("the long call's thread");
    assert!(fault.contains("ran past its deadline of 700 ms"), "{fault}");
    assert!(
        took >= Duration::from_millis(700),
        "stopped after {took:?} by another call's deadline"
    );
}

#[test]
fn the_embedded_annotators_are_pure_and_a_remembered_answer_matches_a_fresh_one() {
    let engine = engine();
    let set = PluginSet::load(&engine, None, &|_, _| PluginSettings::default()).unwrap();
    let pipeline = set.pipeline();
    assert!(!pipeline.annotators().is_empty());
    assert!(
        pipeline.annotators().iter().all(|a| a.is_pure()),
        "the embedded annotators keep no state, so their answers are remembered per tool"
    );
    // The memo gives what the plugins give: the first call asks them, the second is
    // remembered, and a fresh pipeline (an empty memo) agrees with both.
    for name in ["delete_item", "list_items", "run_command", "frobnicate"] {
        let first = pipeline.annotate(&tool(name, None)).unwrap();
        let again = pipeline.annotate(&tool(name, None)).unwrap();
        let fresh = set.pipeline().annotate(&tool(name, None)).unwrap();
        assert_eq!(first, again, "{name}");
        assert_eq!(first, fresh, "{name}");
    }
}

#[test]
fn the_pipeline_infers_for_unannotated_tools_and_says_why_it_rejects() {
    let engine = engine();
    let set = PluginSet::load(&engine, None, &|_, _| PluginSettings::default()).unwrap();
    let pipeline = set.pipeline();

    let eval = pipeline.evaluate(
        OperationType::Read,
        tool("delete_item", None),
        None,
        json!({"id": "1"}),
    );
    assert_eq!(eval.outcome.decision, Decision::Reject);
    assert_eq!(eval.outcome.plugin.as_deref(), Some("intent-matrix"));
    assert_eq!(
        eval.outcome.message.as_deref(),
        Some(
            "Tool 'fixture:delete_item' is inferred destructive by prefix-annotator \
             (name prefix 'delete_'), use call_tool_destructive"
        )
    );
    assert_eq!(
        eval.request.effective.source,
        AnnotationSource::Plugin("prefix-annotator".into())
    );
    assert_eq!(eval.request.effective.safety_class, SafetyClass::Dangerous);

    let eval = pipeline.evaluate(
        OperationType::Destructive,
        tool("delete_item", None),
        Some(Intent {
            data_sensitivity: Some("private".into()),
            reason: Some("cleanup".into()),
            ..Default::default()
        }),
        json!({"id": "1"}),
    );
    assert_eq!(eval.outcome.decision, Decision::Allow);

    // The server's own annotations win over the name.
    let read_only = Annotations {
        read_only_hint: Some(true),
        ..Default::default()
    };
    let eval = pipeline.evaluate(
        OperationType::Write,
        tool("delete_item", Some(read_only)),
        None,
        json!({}),
    );
    assert_eq!(eval.request.effective.source, AnnotationSource::Server);
    assert_eq!(eval.request.effective.safety_class, SafetyClass::ReadOnly);
    assert_eq!(eval.outcome.decision, Decision::Warn);
}

#[test]
fn faulty_plugins_fail_closed_and_the_host_keeps_working() {
    let engine = engine();
    let limits = Limits {
        timeout: Duration::from_millis(30),
        memory_bytes: 8 << 20,
        ..Limits::default()
    };
    // Faults other than the deadline get a deadline a loaded test machine cannot hit first.
    let roomy = Limits {
        timeout: Duration::from_secs(10),
        ..limits
    };
    let good = load(&engine, "intent_matrix", roomy);
    let cases = [
        (
            "spin_loop",
            "test-spin-loop",
            "ran past its deadline of 30 ms and was stopped",
            limits,
        ),
        (
            "memory_hog",
            "test-memory-hog",
            "over its cap of 8 MiB",
            roomy,
        ),
        (
            "trap",
            "test-trap",
            "trapped: wasm `unreachable` instruction executed",
            roomy,
        ),
    ];
    for (crate_name, plugin_name, what, limits) in cases {
        let bad = load(&engine, crate_name, limits);
        let pipeline = Pipeline::new(Vec::new(), validators(&[bad.clone(), good.clone()]));
        // Twice: a faulted instance is thrown away, so the plugin behaves the same again.
        for _ in 0..2 {
            let eval = pipeline.evaluate(
                OperationType::Read,
                tool("list_items", None),
                None,
                json!({}),
            );
            assert_eq!(eval.outcome.decision, Decision::Reject, "{crate_name}");
            assert_eq!(eval.outcome.plugin.as_deref(), Some(plugin_name));
            let message = eval.outcome.message.unwrap();
            assert!(
                message.contains(&format!("validator plugin '{plugin_name}'"))
                    && message.contains(what),
                "{message}"
            );
            assert!(message.contains("fails closed"), "{message}");
        }
        // The good plugin, alone, still answers.
        let pipeline = Pipeline::new(Vec::new(), validators(std::slice::from_ref(&good)));
        let eval = pipeline.evaluate(
            OperationType::Read,
            tool("list_items", None),
            None,
            json!({}),
        );
        assert_eq!(eval.outcome.decision, Decision::Allow, "after {crate_name}");
    }
}

#[test]
fn a_faulting_annotator_rejects_the_call() {
    // The trap fixture is a validator; an annotator fault is reported the same way, and a
    // validator in the annotator slot is refused with a fault rather than run.
    let engine = engine();
    let not_an_annotator = load(&engine, "trap", roomy());
    let good = load(&engine, "intent_matrix", roomy());
    let pipeline = Pipeline::new(annotators(&[not_an_annotator]), validators(&[good]));
    let eval = pipeline.evaluate(
        OperationType::Read,
        tool("list_items", None),
        None,
        json!({}),
    );
    assert_eq!(eval.outcome.decision, Decision::Reject);
    let message = eval.outcome.message.unwrap();
    assert!(
        message.contains("'test-trap'") && message.contains("not an annotator"),
        "{message}"
    );
}

#[test]
fn calls_never_share_state_and_run_concurrently() {
    let engine = engine();
    // About state and concurrency, not deadlines: room for a loaded test machine.
    let set = PluginSet::load(&engine, None, &|_, _| PluginSettings {
        limits: roomy(),
        ..Default::default()
    })
    .unwrap();
    let pipeline = Arc::new(set.pipeline());
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let pipeline = pipeline.clone();
            std::thread::spawn(move || {
                for j in 0..50 {
                    let (name, variant, expect) = match (i + j) % 3 {
                        0 => ("list_items", OperationType::Read, Decision::Allow),
                        1 => ("delete_item", OperationType::Read, Decision::Reject),
                        _ => ("update_item", OperationType::Write, Decision::Allow),
                    };
                    let eval = pipeline.evaluate(variant, tool(name, None), None, json!({}));
                    assert_eq!(eval.outcome.decision, expect, "{name} {variant}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn settings_reach_the_plugin_through_the_config_import() {
    let engine = engine();
    let set = PluginSet::load(&engine, None, &|name, _| PluginSettings {
        settings: if name == "intent-matrix" {
            json!({"strict_server_validation": false})
        } else {
            json!({})
        },
        ..Default::default()
    })
    .unwrap();
    let pipeline = set.pipeline();
    let destructive = Annotations {
        destructive_hint: Some(true),
        ..Default::default()
    };
    let eval = pipeline.evaluate(
        OperationType::Read,
        tool("purge", Some(destructive)),
        None,
        json!({}),
    );
    assert_eq!(eval.outcome.decision, Decision::Warn);
    assert!(
        eval.outcome
            .message
            .unwrap()
            .ends_with("(allowed: strict_server_validation is off)")
    );

    // Bad settings fail closed with a message naming the problem.
    let set = PluginSet::load(&engine, None, &|_, _| PluginSettings {
        settings: json!({"strict_server_validation": "yes"}),
        ..Default::default()
    })
    .unwrap();
    let eval = set.pipeline().evaluate(
        OperationType::Read,
        tool("list_items", None),
        None,
        json!({}),
    );
    assert_eq!(eval.outcome.decision, Decision::Reject);
    assert!(
        eval.outcome
            .message
            .unwrap()
            .starts_with("intent-matrix: invalid settings:"),
    );
}

#[test]
fn the_second_start_loads_compiled_plugins_from_the_cache() {
    let data = tempfile::tempdir().unwrap();
    let options = EngineOptions {
        cache_dir: Some(data.path().join("cache")),
        ..Default::default()
    };
    let first = PluginSet::load(
        &PluginEngine::new(options.clone()).unwrap(),
        None,
        &|_, _| PluginSettings::default(),
    )
    .unwrap();
    assert!(
        first
            .plugins()
            .iter()
            .all(|p| p.info().compile == CacheOutcome::Compiled)
    );
    let second = PluginSet::load(&PluginEngine::new(options).unwrap(), None, &|_, _| {
        PluginSettings::default()
    })
    .unwrap();
    assert!(
        second
            .plugins()
            .iter()
            .all(|p| p.info().compile == CacheOutcome::Hit)
    );
    // A corrupt cache entry is ignored and replaced, never trusted.
    for entry in std::fs::read_dir(data.path().join("cache")).unwrap() {
        std::fs::write(entry.unwrap().path(), b"garbage").unwrap();
    }
    let third = PluginSet::load(
        &PluginEngine::new(EngineOptions {
            cache_dir: Some(data.path().join("cache")),
            ..Default::default()
        })
        .unwrap(),
        None,
        &|_, _| PluginSettings::default(),
    )
    .unwrap();
    assert!(
        third
            .plugins()
            .iter()
            .all(|p| p.info().compile == CacheOutcome::Compiled)
    );
}

/// Calls past the engine's instance slots wait for one instead of failing at once; a call
/// that cannot get one within the wait is refused as overloaded, not blamed on the plugin.
#[test]
fn calls_past_the_instance_slots_queue_then_get_the_overload_result() {
    let engine = PluginEngine::new(EngineOptions {
        max_instances: 4,
        ..Default::default()
    })
    .unwrap();
    // Each call holds its slot for its whole deadline.
    let spinner = load(
        &engine,
        "spin_loop",
        Limits {
            timeout: Duration::from_millis(100),
            ..Limits::default()
        },
    );
    let pipeline = Pipeline::new(Vec::new(), validators(&[spinner]));
    let messages: Vec<String> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..40)
            .map(|_| {
                scope.spawn(|| {
                    let eval = pipeline.evaluate(
                        OperationType::Read,
                        tool("list_items", None),
                        None,
                        json!({}),
                    );
                    eval.outcome.message.unwrap_or_default()
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    // 40 calls on 4 slots: every one ran (and hit its deadline), none failed to start.
    for message in &messages {
        assert!(
            message.contains("ran past its deadline of 100 ms"),
            "{message}"
        );
    }

    // One slot, held for 12 s: a second call, started once the first holds the slot, gives
    // up after its 5 s wait, 7 s before the slot is released.
    let engine = PluginEngine::new(EngineOptions {
        max_instances: 1,
        ..Default::default()
    })
    .unwrap();
    let spinner = load(
        &engine,
        "spin_loop",
        Limits {
            timeout: Duration::from_secs(12),
            ..Limits::default()
        },
    );
    let pipeline = Pipeline::new(Vec::new(), validators(&[spinner]));
    let (first, second) = std::thread::scope(|scope| {
        let evaluate = || {
            pipeline
                .evaluate(
                    OperationType::Read,
                    tool("list_items", None),
                    None,
                    json!({}),
                )
                .outcome
                .message
                .unwrap_or_default()
        };
        assert_eq!(engine.instances_in_use(), 0);
        let first = scope.spawn(evaluate);
        let took_the_slot = std::time::Instant::now() + Duration::from_secs(60);
        while engine.instances_in_use() == 0 {
            assert!(
                std::time::Instant::now() < took_the_slot,
                "the first call took no slot in 60 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let second = scope.spawn(evaluate);
        (first.join().unwrap(), second.join().unwrap())
    });
    // The faulted instance was dropped, never kept: its slot is free again.
    assert_eq!(engine.instances_in_use(), 0);
    assert!(first.contains("ran past its deadline"), "{first}");
    assert!(
        second.starts_with("Call refused because mcpproxy is overloaded: all 1 WebAssembly instance slots were busy for 5 s"),
        "{second}"
    );
    assert!(
        !second.contains("test-spin-loop"),
        "the plugin is not blamed: {second}"
    );
}
