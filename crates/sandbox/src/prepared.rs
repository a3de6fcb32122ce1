//! A sandbox made ready for one launch: the grants checked, the private home and temp dir
//! made, the Landlock ruleset and seccomp filters built, the cgroup made, and the steps the
//! child runs between fork and exec; plus a report of what is enforced and what the kernel
//! lacks.

use std::ffi::{CString, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::child::{ChildSteps, EgressStep, NamespaceStep, ProcessNamespace, UserMapping};
use crate::error::Error;
use crate::filesystem::{self, Grants};
use crate::resources::{self, CgroupGroup, CgroupParents};
use crate::spec::{Network, SandboxSpec};
use crate::support::Support;

/// What the server's process runs between fork and exec.
#[derive(Debug, Clone)]
pub struct ChildSetup(Arc<ChildSteps>);

impl ChildSetup {
    /// Enters the sandbox. Call it only in the child between fork and exec (for example
    /// from `Command::pre_exec`): it makes system calls only, allocates nothing and takes no
    /// lock, so it is async-signal-safe. A failure is the errno of the step that failed.
    pub fn enter(&self) -> std::io::Result<()> {
        self.0.run()
    }
}

/// What lives as long as the sandboxed server: its private directory and its cgroup.
#[derive(Debug)]
pub struct SandboxGuard {
    // The cgroups go first (their processes killed) so the directory can be removed.
    _cgroup: CgroupGroup,
    _private: tempfile::TempDir,
}

/// What the sandbox of a launch enforces, for the server's log and the warnings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub network: Network,
    /// The paths the server may read, beyond the system directories.
    pub read: Vec<PathBuf>,
    /// The paths the server may write (its private home and temp dir included).
    pub write: Vec<PathBuf>,
    /// What the kernel lacks, in words ("Landlock (file system rules)").
    pub missing: Vec<String>,
    /// The package launcher the server runs through, when it is one.
    pub launcher: Option<LauncherReport>,
}

/// A launch through a package launcher: what it runs and where it downloads from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LauncherReport {
    pub kind: crate::launchers::LauncherKind,
    pub package: String,
    /// Each registry's URL (credentials removed) and where it was found.
    pub registries: Vec<(String, String)>,
    /// The version its cache holds from an earlier start (then it runs offline from it).
    pub cached_version: Option<String>,
}

