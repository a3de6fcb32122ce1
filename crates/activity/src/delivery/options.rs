//! Delivery's batching and retry settings ([`DeliveryOptions`]) and the first wait after
//! a failure.

use std::time::Duration;

/// The first wait after a failed delivery; it doubles per failure up to `max_backoff`.
pub(super) const INITIAL_BACKOFF: Duration = Duration::from_secs(1);

/// Batching and retry settings (config: `activity.delivery`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryOptions {
    pub batch_records: usize,
    pub batch_bytes: usize,
    pub interval: Duration,
    pub max_backoff: Duration,
}

impl Default for DeliveryOptions {
    fn default() -> Self {
        Self {
            batch_records: 1000,
            batch_bytes: 4 << 20,
            interval: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
        }
    }
}
