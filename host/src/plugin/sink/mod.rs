//! Running sink plugins: the `sink-plugin` world, with outbound HTTP limited to the hosts
//! the sink's settings grant.
//!
//! A sink gets WASI with nothing in it (no directories, environment, stdio or sockets) plus
//! `wasi:http/outgoing-handler`. `wasi:http` opens its own connections, bypassing `WasiCtx`'s
//! socket checks, so the grant ([`crate::grant`]) is enforced in `http_hooks`: a request to
//! an authority that is not granted is refused with `HTTP-request-denied` before any
//! connection is opened, and the refusal is logged. Every HTTP timeout is clamped to the
//! sink's own deadline (wasi-http's defaults are 600 s), and so is the whole exchange up to
//! the response head (wasi-http puts no timeout on a TLS handshake).
//!
//! Parts: `http_hooks` (grant and timeouts), `record` (the WIT form of an audit record);
//! this file links and runs the world, and makes a sink plugin an
//! [`activity::delivery::Sink`](crate::activity::delivery::Sink).

mod http_hooks;
mod record;

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::activity::ActivityRecord;
use crate::activity::delivery::{Failure, Sink};
use crate::grant::Grant;

use super::bindings::{SinkPluginPre, wit_host, wit_metadata, wit_types};
use super::host::PluginCtx;
use super::limits::Limits;
use super::{Fault, Plugin};
use http_hooks::GrantedHosts;

pub(crate) use record::wit_record;

/// Makes `ring` the process's rustls crypto provider, once. wasi-http's `https` client
/// asks rustls for the process default, and with both `ring` (wasi-http's) and `aws-lc-rs`
/// (reqwest's) compiled in, rustls cannot pick one by itself: every TLS connection of a
/// sink would panic. A provider installed earlier (by an embedding program) is kept:
/// `install_default` refuses to replace one, and that refusal is ignored.
pub(crate) fn install_tls_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The store data of one sink call.
pub(crate) struct SinkCtx {
    pub(crate) plugin: PluginCtx,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    hooks: GrantedHosts,
}

impl SinkCtx {
    pub(crate) fn new(
        plugin: PluginCtx,
        name: Arc<str>,
        grant: Arc<Grant>,
        timeout: Duration,
    ) -> Self {
        // Nothing: no preopened directories, no environment, no stdio, no sockets.
        let wasi = WasiCtxBuilder::new()
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }))
            .build();
        Self {
            plugin,
            wasi,
            http: WasiHttpCtx::new(),
            table: ResourceTable::new(),
            hooks: GrantedHosts {
                plugin: name,
                grant,
                timeout,
            },
        }
    }
}

impl WasiView for SinkCtx {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for SinkCtx {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

/// The linker for sinks: the `mcpproxy:plugin` host interfaces, WASI p2 (with an empty
/// context) and `wasi:http`. Synchronous: a sink call runs on a blocking thread, and
/// wasi-http's I/O runs on the surrounding tokio runtime.
pub(crate) fn sink_linker(engine: &Engine) -> wasmtime::Result<Linker<SinkCtx>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_sync(&mut linker)?;
    wit_types::add_to_linker::<SinkCtx, HasSelf<PluginCtx>>(&mut linker, |ctx| &mut ctx.plugin)?;
    wit_host::add_to_linker::<SinkCtx, HasSelf<PluginCtx>>(&mut linker, |ctx| &mut ctx.plugin)?;
    Ok(linker)
}

/// A sink plugin ready to run: its template and what its settings grant.
pub(crate) struct SinkRunner {
    pre: SinkPluginPre<SinkCtx>,
    grant: Arc<Grant>,
}

impl SinkRunner {
    /// Type-checks `component` against the sink world with the sink linker.
    pub(crate) fn new(linker: &Linker<SinkCtx>, component: &Component) -> wasmtime::Result<Self> {
        install_tls_crypto_provider();
        let pre = linker.instantiate_pre(component)?;
        Ok(Self {
            pre: SinkPluginPre::new(pre)?,
            grant: Arc::new(Grant::default()),
        })
    }

    pub(crate) fn set_grant(&mut self, grant: Grant) {
        self.grant = Arc::new(grant);
    }

    pub(crate) fn grant(&self) -> &Grant {
        &self.grant
    }

    /// A store for one call: no grant is needed to ask who the plugin is.
    pub(crate) fn store_data(&self, plugin: PluginCtx, name: Arc<str>, limits: &Limits) -> SinkCtx {
        SinkCtx::new(plugin, name, self.grant.clone(), limits.timeout)
    }

    /// Calls `metadata.info()`.
    pub(crate) fn info(
        &self,
        store: &mut Store<SinkCtx>,
    ) -> wasmtime::Result<wit_metadata::PluginInfo> {
        let indices = wit_metadata::GuestIndices::new(self.pre.instance_pre())?;
        let instance = self.pre.instance_pre().instantiate(&mut *store)?;
        let guest = indices.load(&mut *store, &instance)?;
        guest.call_info(&mut *store)
    }

    /// Instantiates the sink and delivers `batch`: `Ok(Err(reason))` is the sink's own
    /// refusal (the remote is down, a bad answer), `Err` a fault.
    pub(crate) fn deliver(
        &self,
        store: &mut Store<SinkCtx>,
        batch: &[wit_types::ActivityRecord],
    ) -> wasmtime::Result<Result<(), String>> {
        let plugin = self.pre.instantiate(&mut *store)?;
        plugin
            .mcpproxy_plugin_sink()
            .call_deliver(&mut *store, batch)
    }
}

impl Sink for Plugin {
    fn name(&self) -> &str {
        Plugin::name(self)
    }

    fn deliver(&self, batch: &[ActivityRecord]) -> Result<(), Failure> {
        match Plugin::deliver(self, batch) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => Err(reason.into()),
            Err(fault) => Err(Failure {
                out_of_memory: matches!(fault.fault, Fault::Memory(_)),
                reason: fault.to_string(),
            }),
        }
    }

    fn granted_hosts(&self) -> Vec<String> {
        Plugin::granted_hosts(self).unwrap_or_default()
    }

    fn deadline(&self) -> Option<Duration> {
        Some(self.limits().timeout)
    }
}
