//! The sandbox a stdio server is launched in: its config's `isolation` turned into a
//! [`mcpproxy_sandbox::SandboxSpec`], prepared for this launch, with the result written to
//! the server's log (what it may reach, and what the kernel could not enforce).

use std::path::Path;

use mcpproxy_sandbox::{ForbiddenPath, Launch, Prepared, SandboxSpec, Support};

use super::Upstream;
use crate::config::Isolation;

/// The sandbox of one launch of `upstream`; `None` when its isolation is off.
pub(super) fn prepare(
    upstream: &Upstream,
    command: &str,
    args: &[String],
    env: &std::collections::BTreeMap<String, String>,
    working_dir: Option<&Path>,
) -> Result<Option<Prepared>, String> {
    let isolation = &upstream.config.isolation;
    if !isolation.enabled {
        upstream.log_line(
            "mcpproxy: sandbox off (isolation.enabled is false): the server runs as you, with mcpproxy's environment, your files and the network",
        );
        return Ok(None);
    }
    let spec = spec(isolation, env, &upstream.forbidden_paths);
    let launch = Launch {
        command,
        args,
        working_dir,
        label: upstream.name(),
    };
    let prepared = mcpproxy_sandbox::prepare(&spec, launch, Support::get())
        .map_err(|e| format!("cannot start `{command}` in its sandbox: {e}"))?;
    upstream.log_line(&format!("mcpproxy: {}", prepared.report.summary()));
    *mcpproxy_policy::lock(&upstream.inferred_reads) = prepared
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

/// What the sandbox crate needs of a server's `isolation`.
fn spec(
    isolation: &Isolation,
    env: &std::collections::BTreeMap<String, String>,
    forbidden: &[ForbiddenPath],
) -> SandboxSpec {
    SandboxSpec {
        network: isolation.network,
        read: isolation.read.clone(),
        write: isolation.write.clone(),
        env_passthrough: isolation.env_passthrough.clone(),
        env: env.clone(),
        limits: isolation.limits,
        required: isolation.required,
        forbidden: forbidden.to_vec(),
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
        "it runs in a sandbox (isolation) with no network and a private home, so a launcher like npx or uvx cannot download the server or use its cache: install the server (npm install -g PACKAGE, or a venv) and point 'command' at it, or set isolation.network to \"all\" and grant the launcher's cache (e.g. \"write\": [\"~/.npm\"]) for this server",
    )
}

/// A stdio server's sandbox as status displays show it (`upstream list`, REST, the page,
/// the `upstream_servers` tool).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct SandboxStatus {
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
}

impl SandboxStatus {
    /// `inferred_read`: what its sandbox granted at its last launch beyond the config.
    pub(crate) fn of(
        isolation: &Isolation,
        forbidden: &[ForbiddenPath],
        inferred_read: Vec<String>,
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
        }
    }

    /// A few words for a table: `on (network none)`, `OFF`.
    pub(crate) fn brief(&self) -> String {
        if !self.enabled {
            return "OFF".to_owned();
        }
        let mut text = format!("on (network {}", self.network);
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
