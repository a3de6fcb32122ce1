//! The default plugins, compiled from `plugins/` by `host/build.rs` and built into the
//! binary so `mcpproxy serve` needs no `--plugins` directory.

/// `(label, component bytes)` for each embedded plugin, in load order.
pub(crate) const EMBEDDED: &[(&str, &[u8])] = &[
    (
        "prefix-annotator",
        include_bytes!(concat!(env!("OUT_DIR"), "/prefix_annotator.wasm")),
    ),
    (
        "intent-matrix",
        include_bytes!(concat!(env!("OUT_DIR"), "/intent_matrix.wasm")),
    ),
    (
        "clickhouse-sink",
        include_bytes!(concat!(env!("OUT_DIR"), "/clickhouse_sink.wasm")),
    ),
    (
        "http-sink",
        include_bytes!(concat!(env!("OUT_DIR"), "/http_sink.wasm")),
    ),
];
