//! The steps that run in the server's process between fork and exec, and the kernel probes
//! that share their system calls. Everything here is async-signal-safe: the parent opened
//! every file, built every buffer and compiled every filter before the fork, so a step only
//! makes system calls (no allocation, no lock), and a failure is an errno.
//!
//! The order matters: namespaces first (they need the privileges the later steps drop), then
//! the cgroup and the resource limits, then the capabilities go, then `no_new_privs`, the
//! Landlock domain and, last, the seccomp filter (which forbids what the earlier steps used).

#![allow(
    unsafe_code,
    reason = "the raw system calls of a sandbox between fork and exec have no safe wrapper"
)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// A new network namespace for the child, through a user namespace when not root.
#[derive(Debug)]
pub(crate) struct NamespaceStep {
    /// Make a user namespace too (an unprivileged mcpproxy), mapping the user to itself.
    pub user: Option<UserMapping>,
}

/// What a new user namespace maps: the user and group to themselves.
#[derive(Debug)]
pub(crate) struct UserMapping {
    pub setgroups_path: CString,
    pub uid_map_path: CString,
    pub gid_map_path: CString,
    pub uid_map: Vec<u8>,
    pub gid_map: Vec<u8>,
}

/// Every step, prepared by the parent.
#[derive(Debug, Default)]
pub(crate) struct ChildSteps {
    pub namespace: Option<NamespaceStep>,
    /// `cgroup.procs` of the server's own pids cgroup, opened for writing.
    pub cgroup_procs: Option<OwnedFd>,
    /// `(resource, limit)` pairs for `setrlimit`.
    pub rlimits: Vec<(libc::__rlimit_resource_t, libc::rlim_t)>,
    /// Empty the capability bounding set (mcpproxy runs as root: the server does not).
    pub drop_capabilities: bool,
    /// The Landlock ruleset to enforce.
    pub landlock: Option<OwnedFd>,
    /// The seccomp filters to install, in order.
    pub seccomp: Vec<seccompiler::BpfProgram>,
}

impl ChildSteps {
    /// Runs every step in the child. Async-signal-safe.
    pub(crate) fn run(&self) -> io::Result<()> {
        if let Some(namespace) = &self.namespace {
            enter_network_namespace(namespace)?;
        }
        if let Some(procs) = &self.cgroup_procs {
            write_all(procs.as_raw_fd(), b"0")?;
        }
        for &(resource, limit) in &self.rlimits {
            let value = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            // SAFETY: setrlimit reads the struct on our stack.
            check(unsafe { libc::setrlimit(resource, &value) })?;
        }
        if self.drop_capabilities {
            drop_capabilities()?;
        }
        // SAFETY: prctl with integer arguments.
        check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
        if let Some(ruleset) = &self.landlock {
            // SAFETY: the ruleset fd is open; flags 0.
            let done = unsafe {
                libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32)
            };
            check(done as libc::c_int)?;
        }
        for filter in &self.seccomp {
            seccompiler::apply_filter(filter).map_err(|_| io::Error::last_os_error())?;
        }
        Ok(())
    }
}

fn check(result: libc::c_int) -> io::Result<()> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn write_all(fd: libc::c_int, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: the buffer outlives the call.
    let written = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    if written < 0 {
        return Err(io::Error::last_os_error());
    }
    if written as usize != bytes.len() {
        return Err(io::Error::from_raw_os_error(libc::EIO));
    }
    Ok(())
}

fn write_file(path: &CString, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: a NUL-terminated path the parent built.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    check(fd)?;
    let written = write_all(fd, bytes);
    // SAFETY: closing the fd opened above.
    unsafe { libc::close(fd) };
    written
}

fn enter_network_namespace(step: &NamespaceStep) -> io::Result<()> {
    let mut flags = libc::CLONE_NEWNET;
    if step.user.is_some() {
        flags |= libc::CLONE_NEWUSER;
    }
    // SAFETY: unshare with flags; the child is single-threaded after fork.
    check(unsafe { libc::unshare(flags) })?;
    if let Some(user) = &step.user {
        write_file(&user.setgroups_path, b"deny")?;
        write_file(&user.uid_map_path, &user.uid_map)?;
        write_file(&user.gid_map_path, &user.gid_map)?;
    }
    loopback_up()
}

/// Brings `lo` of the new namespace up, so the server can talk to itself.
fn loopback_up() -> io::Result<()> {
    // SAFETY: socket, ioctl and close on a socket of our own with a zeroed ifreq.
    unsafe {
        let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        check(socket)?;
        let mut request: libc::ifreq = std::mem::zeroed();
        request.ifr_name[0] = b'l' as libc::c_char;
        request.ifr_name[1] = b'o' as libc::c_char;
        let mut result = libc::ioctl(socket, libc::SIOCGIFFLAGS, &mut request);
        if result >= 0 {
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            result = libc::ioctl(socket, libc::SIOCSIFFLAGS, &request);
        }
        let error = io::Error::last_os_error();
        libc::close(socket);
        if result < 0 { Err(error) } else { Ok(()) }
    }
}

/// Empties the bounding set and the ambient set: after exec, even a root server holds no
/// capability (it cannot mount, load modules, trace, or override file permissions).
fn drop_capabilities() -> io::Result<()> {
    for capability in 0..64 {
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0) } < 0 {
            let error = io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::EINVAL) {
                break; // past the last capability this kernel knows
            }
            return Err(error);
        }
    }
    // SAFETY: prctl with integer arguments.
    check(unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    })
}

/// The effective user id of this process.
pub(crate) fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// The effective group id of this process.
pub(crate) fn effective_gid() -> u32 {
    // SAFETY: getegid cannot fail.
    unsafe { libc::getegid() }
}

/// The Landlock ABI the kernel offers (0: none).
pub(crate) fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the version query takes no attribute.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(version).unwrap_or(0)
}

/// Whether seccomp filters are available.
pub(crate) fn seccomp_available() -> bool {
    // SAFETY: prctl with integer arguments; PR_GET_SECCOMP fails with EINVAL without seccomp.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
}
