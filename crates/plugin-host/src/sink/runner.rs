//! Linking and running the two sink worlds, one warm instance kept while a backlog drains,
//! and a sink plugin as the journal's [`Sink`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::component::{Component, HasSelf, InstancePre, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use mcpproxy_activity::SinkBatch;
use mcpproxy_activity::{Failure, Sink};
use mcpproxy_policy::Grant;

use super::http_hooks::GrantedHosts;
use crate::bindings::{
    NdjsonSinkPlugin, NdjsonSinkPluginPre, SinkPlugin, SinkPluginPre, wit_host, wit_metadata,
    wit_ndjson_sink, wit_types,
};
use crate::host::PluginCtx;
use crate::{CallFault, Plugin};
use mcpproxy_policy::Limits;

use crate::deadline::{ArmedDeadline, HoldsDeadline};

use super::record::wit_record;

/// Makes `ring` the process's rustls crypto provider, once. wasi-http's `https` client
/// asks rustls for the process default, which nothing installs by itself: without one,
/// every TLS connection of a sink would panic. The binary's `main` installs ring first
/// (`mcpproxy_auth::install_crypto_providers`); this is for the plugin host on its own (its
/// tests, an embedding program). A provider installed earlier is kept: `install_default`
/// refuses to replace one, and that refusal is ignored.
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
                deadline_at: None,
            },
        }
    }

    /// The call has returned: its deadline is no longer watched nor bounds HTTP waits.
    pub(crate) fn end_call(&mut self) {
        self.hooks.deadline_at = None;
        self.plugin.end_call();
    }
}

/// A sink call's deadline is watched until the call ends, and bounds its HTTP waits.
impl HoldsDeadline for SinkCtx {
    fn hold_deadline(&mut self, armed: ArmedDeadline) {
        self.hooks.deadline_at = Some(armed.at());
        self.plugin.hold_deadline(armed);
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

/// The two sink worlds: what a component is handed per batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SinkWorld {
    /// `sink-plugin`: typed records.
    Records,
    /// `ndjson-sink-plugin`: the journal's JSON lines as stored (the faster form).
    Lines,
}

impl SinkWorld {
    /// The world's name, for messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Records => "sink-plugin",
            Self::Lines => "ndjson-sink-plugin",
        }
    }
}

/// Which sink world a component implements.
pub(crate) enum SinkTemplate {
    /// `sink-plugin`: typed records.
    Records(SinkPluginPre<SinkCtx>),
    /// `ndjson-sink-plugin`: the journal's JSON lines.
    Lines(NdjsonSinkPluginPre<SinkCtx>),
}

/// An instance's export bindings, in its world.
pub(crate) enum SinkBindings {
    Records(SinkPlugin),
    Lines(NdjsonSinkPlugin),
}

/// A live instance: its store (memory, limiter, WASI and HTTP context) and its exports.
pub(crate) struct WarmSink {
    pub(crate) store: Store<SinkCtx>,
    pub(crate) bindings: SinkBindings,
    /// The last batch's NDJSON buffer, reused for the next batch (no new large allocation,
    /// and none of its page faults, per batch of a backlog).
    pub(crate) lines: Vec<u8>,
}

/// A sink plugin ready to run: its template, what its settings grant, and the instance kept
/// between the batches of a backlog.
pub(crate) struct SinkRunner {
    template: SinkTemplate,
    grant: Arc<Grant>,
    /// Kept only while batches follow one another (`SinkBatch::more`): draining a backlog
    /// then costs one instance, not one per batch, and a caught-up sink holds no memory.
    warm: Mutex<Option<WarmSink>>,
}

impl SinkRunner {
    /// Type-checks `component` against the sink world it exports with the sink linker.
    pub(crate) fn new(
        linker: &Linker<SinkCtx>,
        component: &Component,
        world: SinkWorld,
    ) -> wasmtime::Result<Self> {
        install_tls_crypto_provider();
        let pre = linker.instantiate_pre(component)?;
        let template = match world {
            SinkWorld::Lines => SinkTemplate::Lines(NdjsonSinkPluginPre::new(pre)?),
            SinkWorld::Records => SinkTemplate::Records(SinkPluginPre::new(pre)?),
        };
        Ok(Self {
            template,
            grant: Arc::new(Grant::default()),
            warm: Mutex::new(None),
        })
    }

