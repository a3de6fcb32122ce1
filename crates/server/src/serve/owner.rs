//! Becoming the owner of the data dir: one process holds its journal and serves; a `serve`
//! that finds an owner already running becomes its front-end ([`super::front_end`]) and
//! takes the data dir over when the owner goes away (one front-end wins the journal, the
//! others attach to the winner).

use std::path::Path;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::front_end::{Event, FrontEnd};
use super::{Error, Notices, Transport};
use crate::runtime::{self, Runtime};

/// How long a starting `serve` waits for the process that holds the journal to answer on
/// its control socket, or to let go of the journal.
const HOLDER_WAIT: Duration = Duration::from_secs(30);
/// How often it asks meanwhile.
const OWNER_POLL: Duration = Duration::from_millis(50);
/// How soon a front-end whose owner stopped tries the journal again while it is still held
/// (the old owner closing, or another front-end that won it and opens its socket soon).
const TAKEOVER_RETRY: Duration = Duration::from_millis(100);
/// How soon it tries again after a takeover failed for another reason (the error logged).
const TAKEOVER_FAILED_RETRY: Duration = Duration::from_secs(5);

/// This process owns the data dir: its runtime, and the front-end it ran before when it
/// took the data dir over from an owner that stopped.
pub(super) struct Owned {
    pub(super) runtime: Runtime,
    pub(super) front: Option<FrontEnd>,
}

/// Becomes the owner of `data_dir` (`Some`), building the runtime with `build`, or serves
/// as the front-end of the owner until the front-end ends or `shutdown` (`None`).
pub(super) async fn own(
    data_dir: &Path,
    transport: &Transport,
    api_key: Option<&str>,
    build: &impl Fn() -> runtime::Result<Runtime>,
    notices: &Notices,
    shutdown: &CancellationToken,
) -> Result<Option<Owned>, Error> {
    let mut front: Option<FrontEnd> = None;
    // Since when the journal was found held, at most [`HOLDER_WAIT`] in all (a holder this
    // process cannot see, another user's, would otherwise be tried forever).
    let mut held_until: Option<tokio::time::Instant> = None;
    // This process as the front-end of the owner on the other end of `owner`.
    let attach = |owner| {
        FrontEnd::start(
            owner,
            transport,
            data_dir,
            api_key,
            notices,
            shutdown.clone(),
        )
    };
    loop {
        if let Some(running) = front.as_mut() {
            let event = tokio::select! {
                _ = shutdown.cancelled() => return Ok(None),
                event = running.next() => event?,
            };
            if let Event::Ended = event {
                return Ok(None);
            }
            match take_over(data_dir, build, shutdown).await {
                Some(runtime) => return Ok(Some(Owned { runtime, front })),
                // Another front-end won: this one's bridge or relay attaches to it.
                None => continue,
            }
        }
        if let Some(owner) = crate::control::connect(data_dir).await {
            front = Some(attach(owner).await?);
            continue;
        }
        match build() {
            Ok(runtime) => return Ok(Some(Owned { runtime, front })),
            // Another process became the owner as this one started, or a one-shot command
            // (`mcpproxy upstream list` with no owner running) holds the journal for now.
            Err(e @ runtime::Error::Held { .. }) => match wait_for_owner(
                data_dir,
                *held_until.get_or_insert_with(|| tokio::time::Instant::now() + HOLDER_WAIT),
                shutdown,
            )
            .await
            {
                Waited::Owner(owner) => front = Some(attach(owner).await?),
                // The command ended: try to own the data dir again.
                Waited::Released => {}
                Waited::TimedOut => return Err(e.into()),
            },
            Err(e) => return Err(e.into()),
        }
    }
}

/// The owner went away: tries to become the owner until that works (`Some`) or another
/// process's socket answers (`None`: it won). The journal is still held while the old owner
/// closes (or while the winner starts): tried again every [`TAKEOVER_RETRY`].
async fn take_over(
    data_dir: &Path,
    build: &impl Fn() -> runtime::Result<Runtime>,
    shutdown: &CancellationToken,
) -> Option<Runtime> {
    while !shutdown.is_cancelled() {
        if crate::control::answers(data_dir).await {
            return None;
        }
        match build() {
            Ok(runtime) => return Some(runtime),
            Err(runtime::Error::Held { .. }) => tokio::time::sleep(TAKEOVER_RETRY).await,
            Err(e) => {
                tracing::error!(
                    "the owner of {} stopped and this process cannot take it over: {e}",
                    data_dir.display()
                );
                tokio::time::sleep(TAKEOVER_FAILED_RETRY).await;
            }
        }
    }
    None
}

/// What a `serve` that found the journal held waited for.
enum Waited {
    /// The holder's control socket answered: it owns the data dir.
    Owner(tokio::net::UnixStream),
    /// No process holds the journal any more (a one-shot command ended).
    Released,
    /// Neither, within [`HOLDER_WAIT`] (or shutdown).
    TimedOut,
}

/// Waits, until `deadline`, for the process that holds the journal to open its control socket (two `serve`s
/// started together: one becomes the owner, the other its front-end), or to let go of it (a
/// one-shot command such as a script's `mcpproxy upstream list`, which opened the data dir
/// because no owner answered yet): a read-only command does not keep `serve` from starting.
async fn wait_for_owner(
    data_dir: &Path,
    deadline: tokio::time::Instant,
    shutdown: &CancellationToken,
) -> Waited {
    let journal = runtime::journal_path(data_dir);
    while tokio::time::Instant::now() < deadline && !shutdown.is_cancelled() {
        if let Some(owner) = crate::control::connect(data_dir).await {
            return Waited::Owner(owner);
        }
        if crate::control::holder::find(&journal).is_none() {
            return Waited::Released;
        }
        tokio::time::sleep(OWNER_POLL).await;
    }
    Waited::TimedOut
}
