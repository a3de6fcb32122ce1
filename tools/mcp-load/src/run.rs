//! The load loop: open client sessions, run warm-up calls, then run the measured
//! calls with a fixed pool of tasks pulling call numbers from a shared counter,
//! timing each call end to end.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    Implementation, JsonObject,
};
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde::Serialize;
use tokio::task::JoinSet;

use crate::stats::Latency;

/// How long opening one session (HTTP connect + MCP initialize) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How a client uses its HTTP connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Connections {
    /// A new connection for every request, as rmcp's client does.
    #[default]
    PerRequest,
    /// Connections stay open between requests and are reused, as the official TypeScript and
    /// Python SDK clients do (a server must then answer in a way that lets the client read
    /// each response to its end).
    KeepAlive,
}

/// What to call, how often and how hard.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// The MCP streamable-HTTP endpoint, e.g. `http://127.0.0.1:8080/mcp`.
    pub url: String,
    /// The tool to call.
    pub tool: String,
    /// The tool's arguments.
    pub args: JsonObject,
    /// Measured calls.
    pub requests: usize,
    /// Calls in flight at once (the size of the task pool).
    pub concurrency: usize,
    /// Unmeasured calls before the measured ones.
    pub warmup: usize,
    /// Client sessions; calls go to them round-robin.
    pub sessions: usize,
    /// The longest one call may take before it counts as an error.
    pub call_timeout: Duration,
    pub connections: Connections,
}

/// The outcome of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub url: String,
    pub tool: String,
    pub requests: usize,
    pub concurrency: usize,
    pub sessions: usize,
    pub connections: Connections,
    pub errors: usize,
    /// The error of the lowest-numbered failed call, if any.
    pub first_error: Option<String>,
    /// Wall time of the measured calls, in milliseconds.
    pub wall_ms: f64,
    /// Measured calls (successful or not) divided by the wall time.
    pub calls_per_sec: f64,
    /// Latency of the successful calls; absent when none succeeded.
    #[serde(flatten)]
    pub latency: Option<Latency>,
}

/// Opens the sessions, warms up, runs the measured calls and closes the sessions.
///
/// Fails if a session cannot be opened or a warm-up call fails; errors of measured
/// calls are counted in the report instead.
pub async fn run(spec: &LoadSpec) -> Result<Report> {
    if spec.concurrency == 0 || spec.sessions == 0 {
        bail!("--concurrency and --sessions must be at least 1");
    }
    let clients = connect(&spec.url, spec.sessions, spec.connections).await?;
    let peers: Arc<[Peer<RoleClient>]> = clients.iter().map(|c| c.peer().clone()).collect();
    let params = CallToolRequestParams::new(spec.tool.clone()).with_arguments(spec.args.clone());

    let result = async {
        if spec.warmup > 0 {
            let warm = pool(
                &peers,
                &params,
                spec.warmup,
                spec.concurrency,
                spec.call_timeout,
            )
            .await;
            if let Some((_, error)) = warm.first_error {
                bail!(
                    "warm-up call of `{}` at {} failed ({} of {} failed): {error}",
                    spec.tool,
                    spec.url,
                    warm.errors,
                    spec.warmup
                );
            }
        }
        Ok(pool(
            &peers,
            &params,
            spec.requests,
            spec.concurrency,
            spec.call_timeout,
        )
        .await)
    }
    .await;

    for client in clients {
        // Best effort: ends the session (HTTP DELETE) so servers do not keep it around.
        let _ = tokio::time::timeout(Duration::from_secs(5), client.cancel()).await;
    }
    let measured = result?;

    let wall = measured.wall.as_secs_f64();
    Ok(Report {
        url: spec.url.clone(),
        tool: spec.tool.clone(),
        requests: spec.requests,
        concurrency: spec.concurrency,
        sessions: spec.sessions,
        connections: spec.connections,
        errors: measured.errors,
        first_error: measured.first_error.map(|(_, e)| e),
        wall_ms: wall * 1e3,
        calls_per_sec: if wall > 0.0 {
            spec.requests as f64 / wall
        } else {
            0.0
        },
        latency: Latency::from_durations(&measured.latencies),
    })
}

pub(crate) type Client = RunningService<RoleClient, ClientConfig>;

/// Opens `sessions` MCP sessions to `url`, one after another.
pub(crate) async fn connect(
    url: &str,
    sessions: usize,
    connections: Connections,
) -> Result<Vec<Client>> {
    let mut clients = Vec::with_capacity(sessions);
    crate::install_crypto_provider();
    for _ in 0..sessions {
        let handler = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mcp-load", env!("CARGO_PKG_VERSION")),
        );
        let transport = match connections {
            Connections::PerRequest => StreamableHttpClientTransport::from_uri(url.to_owned()),
            Connections::KeepAlive => StreamableHttpClientTransport::with_client(
                reqwest::Client::new(),
                StreamableHttpClientTransportConfig::with_uri(url.to_owned()),
            ),
        };
        let client = tokio::time::timeout(CONNECT_TIMEOUT, handler.serve(transport))
            .await
            .with_context(|| format!("MCP initialize with {url} timed out"))?
            .with_context(|| format!("MCP initialize with {url} failed"))?;
        clients.push(client);
    }
    Ok(clients)
}

/// What a pool of tasks measured.
#[derive(Debug, Default)]
struct PoolResult {
    latencies: Vec<Duration>,
    errors: usize,
    /// (call number, error text) of the lowest-numbered failed call.
    first_error: Option<(usize, String)>,
    wall: Duration,
}