impl Report {
    /// One line for the server's log.
    pub fn summary(&self) -> String {
        let list = |paths: &[PathBuf]| {
            if paths.is_empty() {
                "nothing".to_string()
            } else {
                paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        let mut line = format!(
            "sandbox: network {}; reads the system directories and {}; writes {}",
            self.network.describe(),
            list(&self.read),
            list(&self.write)
        );
        if let Some(launcher) = &self.launcher {
            line.push_str(&format!(
                "; {} runs {} from {}",
                launcher.kind.as_str(),
                launcher.package,
                launcher
                    .registries
                    .iter()
                    .map(|(url, source)| format!("{url} ({source})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            match &launcher.cached_version {
                Some(version) => {
                    line.push_str(&format!(", version {version} from its cache (offline)"))
                }
                None => line.push_str(", first start: downloads it"),
            }
        }
        if !self.missing.is_empty() {
            line.push_str(&format!(
                "; NOT ENFORCED (the kernel lacks it): {}",
                self.missing.join(", ")
            ));
        }
        line
    }
}

/// A sandbox ready for one launch.
#[derive(Debug)]
pub struct Prepared {
    pub setup: ChildSetup,
    /// The program to run instead of the configured command, when that command is a version
    /// manager's shim.
    pub shim: Option<crate::shims::ResolvedShim>,
    /// The server's whole environment (clear mcpproxy's first).
    pub environment: Vec<(OsString, OsString)>,
    pub guard: SandboxGuard,
    pub report: Report,
    /// Where mcpproxy receives the egress proxy's listener (`"network": {"allow": [...]}` on a
    /// kernel with network namespaces).
    pub egress: Option<EgressReceiver>,
}

/// mcpproxy's end of the socket pair over which the server's process hands over the egress
/// proxy's listener, bound in the server's network namespace.
#[derive(Debug)]
pub struct EgressReceiver(std::os::fd::OwnedFd);

impl EgressReceiver {
    /// Waits up to `timeout` for the listener, once the server was started. `Ok(None)`: the
    /// server's process ended (or failed) before handing it over. Blocking: call it off the
    /// async runtime.
    pub fn receive(
        self,
        timeout: std::time::Duration,
    ) -> std::io::Result<Option<std::net::TcpListener>> {
        crate::child::receive_listener(&self.0, timeout)
    }
}

/// What the server runs: its command, arguments and working directory.
#[derive(Debug, Clone, Copy)]
pub struct Launch<'a> {
    pub command: &'a str,
    pub args: &'a [String],
    pub working_dir: Option<&'a Path>,
    /// A label for the cgroup and the private directory (the server's name).
    pub label: &'a str,
}

/// Prepares `spec` for `launch` on a kernel with `support`.
pub fn prepare(
    spec: &SandboxSpec,
    launch: Launch<'_>,
    support: &Support,
) -> Result<Prepared, Error> {
    let parent = |name: &str| std::env::var_os(name);
    let real_home = parent("HOME").map(PathBuf::from);
    check_grants(spec)?;

    let missing = missing_features(spec, support);
    if spec.required && !missing.is_empty() {
        return Err(Error::Unsupported {
            missing: missing.join(", "),
        });
    }

    // The server's name, safe in a file name, for the private directory and the cgroup.
    let label = sanitize(launch.label);
    let (private, home, tmp) = private_dir(&label)?;

    let path_var = parent("PATH");
    let (command, shim) = resolve_program(launch, path_var.as_deref())?;
    let LauncherSetup {
        network,
        dirs: launcher_dirs,
        env: launcher_env,
        report: launcher_report,
    } = launcher_setup(spec, launch, real_home.as_deref())?;
    let read = read_grants(
        spec,
        launch,
        command.as_deref(),
        path_var.as_deref(),
        real_home.as_deref(),
    );
    let grants = Grants {
        read: filesystem::SYSTEM_READ
            .iter()
            .map(PathBuf::from)
            .chain(read.iter().cloned())
            .collect(),
        write_private: filesystem::DEVICES
            .iter()
            .map(PathBuf::from)
            .chain([home.clone(), tmp.clone()])
            .collect(),
        // The launcher's cache holds the programs it runs: written and executed, by this
        // server alone.
        write: spec
            .write
            .iter()
            .cloned()
            .chain(launcher_dirs.iter().cloned())
            .collect(),
    };
    let real_home_granted = real_home
        .as_ref()
        .is_some_and(|h| spec.read.contains(h) || spec.write.contains(h));
    let mut environment =
        crate::environment::environment(spec, &home, &tmp, real_home_granted, parent);
    if let Some(shim) = &shim {
        shim_first_on_path(&mut environment, shim);
    }
    for (name, value) in launcher_env {
        crate::environment::set(&mut environment, &name, value);
    }
    let own_network = network.own_namespace() && support.network_namespace;
    let (egress_receiver, egress) = match network.egress() {
        Some(_) if own_network => {
            let (receiver, channel) = crate::child::socket_pair().map_err(Error::EgressChannel)?;
            (
                Some(EgressReceiver(receiver)),
                Some(EgressStep {
                    channel,
                    port: crate::egress::PROXY_PORT,
                }),
            )
        }
        _ => (None, None),
    };
    if network.egress().is_some() {
        proxy_variables(&mut environment);
    }
    let (steps, cgroup) = child_steps(
        spec,
        support,
        ChildNetwork {
            network: &network,
            own_network,
            egress,
        },
        &grants,
        [&home, &tmp],
        &label,
    )?;
    let mut write = spec.write.clone();
    write.extend([home, tmp]);
    write.extend(launcher_dirs);
    Ok(Prepared {
        setup: ChildSetup(Arc::new(steps)),
        shim,
        environment,
        guard: SandboxGuard {
            _cgroup: cgroup,
            _private: private,
        },
        egress: egress_receiver,
        report: Report {
            network,
            read,
            write,
            missing,
            launcher: launcher_report,
        },
    })
}

/// The launch's private directory (named after this process and `label`, so a later mcpproxy
/// can tell the directories of one that is gone) with its `home` and `tmp`; abandoned ones of
/// earlier processes are swept first.
fn private_dir(label: &str) -> Result<(tempfile::TempDir, PathBuf, PathBuf), Error> {
    sweep_abandoned_private_dirs(&std::env::temp_dir());
    // The directory itself is 0700 (tempfile's default), and so are home and tmp.
    let private = tempfile::Builder::new()
        .prefix(&format!("{PRIVATE_PREFIX}{}-{label}-", std::process::id()))
        .tempdir()
        .map_err(Error::PrivateDir)?;
    let home = private.path().join("home");
    let tmp = private.path().join("tmp");
    for dir in [&home, &tmp] {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir)
            .map_err(Error::PrivateDir)?;
    }
    Ok((private, home, tmp))
}

/// The program the server's command runs (found on `PATH`) and, when it is a version
/// manager's shim, the program that shim resolves to.
fn resolve_program(
    launch: Launch<'_>,
    path_var: Option<&std::ffi::OsStr>,
) -> Result<(Option<PathBuf>, Option<crate::shims::ResolvedShim>), Error> {
    let command =
        crate::install_tree::resolve_command(launch.command, path_var, launch.working_dir);
    // A version manager's shim runs the program it resolves to, not the manager.
    let shim = match command
        .as_deref()
        .and_then(|c| crate::shims::resolve_shim(c, launch.working_dir))
    {
        Some(Ok(resolved)) => Some(resolved),
        Some(Err(why)) => return Err(Error::Shim(why)),
        None => None,
    };
    let command = shim.as_ref().map(|s| s.program.clone()).or(command);
    Ok((command, shim))
}

/// What a package launcher adds to a launch: the network with its registries allowed, the
/// cache directories it writes, its variables, and what to report.
struct LauncherSetup {
    network: Network,
    dirs: Vec<PathBuf>,
    env: Vec<(String, OsString)>,
    report: Option<LauncherReport>,
}

/// A package launcher's caches in a directory of the server's own, its registries reachable
/// through the egress proxy; the spec's network unchanged when the command is no launcher.
fn launcher_setup(
    spec: &SandboxSpec,
    launch: Launch<'_>,
    real_home: Option<&Path>,
) -> Result<LauncherSetup, Error> {
    let mut network = spec.network.clone();
    let mut launcher_dirs: Vec<PathBuf> = Vec::new();
    let mut launcher_env: Vec<(String, OsString)> = Vec::new();
    let mut launcher_report = None;
    if let Some(root) = &spec.launcher_cache {
        let parent_env = |name: &str| std::env::var_os(name);
        if let Some(plan) = crate::launchers::launcher_plan(
            launch.command,
            launch.args,
            &spec.env,
            &parent_env,
            real_home,
            root,
        ) {
            let cached_version = crate::launchers::resolved_version(&plan, root);
            for (name, dir) in &plan.cache_env {
                private_dir_all(dir)?;
                launcher_env.push((name.clone(), dir.as_os_str().to_owned()));
            }
            private_dir_all(root)?;
            launcher_dirs.push(root.clone());
            for (name, value) in &plan.registry_env {
                launcher_env.push((name.clone(), value.into()));
            }
            if cached_version.is_some() {
                for (name, value) in &plan.offline_env {
                    launcher_env.push((name.clone(), value.into()));
                }
            }
            let registry_rules = plan
                .registries
                .iter()
                .filter_map(|r| crate::egress::EgressRule::parse(&r.host_port).ok());
            network = match network {
                Network::None => {
                    Network::Allow(crate::egress::EgressRules::new(registry_rules.collect()))
                }
                Network::Allow(mut rules) => {
                    for rule in registry_rules {
                        rules.push(rule);
                    }
                    Network::Allow(rules)
                }
                Network::All => Network::All,
            };
            launcher_report = Some(LauncherReport {
                kind: plan.kind,
                package: plan.package.clone(),
                registries: plan
                    .registries
                    .iter()
                    .map(|r| (r.url.clone(), r.source.clone()))
                    .collect(),
                cached_version,
            });
        }
    }
    Ok(LauncherSetup {
        network,
        dirs: launcher_dirs,
        env: launcher_env,
        report: launcher_report,
    })
}

/// What the server may read besides the system: the install trees of its program, its
/// working directory (not the home itself) and the spec's `read`, none that reaches a
/// forbidden path.
fn read_grants(
    spec: &SandboxSpec,
    launch: Launch<'_>,
    command: Option<&Path>,
    path_var: Option<&std::ffi::OsStr>,
    real_home: Option<&Path>,
) -> Vec<PathBuf> {
    let mut read: Vec<PathBuf> = Vec::new();
    for tree in crate::install_tree::install_trees(
        command,
        launch.args,
        launch.working_dir,
        path_var,
        real_home,
    ) {
        // A tree that reaches the data dir is not granted (the server may then fail to
        // start, which is the safe way to fail).
        if crate::spec::forbidden_overlap(&tree, &spec.forbidden).is_none() && !read.contains(&tree)
        {
            read.push(tree);
        }
    }
    if let Some(dir) = launch.working_dir
        && Some(dir) != real_home
        && dir.parent().is_some()
        && crate::spec::forbidden_overlap(dir, &spec.forbidden).is_none()
        && !read.iter().any(|r| dir.starts_with(r))
    {
        read.push(dir.to_path_buf());
    }
    for path in &spec.read {
        if !read.contains(path) {
            read.push(path.clone());
        }
    }

    read
}

/// As the manager's `exec` does: the version's own programs first, so what the server
/// starts (`python3 -m pip`) does not meet the shim again.
fn shim_first_on_path(environment: &mut [(OsString, OsString)], shim: &crate::shims::ResolvedShim) {
    if let Some(dir) = shim.program.parent() {
        for (name, value) in environment.iter_mut() {
            if name == "PATH" {
                let mut path = dir.as_os_str().to_owned();
                path.push(":");
                path.push(&*value);
                *value = path;
            }
        }
    }
}

/// The proxy variables that send the server's traffic through the egress proxy.
fn proxy_variables(environment: &mut Vec<(OsString, OsString)>) {
    // Every common client reads one of these; the proxy speaks HTTP (CONNECT and plain
    // requests) and SOCKS5 on the same port. Nothing bypasses it: NO_PROXY is empty, and
    // a direct connection has no route out of the namespace anyway.
    let http = format!("http://{}", crate::egress::PROXY_ADDRESS);
    let socks = format!("socks5h://{}", crate::egress::PROXY_ADDRESS);
    for (name, value) in [
        ("HTTP_PROXY", http.as_str()),
        ("HTTPS_PROXY", http.as_str()),
        ("ALL_PROXY", socks.as_str()),
        ("NO_PROXY", ""),
    ] {
        for name in [name.to_owned(), name.to_ascii_lowercase()] {
            crate::environment::set(environment, &name, value.into());
        }
    }
    // npm reads its own settings before the variables; Node 24+ fetch needs this one.
    for (name, value) in [
        ("npm_config_proxy", http.as_str()),
        ("npm_config_https_proxy", http.as_str()),
        ("NODE_USE_ENV_PROXY", "1"),
    ] {
        if !environment.iter().any(|(n, _)| n == name) {
            environment.push((name.into(), value.into()));
        }
    }
}

/// The network a launch's child gets: the network rules, whether it has a namespace of its
/// own, and the egress proxy's step in it.
struct ChildNetwork<'a> {
    network: &'a Network,
    own_network: bool,
    egress: Option<EgressStep>,
}

/// The steps the child runs between fork and exec (namespaces, cgroup, rlimits, capabilities,
/// Landlock, seccomp), and the cgroup they put it in.
fn child_steps(
    spec: &SandboxSpec,
    support: &Support,
    child: ChildNetwork<'_>,
    grants: &Grants,
    [home, tmp]: [&Path; 2],
    label: &str,
) -> Result<(ChildSteps, CgroupGroup), Error> {
    let ChildNetwork {
        network,
        own_network,
        egress,
    } = child;
    let process = support.process_namespace.then(|| {
        let path = |p: &Path| CString::new(p.as_os_str().as_encoded_bytes()).unwrap_or_default();
        ProcessNamespace::new(
            vec![path(home), path(tmp)],
            filesystem::read_access_bits(support.landlock_abi),
        )
    });
    let namespace = (own_network || process.is_some()).then(|| NamespaceStep {
        user: (!support.root).then(user_mapping),
        network: own_network,
        process,
        egress,
    });
    let own_process_namespace = namespace.as_ref().is_some_and(|n| n.process.is_some());
    let in_own_user_namespace = namespace.as_ref().is_some_and(|n| n.user.is_some());
    let (cgroup, cgroup_procs) = CgroupGroup::create(
        &CgroupParents {
            pids: support.pids_cgroup.clone(),
            memory: support.memory_cgroup.clone(),
        },
        label,
        &spec.limits,
    )?;
    let pids_limited = spec.limits.max_processes.is_some() && support.pids_cgroup.is_some();
    let steps = ChildSteps {
        namespace,
        cgroup_procs,
        rlimits: resources::rlimits(&spec.limits, !pids_limited && in_own_user_namespace),
        drop_capabilities: support.root,
        landlock: filesystem::ruleset(
            support.landlock_abi,
            grants,
            network.own_namespace() && !support.network_namespace,
        )?,
        seccomp: if support.seccomp {
            crate::syscalls::filters(own_process_namespace)?
        } else {
            Vec::new()
        },
    };
    Ok((steps, cgroup))
}

/// Makes `dir` and its missing parents, the new ones private (0700).
fn private_dir_all(dir: &Path) -> Result<(), Error> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(Error::PrivateDir)
}

/// What `spec` needs that the kernel lacks, in words.
pub fn missing_features(spec: &SandboxSpec, support: &Support) -> Vec<String> {
    let mut missing = Vec::new();
    if support.landlock_abi == 0 {
        missing.push("Landlock (the file system rules)".to_string());
    } else if support.landlock_abi < 6 {
        missing.push(format!(
            "Landlock ABI 6 (signal scoping; this kernel has ABI {})",
            support.landlock_abi
        ));
    }
    if spec.network.egress().is_some() && !support.network_namespace {
        missing.push(
            "network namespaces (egress by host needs one: the server gets no network at all)"
                .to_string(),
        );
    } else if spec.network == Network::None && !support.network_namespace {
        if support.landlock_abi >= 4 {
            missing.push(
                "network namespaces (TCP is refused by Landlock instead; UDP is not)".to_string(),
            );
        } else {
            missing.push("network namespaces (the network is not confined)".to_string());
        }
    }
    if !support.seccomp {
        missing.push("seccomp (the system call filter)".to_string());
    }
    // RLIMIT_NPROC counts the server's processes alone in a user namespace of its own, made
    // (when not root) with its network or its process namespace.
    let nproc_possible = !support.root
        && ((spec.network.own_namespace() && support.network_namespace)
            || support.process_namespace);
    if spec.limits.max_processes.is_some() && support.pids_cgroup.is_none() && !nproc_possible {
        missing.push("a pids cgroup mcpproxy may write (the process count)".to_string());
    }
    if spec.limits.memory_mb.is_some() && support.memory_cgroup.is_none() {
        missing.push(
            "a memory cgroup mcpproxy may write (memory_mb then bounds each process, not the server as a whole)"
                .to_string(),
        );
    }
    if !support.process_namespace {
        missing.push(
            "PID, IPC and mount namespaces (the server can name other processes and read their command lines, and shares SysV IPC: seccomp refuses the calls that act on another pid and SysV IPC instead)"
                .to_string(),
        );
    }
    missing
}

/// Refuses grants that reach a forbidden path.
fn check_grants(spec: &SandboxSpec) -> Result<(), Error> {
    crate::spec::check_grants_against(spec.read.iter().chain(&spec.write), &spec.forbidden)
}

/// The prefix of a sandbox's private directory in the temp dir; the owner's pid follows.
const PRIVATE_PREFIX: &str = "mcpproxy-sandbox-";

/// Removes the private directories that an mcpproxy that is no longer running left in `tmp`
/// (killed before it could remove them). A directory of a running mcpproxy is never touched;
/// one named the older way (no pid) is left alone.
fn sweep_abandoned_private_dirs(tmp: &Path) {
    for entry in crate::support::abandoned_entries(tmp, PRIVATE_PREFIX) {
        let ours = entry.metadata().is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.is_dir() && m.uid() == crate::child::effective_uid()
        });
        // remove_dir_all does not follow the symbolic links a server may have left.
        if ours && let Err(e) = std::fs::remove_dir_all(entry.path()) {
            tracing::debug!(
                "cannot remove an abandoned sandbox directory {}: {e}",
                entry.path().display()
            );
        }
    }
}

pub(crate) fn user_mapping() -> UserMapping {
    let uid = crate::child::effective_uid();
    let gid = crate::child::effective_gid();
    let path = |p: &str| CString::new(p).unwrap_or_default();
    UserMapping {
        setgroups_path: path("/proc/self/setgroups"),
        uid_map_path: path("/proc/self/uid_map"),
        gid_map_path: path("/proc/self/gid_map"),
        uid_map: format!("{uid} {uid} 1\n").into_bytes(),
        gid_map: format!("{gid} {gid} 1\n").into_bytes(),
    }
}

fn sanitize(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}
