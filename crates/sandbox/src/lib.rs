//! mcpproxy's sandbox for the stdio servers it starts, applied between fork and exec with no
//! daemon and no image: Landlock confines the file system (system directories and the
//! server's own install tree to read, a private home and temp dir and the granted paths to
//! write, never mcpproxy's data dir) and scopes signals; a network namespace of its own cuts
//! the network; a PID namespace (with its own `/proc`), an IPC namespace and a mount namespace
//! keep other processes out of sight and reach; the capabilities go (when mcpproxy runs as
//! root); `no_new_privs` and a seccomp filter refuse tracing, mounting, kernel modules, new
//! namespaces, Unix sockets and acting on other pids; rlimits and pids and memory cgroups
//! bound memory, files, CPU and processes; and the environment is rebuilt from a few names.
//! [`sandboxed_peer`] tells mcpproxy's sockets a sandboxed peer from the user's own.
//!
//! [`prepare`] does everything that can fail or allocate in the parent; the child only runs
//! [`ChildSetup::enter`].

#[cfg(target_os = "linux")]
mod child;
pub mod egress;
mod environment;
mod error;
#[cfg(target_os = "linux")]
mod filesystem;
mod install_tree;
mod launchers;
#[cfg(target_os = "linux")]
mod peer;
#[cfg(target_os = "linux")]
mod prepared;
#[cfg(target_os = "linux")]
mod resources;
mod shims;
mod spec;
mod support;
#[cfg(target_os = "linux")]
mod syscalls;

pub use error::Error;
pub use install_tree::proposed_grants;
pub use launchers::{
    LauncherKind, LauncherPlan, MAX_CONFIG_BYTES, Registry, launcher_kind, launcher_plan,
    resolved_version,
};
#[cfg(target_os = "linux")]
pub use peer::sandboxed_peer;
#[cfg(target_os = "linux")]
pub use prepared::{
    ChildSetup, EgressReceiver, Launch, LauncherReport, Prepared, Report, SandboxGuard,
    missing_features, prepare,
};
pub use shims::{ResolvedShim, resolve_shim};
pub use spec::{ForbiddenPath, Network, ResourceLimits, SandboxSpec, check_grants_against};
pub use support::Support;
