//! Loading components: headers, worlds, names, faults.

use super::*;

#[test]
fn only_embedded_stateless_plugins_on_warm_instances_are_quick() {
    let engine = PluginEngine::new(super::super::EngineOptions::default()).unwrap();
    let embedded = EMBEDDED.iter().find(|e| e.stateless).unwrap();
    let load = |source| Plugin::load(&engine, &embedded.bytes(), source, Limits::default());
    let mut ours = load(PluginSource::Embedded).unwrap();
    ours.stateless_embedded = true; // as `PluginSet::load` marks it
    ours.configure(&PluginSettings::default());
    assert!(ours.is_quick(), "embedded, stateless, reusing by default");
    let fresh = PluginSettings {
        limits: Limits {
            reuse_instance: false,
            ..Limits::default()
        },
        reuse_chosen: true,
        ..PluginSettings::default()
    };
    ours.configure(&fresh);
    assert!(
        !ours.is_quick(),
        "fresh instances: the operator asked for them"
    );
    // The same component from a file (as with --plugins) is not ours to vouch for.
    let mut file = load(PluginSource::File("x.wasm".into())).unwrap();
    file.configure(&PluginSettings {
        limits: Limits {
            reuse_instance: true,
            ..Limits::default()
        },
        reuse_chosen: true,
        ..PluginSettings::default()
    });
    assert!(file.reuses_instances());
    assert!(!file.is_quick());
}

#[test]
fn names_are_checked() {
    assert!(is_plugin_name("intent-matrix"));
    assert!(is_plugin_name("v2"));
    assert!(!is_plugin_name(""));
    assert!(!is_plugin_name("Intent"));
    assert!(!is_plugin_name("-x"));
    assert!(!is_plugin_name("a_b"));
    assert!(!is_plugin_name(&"a".repeat(65)));
}

#[test]
fn exports_are_matched_by_interface_and_version_line() {
    let ours = "mcpproxy:plugin/validator@0.1.1";
    assert!(same_interface("mcpproxy:plugin/validator@0.1.0", ours));
    assert!(same_interface("mcpproxy:plugin/validator@0.1.1", ours));
    assert!(same_interface("mcpproxy:plugin/validator@0.1.3", ours));
    assert!(!same_interface("mcpproxy:plugin/validator@0.2.0", ours));
    assert!(!same_interface("mcpproxy:plugin/annotator@0.1.0", ours));
    assert!(!same_interface("mcpproxy:plugin/validator", ours));
}

#[test]
fn header_check_names_what_the_file_is() {
    let err = check_header(b"hello world", "x.wasm").unwrap_err();
    assert!(err.to_string().contains("not a WebAssembly file"), "{err}");
    let core = b"\0asm\x01\0\0\0";
    let err = check_header(core, "x.wasm").unwrap_err();
    assert!(err.to_string().contains("core WebAssembly module"), "{err}");
    assert!(check_header(b"\0asm\x0d\0\x01\0", "x.wasm").is_ok());
}
