//! The in-memory [`BucketStore`]: one proxy's buckets in a map under a mutex, on an
//! injected [`Clock`] (the tests drive time by hand). The map is bounded: past
//! [`MAX_BUCKETS`] keys, full buckets (which a fresh bucket equals) are forgotten.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpproxy_config::Limit;

use super::{Bucket, BucketStore, Take, TakeFuture};

/// Keys kept before full buckets are swept.
pub(crate) const MAX_BUCKETS: usize = 100_000;

/// Where a store reads the time: a monotonic [`Duration`] since a fixed origin.
pub trait Clock: Send + Sync {
    fn now(&self) -> Duration;
}

/// The monotonic clock of the machine.
#[derive(Debug)]
pub(crate) struct SystemClock(Instant);

impl Default for SystemClock {
    fn default() -> Self {
        Self(Instant::now())
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// Buckets in memory.
pub struct MemoryBuckets {
    clock: Arc<dyn Clock>,
    buckets: Mutex<HashMap<String, (Bucket, Limit)>>,
}

impl Default for MemoryBuckets {
    fn default() -> Self {
        Self::with_clock(Arc::new(SystemClock::default()))
    }
}

impl MemoryBuckets {
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            buckets: Mutex::default(),
        }
    }

    /// Takes a token now (the store's work, without the future around it).
    pub fn take_now(&self, key: &str, limit: &Limit) -> Take {
        let now = self.clock.now();
        let mut buckets = mcpproxy_support::lock(&self.buckets);
        if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(key) {
            buckets.retain(|_, (bucket, limit)| !bucket.is_full(limit, now));
        }
        let (bucket, kept) = buckets
            .entry(key.to_owned())
            .or_insert_with(|| (Bucket::full(limit, now), *limit));
        *kept = *limit;
        match bucket.take(limit, now) {
            None => Take {
                allowed: true,
                retry_after: Duration::ZERO,
            },
            Some(wait) => Take {
                allowed: false,
                retry_after: wait,
            },
        }
    }

    /// How many buckets are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        mcpproxy_support::lock(&self.buckets).len()
    }
}

impl BucketStore for MemoryBuckets {
    fn take<'a>(&'a self, key: &'a str, limit: &'a Limit) -> TakeFuture<'a> {
        let take = self.take_now(key, limit);
        Box::pin(std::future::ready(Ok(take)))
    }
}