    /// The world's name, for messages.
    pub(crate) fn world(&self) -> &'static str {
        match self.template {
            SinkTemplate::Records(_) => SinkWorld::Records.name(),
            SinkTemplate::Lines(_) => SinkWorld::Lines.name(),
        }
    }

    /// Sets what the sink may reach; a warm instance (made under the old grant) is dropped.
    pub(crate) fn set_grant(&mut self, grant: Grant) {
        self.grant = Arc::new(grant);
        self.warm_slot().take();
    }

    pub(crate) fn grant(&self) -> &Grant {
        &self.grant
    }

    /// A store for one call: no grant is needed to ask who the plugin is.
    pub(crate) fn store_data(&self, plugin: PluginCtx, name: Arc<str>, limits: &Limits) -> SinkCtx {
        SinkCtx::new(plugin, name, self.grant.clone(), limits.timeout)
    }

    fn instance_pre(&self) -> &InstancePre<SinkCtx> {
        match &self.template {
            SinkTemplate::Records(pre) => pre.instance_pre(),
            SinkTemplate::Lines(pre) => pre.instance_pre(),
        }
    }

    fn warm_slot(&self) -> std::sync::MutexGuard<'_, Option<WarmSink>> {
        mcpproxy_support::lock(&self.warm)
    }

    /// The instance kept from the previous batch, if any.
    pub(crate) fn take_warm(&self) -> Option<WarmSink> {
        self.warm_slot().take()
    }

    #[cfg(test)]
    pub(crate) fn has_warm(&self) -> bool {
        self.warm_slot().is_some()
    }

    /// Keeps `instance` for the next batch.
    pub(crate) fn keep_warm(&self, instance: WarmSink) {
        *self.warm_slot() = Some(instance);
    }

    /// Calls `metadata.info()`.
    pub(crate) fn info(
        &self,
        store: &mut Store<SinkCtx>,
    ) -> wasmtime::Result<wit_metadata::PluginInfo> {
        let indices = wit_metadata::GuestIndices::new(self.instance_pre())?;
        let instance = self.instance_pre().instantiate(&mut *store)?;
        let guest = indices.load(&mut *store, &instance)?;
        guest.call_info(&mut *store)
    }

    /// A new instance of the sink in `store`.
    pub(crate) fn instantiate(&self, store: &mut Store<SinkCtx>) -> wasmtime::Result<SinkBindings> {
        Ok(match &self.template {
            SinkTemplate::Records(pre) => SinkBindings::Records(pre.instantiate(store)?),
            SinkTemplate::Lines(pre) => SinkBindings::Lines(pre.instantiate(store)?),
        })
    }

    /// Delivers `batch` through `instance` in the sink's own form: `Ok(Err(reason))` is the
    /// sink's own refusal (the remote is down, a bad answer), `Err` a fault.
    pub(crate) fn deliver(
        instance: &mut WarmSink,
        batch: &SinkBatch,
    ) -> wasmtime::Result<Result<(), String>> {
        let store = &mut instance.store;
        match &instance.bindings {
            SinkBindings::Records(plugin) => {
                let records: Vec<_> = batch
                    .records()
                    .iter()
                    .filter_map(|(record, row)| wit_record(record, row))
                    .collect();
                if records.is_empty() {
                    return Ok(Ok(()));
                }
                plugin.mcpproxy_plugin_sink().call_deliver(store, &records)
            }
            SinkBindings::Lines(plugin) => {
                let (Some(first), Some(last)) = (batch.first_id(), batch.last_id()) else {
                    return Ok(Ok(()));
                };
                batch.ndjson_into(&mut instance.lines);
                let wit_batch = wit_ndjson_sink::NdjsonBatch {
                    records: u32::try_from(batch.len()).unwrap_or(u32::MAX),
                    first_id: first.to_owned(),
                    last_id: last.to_owned(),
                    lines: std::mem::take(&mut instance.lines),
                };
                let outcome = plugin
                    .mcpproxy_plugin_ndjson_sink()
                    .call_deliver(store, &wit_batch);
                instance.lines = wit_batch.lines;
                outcome
            }
        }
    }
}

