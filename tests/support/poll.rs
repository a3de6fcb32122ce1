//! Waiting for something another process does in its own time: poll a check until it holds,
//! with a deadline that bounds a hang (never an assertion on speed).

use std::time::{Duration, Instant};

/// How often a check is tried.
const INTERVAL: Duration = Duration::from_millis(20);

/// Tries `check` every 20 ms until it is `Ok`, and returns how long that took; panics with
/// its last `Err` once `deadline` has passed.
pub(crate) async fn until<F, Fut>(what: &str, deadline: Duration, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let start = Instant::now();
    loop {
        match check().await {
            Ok(()) => return start.elapsed(),
            Err(last) => assert!(
                start.elapsed() < deadline,
                "{what}: not within {deadline:?}; last: {last}"
            ),
        }
        tokio::time::sleep(INTERVAL).await;
    }
}
