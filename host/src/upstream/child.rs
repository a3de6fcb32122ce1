//! A stdio server's process: started in its own process group (so what it starts ends with
//! it), killed by the kernel if mcpproxy dies (Linux), its stdout read through the
//! [`LineGuard`](crate::line_guard) so a reply over 16 MiB fails its call at once instead of
//! being dropped, and ended when its session ends: stdin closes first, then the process
//! gets [`EXIT_GRACE`] to exit before it is killed.

use std::process::Stdio;
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

use crate::line_guard::{LineGuard, error_response};

/// How long a server may take to exit after its stdin closes.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// The running process; dropping it ends the process (after [`EXIT_GRACE`]).
pub(super) struct ChildGuard(Option<Box<dyn ChildWrapper>>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        let ended = async move {
            if tokio::time::timeout(EXIT_GRACE, child.wait())
                .await
                .is_err()
            {
                let _ = Box::into_pin(child.kill()).await;
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

/// Starts `cmd` with piped stdio.
pub(super) fn spawn(mut cmd: tokio::process::Command) -> std::io::Result<(ChildGuard, Pipes)> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    die_with_this_process(&mut cmd);
    let mut wrapped = CommandWrap::from(cmd);
    // Its own process group, so children it spawns (npx → node) end with it.
    wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
    let mut child = wrapped.spawn()?;
    let missing = |what: &str| std::io::Error::other(format!("the server's {what} is not a pipe"));
    let stdout = child.stdout().take().ok_or_else(|| missing("stdout"))?;
    let stdin = child.stdin().take().ok_or_else(|| missing("stdin"))?;
    let stderr = child.stderr().take();
    Ok((
        ChildGuard(Some(child)),
        Pipes {
            stdout: LineGuard::new(stdout, error_response),
            stdin,
            stderr,
        },
    ))
}

/// Has the kernel kill a stdio server when this process dies, even by `kill -9` (which no
/// cleanup code survives): a server that ignores the end of its stdin would otherwise run on.
#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "libc has no safe wrapper for prctl; pre_exec is unsafe by nature"
)]
fn die_with_this_process(cmd: &mut tokio::process::Command) {
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
                return Err(std::io::Error::other(
                    "mcpproxy exited while starting the server",
                ));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_this_process(_cmd: &mut tokio::process::Command) {}
