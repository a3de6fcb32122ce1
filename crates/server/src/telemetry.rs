//! Trace export: the [`mcpproxy_policy::spans`] of each call sent to an OpenTelemetry collector over
//! OTLP/HTTP (protobuf), when `telemetry.otlp_endpoint` is configured.
//!
//! Spans are batched in a bounded queue and sent by the SDK's own thread every
//! `export_interval`; a slow or absent collector never delays a call, and past the queue's
//! bound spans are dropped, not buffered without end. A failing collector is reported in one
//! log line, and once more when it answers again, not once per batch.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracerProvider, SpanData, SpanExporter,
};
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

use mcpproxy_config::OtlpConfig;

/// Spans waiting to be sent at most; past it new spans are dropped.
const MAX_QUEUED_SPANS: usize = 8192;
/// How long one export may take before it counts as failed.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot set up trace export to {url}: {reason}")]
    Exporter { url: String, reason: String },
}

/// The running export. Dropping it without [`TraceExport::shutdown`] loses the spans not
/// yet sent.
#[derive(Debug)]
pub struct TraceExport {
    provider: SdkTracerProvider,
    url: String,
}

impl TraceExport {
    /// Builds the exporter and its batching thread. Call it outside an async runtime's
    /// worker (the HTTP client it makes is a blocking one, on its own thread).
    pub fn start(config: &OtlpConfig) -> Result<Self, Error> {
        // The URL as logs and errors show it (a collector's URL may carry a token).
        let shown = mcpproxy_auth::masking::mask_url(&config.traces_url);
        let failed = |reason: String| Error::Exporter {
            url: shown.clone(),
            reason: mcpproxy_auth::masking::mask_text_with_url(&reason, &config.traces_url),
        };
        mcpproxy_auth::install_crypto_providers();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(config.traces_url.clone())
            .with_timeout(EXPORT_TIMEOUT)
            .with_headers(config.headers.clone().into_iter().collect())
            .build()
            .map_err(|e| failed(e.to_string()))?;
        let exporter = Reporting {
            inner: exporter,
            url: Arc::from(shown.as_str()),
            failing: AtomicBool::new(false),
        };
        let batches = BatchConfigBuilder::default()
            .with_max_queue_size(MAX_QUEUED_SPANS)
            .with_scheduled_delay(config.export_interval)
            .build();
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(batches)
            .build();
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(config.service_name.clone())
            .with_attribute(opentelemetry::KeyValue::new(
                "service.version",
                env!("CARGO_PKG_VERSION"),
            ))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                config.sample_ratio,
            ))))
            .with_resource(resource)
            .build();
        Ok(Self {
            provider,
            url: shown,
        })
    }

    /// Where spans go, with the URL's secrets masked ([`mcpproxy_auth::masking::mask_url`]).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The tracing layer that turns [`mcpproxy_policy::spans`] into exported spans; it sees nothing
    /// else (no log events, no spans of libraries).
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: Subscriber + for<'span> LookupSpan<'span> + Send + Sync,
    {
        let tracer = self.provider.tracer("mcpproxy");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            // INFO, the spans' own level, and not TRACE: the most verbose level any layer
            // takes becomes `log`'s maximum too, and at TRACE every `log::trace!` in
            // cranelift and regalloc2 went through the filters while plugins compiled
            // (a first start took 45 s instead of 6 in a debug build).
            .with_filter(
                Targets::new().with_target(mcpproxy_policy::SPAN_TARGET, tracing::Level::INFO),
            )
    }

    /// Sends the spans still queued (waiting at most the export timeout) and stops the
    /// batching thread. Call it outside an async runtime's worker.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            let e = mcpproxy_auth::masking::mask_text(&e.to_string());
            tracing::warn!("trace export to {} did not finish: {e}", self.url);
        }
    }
}

/// The OTLP exporter, logging a failing collector once (and its recovery) instead of at
/// every batch.
#[derive(Debug)]
struct Reporting<E> {
    inner: E,
    url: Arc<str>,
    failing: AtomicBool,
}

impl<E: SpanExporter> SpanExporter for Reporting<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        match &result {
            Err(e) if !self.failing.swap(true, Ordering::Relaxed) => tracing::warn!(
                "cannot send traces to {}: {}; {spans} spans dropped, and later ones until it answers",
                self.url,
                mcpproxy_auth::masking::mask_text(&e.to_string())
            ),
            Ok(()) if self.failing.swap(false, Ordering::Relaxed) => {
                tracing::info!("sending traces to {} again", self.url);
            }
            _ => {}
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use tracing_subscriber::filter::LevelFilter;

    #[test]
    fn the_export_layer_asks_for_no_level_more_verbose_than_its_spans() {
        // `log`'s maximum level follows the most verbose level a layer asks for; at TRACE
        // every `log::trace!` of the plugin compiler runs through the filters.
        let export = TraceExport::start(&OtlpConfig {
            traces_url: "http://127.0.0.1:9/v1/traces".into(),
            headers: BTreeMap::new(),
            service_name: "mcpproxy-test".into(),
            sample_ratio: 1.0,
            export_interval: Duration::from_secs(1),
        })
        .expect("an exporter for a well-formed URL");
        let layer = export.layer::<tracing_subscriber::Registry>();
        assert_eq!(layer.max_level_hint(), Some(LevelFilter::INFO));
        export.shutdown();
    }
}
