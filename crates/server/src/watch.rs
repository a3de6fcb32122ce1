//! Watching a directory for changes to some of its files: the config file's hand edits
//! (`manage`) and the plugins dir's components (`runtime`). Events are matched by file name
//! in the directory, so editors that save by writing a new file and renaming it are seen;
//! a burst of events (a save, a copy) is one change, acted on once the directory has been
//! quiet for a settle time.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Watches `dir` (not recursively) and, after each burst of changes to a file `wanted`
/// accepts, once no event came for `settle`, awaits `on_change`; until `shutdown`. Reads
/// (access events) are not changes.
pub(crate) fn watch_dir<W, F, Fut>(
    dir: &Path,
    wanted: W,
    settle: Duration,
    shutdown: CancellationToken,
    mut on_change: F,
) -> Result<(), notify::Error>
where
    W: Fn(&Path) -> bool + Send + 'static,
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    use notify::Watcher;
    // One pending signal is enough: the consumer drains the rest before it acts, so when
    // the slot is full the event is already accounted for.
    let (tx, mut rx) = tokio::sync::mpsc::channel(1);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && !event.kind.is_access()
            && event.paths.iter().any(|p| wanted(p))
        {
            let _ = tx.try_send(());
        }
    })?;
    watcher.watch(dir, notify::RecursiveMode::NonRecursive)?;
    tokio::spawn(async move {
        let _watcher = watcher;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                event = rx.recv() => if event.is_none() { return },
            }
            // Wait until the directory is quiet.
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(settle) => break,
                    more = rx.recv() => if more.is_none() { return },
                }
            }
            on_change().await;
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Polls `check` every 10 ms for up to 10 s.
    async fn until(check: impl Fn() -> bool) -> bool {
        for _ in 0..1000 {
            if check() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_burst_of_writes_to_a_wanted_file_is_one_change_and_others_are_none() {
        let dir = tempfile::tempdir().unwrap();
        let changes = Arc::new(AtomicUsize::new(0));
        let counted = changes.clone();
        let shutdown = CancellationToken::new();
        watch_dir(
            dir.path(),
            |p| p.extension().is_some_and(|e| e == "wasm"),
            Duration::from_secs(1),
            shutdown.clone(),
            move || {
                let counted = counted.clone();
                async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
            },
        )
        .unwrap();
        // Files the watch does not want change nothing.
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        // A file written in pieces: one change.
        for chunk in 0..5 {
            std::fs::write(dir.path().join("p.wasm"), vec![chunk; 100]).unwrap();
        }
        assert!(until(|| changes.load(Ordering::SeqCst) >= 1).await);
        assert_eq!(
            changes.load(Ordering::SeqCst),
            1,
            "a burst made several changes"
        );
        // A file renamed into place (how editors save) is a change.
        let part = dir.path().join("q.part");
        std::fs::write(&part, "x").unwrap();
        std::fs::rename(&part, dir.path().join("q.wasm")).unwrap();
        assert!(until(|| changes.load(Ordering::SeqCst) >= 2).await);
        shutdown.cancel();
        assert_eq!(changes.load(Ordering::SeqCst), 2);
    }
}
