//! Running sink plugins: the `sink-plugin` world, with outbound HTTP limited to the hosts
//! the sink's settings grant.
//!
//! A sink gets WASI with nothing in it (no directories, environment, stdio or sockets) plus
//! `wasi:http/outgoing-handler`. `wasi:http` opens its own connections, bypassing `WasiCtx`'s
//! socket checks, so the grant is enforced in [`GrantedHosts::send_request`]: a request to
//! an authority that is not granted is refused with `HTTP-request-denied` before any
//! connection is opened, and the refusal is logged. Every HTTP timeout is clamped to the
//! sink's own deadline (wasi-http's defaults are 600 s), and so is the whole exchange up to
//! the response head (wasi-http puts no timeout on a TLS handshake).
//!
//! The grant comes from the sink's settings: the authority (`host:port`) of its `url`
//! setting plus each entry of `allowed_hosts` (a `host:port` or a URL).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use http::uri::{Scheme, Uri};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{
    RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView,
};

use crate::activity::ActivityRecord;
use crate::policy::{Annotations, Decision, OperationType, SafetyClass};

use super::bindings::{wit_host, wit_metadata, wit_types};
use super::host::PluginCtx;
use super::limits::Limits;

pub(crate) mod sink_world {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "sink-plugin",
        with: {
            "mcpproxy:plugin/types": crate::plugin::bindings::validator_world::mcpproxy::plugin::types,
            "mcpproxy:plugin/host": crate::plugin::bindings::validator_world::mcpproxy::plugin::host,
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::sync::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
        },
        require_store_data_send: true,
    });
}

use sink_world::SinkPluginPre;

/// Largest response-timeout a sink may ask for, whatever its deadline.
const MAX_HTTP_TIMEOUT: Duration = Duration::from_secs(120);

/// The hosts one sink may reach, as lowercase `host:port` authorities.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grant {
    authorities: BTreeSet<String>,
}

impl Grant {
    /// The grant in a sink's settings: `url`'s authority plus every `allowed_hosts` entry.
    /// Entries that cannot be read are returned as errors for the config check to report.
    pub fn from_settings(settings: &serde_json::Value) -> (Self, Vec<String>) {
        let mut grant = Self::default();
        let mut problems = Vec::new();
        if let Some(url) = settings.get("url") {
            match url.as_str().map(authority_of) {
                Some(Ok(authority)) => {
                    grant.authorities.insert(authority);
                }
                Some(Err(e)) => problems.push(format!("url: {e}")),
                None => {
                    problems.push("url: must be a string such as \"http://127.0.0.1:8123\"".into())
                }
            }
        }
        match settings.get("allowed_hosts") {
            None => {}
            Some(serde_json::Value::Array(hosts)) => {
                for (i, host) in hosts.iter().enumerate() {
                    match host.as_str().map(authority_of) {
                        Some(Ok(authority)) => {
                            grant.authorities.insert(authority);
                        }
                        Some(Err(e)) => problems.push(format!("allowed_hosts[{i}]: {e}")),
                        None => problems.push(format!("allowed_hosts[{i}]: must be a string")),
                    }
                }
            }
            Some(_) => problems
                .push("allowed_hosts: must be a list such as [\"siem.example.com:443\"]".into()),
        }
        (grant, problems)
    }

    pub fn allows(&self, authority: &str) -> bool {
        self.authorities.contains(authority)
    }

    pub fn authorities(&self) -> impl Iterator<Item = &str> {
        self.authorities.iter().map(String::as_str)
    }
}

/// `host:port` of a URL (`http://h:1/x`) or of a bare `host:port`/`host`, lowercased, with
/// the scheme's default port filled in (80 for http and bare hosts, 443 for https).
pub fn authority_of(text: &str) -> Result<String, String> {
    let text = text.trim();
    let uri: Uri = text
        .parse()
        .map_err(|_| format!("{text:?} is not a URL or host:port"))?;
    let scheme = uri.scheme().cloned();
    if let Some(s) = &scheme
        && *s != Scheme::HTTP
        && *s != Scheme::HTTPS
    {
        return Err(format!("{text:?}: only http and https are supported"));
    }
    let authority = uri
        .authority()
        .ok_or_else(|| format!("{text:?} names no host"))?;
    let host = authority.host().to_ascii_lowercase();
    if host.is_empty() {
        return Err(format!("{text:?} names no host"));
    }
    let port = authority.port_u16().unwrap_or(match scheme {
        Some(s) if s == Scheme::HTTPS => 443,
        _ => 80,
    });
    Ok(format!("{host}:{port}"))
}

