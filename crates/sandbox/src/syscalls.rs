//! The seccomp filters: system calls a server never needs and an attacker wants (tracing
//! other processes, mounting, kernel modules and kexec, BPF, keyrings, new namespaces, raw
//! I/O ports, the clock) fail with `EPERM`; `clone3`, whose flags a filter cannot read,
//! fails with `ENOSYS` so the C library falls back to `clone`, whose flags it can.

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

fn arch() -> Result<TargetArch, Error> {
    std::env::consts::ARCH
        .try_into()
        .map_err(|_| Error::Seccomp(format!("no filter for {}", std::env::consts::ARCH)))
}

/// The compiled filters, in the order they are installed.
pub(crate) fn filters() -> Result<Vec<BpfProgram>, Error> {
    let compile = |e: &dyn std::fmt::Display| Error::Seccomp(e.to_string());
    let arch = arch()?;
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|&call| (call, Vec::new())).collect();
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
    let clone3 = SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
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
        let filters = super::filters().expect("filters");
        assert_eq!(filters.len(), 2);
        assert!(filters.iter().all(|f| !f.is_empty()));
    }
}
