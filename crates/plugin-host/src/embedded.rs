//! The default plugins, compiled from `plugins/` by this crate's `build.rs` and built into the
//! binary so `mcpproxy serve` needs no `--plugins` directory.

/// One plugin built into the binary.
pub(crate) struct Embedded {
    /// The name the plugin gives itself (`info().name`), for `plugins check NAME`.
    pub(crate) name: &'static str,
    pub(crate) bytes: &'static [u8],
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
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/prefix_annotator.wasm")),
        opt_in: false,
        stateless: true,
    },
    Embedded {
        name: "intent-matrix",
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/intent_matrix.wasm")),
        opt_in: false,
        stateless: true,
    },
    Embedded {
        name: "clickhouse-sink",
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/clickhouse_sink.wasm")),
        opt_in: true,
        stateless: false,
    },
    Embedded {
        name: "http-sink",
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/http_sink.wasm")),
        opt_in: true,
        stateless: false,
    },
    Embedded {
        name: "safety-routing",
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/safety_routing.wasm")),
        opt_in: true,
        stateless: true,
    },
    Embedded {
        name: "tool-scanner",
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/tool_scanner.wasm")),
        opt_in: false,
        stateless: true,
    },
    Embedded {
        name: "secret-redactor",
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/secret_redactor.wasm")),
        opt_in: false,
        stateless: true,
    },
    Embedded {
        name: "injection-marker",
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/injection_marker.wasm")),
        opt_in: true,
        stateless: true,
    },
];

/// The component of the embedded plugin named `name` (`intent-matrix`), to check it as a
/// file is checked.
pub fn embedded_component(name: &str) -> Option<&'static [u8]> {
    EMBEDDED.iter().find(|e| e.name == name).map(|e| e.bytes)
}

/// The embedded plugins' names, in load order.
pub fn embedded_names() -> Vec<&'static str> {
    EMBEDDED.iter().map(|e| e.name).collect()
}