/// The `wasi:http` hooks of one sink call: the grant, and the clamp on timeouts.
struct GrantedHosts {
    plugin: Arc<str>,
    grant: Arc<Grant>,
    timeout: Duration,
}

impl WasiHttpHooks for GrantedHosts {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<WasiBody>,
                        Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
                    ),
                    wasmtime_wasi_http::Error,
                >,
            > + Send,
    > {
        drop(fut);
        let authority = authority_of(&request.uri().to_string());
        let granted = authority.as_ref().is_ok_and(|a| self.grant.allows(a));
        if !granted {
            let target = authority.unwrap_or_else(|_| request.uri().to_string());
            tracing::warn!(
                plugin = %self.plugin,
                target = %target,
                granted = %self.grant.authorities().collect::<Vec<_>>().join(", "),
                "refused an outbound request from sink '{}' to {target}: not in its granted hosts (its `url` and `allowed_hosts` settings)",
                self.plugin
            );
            return Box::new(async move {
                // Drain what the guest writes, so it sees the refusal rather than a broken pipe.
                use http_body_util::BodyExt;
                let mut body = request.into_body();
                while let Some(Ok(_)) = body.frame().await {}
                Err(wasmtime_wasi_http::Error::HttpRequestDenied)
            });
        }
        let clamp = self.timeout.min(MAX_HTTP_TIMEOUT);
        let pick = |asked: Option<Duration>| Some(asked.map_or(clamp, |d| d.min(clamp)));
        let options = RequestOptions {
            connect_timeout: pick(options.and_then(|o| o.connect_timeout)),
            first_byte_timeout: pick(options.and_then(|o| o.first_byte_timeout)),
            between_bytes_timeout: pick(options.and_then(|o| o.between_bytes_timeout)),
        };
        Box::new(async move {
            use http_body_util::BodyExt;
            // wasi-http bounds the TCP connect, the HTTP handshake and the first byte, but
            // not a TLS handshake: a remote that accepts and then says nothing would hold
            // the sink inside this host call, where its deadline cannot stop it. Bound the
            // whole exchange up to the response head by the deadline too.
            let sent = tokio::time::timeout(
                clamp,
                wasmtime_wasi_http::default_send_request(request, Some(options)),
            )
            .await;
            let (response, io) = match sent {
                Ok(result) => result?,
                Err(_) => return Err(wasmtime_wasi_http::Error::ConnectionTimeout),
            };
            Ok((
                response.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = _> + Send>,
            ))
        })
    }
}

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

