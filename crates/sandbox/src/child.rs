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

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

/// The namespaces the child makes, through a user namespace when not root.
#[derive(Debug)]
pub(crate) struct NamespaceStep {
    /// Make a user namespace too (an unprivileged mcpproxy), mapping the user to itself.
    pub user: Option<UserMapping>,
    /// A network namespace of its own (`"network": "none"`).
    pub network: bool,
    /// A PID namespace of its own with its own `/proc`, an IPC namespace, a mount namespace
    /// with the private home and temp dir mounted `noexec`: see [`ProcessNamespace`].
    pub process: Option<ProcessNamespace>,
    /// The egress proxy's listening socket, made in the new network namespace and handed to
    /// mcpproxy (`"network": {"allow": [...]}`).
    pub egress: Option<EgressStep>,
}

/// Where the server's process binds the egress proxy's listener (inside its own network
/// namespace, before any other step) and how it hands it to mcpproxy: over one end of a
/// socket pair made before the fork, as `SCM_RIGHTS`. mcpproxy accepts on it; the
/// connections it accepts come from inside the namespace, and the ones it opens leave from
/// its own.
#[derive(Debug)]
pub(crate) struct EgressStep {
    /// The server's end of the socket pair (close-on-exec: the server never holds it).
    pub channel: OwnedFd,
    /// The port on the namespace's loopback.
    pub port: u16,
}

/// What the server's own PID and mount namespaces hold. The server runs as process 1 of a
/// PID namespace of its own: it cannot name the proxy or any other process (so `kill`,
/// `prlimit`, `sched_setaffinity` and their kin have nothing outside to act on), a `/proc`
/// mounted in it lists only its own processes, and when it ends every process it left
/// behind ends with it. Its SysV IPC objects are its own.
#[derive(Debug)]
pub(crate) struct ProcessNamespace {
    /// Directories bind-mounted onto themselves `noexec,nosuid,nodev` (the private home and
    /// temp dir): nothing written there can be run, by `exec` or by the dynamic loader.
    pub noexec: Vec<CString>,
    /// The Landlock rights on the new `/proc` (a file system the parent could not name when
    /// it built the ruleset): read, added to the ruleset in the child. 0: no Landlock.
    pub proc_access: u64,
}

/// Where the new `/proc` is mounted.
const PROC: &CStr = c"/proc";

/// `struct landlock_path_beneath_attr` (packed, as the kernel declares it).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Adds a rule for the new `/proc` to `ruleset`: read, as the host's `/proc` was.
fn grant_new_proc(process: &ProcessNamespace, ruleset: &OwnedFd) -> io::Result<()> {
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    // SAFETY: open, landlock_add_rule and close with a path the parent built and a struct
    // on the stack.
    unsafe {
        let proc_fd = libc::open(
            PROC.as_ptr(),
            libc::O_PATH | libc::O_CLOEXEC | libc::O_DIRECTORY,
        );
        check(proc_fd)?;
        let attr = PathBeneathAttr {
            allowed_access: process.proc_access,
            parent_fd: proc_fd,
        };
        let added = libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        );
        let error = io::Error::last_os_error();
        libc::close(proc_fd);
        if added < 0 { Err(error) } else { Ok(()) }
    }
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
    /// `cgroup.procs` of the server's own cgroups (one per hierarchy), opened for writing.
    pub cgroup_procs: Vec<OwnedFd>,
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
            enter_namespaces(namespace)?;
            if let (Some(process), Some(ruleset)) = (&namespace.process, &self.landlock)
                && process.proc_access != 0
            {
                grant_new_proc(process, ruleset)?;
            }
        }
        for procs in &self.cgroup_procs {
            write_all(procs.as_raw_fd(), b"0")?;
        }
        // What the server makes is its own: private files and directories (umask cannot fail).
        // SAFETY: umask with an integer argument.
        unsafe { libc::umask(0o077) };
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

fn enter_namespaces(step: &NamespaceStep) -> io::Result<()> {
    let mut flags = 0;
    if step.network {
        flags |= libc::CLONE_NEWNET;
    }
    if step.process.is_some() {
        flags |= libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
    }
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
    if let Some(process) = &step.process {
        // The PID namespace holds this process's children, not this process: the server is
        // its first child, and this process only waits for it (it never returns).
        become_first_process_of_the_namespace()?;
        mount_private_views(process)?;
    }
    if step.network {
        loopback_up()?;
        if let Some(egress) = &step.egress {
            hand_over_egress_listener(egress)?;
        }
    }
    Ok(())
}

