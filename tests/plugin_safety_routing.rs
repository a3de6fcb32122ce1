//! The opt-in `safety-routing` validator (strict routing on safety classes): every safety class ×
//! every variant through the host against the compiled component, then end to end through
//! real MCP, chained after `intent-matrix`.

use mcpproxy_plugin_host::{
    EngineOptions, Limits, Plugin, PluginEngine, PluginSettings, PluginSource,
};
use mcpproxy_policy::{
    AnnotationSource, CallRequest, EffectiveAnnotations, OperationType, SafetyClass, Tool, Verdict,
};
use serde_json::json;

use crate::support::mcp::{
    PLUGIN_TIMEOUT_MS, Proxy, call, config_with, connect, is_error, stdio_fixture, text,
};
use crate::support::{artifact, artifact_bytes};

fn request(variant: OperationType, class: SafetyClass) -> CallRequest {
    CallRequest {
        variant,
        tool: Tool {
            server: "mq".into(),
            name: "some_tool".into(),
            description: "a tool".into(),
            input_schema: json!({"type": "object"}).into(),
            annotations: None,
            meta: None,
            ..Default::default()
        },
        intent: None,
        effective: EffectiveAnnotations {
            annotations: None,
            source: AnnotationSource::Plugin("prefix-annotator".into()),
            reason: None,
            safety_class: class,
        },
        args: json!({}),
    }
}

const UNKNOWN: &str = "Blocked: tool 'mq:some_tool' has unknown safety class. No variant can run it: ask the server's maintainers to annotate it (readOnlyHint / destructiveHint) or to give it a _meta.safety_class";
const DANGEROUS: &str =
    "Blocked: tool 'mq:some_tool' is classified dangerous. Use call_tool_destructive to run it.";

fn needs_write(class: &str) -> String {
    format!(
        "Blocked: tool 'mq:some_tool' is classified {class}. Use call_tool_write or call_tool_destructive to run it."
    )
}

#[test]
fn every_class_and_variant_is_routed_by_the_strict_rules() {
    use OperationType::{Destructive, Read, Write};
    use SafetyClass::{Dangerous, ReadOnly, Subprocess, Unknown, WriteCapable};
    let engine = PluginEngine::new(EngineOptions::default()).expect("engine");
    let mut plugin = Plugin::load(
        &engine,
        &artifact_bytes("safety_routing"),
        PluginSource::File(artifact("safety_routing")),
        Limits::default(),
    )
    .expect("load safety_routing.wasm");
    assert_eq!(plugin.name(), "safety-routing");

    let allow = || Verdict::Allow;
    let reject = |m: &str| Verdict::Reject(m.to_owned());
    let table: [(SafetyClass, OperationType, Verdict); 15] = [
        (ReadOnly, Read, allow()),
        (ReadOnly, Write, allow()),
        (ReadOnly, Destructive, allow()),
        (WriteCapable, Read, reject(&needs_write("write-capable"))),
        (WriteCapable, Write, allow()),
        (WriteCapable, Destructive, allow()),
        (Subprocess, Read, reject(&needs_write("subprocess"))),
        (Subprocess, Write, allow()),
        (Subprocess, Destructive, allow()),
        (Dangerous, Read, reject(DANGEROUS)),
        (Dangerous, Write, reject(DANGEROUS)),
        (Dangerous, Destructive, allow()),
        (Unknown, Read, reject(UNKNOWN)),
        (Unknown, Write, reject(UNKNOWN)),
        (Unknown, Destructive, reject(UNKNOWN)),
    ];
    // Every pair is in the table once.
    for class in SafetyClass::ALL {
        for variant in OperationType::ALL {
            let rows = table
                .iter()
                .filter(|(c, v, _)| *c == class && *v == variant)
                .count();
            assert_eq!(rows, 1, "{class:?} x {variant:?}");
        }
    }
    // The same answers from a fresh instance per call and from a reused one.
    for reuse_instance in [false, true] {
        plugin.configure(&PluginSettings {
            limits: Limits {
                reuse_instance,
                ..Limits::default()
            },
            reuse_chosen: true,
            ..Default::default()
        });
        for (class, variant, expected) in &table {
            let got = plugin
                .validate(&request(*variant, *class))
                .unwrap_or_else(|f| panic!("{class:?} x {variant:?}: {f}"));
            assert_eq!(
                &got, expected,
                "{class:?} x {variant:?} (reuse_instance: {reuse_instance})"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn chained_after_intent_matrix_it_blocks_unknown_tools_through_mcp() {
    // The embedded one: the strict profile needs no plugins directory.
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut config = config_with(vec![stdio_fixture("fx", log.path())]);
    config["plugins"] = json!({
        "limits": {"timeout_ms": PLUGIN_TIMEOUT_MS},
        "validators": ["intent-matrix", "safety-routing"],
    });
    let proxy = Proxy::builder(&config).start();
    let client = connect(&proxy.url).await;

    // intent-matrix alone lets mystery_tool through every variant; safety-routing does not.
    for variant in ["call_tool_read", "call_tool_write", "call_tool_destructive"] {
        let result = call(&client, variant, json!({"name": "fx:mystery_tool"}))
            .await
            .unwrap();
        assert!(is_error(&result), "{variant}: {}", text(&result));
        assert!(
            text(&result).starts_with("Blocked: tool 'fx:mystery_tool' has unknown safety class."),
            "{variant}: {}",
            text(&result)
        );
    }
    // A read-only tool still reads.
    let status = call(&client, "call_tool_read", json!({"name": "fx:get_status"}))
        .await
        .unwrap();
    assert!(!is_error(&status), "{}", text(&status));
    // run_job (subprocess by its name, so not read-only) needs write: intent-matrix already
    // refuses the read.
    let job = call(
        &client,
        "call_tool_read",
        json!({"name": "fx:run_job", "args": {"job": "j"}}),
    )
    .await
    .unwrap();
    assert_eq!(
        text(&job),
        "Tool 'fx:run_job' is inferred as not read-only by prefix-annotator (name prefix 'run_'), use call_tool_write"
    );
    let job = call(
        &client,
        "call_tool_write",
        json!({"name": "fx:run_job", "args": {"job": "j"}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&job), "{}", text(&job));
    assert_eq!(text(&job), "ran j");

    // Only the two allowed calls reached the upstream.
    let tools: Vec<String> = crate::support::mcp::call_log_lines(log.path())
        .iter()
        .filter_map(|l| l["tool"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(tools, ["get_status", "run_job"], "{tools:?}");
    client.cancel().await.unwrap();
}
