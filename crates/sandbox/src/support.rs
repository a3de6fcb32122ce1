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
            root: false,
        }
    }
}

#[cfg(target_os = "linux")]
fn probe() -> Support {
    let root = crate::child::effective_uid() == 0;
    Support {
        landlock_abi: crate::child::landlock_abi(),
        network_namespace: root || user_namespaces_allowed(),
        seccomp: crate::child::seccomp_available(),
        pids_cgroup: pids_cgroup(),
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

/// The pids cgroup this process is in, when mcpproxy may create a group inside it: the
/// cgroup v2 group of the process (delegated, or as root), else the v1 `pids` hierarchy.
#[cfg(target_os = "linux")]
fn pids_cgroup() -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let writable = |dir: &std::path::Path| {
        let probe = dir.join(format!("mcpproxy-probe-{}", std::process::id()));
        let made = std::fs::create_dir(&probe).is_ok() && probe.join("pids.max").exists();
        let _ = std::fs::remove_dir(&probe);
        made
    };
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let relative = path.trim_start_matches('/');
        let dir = match controllers {
            "pids" => PathBuf::from("/sys/fs/cgroup/pids").join(relative),
            "" => {
                let base = if std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
                    PathBuf::from("/sys/fs/cgroup")
                } else {
                    PathBuf::from("/sys/fs/cgroup/unified")
                };
                let dir = base.join(relative);
                let enabled =
                    std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
                if !enabled.split_whitespace().any(|c| c == "pids") {
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
