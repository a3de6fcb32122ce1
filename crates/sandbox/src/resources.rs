//! Resource limits: address space, open files and CPU time as rlimits; the process count as a
//! pids cgroup of the server's own (where mcpproxy may create one), which also lets mcpproxy
//! end every process the server left behind, even those that left its process group.

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

/// A pids cgroup made for one server; removed (its processes killed first) when dropped.
#[derive(Debug)]
pub(crate) struct CgroupGroup {
    dir: PathBuf,
}

impl CgroupGroup {
    /// Makes a group under `parent` that admits `max` processes, and opens its
    /// `cgroup.procs` for the child to join. `label` is already safe in a file name.
    pub(crate) fn create(parent: &Path, label: &str, max: u64) -> Result<(Self, OwnedFd), Error> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        sweep_abandoned(parent);
        // The pid, a counter and the start time: a pid the kernel hands out again, to a
        // later mcpproxy, never meets a group an earlier one left behind.
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = parent.join(format!(
            "mcpproxy-{}-{}-{started:x}-{label}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let cgroup = |e: std::io::Error| Error::Cgroup(format!("{}: {e}", dir.display()));
        std::fs::create_dir(&dir).map_err(cgroup)?;
        let group = CgroupGroup { dir: dir.clone() };
        std::fs::write(dir.join("pids.max"), max.to_string()).map_err(cgroup)?;
        let procs = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .map_err(cgroup)?;
        Ok((group, OwnedFd::from(procs)))
    }

    /// The processes in the group now.
    fn processes(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect()
    }
}

/// Removes the empty groups an mcpproxy that is no longer running left behind (one that was
/// killed, or exited before its servers' groups were removed). A group of a running mcpproxy
/// is never touched, nor a group with a process in it (the kernel refuses to remove those).
fn sweep_abandoned(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name
            .to_str()
            .and_then(|n| n.strip_prefix("mcpproxy-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if owner != std::process::id() && !Path::new(&format!("/proc/{owner}")).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

impl Drop for CgroupGroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            let left = self.processes();
            if left.is_empty() {
                break;
            }
            for pid in left {
                kill(pid);
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            tracing::warn!(
                "cannot remove the sandbox's cgroup {}: {e}",
                self.dir.display()
            );
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
