//! The contract's versioning rule, proved on real components: a plugin built against the WIT
//! of mcpproxy 0.1.0 (`plugins/fixtures/caller-unaware`, bound to the committed copy
//! `plugins/fixtures/wit-0.1.0`) names `mcpproxy:plugin/...@0.1.0` in every import and export,
//! and this host, whose contract is `0.1.1`, links its `host@0.1.0` import, finds its
//! `validator@0.1.0` export and runs it beside a plugin built against the current contract.

use mcpproxy_plugin_host::{
    EngineOptions, Limits, Plugin, PluginEngine, PluginKind, PluginSettings, PluginSource,
};
use mcpproxy_policy::{
    CallRequest, EffectiveAnnotations, OperationType, SafetyClass, Tool, Verdict,
};
use serde_json::{Value, json};
use wasmtime::component::Component;

// The compiled test plugins, built from source by the `plugin-artifacts` crate.
use plugin_artifacts::{artifact, artifact_bytes};

/// The `mcpproxy:plugin` interfaces a component imports and exports, as it names them.
fn contract_names(bytes: &[u8]) -> (Vec<String>, Vec<String>) {
    let engine = wasmtime::Engine::default();
    let component = Component::new(&engine, bytes).expect("the fixture is a component");
    let ty = component.component_type();
    let ours = |name: &str| name.starts_with("mcpproxy:plugin/");
    let mut imports: Vec<String> = ty
        .imports(&engine)
        .map(|(name, _)| name.to_owned())
        .filter(|name| ours(name))
        .collect();
    let mut exports: Vec<String> = ty
        .exports(&engine)
        .map(|(name, _)| name.to_owned())
        .filter(|name| ours(name))
        .collect();
    imports.sort();
    exports.sort();
    (imports, exports)
}

fn load(crate_name: &str, settings: Value) -> Plugin {
    let engine = PluginEngine::new(EngineOptions::default()).expect("engine");
    // A deadline a loaded test machine cannot hit; the deadline is not what is tested here.
    let limits = Limits {
        timeout: std::time::Duration::from_secs(30),
        ..Limits::default()
    };
    let mut plugin = Plugin::load(
        &engine,
        &artifact_bytes(crate_name),
        PluginSource::File(artifact(crate_name)),
        limits,
    )
    .unwrap_or_else(|e| panic!("{crate_name} loads: {e}"));
    plugin.configure(&PluginSettings {
        limits,
        settings,
        ..Default::default()
    });
    plugin
}

fn request(variant: OperationType, args: Value) -> CallRequest {
    CallRequest {
        variant,
        tool: Tool {
            server: "fx".into(),
            name: "delete_note".into(),
            description: "Deletes a note".into(),
            input_schema: json!({"type": "object"}).into(),
            annotations: None,
            meta: None,
            ..Default::default()
        },
        intent: None,
        effective: EffectiveAnnotations {
            safety_class: SafetyClass::Dangerous,
            ..EffectiveAnnotations::unknown()
        },
        args,
    }
}

#[test]
fn the_fixture_is_named_0_1_0_and_the_embedded_plugins_0_1_1() {
    let (imports, exports) = contract_names(&artifact_bytes("caller_unaware"));
    assert_eq!(
        imports,
        ["mcpproxy:plugin/host@0.1.0", "mcpproxy:plugin/types@0.1.0"]
    );
    assert_eq!(
        exports,
        [
            "mcpproxy:plugin/metadata@0.1.0",
            "mcpproxy:plugin/validator@0.1.0"
        ]
    );
    // The other side of the test: what this proxy's own plugins are built against.
    let (imports, exports) = contract_names(&artifact_bytes("intent_matrix"));
    assert_eq!(
        imports,
        ["mcpproxy:plugin/host@0.1.1", "mcpproxy:plugin/types@0.1.1"]
    );
    assert_eq!(
        exports,
        [
            "mcpproxy:plugin/metadata@0.1.1",
            "mcpproxy:plugin/validator@0.1.1"
        ]
    );
}

#[test]
fn a_validator_built_against_0_1_0_loads_and_judges() {
    let plugin = load("caller_unaware", json!({}));
    assert_eq!(plugin.kind(), PluginKind::Validator);
    assert_eq!(plugin.name(), "test-caller-unaware");

    // Its verdicts need its `host@0.1.0` imports (`config`, `log`), linked by the 0.1.1 host.
    let refused = plugin
        .validate(&request(
            OperationType::Destructive,
            json!({"id": "forbidden"}),
        ))
        .expect("the 0.1.0 validator runs");
    assert_eq!(
        refused,
        Verdict::Reject(
            "test-caller-unaware: destructive calls carrying 'forbidden' are refused".into()
        )
    );
    let allowed = plugin
        .validate(&request(OperationType::Read, json!({"id": "forbidden"})))
        .expect("the 0.1.0 validator runs");
    assert_eq!(allowed, Verdict::Allow);

    // `host.config` hands it the settings as it did in 0.1.0.
    let other = load("caller_unaware", json!({"marker": "other"}));
    let verdict = other
        .validate(&request(OperationType::Destructive, json!({"id": "other"})))
        .expect("the 0.1.0 validator runs");
    assert_eq!(
        verdict,
        Verdict::Reject(
            "test-caller-unaware: destructive calls carrying 'other' are refused".into()
        )
    );

    // Beside it, a validator of the current contract loads in the same host.
    let current = load("intent_matrix", json!({}));
    assert_eq!(current.kind(), PluginKind::Validator);
}
