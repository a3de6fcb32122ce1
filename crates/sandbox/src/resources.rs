//! Resource limits: address space, open files and CPU time as rlimits; the process count and
//! the memory of the server as a whole (all its processes together) as cgroups of its own,
//! where mcpproxy may create them, which also let mcpproxy end every process the server left
//! behind, even those that left its process group.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Error;
use crate::spec::ResourceLimits;

/// The rlimits for `limits`; `nproc` adds `RLIMIT_NPROC` (only where it counts the server's
/// processes alone: in a user namespace of its own).
pub(crate) fn rlimits(
    limits: &ResourceLimits,
    nproc: bool,
) -> Vec<(libc::__rlimit_resource_t, libc::rlim_t)> {
    let mut out = Vec::new();
    if let Some(mb) = limits.memory_mb {
        out.push((libc::RLIMIT_AS, mb.saturating_mul(1024 * 1024)));
    }
    if let Some(files) = limits.open_files {
        out.push((libc::RLIMIT_NOFILE, files));
    }
    if let Some(seconds) = limits.cpu_seconds {
        out.push((libc::RLIMIT_CPU, seconds));
    }
    if nproc && let Some(processes) = limits.max_processes {
        out.push((libc::RLIMIT_NPROC, processes));
    }
    // No core dumps: a dump of a server holds whatever secrets it was given.
    out.push((libc::RLIMIT_CORE, 0));
    out
}

/// Where mcpproxy may make a server's groups, as probed ([`crate::Support`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CgroupParents {
    /// The group to make pids groups in (cgroup v2, or the v1 `pids` hierarchy).
    pub pids: Option<PathBuf>,
    /// The group to make memory groups in (cgroup v2, or the v1 `memory` hierarchy); the
    /// same directory as `pids` on cgroup v2.
    pub memory: Option<PathBuf>,
}

/// The limit files of one controller, as cgroup v2 or v1 names them.
#[derive(Debug, Clone, Copy)]
enum Limit {
    Pids(u64),
    MemoryBytes(u64),
}

impl Limit {
    fn write(self, dir: &Path) -> std::io::Result<()> {
        match self {
            Limit::Pids(max) => std::fs::write(dir.join("pids.max"), max.to_string()),
            Limit::MemoryBytes(bytes) => {
                if dir.join("memory.max").exists() {
                    std::fs::write(dir.join("memory.max"), bytes.to_string())?;
                    // No way around the limit through swap (absent without swap accounting).
                    let _ = std::fs::write(dir.join("memory.swap.max"), "0");
                    Ok(())
                } else {
                    std::fs::write(dir.join("memory.limit_in_bytes"), bytes.to_string())?;
                    let _ =
                        std::fs::write(dir.join("memory.memsw.limit_in_bytes"), bytes.to_string());
                    Ok(())
                }
            }
        }
    }
}

/// The cgroups made for one server (one per hierarchy: one on cgroup v2, up to two on v1);
/// removed, their processes killed first, when dropped.
#[derive(Debug, Default)]
pub(crate) struct CgroupGroup {
    dirs: Vec<PathBuf>,
}

impl CgroupGroup {
    /// Makes the groups `limits` needs under `parents` and opens each one's `cgroup.procs`
    /// for the child to join. `label` is already safe in a file name. A limit whose
    /// controller has no parent is not made here (the caller reports it as missing).
    pub(crate) fn create(
        parents: &CgroupParents,
        label: &str,
        limits: &ResourceLimits,
    ) -> Result<(Self, Vec<OwnedFd>), Error> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let mut wanted: Vec<(&Path, Vec<Limit>)> = Vec::new();
        fn add<'a>(wanted: &mut Vec<(&'a Path, Vec<Limit>)>, parent: &'a Path, limit: Limit) {
            match wanted.iter_mut().find(|(p, _)| *p == parent) {
                Some((_, limits)) => limits.push(limit),
                None => wanted.push((parent, vec![limit])),
            }
        }
        if let (Some(max), Some(parent)) = (limits.max_processes, &parents.pids) {
            add(&mut wanted, parent, Limit::Pids(max));
        }
        if let (Some(mb), Some(parent)) = (limits.memory_mb, &parents.memory) {
            add(
                &mut wanted,
                parent,
                Limit::MemoryBytes(mb.saturating_mul(1024 * 1024)),
            );
        }
        // The pid, a counter and the start time: a pid the kernel hands out again, to a
        // later mcpproxy, never meets a group an earlier one left behind.
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!(
            "mcpproxy-{}-{}-{started:x}-{label}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut group = CgroupGroup::default();
        let mut procs = Vec::new();
        for (parent, limits) in wanted {
            sweep_abandoned(parent);
            let dir = parent.join(&name);
            let cgroup = |e: std::io::Error| Error::Cgroup(format!("{}: {e}", dir.display()));
            std::fs::create_dir(&dir).map_err(cgroup)?;
            group.dirs.push(dir.clone());
            for limit in limits {
                limit.write(&dir).map_err(cgroup)?;
            }
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))
                .map_err(cgroup)?;
            procs.push(OwnedFd::from(file));
        }
        Ok((group, procs))
    }
}

/// The processes in a group now.
fn processes(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

/// Kills every process in `dir` (a few rounds: one may fork while it is being killed), then
/// removes it.
fn empty_and_remove(dir: &Path) -> std::io::Result<()> {
    for _ in 0..50 {
        let left = processes(dir);
        if left.is_empty() {
            break;
        }
        for pid in left {
            kill(pid);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::fs::remove_dir(dir)
}

/// Ends the groups an mcpproxy that is no longer running left behind (one that was killed,
/// or exited before its servers' groups were removed): their processes (a server that
/// double-forked and left its process group) are killed, then the groups removed. A group of
/// a running mcpproxy is never touched.
fn sweep_abandoned(parent: &Path) {
    for entry in crate::support::abandoned_entries(parent, "mcpproxy-") {
        if let Err(e) = empty_and_remove(&entry.path()) {
            tracing::debug!(
                "cannot remove an abandoned sandbox cgroup {}: {e}",
                entry.path().display()
            );
        }
    }
}

impl Drop for CgroupGroup {
    fn drop(&mut self) {
        for dir in &self.dirs {
            if let Err(e) = empty_and_remove(dir) {
                tracing::warn!("cannot remove the sandbox's cgroup {}: {e}", dir.display());
            }
        }
    }
}

#[allow(unsafe_code, reason = "kill has no safe wrapper in libc")]
fn kill(pid: i32) {
    if pid > 1 {
        // SAFETY: kill with integer arguments.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}