/// The WIT form of a journal record.
pub(crate) fn wit_record(rec: &ActivityRecord) -> wit_types::ActivityRecord {
    let timestamp_ms = ulid::Ulid::from_string(&rec.id).map_or(0, |u| u.timestamp_ms());
    let safety_class = SafetyClass::ALL
        .into_iter()
        .find(|c| c.as_str() == rec.safety_class)
        .unwrap_or(SafetyClass::Unknown);
    let annotations = rec
        .annotations
        .as_ref()
        .and_then(|a| serde_json::from_value::<Annotations>(a.clone()).ok())
        .map(|a| wit_types::Annotations::from(&a));
    let intent = rec.intent.as_ref().map(|i| wit_types::Intent {
        operation_type: i
            .operation_type
            .as_deref()
            .and_then(|op| op.parse::<OperationType>().ok())
            .map(Into::into),
        data_sensitivity: i.data_sensitivity.clone(),
        reason: i.reason.clone(),
    });
    let status = match rec.status {
        crate::activity::Status::Success => wit_types::CallStatus::Success,
        crate::activity::Status::Blocked => wit_types::CallStatus::Blocked,
        // Sinks get finished records only; a pending one would be reported as an error.
        crate::activity::Status::Error | crate::activity::Status::Pending => {
            wit_types::CallStatus::Error
        }
    };
    let decision = match rec.verdict.decision {
        Decision::Allow => wit_types::Decision::Allow,
        Decision::Warn => wit_types::Decision::Warn,
        Decision::Reject => wit_types::Decision::Reject,
    };
    wit_types::ActivityRecord {
        id: rec.id.clone(),
        timestamp_ms,
        record_type: rec.record_type.as_str().to_owned(),
        source: rec.source.as_str().to_owned(),
        server_name: rec.server_name.clone(),
        tool_name: rec.tool_name.clone(),
        tool_variant: rec.tool_variant.clone().unwrap_or_default(),
        intent,
        annotations,
        annotation_source: rec.annotation_source.clone(),
        safety_class: safety_class.into(),
        verdict: wit_types::VerdictSummary {
            decision,
            plugin: rec.verdict.plugin.clone(),
            message: rec.verdict.message.clone(),
            warnings: rec
                .verdict
                .warnings
                .iter()
                .map(|w| format!("{}: {}", w.plugin, w.message))
                .collect(),
        },
        arguments_json: rec.arguments.as_ref().map(ToString::to_string),
        response_bytes: rec.response_bytes,
        status,
        error_message: rec.error_message.clone(),
        duration_ms: rec.duration_ms,
        session_id: rec.session_id.clone(),
        request_id: rec.request_id.clone(),
        client: rec.client.as_ref().map(|c| wit_types::ClientInfo {
            name: c.name.clone(),
            version: c.version.clone(),
        }),
        json: serde_json::to_string(rec).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn authorities_get_default_ports_and_lowercase() {
        assert_eq!(
            authority_of("http://127.0.0.1:8123").unwrap(),
            "127.0.0.1:8123"
        );
        assert_eq!(
            authority_of("https://SIEM.example.com/x?y").unwrap(),
            "siem.example.com:443"
        );
        assert_eq!(authority_of("http://h/").unwrap(), "h:80");
        assert_eq!(authority_of("h:9000").unwrap(), "h:9000");
        assert_eq!(authority_of("[::1]:8123").unwrap(), "[::1]:8123");
        assert!(
            authority_of("ftp://h")
                .unwrap_err()
                .contains("only http and https")
        );
        assert!(authority_of("not a url").is_err());
    }

    #[test]
    fn grant_comes_from_url_and_allowed_hosts() {
        let (grant, problems) = Grant::from_settings(&json!({
            "url": "http://127.0.0.1:8123",
            "allowed_hosts": ["https://backup.example.com", "10.0.0.1:9000"],
        }));
        assert!(problems.is_empty(), "{problems:?}");
        assert!(grant.allows("127.0.0.1:8123"));
        assert!(grant.allows("backup.example.com:443"));
        assert!(grant.allows("10.0.0.1:9000"));
        assert!(!grant.allows("127.0.0.1:8124"));
        assert!(!grant.allows("evil.example.com:443"));

        let (grant, problems) = Grant::from_settings(&json!({"url": 5, "allowed_hosts": "x"}));
        assert_eq!(grant, Grant::default());
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            Grant::from_settings(&json!({}))
                .0
                .authorities()
                .next()
                .is_none()
        );
    }

    #[test]
    fn records_convert_with_every_field() {
        let mut rec = ActivityRecord::new(
            crate::activity::RecordType::ToolCall,
            crate::activity::Source::Api,
            "github",
            "delete_repo",
        );
        rec.status = crate::activity::Status::Blocked;
        rec.safety_class = "dangerous".into();
        rec.annotations = Some(json!({"destructiveHint": true}));
        rec.arguments = Some(json!({"repo": "x"}));
        rec.verdict.decision = Decision::Reject;
        rec.verdict.warnings.push(crate::activity::WarningRecord {
            plugin: "p".into(),
            message: "m".into(),
        });
        let wit = wit_record(&rec);
        assert_eq!(wit.id, rec.id);
        assert!(wit.timestamp_ms > 1_700_000_000_000);
        assert_eq!(wit.status, wit_types::CallStatus::Blocked);
        assert_eq!(wit.safety_class, wit_types::SafetyClass::Dangerous);
        assert_eq!(wit.annotations.unwrap().destructive_hint, Some(true));
        assert_eq!(wit.arguments_json.as_deref(), Some(r#"{"repo":"x"}"#));
        assert_eq!(wit.verdict.warnings, vec!["p: m".to_string()]);
        let back: ActivityRecord = serde_json::from_str(&wit.json).unwrap();
        assert_eq!(back, rec);
    }
}
