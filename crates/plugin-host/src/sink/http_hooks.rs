//! The `wasi:http` hooks of a sink call: every outbound request is checked against the
//! sink's [`Grant`] before a connection is opened (wasi-http opens its own sockets, so
//! `WasiCtx`'s socket checks do not apply), and every HTTP timeout is clamped to what is
//! left of the sink's deadline, less a margin in which the sink sees the timeout and says
//! what timed out (rather than being stopped by the deadline without a word).

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime_wasi_http::{RequestOptions, WasiBody, WasiHttpHooks};

use mcpproxy_policy::{Grant, authority_of};

/// Largest response-timeout a sink may ask for, whatever its deadline.
const MAX_HTTP_TIMEOUT: Duration = Duration::from_secs(120);

/// The least and the most of a deadline kept back from HTTP waits, for the sink to report
/// a timeout in (5% of what is left, within these bounds, and never more than half).
const MIN_MARGIN: Duration = Duration::from_millis(10);
const MAX_MARGIN: Duration = Duration::from_millis(250);

/// The `wasi:http` hooks of one sink call: the grant, and the clamp on timeouts.
pub(super) struct GrantedHosts {
    pub(super) plugin: Arc<str>,
    pub(super) grant: Arc<Grant>,
    pub(super) timeout: Duration,
    /// When the running call's deadline comes (set as it is armed).
    pub(super) deadline_at: Option<Instant>,
}

impl GrantedHosts {
    /// The longest an HTTP wait may take now: the sink's timeout (at most
    /// [`MAX_HTTP_TIMEOUT`]), and no longer than what is left of the call's deadline less
    /// a margin, so the wait ends while the sink can still run and report it.
    fn http_budget(&self, now: Instant) -> Duration {
        let whole = self.timeout.min(MAX_HTTP_TIMEOUT);
        let Some(at) = self.deadline_at else {
            return whole;
        };
        let left = at.saturating_duration_since(now);
        let margin = (left / 20).clamp(MIN_MARGIN, MAX_MARGIN).min(left / 2);
        whole.min(left - margin)
    }
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
        let clamp = self.http_budget(Instant::now());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn hooks(timeout: Duration, deadline_at: Option<Instant>) -> GrantedHosts {
        GrantedHosts {
            plugin: Arc::from("sink"),
            grant: Arc::new(Grant::default()),
            timeout,
            deadline_at,
        }
    }

    #[test]
    fn http_waits_end_before_the_deadline_with_room_to_report() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        // 1.5 s left: 5% (75 ms) kept back.
        let budget = hooks(ms(1500), Some(now + ms(1500))).http_budget(now);
        assert_eq!(budget, ms(1425));
        // Later in the call, less is left.
        assert_eq!(
            hooks(ms(1500), Some(now + ms(1500))).http_budget(now + ms(500)),
            ms(950)
        );
        // A long deadline keeps back at most 250 ms; the wait is capped at 120 s.
        assert_eq!(
            hooks(ms(30_000), Some(now + ms(30_000))).http_budget(now),
            ms(29_750)
        );
        assert_eq!(
            hooks(ms(600_000), Some(now + ms(600_000))).http_budget(now),
            MAX_HTTP_TIMEOUT
        );
        // A short one keeps back at least 10 ms, but never more than half of what is left.
        assert_eq!(hooks(ms(100), Some(now + ms(100))).http_budget(now), ms(90));
        assert_eq!(hooks(ms(100), Some(now + ms(8))).http_budget(now), ms(4));
        // Past the deadline: no wait at all.
        assert_eq!(
            hooks(ms(100), Some(now)).http_budget(now + ms(5)),
            Duration::ZERO
        );
        // No deadline armed (not a call): the sink's timeout.
        assert_eq!(hooks(ms(1500), None).http_budget(now), ms(1500));
    }
}
