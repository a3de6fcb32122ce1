//! The sandbox a stdio server is launched in: its config's `isolation` turned into a
//! [`mcpproxy_sandbox::SandboxSpec`], prepared for this launch, with the result written to
//! the server's log (what it may reach, and what the kernel could not enforce).

use std::path::Path;
use std::sync::Arc;

use mcpproxy_sandbox::{ForbiddenPath, Launch, Prepared, SandboxSpec, Support};

use super::Upstream;
use mcpproxy_config::{Isolation, StdioLaunch};
use mcpproxy_support::lock;

/// The sandbox of one launch of `upstream`; `None` when its isolation is off.
pub(super) fn prepare(
    upstream: &Upstream,
    launch: StdioLaunch<'_>,
) -> Result<Option<Prepared>, String> {
    let StdioLaunch {
        command,
        args,
        env,
        working_dir,
    } = launch;
    let isolation = &upstream.config.isolation;
    if !isolation.enabled {
        upstream.log_line(
            "mcpproxy: sandbox off (isolation.enabled is false): the server runs as you, with mcpproxy's environment, your files and the network",
        );
        return Ok(None);
    }
    let mut spec = spec(isolation, env, &upstream.forbidden_paths);
    spec.launcher_cache = Some(upstream.launcher_cache.clone());
    let launch = Launch {
        command,
        args,
        working_dir,
        label: upstream.name(),
    };
    let prepared = mcpproxy_sandbox::prepare(&spec, launch, Support::get())
        .map_err(|e| format!("cannot start `{command}` in its sandbox: {e}"))?;
    upstream.log_line(&format!("mcpproxy: {}", prepared.report.summary()));
    *lock(&upstream.inferred_reads) = prepared
        .report
        .read
        .iter()
        .filter(|path| !isolation.read.contains(path))
        .map(|path| path.display().to_string())
        .collect();
    if !prepared.report.missing.is_empty() {
        tracing::warn!(
            server = upstream.name(),
            "the server's sandbox is incomplete: this kernel lacks {} (set isolation.required to refuse to start it instead)",
            prepared.report.missing.join(", ")
        );
    }
    Ok(Some(prepared))
}

/// Starts the egress proxy of a server launched with `"network": {"allow": [...]}`: waits
/// (off the async threads) for the listener its process binds in its network namespace, then
/// serves it until the returned task is aborted (when the process is ended).
pub(super) fn start_egress(
    upstream: &Arc<Upstream>,
    receiver: mcpproxy_sandbox::EgressReceiver,
    rules: mcpproxy_sandbox::egress::EgressRules,
) -> tokio::task::AbortHandle {
    /// How long the server's process may take to hand the listener over (it does so
    /// before it runs the server's program).
    const HANDOVER: std::time::Duration = std::time::Duration::from_secs(30);
    lock(&upstream.egress).allow = rules.rules().iter().map(ToString::to_string).collect();
    let rules = Arc::new(rules);
    let weak = Arc::downgrade(upstream);
    let server: Arc<str> = Arc::from(upstream.name());
    tokio::spawn(async move {
        let received = tokio::task::spawn_blocking(move || receiver.receive(HANDOVER)).await;
        let listener = match received {
            Ok(Ok(Some(listener))) => listener,
            outcome => {
                let why = match outcome {
                    Ok(Ok(_)) => "the server's process ended before handing it over".to_owned(),
                    Ok(Err(e)) => e.to_string(),
                    Err(e) => e.to_string(),
                };
                if let Some(upstream) = weak.upgrade() {
                    upstream.log_line(&format!(
                        "mcpproxy: the egress proxy did not start ({why}): the server has no network"
                    ));
                }
                return;
            }
        };
        let listener = match listener
            .set_nonblocking(true)
            .and_then(|()| tokio::net::TcpListener::from_std(listener))
        {
            Ok(listener) => listener,
            Err(e) => {
                tracing::warn!(server = %server, "the egress proxy's listener is unusable: {e}");
                return;
            }
        };
        if let Some(upstream) = weak.upgrade() {
            upstream.log_line(&format!(
                "mcpproxy: egress proxy on {} in the server's network namespace, allowing {}",
                mcpproxy_sandbox::egress::PROXY_ADDRESS,
                rules
            ));
        }
        let report = Arc::new(move |event: mcpproxy_egress::EgressEvent| {
            if let Some(upstream) = weak.upgrade() {
                upstream.egress_event(event);
            }
        });
        mcpproxy_egress::serve(listener, rules, server, report).await;
    })
    .abort_handle()
}

