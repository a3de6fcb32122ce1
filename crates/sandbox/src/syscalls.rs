//! The seccomp filters: system calls a server never needs and an attacker wants (tracing
//! other processes, mounting, kernel modules and kexec, BPF, keyrings, new namespaces, raw
//! I/O ports, the clock) fail with `EPERM`; so do the calls that act on another process by
//! its pid (`prlimit64`, `sched_setaffinity`, `setpriority`, `ioprio_set`, ... on anything
//! but the caller itself), and `socket(AF_UNIX)`, since Landlock does not mediate `connect`
//! to a pathname socket and no namespace hides one.
//! `clone3`, whose flags a filter cannot read, fails with `ENOSYS` so the C library falls back
//! to `clone`, whose flags it can; `pidfd_open` too, where the server has no PID namespace
//! of its own (every pid it could name is then someone else's).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::error::Error;

/// The refused system calls.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_setns,
    libc::SYS_unshare,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_fanotify_init,
    libc::SYS_vhangup,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// `clone` flags that make namespaces: refused like `unshare`.
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWCGROUP,
];

/// Calls refused outright: acting on another process's memory or files by pidfd, comparing
/// processes' kernel objects.
const REFUSED_PROCESS: &[libc::c_long] = &[
    libc::SYS_process_madvise,
    libc::SYS_process_mrelease,
    libc::SYS_pidfd_getfd,
    libc::SYS_kcmp,
];

/// Calls whose first argument is a pid (0: the caller): refused for any other pid.
const PID_FIRST: &[libc::c_long] = &[
    libc::SYS_prlimit64,
    libc::SYS_sched_setaffinity,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_setparam,
    libc::SYS_sched_setattr,
    libc::SYS_migrate_pages,
    libc::SYS_move_pages,
];

/// SysV IPC, refused where the server has no IPC namespace of its own (the host's shared
/// memory segments, queues and semaphores would be its to read and write).
const SYSV_IPC: &[libc::c_long] = &[
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmctl,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
];

fn condition(
    arg: u8,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, seccompiler::BackendError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
}

fn arch() -> Result<TargetArch, Error> {
    std::env::consts::ARCH
        .try_into()
        .map_err(|_| Error::Seccomp(format!("no filter for {}", std::env::consts::ARCH)))
}

/// The compiled filters, in the order they are installed.
///
/// With `own_process_namespace` the server is process 1 of a PID, IPC and mount namespace of
/// its own: pid 1 is itself, `pidfd_open` names only its own processes, SysV IPC is its own.
pub(crate) fn filters(own_process_namespace: bool) -> Result<Vec<BpfProgram>, Error> {
    let compile = |e: &dyn std::fmt::Display| Error::Seccomp(e.to_string());
    let arch = arch()?;
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> = REFUSED
        .iter()
        .chain(REFUSED_PROCESS)
        .map(|&call| (call, Vec::new()))
        .collect();
    if !own_process_namespace {
        refused.extend(SYSV_IPC.iter().map(|&call| (call, Vec::new())));
    }
    let rule = |conditions: Vec<SeccompCondition>| SeccompRule::new(conditions);
    // A pid that is not the caller's: not 0, and not 1 where the server is process 1.
    let other_pid = |arg: u8| -> Result<SeccompRule, seccompiler::BackendError> {
        let mut conditions = vec![condition(arg, SeccompCmpOp::Ne, 0)?];
        if own_process_namespace {
            conditions.push(condition(arg, SeccompCmpOp::Ne, 1)?);
        }
        rule(conditions)
    };
    let pid_rules = (|| -> Result<Vec<(i64, Vec<SeccompRule>)>, seccompiler::BackendError> {
        let mut rules: Vec<(i64, Vec<SeccompRule>)> = Vec::new();
        for &call in PID_FIRST {
            rules.push((call, vec![other_pid(0)?]));
        }
        // setpriority(which, who, prio) and ioprio_set(which, who, prio): `who` 0 is the
        // caller (its process, or its process group); the user's processes (PRIO_USER,
        // IOPRIO_WHO_USER) include mcpproxy.
        rules.push((
            libc::SYS_setpriority,
            vec![
                rule(vec![condition(
                    0,
                    SeccompCmpOp::Eq,
                    libc::PRIO_USER as u64,
                )?])?,
                other_pid(1)?,
            ],
        ));
        const IOPRIO_WHO_USER: u64 = 3;
        rules.push((
            libc::SYS_ioprio_set,
            vec![
                rule(vec![condition(0, SeccompCmpOp::Eq, IOPRIO_WHO_USER)?])?,
                other_pid(1)?,
            ],
        ));
        let unix = libc::AF_UNIX as u64;
        rules.push((
            libc::SYS_socket,
            vec![rule(vec![condition(0, SeccompCmpOp::Eq, unix)?])?],
        ));
        // A connected pair is harmless (the stdio of child processes), but a datagram pair
        // can be re-pointed at any path with connect or sendto.
        rules.push((
            libc::SYS_socketpair,
            vec![rule(vec![
                condition(0, SeccompCmpOp::Eq, unix)?,
                condition(1, SeccompCmpOp::MaskedEq(0xf), libc::SOCK_DGRAM as u64)?,
            ])?],
        ));
        Ok(rules)
    })()
    .map_err(|e| compile(&e))?;
    refused.extend(pid_rules);
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|&flag| {
            let flag = flag as u64;
            SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )
            .and_then(|condition| SeccompRule::new(vec![condition]))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| compile(&e))?;
    refused.insert(libc::SYS_clone, clone_rules);
    let eperm = SeccompFilter::new(
        refused,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| compile(&e))?;
    let mut enosys: BTreeMap<i64, Vec<SeccompRule>> =
        [(libc::SYS_clone3, Vec::new())].into_iter().collect();
    if !own_process_namespace {
        enosys.insert(libc::SYS_pidfd_open, Vec::new());
    }
    let clone3 = SeccompFilter::new(
        enosys,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(|e| compile(&e))?;
    Ok(vec![
        BpfProgram::try_from(eperm).map_err(|e| compile(&e))?,
        BpfProgram::try_from(clone3).map_err(|e| compile(&e))?,
    ])
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_filters_compile_for_this_machine() {
        for own_process_namespace in [false, true] {
            let filters = super::filters(own_process_namespace).expect("filters");
            assert_eq!(filters.len(), 2);
            assert!(filters.iter().all(|f| !f.is_empty()));
        }
    }
}