/// Binds the egress proxy's listener on the new namespace's loopback and sends it to
/// mcpproxy; the server keeps no copy of it.
fn hand_over_egress_listener(egress: &EgressStep) -> io::Result<()> {
    // SAFETY: socket, setsockopt, bind, listen, sendmsg and close with structs on the stack
    // and the fds made here or by the parent.
    unsafe {
        let listener = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        check(listener)?;
        let result = (|| {
            let address = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: egress.port.to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
                },
                sin_zero: [0; 8],
            };
            check(libc::bind(
                listener,
                (&address as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ))?;
            check(libc::listen(listener, 128))?;
            // One byte of data and the listener as SCM_RIGHTS.
            let mut byte = [b'L'];
            let mut iov = libc::iovec {
                iov_base: byte.as_mut_ptr().cast(),
                iov_len: 1,
            };
            // Room for one cmsghdr and one fd, aligned for cmsghdr.
            let mut control = [0u64; 4];
            let space = libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) as usize;
            if space > size_of_val(&control) {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            let mut message: libc::msghdr = std::mem::zeroed();
            message.msg_iov = &mut iov;
            message.msg_iovlen = 1;
            message.msg_control = control.as_mut_ptr().cast();
            message.msg_controllen = space as _;
            let header = libc::CMSG_FIRSTHDR(&message);
            if header.is_null() {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<libc::c_int>(), listener);
            let sent = libc::sendmsg(egress.channel.as_raw_fd(), &message, libc::MSG_NOSIGNAL);
            if sent != 1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        })();
        libc::close(listener);
        result
    }
}

/// The process a forwarded signal goes to (the server, seen from the waiting process).
static SERVER_PID: AtomicI32 = AtomicI32::new(0);

/// The signals the waiting process passes on to the server (mcpproxy stops a server with
/// `SIGKILL` to its process group, which reaches the server directly).
const FORWARDED: &[libc::c_int] = &[
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

extern "C" fn forward_signal(signal: libc::c_int) {
    let pid = SERVER_PID.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, signal) };
    }
}

/// Forks: the child returns (as process 1 of the new PID namespace, killed if its parent
/// dies); the parent closes every file it holds (the server's pipes, and the pipe through
/// which mcpproxy learns that the exec happened), waits for the child and exits as it did.
fn become_first_process_of_the_namespace() -> io::Result<()> {
    // SAFETY: fork in a single-threaded child; both sides make system calls only.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(io::Error::last_os_error());
    }
    if child == 0 {
        // SAFETY: prctl with integer arguments.
        return check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) });
    }
    wait_and_exit_as(child)
}

/// The waiting side of [`become_first_process_of_the_namespace`]. Never returns.
fn wait_and_exit_as(child: libc::pid_t) -> ! {
    SERVER_PID.store(child, Ordering::Relaxed);
    // SAFETY: sigaction with a handler that only calls kill; close_range and close with
    // integer arguments; waitpid into a local; _exit and kill never return or allocate.
    unsafe {
        for &signal in FORWARDED {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = forward_signal as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
        if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
            for fd in 0..4096 {
                libc::close(fd);
            }
        }
        let mut status = 0;
        loop {
            let waited = libc::waitpid(child, &mut status, 0);
            if waited == child {
                break;
            }
            if waited < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(127);
            }
        }
        if libc::WIFEXITED(status) {
            libc::_exit(libc::WEXITSTATUS(status));
        }
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            libc::signal(signal, libc::SIG_DFL);
            let mut unblocked: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut unblocked);
            libc::sigaddset(&mut unblocked, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &unblocked, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(127)
    }
}

