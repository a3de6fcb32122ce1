//! The Landlock ruleset: which paths the server may read (and execute) and which it may also
//! write, plus the scopes that keep it from signalling processes outside its sandbox (such
//! as mcpproxy) and from reaching abstract unix sockets made outside it. Built in the parent;
//! the child only enforces it.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};

use crate::error::Error;

/// System directories every server may read: programs, libraries, and the few files under
/// `/etc` a runtime needs (the dynamic linker's cache, time zones, certificates, name
/// resolution, users). Not `/etc` as a whole: it holds host keys and `shadow`.
pub(crate) const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/proc",
    "/sys",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/zoneinfo",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/alternatives",
    "/etc/python3",
    "/etc/python3.11",
    "/etc/python3.12",
    "/etc/python3.13",
    "/etc/nodejs",
    "/etc/npmrc",
    "/etc/locale.alias",
];

/// Devices every server may read and write.
pub(crate) const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// The grants of one server, as paths that exist.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Grants {
    /// Read and execute.
    pub read: Vec<PathBuf>,
    /// Read and write, not execute (the private home and temp dir).
    pub write_private: Vec<PathBuf>,
    /// Read, write and execute (what the config grants).
    pub write: Vec<PathBuf>,
}

/// Builds the ruleset for `grants` with the kernel's `abi`; `deny_tcp` also refuses every
/// TCP bind and connect (when no network namespace could be made). `None` when the kernel
/// has no Landlock.
pub(crate) fn ruleset(abi: u32, grants: &Grants, deny_tcp: bool) -> Result<Option<OwnedFd>, Error> {
    if abi == 0 {
        return Ok(None);
    }
    let target = ABI::V7;
    let landlock = |e: &dyn std::fmt::Display| Error::Landlock(e.to_string());
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(target))
        .map_err(|e| landlock(&e))?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .map_err(|e| landlock(&e))?;
    if deny_tcp {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| landlock(&e))?;
    }
    let mut created = ruleset.create().map_err(|e| landlock(&e))?;
    let read = AccessFs::from_read(target);
    let write = AccessFs::from_all(target);
    let write_no_exec = write & !AccessFs::Execute;
    for (paths, access) in [
        (&grants.read, read),
        (&grants.write_private, write_no_exec),
        (&grants.write, write),
    ] {
        for path in paths {
            let Some(rule) = rule(path, access)? else {
                continue;
            };
            created = created.add_rule(rule).map_err(|e| landlock(&e))?;
        }
    }
    Ok(Option::<OwnedFd>::from(created))
}

/// The read rights of a directory rule on a kernel with Landlock `abi`, as the bits
/// `landlock_add_rule` takes (0: no Landlock).
pub(crate) fn read_access_bits(abi: u32) -> u64 {
    if abi == 0 {
        return 0;
    }
    let abi = ABI::from(i32::try_from(abi).unwrap_or(i32::MAX));
    AccessFs::from_read(abi).bits()
}

/// A rule for `path` (a file gets only the rights that apply to files); `None` when the path
/// does not exist.
fn rule(
    path: &Path,
    access: landlock::BitFlags<AccessFs>,
) -> Result<Option<PathBeneath<PathFd>>, Error> {
    let Ok(metadata) = std::fs::metadata(path) else {
        return Ok(None);
    };
    let access = if metadata.is_dir() {
        access
    } else {
        access & AccessFs::from_file(ABI::V7)
    };
    let fd = PathFd::new(path).map_err(|e| Error::Landlock(format!("{}: {e}", path.display())))?;
    Ok(Some(PathBeneath::new(fd, access)))
}