/// What the sandbox crate needs of a server's `isolation`.
fn spec(
    isolation: &Isolation,
    env: &std::collections::BTreeMap<String, String>,
    forbidden: &[ForbiddenPath],
) -> SandboxSpec {
    SandboxSpec {
        network: isolation.network.clone(),
        read: isolation.read.clone(),
        write: isolation.write.clone(),
        env_passthrough: isolation.env_passthrough.clone(),
        env: env.clone(),
        limits: isolation.limits,
        required: isolation.required,
        forbidden: forbidden.to_vec(),
        launcher_cache: None,
    }
}

/// A hint for a server that failed to start in its sandbox, when one applies: launchers
/// that download the server at start need the network and their cache.
pub(super) fn start_hint(isolation: &Isolation, command: &str) -> Option<&'static str> {
    if !isolation.enabled {
        return None;
    }
    let launcher = Path::new(command)
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| matches!(n, "npx" | "uvx" | "bunx" | "pnpx" | "pipx" | "uv"));
    launcher.then_some(
        "it runs in a sandbox (isolation) with no network and a private home, so a launcher like npx or uvx cannot download the server or use its cache: install the server (npm install -g PACKAGE, or a venv) and point 'command' at it, or let it reach its registry through the egress proxy (\"network\": {\"allow\": [\"registry.npmjs.org:443\"]}) and grant the launcher's cache (e.g. \"write\": [\"~/.npm\"]) for this server",
    )
}

/// A stdio server's sandbox as status displays show it (`upstream list`, REST, the page,
/// the `upstream_servers` tool).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SandboxStatus {
    pub enabled: bool,
    /// `none` or `all`.
    pub network: String,
    /// Paths granted to read, beyond the system directories and the server's install tree.
    #[serde(default)]
    pub read: Vec<String>,
    /// Paths granted to write, beyond its private home and temp dir.
    #[serde(default)]
    pub write: Vec<String>,
    /// Paths its sandbox granted to read at its last launch without the config naming them,
    /// found from its command and arguments: its install tree (a `node_modules`, a venv, an
    /// interpreter's prefix), a script's project, its working directory.
    #[serde(default)]
    pub inferred_read: Vec<String>,
    /// What this kernel cannot enforce of it.
    #[serde(default)]
    pub missing: Vec<String>,
    /// With `"network": {"allow": [...]}`: what it may reach, and what its egress proxy
    /// carried and refused since mcpproxy started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<mcpproxy_egress::EgressStats>,
}

impl SandboxStatus {
    /// `inferred_read`: what its sandbox granted at its last launch beyond the config.
    pub fn of(
        isolation: &Isolation,
        forbidden: &[ForbiddenPath],
        inferred_read: Vec<String>,
        egress: Option<mcpproxy_egress::EgressStats>,
    ) -> Self {
        let shown =
            |paths: &[std::path::PathBuf]| paths.iter().map(|p| p.display().to_string()).collect();
        let missing = if isolation.enabled {
            mcpproxy_sandbox::missing_features(
                &spec(isolation, &Default::default(), forbidden),
                Support::get(),
            )
        } else {
            Vec::new()
        };
        Self {
            enabled: isolation.enabled,
            network: isolation.network.as_str().to_owned(),
            read: shown(&isolation.read),
            write: shown(&isolation.write),
            inferred_read,
            missing,
            egress,
        }
    }

    /// A few words for a table: `on (network none)`, `OFF`.
    pub fn brief(&self) -> String {
        if !self.enabled {
            return "OFF".to_owned();
        }
        let mut text = match &self.egress {
            Some(egress) => format!("on (network allow {}", egress.allow.join(" ")),
            None => format!("on (network {}", self.network),
        };
        if !self.inferred_read.is_empty() {
            text.push_str(&format!(
                ", reads {} (inferred)",
                self.inferred_read.join(", ")
            ));
        }
        if !self.write.is_empty() {
            text.push_str(&format!(", writes {}", self.write.join(", ")));
        }
        if !self.missing.is_empty() {
            text.push_str(", incomplete");
        }
        text.push(')');
        text
    }
}
