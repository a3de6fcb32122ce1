//! Running sink plugins: the `sink-plugin` world (typed records) and the `ndjson-sink-plugin`
//! world (the journal's JSON lines), with outbound HTTP limited to the hosts the sink's
//! settings grant.
//!
//! A sink gets WASI with nothing in it (no directories, environment, stdio or sockets) plus
//! `wasi:http/outgoing-handler`. `wasi:http` opens its own connections, bypassing `WasiCtx`'s
//! socket checks, so the grant ([`mcpproxy_policy::Grant`]) is enforced in `http_hooks`: a request to
//! an authority that is not granted is refused with `HTTP-request-denied` before any
//! connection is opened, and the refusal is logged. Every HTTP timeout is clamped to the
//! sink's own deadline (wasi-http's defaults are 600 s), and so is the whole exchange up to
//! the response head (wasi-http puts no timeout on a TLS handshake).
//!
//! Parts: `http_hooks` (grant and timeouts), `record` (the WIT form of an audit record),
//! `runner` (links and runs the world, and makes a sink plugin an
//! [`activity::Sink`](mcpproxy_activity::Sink)).

mod http_hooks;
mod record;
mod runner;

pub(crate) use runner::{SinkCtx, SinkRunner, SinkWorld, WarmSink, sink_linker};
