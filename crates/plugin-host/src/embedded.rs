//! The default plugins, compiled from `plugins/` by this crate's `build.rs` and built into the
//! binary so `mcpproxy serve` needs no `--plugins` directory.

/// One plugin built into the binary.
pub(crate) struct Embedded {
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
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/prefix_annotator.wasm")),
        opt_in: false,
        stateless: true,
    },
    Embedded {
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/intent_matrix.wasm")),
        opt_in: false,
        stateless: true,
    },
    Embedded {
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/clickhouse_sink.wasm")),
        opt_in: true,
        stateless: false,
    },
    Embedded {
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/http_sink.wasm")),
        opt_in: true,
        stateless: false,
    },
    Embedded {
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/safety_routing.wasm")),
        opt_in: true,
        stateless: true,
    },
    Embedded {
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/tool_scanner.wasm")),
        opt_in: false,
        stateless: true,
    },
    Embedded {
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/secret_redactor.wasm")),
        opt_in: false,
        stateless: true,
    },
    Embedded {
        bytes: include_bytes!(concat!(env!("OUT_DIR"), "/injection_marker.wasm")),
        opt_in: true,
        stateless: true,
    },
];