impl Sink for Plugin {
    fn name(&self) -> &str {
        Plugin::name(self)
    }

    fn deliver(&self, batch: &SinkBatch) -> Result<(), Failure> {
        match Plugin::deliver(self, batch) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => Err(reason.into()),
            Err(fault) => Err(Failure {
                out_of_memory: matches!(fault.fault, CallFault::Memory(_)),
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::{EngineOptions, PluginEngine, PluginSettings, PluginSource};
    use mcpproxy_activity::{ActivityRecord, RecordType, Source};

    /// An NDJSON endpoint on loopback that stores nothing and counts the lines it got.
    async fn receiver(lines: Arc<AtomicUsize>) -> String {
        let app = axum::Router::new().route(
            "/ingest",
            axum::routing::post(move |body: axum::body::Bytes| async move {
                lines.fetch_add(
                    body.iter().filter(|b| **b == b'\n').count(),
                    Ordering::SeqCst,
                );
                "ok"
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}/ingest")
    }

    fn http_sink(engine: &PluginEngine, url: &str) -> Plugin {
        let bytes = crate::embedded_component("http-sink").unwrap();
        let mut plugin =
            Plugin::load(engine, &bytes, PluginSource::Embedded, Limits::default()).unwrap();
        plugin.configure(&PluginSettings {
            limits: Limits::default(),
            settings: serde_json::json!({ "url": url }),
            reuse_chosen: true,
        });
        plugin
    }

    fn batch(n: usize, more: bool) -> SinkBatch {
        let records: Vec<ActivityRecord> = (0..n)
            .map(|i| ActivityRecord::new(RecordType::ToolCall, Source::Api, "s", format!("t{i}")))
            .collect();
        SinkBatch {
            more,
            ..SinkBatch::of(&records).unwrap()
        }
    }

    #[test]
    fn an_instance_is_kept_only_while_a_backlog_drains() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let lines = Arc::new(AtomicUsize::new(0));
        let url = rt.block_on(receiver(lines.clone()));
        let _inside = rt.enter();
        let engine = PluginEngine::new(EngineOptions::default()).unwrap();
        let mut plugin = http_sink(&engine, &url);
        assert_eq!(plugin.world(), "ndjson-sink-plugin");

        // Two batches of a backlog: one instance, kept between them.
        assert_eq!(plugin.deliver(&batch(3, true)).unwrap(), Ok(()));
        assert!(
            plugin.holds_warm_sink(),
            "kept after a stored batch with more behind it"
        );
        assert_eq!(plugin.deliver(&batch(2, true)).unwrap(), Ok(()));
        assert!(plugin.holds_warm_sink());
        // The last batch of the backlog: delivered by the warm instance, which then goes.
        assert_eq!(plugin.deliver(&batch(1, false)).unwrap(), Ok(()));
        assert!(
            !plugin.holds_warm_sink(),
            "a caught-up sink holds no instance"
        );
        assert_eq!(lines.load(Ordering::SeqCst), 6);

        // New settings (a new grant) drop the kept instance.
        plugin.deliver(&batch(1, true)).unwrap().unwrap();
        assert!(plugin.holds_warm_sink());
        plugin.configure(&PluginSettings {
            limits: Limits::default(),
            settings: serde_json::json!({ "url": url }),
            reuse_chosen: true,
        });
        assert!(!plugin.holds_warm_sink());

        // A refusal (the remote is gone) drops it too.
        let gone = http_sink(&engine, "http://127.0.0.1:9/ingest");
        let refused = gone.deliver(&batch(1, true)).unwrap();
        assert!(refused.unwrap_err().contains("refused"));
        assert!(!gone.holds_warm_sink());
    }
}
