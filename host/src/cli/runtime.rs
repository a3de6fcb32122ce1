//! The async runtime a one-shot command runs on: one thread, with IO and timers. `serve`
//! builds its own (several workers, its own thread names).

use anyhow::{Context, Result};

/// A current-thread runtime for one command.
pub(super) fn current_thread() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}