impl PoolResult {
    fn merge(&mut self, other: PoolResult) {
        self.latencies.extend(other.latencies);
        self.errors += other.errors;
        self.record_error_text(other.first_error);
    }

    fn record_error_text(&mut self, error: Option<(usize, String)>) {
        if let Some((n, text)) = error
            && self.first_error.as_ref().is_none_or(|(m, _)| n < *m)
        {
            self.first_error = Some((n, text));
        }
    }
}

/// Makes `total` calls with `concurrency` tasks, each pulling the next call number
/// from a shared counter; call `n` goes to session `n % sessions`.
async fn pool(
    peers: &Arc<[Peer<RoleClient>]>,
    params: &CallToolRequestParams,
    total: usize,
    concurrency: usize,
    call_timeout: Duration,
) -> PoolResult {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    let started = Instant::now();
    for _ in 0..concurrency.min(total.max(1)) {
        let next = next.clone();
        let peers = peers.clone();
        let params = params.clone();
        tasks.spawn(async move {
            let mut mine = PoolResult {
                latencies: Vec::with_capacity(total / concurrency + 1),
                ..PoolResult::default()
            };
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= total {
                    break;
                }
                let peer = &peers[n % peers.len()];
                let t0 = Instant::now();
                let outcome = tokio::time::timeout(call_timeout, call(peer, params.clone())).await;
                let elapsed = t0.elapsed();
                let error = match outcome {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(e),
                    Err(_) => Some(format!("no answer within {call_timeout:?}")),
                };
                match error {
                    None => mine.latencies.push(elapsed),
                    Some(text) => {
                        mine.errors += 1;
                        mine.record_error_text(Some((n, text)));
                    }
                }
            }
            mine
        });
    }
    let mut all = PoolResult::default();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(part) => all.merge(part),
            Err(e) => {
                // A panicking task: count it once so the run is not reported clean.
                all.errors += 1;
                all.record_error_text(Some((usize::MAX, format!("load task failed: {e}"))));
            }
        }
    }
    all.wall = started.elapsed();
    all
}

/// One `tools/call`; `Err` carries a one-line description of what went wrong.
async fn call(peer: &Peer<RoleClient>, params: CallToolRequestParams) -> Result<(), String> {
    match peer.call_tool_once(params).await {
        Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => {
            Err(format!("tool returned isError: {}", result_text(&result)))
        }
        Ok(CallToolResponse::Complete(_)) => Ok(()),
        Ok(CallToolResponse::InputRequired(_)) => Err(
            "the server asked for client input (input_required), which mcp-load does not provide"
                .into(),
        ),
        Ok(CallToolResponse::Task(_)) => {
            Err("the server turned the call into a task, which mcp-load does not poll".into())
        }
        Ok(_) => Err("the server sent an unknown kind of tools/call result".into()),
        Err(e) => Err(format!("request failed: {e}")),
    }
}

/// The text blocks of a result, joined and cut to a readable length.
pub(crate) fn result_text(result: &CallToolResult) -> String {
    const MAX: usize = 500;
    let text: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.as_str())
        .collect();
    let text = text.join(" ");
    if text.is_empty() {
        return "(no text content)".into();
    }
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ServerCapabilities,
        ServerConfig,
    };
    use rmcp::service::RequestContext;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    use rmcp::{ErrorData, RoleServer, ServerHandler};

    use super::*;

    /// A real MCP server whose every tool answers "ok".
    #[derive(Clone)]
    struct AnswersOk;

    impl ServerHandler for AnswersOk {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }

        async fn call_tool(
            &self,
            _request: CallToolRequestParams,
            _context: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            Ok(CallToolResult::success(vec![ContentBlock::text("ok")]).into())
        }
    }

    /// Serves [`AnswersOk`] on loopback, answering every request with a JSON body (which a client
    /// reads to its end, so it may reuse the connection); the URL and a count of the TCP
    /// connections accepted.
    async fn serve() -> (String, Arc<AtomicUsize>) {
        let mut config = StreamableHttpServerConfig::default();
        config.legacy_session_mode = false;
        config.json_response = true;
        let service = StreamableHttpService::new(
            || Ok(AnswersOk),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let app = axum::Router::new().route_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        let listener = axum::serve::ListenerExt::tap_io(listener, move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, accepted)
    }

    async fn calls(connections: Connections) -> (Report, usize) {
        let (url, accepted) = serve().await;
        let spec = LoadSpec {
            url,
            tool: "anything".into(),
            args: JsonObject::new(),
            requests: 20,
            concurrency: 1,
            warmup: 0,
            sessions: 1,
            call_timeout: Duration::from_secs(10),
            connections,
        };
        let report = run(&spec).await.unwrap();
        (report, accepted.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn keep_alive_reuses_one_connection_and_per_request_opens_one_each() {
        let (report, accepted) = calls(Connections::KeepAlive).await;
        assert_eq!(report.errors, 0, "{:?}", report.first_error);
        assert_eq!(report.connections, Connections::KeepAlive);
        // initialize, its notification, 20 calls and the closing DELETE: one connection.
        assert_eq!(accepted, 1, "keep-alive connections accepted");

        let (report, accepted) = calls(Connections::PerRequest).await;
        assert_eq!(report.errors, 0, "{:?}", report.first_error);
        assert!(
            accepted >= 20,
            "per-request connections accepted: {accepted}"
        );
    }
}
