//! The `wasi:http` hooks of a sink call: every outbound request is checked against the
//! sink's [`Grant`] before a connection is opened (wasi-http opens its own sockets, so
//! `WasiCtx`'s socket checks do not apply), and every HTTP timeout is clamped to the sink's
//! deadline.

use std::sync::Arc;
use std::time::Duration;

use wasmtime_wasi_http::{RequestOptions, WasiBody, WasiHttpHooks};

use crate::grant::{Grant, authority_of};

/// Largest response-timeout a sink may ask for, whatever its deadline.
const MAX_HTTP_TIMEOUT: Duration = Duration::from_secs(120);

/// The `wasi:http` hooks of one sink call: the grant, and the clamp on timeouts.
pub(super) struct GrantedHosts {
    pub(super) plugin: Arc<str>,
    pub(super) grant: Arc<Grant>,
    pub(super) timeout: Duration,
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
