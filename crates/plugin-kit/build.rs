//! Hands this crate's tests the directory of the guest plugins `mcpproxy-plugin-host` built
//! (`MCPPROXY_PLUGIN_ARTIFACTS`): the result cases run against the embedded `secret-redactor`
//! and the `guard-trap` fixture.

fn main() {
    // Set by the build script of mcpproxy-plugin-host (its `links = "mcpproxy-plugins"`).
    if let Ok(artifacts) = std::env::var("DEP_MCPPROXY_PLUGINS_ARTIFACTS") {
        println!("cargo::rustc-env=MCPPROXY_PLUGIN_ARTIFACTS={artifacts}");
    }
    println!("cargo::rerun-if-env-changed=DEP_MCPPROXY_PLUGINS_ARTIFACTS");
}
