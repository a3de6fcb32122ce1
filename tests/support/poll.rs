//! Waiting for something another process does in its own time: poll a check until it holds,
//! with a deadline that bounds a hang (never an assertion on speed).

use std::time::{Duration, Instant};

/// How often a check is tried.
const INTERVAL: Duration = Duration::from_millis(20);

/// Tries `check` every 20 ms until it is `Ok`, and returns how long that took; panics with
/// its last `Err` once `deadline` has passed.
pub(crate) async fn until<F, Fut>(what: &str, deadline: Duration, check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let start = Instant::now();
    until_value(what, deadline, check).await;
    start.elapsed()
}

/// [`until`] for a check that finds something: returns what its first `Ok` carries (the
/// records once they are all written, say).
pub(crate) async fn until_value<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let start = Instant::now();
    loop {
        match check().await {
            Ok(value) => return value,
            Err(last) => assert!(
                start.elapsed() < deadline,
                "{what}: not within {deadline:?}; last: {last}"
            ),
        }
        tokio::time::sleep(INTERVAL).await;
    }
}

/// [`until_value`] for a check that does not await: a plain `#[test]`, or a thread of its
/// own.
pub(crate) fn until_blocking<T>(
    what: &str,
    deadline: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let start = Instant::now();
    loop {
        match check() {
            Ok(value) => return value,
            Err(last) => assert!(
                start.elapsed() < deadline,
                "{what}: not within {deadline:?}; last: {last}"
            ),
        }
        std::thread::sleep(INTERVAL);
    }
}
