//! Where buckets live: the [`BucketStore`] trait. The in-memory store serves one proxy; a
//! store shared by replicas (a database) implements the same trait, so every replica draws
//! from the same buckets.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use mcpproxy_config::Limit;

/// The answer of [`BucketStore::take`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Take {
    /// A token was taken: the call may go ahead.
    pub allowed: bool,
    /// When refused, how long until the bucket holds a token again (zero when allowed).
    pub retry_after: Duration,
}

/// Why a store could not answer (a shared store out of reach). The proxy refuses the
/// call: a limit that cannot be checked is not waived.
#[derive(Debug, thiserror::Error)]
#[error("the rate-limit store cannot answer: {0}")]
pub struct StoreError(pub String);

/// What [`BucketStore::take`] returns.
pub type TakeFuture<'a> = Pin<Box<dyn Future<Output = Result<Take, StoreError>> + Send + 'a>>;

/// Token buckets by key (see [`super::key`] for the format).
///
/// `take` refills the bucket under `key` by the time passed since it was last used, at
/// `limit`'s rate and up to its burst (a key not seen before starts full), then takes one
/// token if there is one. It is atomic per key: two takes racing on one key never both
/// get its last token. A bucket's limit is the one given with each take: when the config
/// changes a limit, the bucket keeps its tokens (capped at the new burst) and refills at the
/// new rate. A store may forget a bucket that is full, since a full bucket and a fresh one
/// are the same.
pub trait BucketStore: Send + Sync {
    fn take<'a>(&'a self, key: &'a str, limit: &'a Limit) -> TakeFuture<'a>;
}