/// In the new mount namespace: every mount made private (nothing propagates to the host), a
/// `/proc` of the new PID namespace over `/proc`, and the private home and temp dir mounted
/// `noexec,nosuid,nodev` onto themselves.
fn mount_private_views(process: &ProcessNamespace) -> io::Result<()> {
    let none = std::ptr::null::<libc::c_char>();
    // SAFETY: mount and statvfs with NUL-terminated paths (constants, or built by the parent)
    // and a local struct.
    unsafe {
        // `/`: every mount made private before mounting, so nothing propagates to the host.
        check(libc::mount(
            none,
            c"/".as_ptr(),
            none,
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ))?;
        check(libc::mount(
            c"proc".as_ptr(),
            PROC.as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ))?;
        for dir in &process.noexec {
            check(libc::mount(
                dir.as_ptr(),
                dir.as_ptr(),
                none,
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ))?;
            // A remount must keep the flags the mount already has that a user namespace
            // may not clear (read-only, the atime flags).
            let mut stat: libc::statvfs = std::mem::zeroed();
            check(libc::statvfs(dir.as_ptr(), &mut stat))?;
            let mut flags = libc::MS_REMOUNT
                | libc::MS_BIND
                | libc::MS_NOEXEC
                | libc::MS_NOSUID
                | libc::MS_NODEV;
            for (kept, flag) in [
                (libc::ST_RDONLY, libc::MS_RDONLY),
                (libc::ST_NOATIME, libc::MS_NOATIME),
                (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
                (libc::ST_RELATIME, libc::MS_RELATIME),
            ] {
                if stat.f_flag & kept != 0 {
                    flags |= flag;
                }
            }
            check(libc::mount(
                none,
                dir.as_ptr(),
                none,
                flags,
                std::ptr::null(),
            ))?;
        }
    }
    Ok(())
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

/// Whether a server can be given its own PID, IPC and mount namespaces here, with a `/proc`
/// of its own and a `noexec` bind mount: done once in a child, exactly as a launch does it.
pub(crate) fn process_namespace_works(root: bool) -> bool {
    let Ok(scratch) = tempfile::tempdir() else {
        return false;
    };
    let Ok(dir) = CString::new(scratch.path().as_os_str().as_encoded_bytes()) else {
        return false;
    };
    let step = NamespaceStep {
        user: (!root).then(crate::prepared::user_mapping),
        network: false,
        process: Some(ProcessNamespace::new(vec![dir], 0)),
        egress: None,
    };
    // SAFETY: the child makes system calls only (everything was built above) and leaves
    // with _exit; the parent waits for it.
    unsafe {
        let child = libc::fork();
        if child < 0 {
            return false;
        }
        if child == 0 {
            let code = if enter_namespaces(&step).is_ok() {
                0
            } else {
                1
            };
            libc::_exit(code);
        }
        let mut status = 0;
        while libc::waitpid(child, &mut status, 0) < 0 {
            if *libc::__errno_location() != libc::EINTR {
                return false;
            }
        }
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
    }
}

impl ProcessNamespace {
    /// The mounts of a launch whose private directories are `noexec`.
    pub(crate) fn new(noexec: Vec<CString>, proc_access: u64) -> Self {
        ProcessNamespace {
            noexec,
            proc_access,
        }
    }
}

/// A pair of connected `SOCK_SEQPACKET` Unix sockets, close-on-exec: (mcpproxy's end, the
/// server's end). Made before the fork; the server's process sends the egress listener over
/// its end and never holds it past exec.
pub(crate) fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two fds into the array.
    check(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    // SAFETY: both fds were just made and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Receives the listener the server's process sent over `channel` (see
/// [`hand_over_egress_listener`]), waiting up to `timeout`. `Ok(None)` when the other end
/// closed without sending one. Only a listening TCP socket is accepted: whatever else
/// arrives is closed and refused.
pub(crate) fn receive_listener(
    channel: &OwnedFd,
    timeout: std::time::Duration,
) -> io::Result<Option<std::net::TcpListener>> {
    use std::os::fd::FromRawFd;
    let mut poll = libc::pollfd {
        fd: channel.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: poll on one pollfd on the stack.
    let ready = unsafe { libc::poll(&mut poll, 1, millis) };
    if ready < 0 {
        return Err(io::Error::last_os_error());
    }
    if ready == 0 {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the server's process did not hand over the egress proxy's listener in time",
        ));
    }
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = [0u64; 8];
    // SAFETY: recvmsg into buffers on the stack; the cmsg walk stays within msg_controllen.
    unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = control.as_mut_ptr().cast();
        message.msg_controllen = size_of_val(&control) as _;
        let received = libc::recvmsg(
            channel.as_raw_fd(),
            &mut message,
            libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT,
        );
        if received < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut fds = Vec::new();
        let mut header = libc::CMSG_FIRSTHDR(&message);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(header).cast::<libc::c_int>();
                let bytes = (*header).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..bytes / size_of::<libc::c_int>() {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            header = libc::CMSG_NXTHDR(&message, header);
        }
        if received == 0 && fds.is_empty() {
            return Ok(None);
        }
        let truncated = message.msg_flags & libc::MSG_CTRUNC != 0;
        let mut fds = fds.into_iter();
        let (Some(fd), None, false) = (fds.next(), fds.next(), truncated) else {
            return Err(io::Error::other(
                "the egress channel carried something other than one listener",
            ));
        };
        if !is_listening_tcp(&fd) {
            return Err(io::Error::other(
                "the egress channel carried a file that is not a listening TCP socket",
            ));
        }
        Ok(Some(std::net::TcpListener::from(fd)))
    }
}

/// Whether `fd` is a TCP socket that listens.
fn is_listening_tcp(fd: &OwnedFd) -> bool {
    let option = |name: libc::c_int| {
        let mut value: libc::c_int = 0;
        let mut length = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt into an int on the stack.
        let got = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                name,
                (&mut value as *mut libc::c_int).cast(),
                &mut length,
            )
        };
        (got == 0).then_some(value)
    };
    option(libc::SO_DOMAIN) == Some(libc::AF_INET)
        && option(libc::SO_TYPE) == Some(libc::SOCK_STREAM)
        && option(libc::SO_ACCEPTCONN) == Some(1)
}
