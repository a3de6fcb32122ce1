//! The default plugins, compiled from `plugins/` by this crate's `build.rs` and built into the
//! binary so `mcpproxy serve` needs no `--plugins` directory. They are stored deflated
//! (build.rs) and inflated when loaded: 5.4 MB of components take 1.7 MB of the binary, and
//! inflating all of them takes milliseconds (docs/benchmarks.md).

/// One plugin built into the binary.
pub(crate) struct Embedded {
    /// The name the plugin gives itself (`info().name`), for `plugins check NAME`.
    pub(crate) name: &'static str,
    /// The component, deflated by build.rs: [`Embedded::bytes`] inflates it.
    deflated: &'static [u8],
    /// Loaded, but active only when the config names it (`plugins.validators`, ...):
    /// stricter policies a user turns on, like the sinks.
    pub(crate) opt_in: bool,
    /// Keeps nothing between calls (a pure function of the call and its settings), so its
    /// warm instances are reused by default ([`mcpproxy_policy::Limits::reuse_instance`]).
    pub(crate) stateless: bool,
}

/// Every embedded plugin, in load order.
pub(crate) const EMBEDDED: &[Embedded] = &[
    Embedded {
        name: "prefix-annotator",
        deflated: include_bytes!(concat!(env!("OUT_DIR"), "/prefix_annotator.wasm.deflate")),
        opt_in: false,
        stateless: true,
    },
    Embedded {
        name: "intent-matrix",
        deflated: include_bytes!(concat!(env!("OUT_DIR"), "/intent_matrix.wasm.deflate")),
        opt_in: false,
        stateless: true,
    },
    Embedded {
        name: "clickhouse-sink",
        deflated: include_bytes!(concat!(env!("OUT_DIR"), "/clickhouse_sink.wasm.deflate")),
        opt_in: true,
        stateless: false,
    },
    Embedded {
        name: "http-sink",
        deflated: include_bytes!(concat!(env!("OUT_DIR"), "/http_sink.wasm.deflate")),
        opt_in: true,
        stateless: false,
    },
    Embedded {
        name: "safety-routing",
        deflated: include_bytes!(concat!(env!("OUT_DIR"), "/safety_routing.wasm.deflate")),
        opt_in: true,
        stateless: true,
    },
    Embedded {
        name: "tool-scanner",
        deflated: include_bytes!(concat!(env!("OUT_DIR"), "/tool_scanner.wasm.deflate")),
        opt_in: false,
        stateless: true,
    },
    Embedded {
        name: "secret-redactor",
        deflated: include_bytes!(concat!(env!("OUT_DIR"), "/secret_redactor.wasm.deflate")),
        opt_in: false,
        stateless: true,
    },
    Embedded {
        name: "injection-marker",
        deflated: include_bytes!(concat!(env!("OUT_DIR"), "/injection_marker.wasm.deflate")),
        opt_in: true,
        stateless: true,
    },
];

impl Embedded {
    /// The component.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        inflate(self.deflated)
    }
}

/// A component build.rs deflated. It is the binary's own data (a test inflates every one),
/// so a failure is a build that went wrong, not an input to handle.
pub(crate) fn inflate(deflated: &[u8]) -> Vec<u8> {
    miniz_oxide::inflate::decompress_to_vec(deflated)
        .expect("build.rs deflated the embedded component")
}

/// The component of the embedded plugin named `name` (`intent-matrix`), to check it as a
/// file is checked.
pub fn embedded_component(name: &str) -> Option<Vec<u8>> {
    EMBEDDED
        .iter()
        .find(|e| e.name == name)
        .map(Embedded::bytes)
}

/// The embedded plugins' names, in load order.
pub fn embedded_names() -> Vec<&'static str> {
    EMBEDDED.iter().map(|e| e.name).collect()
}

#[cfg(test)]
mod tests {
    use super::EMBEDDED;

    /// Every embedded plugin inflates to a WebAssembly component.
    #[test]
    fn every_embedded_plugin_inflates_to_a_component() {
        for embedded in EMBEDDED {
            let bytes = embedded.bytes();
            assert!(bytes.starts_with(b"\0asm"), "{}", embedded.name);
            assert!(
                bytes.len() > 2 * embedded.deflated.len(),
                "{}",
                embedded.name
            );
        }
        let runtime = super::inflate(crate::script::CODE_RUNTIME);
        assert!(runtime.starts_with(b"\0asm"));
    }
}
