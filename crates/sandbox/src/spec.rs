//! What a server's sandbox allows: the settings the config resolves to, before anything is
//! opened or checked against the kernel.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::egress::EgressRules;

/// Where a sandboxed server may connect.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Network {
    /// A network namespace of its own: a loopback interface nobody else shares, no route out,
    /// nothing of the host's network (its loopback services included) reachable.
    #[default]
    None,
    /// A network namespace of its own, as with `None`, with mcpproxy's egress proxy listening
    /// on its loopback ([`PROXY_ADDRESS`](crate::egress::PROXY_ADDRESS)): the proxy connects
    /// to these destinations and no others, and the proxy variables of the server's
    /// environment point at it. A server that ignores them has no route out.
    Allow(EgressRules),
    /// The host's network, as an unsandboxed process has it.
    All,
}

impl Network {
    /// The config's word for it: `none`, `allow` or `all`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Allow(_) => "allow",
            Network::All => "all",
        }
    }

    /// For people: `none`, `all`, `allow api.github.com:443, *.slack.com:443`.
    pub fn describe(&self) -> String {
        match self {
            Network::Allow(rules) if rules.is_empty() => "allow (nothing)".to_owned(),
            Network::Allow(rules) => format!("allow {rules}"),
            other => other.as_str().to_owned(),
        }
    }

    /// Whether the server gets a network namespace of its own.
    pub fn own_namespace(&self) -> bool {
        !matches!(self, Network::All)
    }

    /// The allowed destinations, when the server reaches the network through the proxy.
    pub fn egress(&self) -> Option<&EgressRules> {
        match self {
            Network::Allow(rules) => Some(rules),
            _ => None,
        }
    }
}

/// Resource limits, each `None` for "not limited".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceLimits {
    /// Address space (`RLIMIT_AS`), in MiB.
    pub memory_mb: Option<u64>,
    /// Processes and threads of the server together (a pids cgroup where mcpproxy may create
    /// one, else `RLIMIT_NPROC` in the server's own user namespace).
    pub max_processes: Option<u64>,
    /// Open file descriptors (`RLIMIT_NOFILE`).
    pub open_files: Option<u64>,
    /// CPU seconds over the server's life (`RLIMIT_CPU`): a long-lived server accumulates
    /// them, so the default is no limit.
    pub cpu_seconds: Option<u64>,
}

impl ResourceLimits {
    /// The defaults: 2 GiB of address space (Node.js and CPython servers start and work in
    /// 1 GiB), 256 processes, 1024 open files, CPU time not limited.
    pub const DEFAULT: ResourceLimits = ResourceLimits {
        memory_mb: Some(2048),
        max_processes: Some(256),
        open_files: Some(1024),
        cpu_seconds: None,
    };
}

impl Default for ResourceLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The sandbox of one stdio server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSpec {
    pub network: Network,
    /// Paths the server may read (and execute), besides the system directories and its own
    /// install tree.
    pub read: Vec<PathBuf>,
    /// Paths the server may read and write.
    pub write: Vec<PathBuf>,
    /// Variables of mcpproxy's environment the server gets, besides the fixed few.
    pub env_passthrough: Vec<String>,
    /// The server's configured `env`.
    pub env: BTreeMap<String, String>,
    pub limits: ResourceLimits,
    /// Refuse to start the server when the kernel lacks a part of the sandbox (else start it
    /// with what there is and a warning naming what is missing).
    pub required: bool,
    /// Paths no grant may reach (the data dir, the config file).
    pub forbidden: Vec<ForbiddenPath>,
    /// Where a package launcher's caches go (`npx -y`, `uvx`, `pipx run`, `bunx`): a
    /// directory of this server's own under mcpproxy's data dir, granted to write. With a
    /// launcher, its registries join the egress allow-list (a `"none"` network becomes one
    /// that reaches them only). `None`: launchers get nothing of the kind.
    pub launcher_cache: Option<PathBuf>,
}

/// A path no server may read or write, whatever the config grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForbiddenPath {
    /// What it is, for the error: "the data dir", "the config file".
    pub what: &'static str,
    pub path: PathBuf,
}

/// Refuses the first of `grants` that contains or lies in one of `forbidden` (a server
/// granted it could never start): what a change to a server's `isolation` is checked with
/// before it is written, and what a start checks again.
pub fn check_grants_against<'a>(
    grants: impl IntoIterator<Item = &'a PathBuf>,
    forbidden: &[ForbiddenPath],
) -> Result<(), crate::Error> {
    for grant in grants {
        if let Some(reached) = forbidden_overlap(grant, forbidden) {
            return Err(crate::Error::Forbidden {
                grant: grant.display().to_string(),
                what: reached.what,
                forbidden: reached.path.display().to_string(),
            });
        }
    }
    Ok(())
}

pub(crate) fn forbidden_overlap<'a>(
    grant: &std::path::Path,
    forbidden: &'a [ForbiddenPath],
) -> Option<&'a ForbiddenPath> {
    let canonical =
        |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let grant = canonical(grant);
    forbidden.iter().find(|f| {
        let forbidden = canonical(&f.path);
        forbidden.starts_with(&grant) || grant.starts_with(&forbidden)
    })
}
