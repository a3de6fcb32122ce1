//! What this kernel offers a sandbox, probed once: the Landlock ABI, network namespaces
//! (directly as root, through a user namespace otherwise), seccomp filters and a pids cgroup
//! mcpproxy may create groups in.

use std::path::PathBuf;
use std::sync::OnceLock;

/// The kernel's sandboxing features, as probed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI version (0: no Landlock). 1 confines files, 4 adds TCP ports, 6
    /// adds signal and abstract-socket scoping.
    pub landlock_abi: u32,
    /// A new network namespace can be made for a child.
    pub network_namespace: bool,
    /// seccomp filters can be installed.
    pub seccomp: bool,
    /// A pids cgroup directory mcpproxy may create groups in (for the process limit).
    pub pids_cgroup: Option<PathBuf>,
    /// A memory cgroup directory mcpproxy may create groups in (for the memory of the
    /// server as a whole): the same as `pids_cgroup` on cgroup v2, the `memory` hierarchy on
    /// v1.
    pub memory_cgroup: Option<PathBuf>,
    /// A server can be given a PID namespace of its own with its own `/proc`, an IPC
    /// namespace, and a mount namespace (probed by doing it once).
    pub process_namespace: bool,
    /// mcpproxy runs as root (the sandbox then also drops every capability).
    pub root: bool,
}

impl Support {
    /// The probed support of this machine (probed on first use).
    pub fn get() -> &'static Support {
        static SUPPORT: OnceLock<Support> = OnceLock::new();
        SUPPORT.get_or_init(probe)
    }

    /// A machine with none of the features (for tests and other systems).
    pub fn none() -> Support {
        Support {
            landlock_abi: 0,
            network_namespace: false,
            seccomp: false,
            pids_cgroup: None,
            memory_cgroup: None,
            process_namespace: false,
            root: false,
        }
    }
}

#[cfg(target_os = "linux")]
fn probe() -> Support {
    let root = crate::child::effective_uid() == 0;
    let namespaces = root || user_namespaces_allowed();
    Support {
        landlock_abi: crate::child::landlock_abi(),
        network_namespace: namespaces,
        seccomp: crate::child::seccomp_available(),
        pids_cgroup: cgroup_parent("pids", "pids.max"),
        memory_cgroup: cgroup_parent("memory", "memory.max")
            .or_else(|| cgroup_parent("memory", "memory.limit_in_bytes")),
        process_namespace: namespaces && crate::child::process_namespace_works(root),
        root,
    }
}

#[cfg(not(target_os = "linux"))]
fn probe() -> Support {
    Support::none()
}

/// Whether an unprivileged process may make a user namespace here.
#[cfg(target_os = "linux")]
fn user_namespaces_allowed() -> bool {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    if read("/proc/sys/kernel/unprivileged_userns_clone").is_some_and(|v| v.trim() == "0") {
        return false;
    }
    if read("/proc/sys/user/max_user_namespaces").is_some_and(|v| v.trim() == "0") {
        return false;
    }
    // AppArmor on Ubuntu 24.04 restricts them to profiled programs.
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
        .is_some_and(|v| v.trim() == "1")
    {
        return false;
    }
    std::path::Path::new("/proc/self/ns/user").exists()
}

/// The cgroup of `controller` this process is in, when mcpproxy may create a group inside it
/// that has `file` (a limit): the cgroup v2 group of the process (delegated, or as root), else
/// the v1 hierarchy of `controller`.
#[cfg(target_os = "linux")]
fn cgroup_parent(controller: &str, file: &str) -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let writable = |dir: &std::path::Path| {
        let probe = dir.join(format!("mcpproxy-probe-{}", std::process::id()));
        let made = std::fs::create_dir(&probe).is_ok() && probe.join(file).exists();
        let _ = std::fs::remove_dir(&probe);
        made
    };
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let relative = path.trim_start_matches('/');
        let dir = match controllers {
            c if c.split(',').any(|c| c == controller) => PathBuf::from("/sys/fs/cgroup")
                .join(controller)
                .join(relative),
            "" => {
                let base = if std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
                    PathBuf::from("/sys/fs/cgroup")
                } else {
                    PathBuf::from("/sys/fs/cgroup/unified")
                };
                let dir = base.join(relative);
                let enabled =
                    std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
                if !enabled.split_whitespace().any(|c| c == controller) {
                    continue;
                }
                dir
            }
            _ => continue,
        };
        if writable(&dir) {
            return Some(dir);
        }
    }
    None
}

/// Whether a process of this pid runs (as this process's `/proc` sees it).
pub(crate) fn process_exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// The entries of `dir` named `<prefix><pid>-...` whose owner (`pid`) is another mcpproxy
/// that is no longer running: what a killed mcpproxy left behind. An entry of this process,
/// of a running one, or not named that way is not returned.
pub(crate) fn abandoned_entries(dir: &std::path::Path, prefix: &str) -> Vec<std::fs::DirEntry> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .and_then(|n| n.strip_prefix(prefix))
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
                .is_some_and(|owner| owner != std::process::id() && !process_exists(owner))
        })
        .collect()
}
