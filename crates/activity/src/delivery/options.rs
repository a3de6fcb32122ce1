//! The first wait after a failed delivery (the settings themselves, [`DeliveryOptions`],
//! are the vocabulary's).
//!
//! [`DeliveryOptions`]: crate::DeliveryOptions

use std::time::Duration;

/// The first wait after a failed delivery; it doubles per failure up to `max_backoff`.
pub(super) const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
