//! A stdio server's process: started in its own process group (so what it starts ends with
//! it), killed by the kernel if mcpproxy dies (Linux), its stdout read through the
//! [`LineGuard`](crate::line_guard) so a reply over 16 MiB fails its call at once instead of
//! being dropped, and ended when its session ends: stdin closes first, then the process
//! gets [`EXIT_GRACE`] to exit before it is killed. A sandboxed server enters its sandbox
//! last, just before exec, and the sandbox's leftovers (private directory, cgroup) go once
//! the process is gone.

use std::process::Stdio;
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

use crate::line_guard::{LineGuard, error_response};
use mcpproxy_sandbox::{ChildSetup, Prepared, SandboxGuard};

/// How long a server may take to exit after its stdin closes.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// The running process; dropping it ends the process (after [`EXIT_GRACE`]).
pub(super) struct ChildGuard {
    child: Option<Box<dyn ChildWrapper>>,
    sandbox: Option<SandboxGuard>,
    /// The server's egress proxy: it ends with the server.
    egress: Option<tokio::task::AbortHandle>,
}

impl ChildGuard {
    /// Ties the server's egress proxy to the process: it stops when the process is ended.
    pub(super) fn attach_egress(&mut self, proxy: tokio::task::AbortHandle) {
        self.egress = Some(proxy);
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(proxy) = self.egress.take() {
            proxy.abort();
        }
        let Some(mut child) = self.child.take() else {
            return;
        };
        let sandbox = self.sandbox.take();
        let ended = async move {
            if tokio::time::timeout(EXIT_GRACE, child.wait())
                .await
                .is_err()
            {
                let _ = Box::into_pin(child.kill()).await;
                let _ = child.wait().await;
            }
            // Removing the cgroup kills what the server left and may wait a little.
            if let Some(sandbox) = sandbox {
                let _ = tokio::task::spawn_blocking(move || drop(sandbox)).await;
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(ended);
            }
            // No runtime left: dropping `child` kills it (KillOnDrop).
            Err(_) => drop(ended),
        }
    }
}

/// The pipes of a started server.
pub(super) struct Pipes {
    pub stdout: LineGuard<ChildStdout>,
    pub stdin: ChildStdin,
    pub stderr: Option<ChildStderr>,
}

/// Starts `cmd` with piped stdio, in `sandbox` when there is one (its environment is then
/// the only one the server gets).
pub(super) fn spawn(
    mut cmd: tokio::process::Command,
    sandbox: Option<Prepared>,
) -> std::io::Result<(ChildGuard, Pipes)> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (setup, sandbox) = match sandbox {
        Some(prepared) => {
            cmd.env_clear().envs(prepared.environment.iter().cloned());
            (Some(prepared.setup), Some(prepared.guard))
        }
        None => (None, None),
    };
    die_with_this_process(&mut cmd, setup);
    let mut wrapped = CommandWrap::from(cmd);
    // Its own process group, so children it spawns (npx → node) end with it.
    wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
    let mut child = wrapped.spawn()?;
    let missing = |what: &str| std::io::Error::other(format!("the server's {what} is not a pipe"));
    let stdout = child.stdout().take().ok_or_else(|| missing("stdout"))?;
    let stdin = child.stdin().take().ok_or_else(|| missing("stdin"))?;
    let stderr = child.stderr().take();
    Ok((
        ChildGuard {
            child: Some(child),
            sandbox,
            egress: None,
        },
        Pipes {
            stdout: LineGuard::new(stdout, error_response),
            stdin,
            stderr,
        },
    ))
}

/// Has the kernel kill a stdio server when this process dies, even by `kill -9` (which no
/// cleanup code survives): a server that ignores the end of its stdin would otherwise run on.
/// Then the server enters its sandbox, when it has one.
#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "libc has no safe wrapper for prctl; pre_exec is unsafe by nature"
)]
fn die_with_this_process(cmd: &mut tokio::process::Command, sandbox: Option<ChildSetup>) {
    // SAFETY: getpid is async-signal-safe.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // async-signal-safe functions (prctl, getppid); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died between fork and prctl: nobody will send the signal.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            // Async-signal-safe: system calls only, everything built before the fork.
            match &sandbox {
                Some(setup) => setup.enter(),
                None => Ok(()),
            }
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_this_process(_cmd: &mut tokio::process::Command, _sandbox: Option<ChildSetup>) {}
