//! Token buckets shared by the replicas (rate limits that hold across the cluster): one row
//! per key in `mcpproxy_buckets`, each take one SQL statement (`INSERT ... ON CONFLICT DO
//! UPDATE ... RETURNING`), so concurrent takes from any number of replicas are serialised by
//! the row lock and none is lost. Time is the database's clock (`now()`), never a replica's:
//! replicas whose clocks disagree still refill one bucket at one rate.
//!
//! A bucket holds up to `capacity` tokens and gains `refill_per_sec` tokens a second; a take
//! needs one whole token. A new key starts full. [`SharedBuckets`] is the rate limits'
//! [`BucketStore`] on these buckets.

use std::sync::Arc;
use std::time::Duration;

use super::error::{Error, Result};
use super::replica::Cluster;
use mcpproxy_config::Limit;

use mcpproxy_rate_limit::{self as rate_limit, BucketStore, StoreError, TakeFuture};

/// The longest key, in bytes.
pub(crate) const MAX_KEY_BYTES: usize = 512;

/// The longest `retry_after` reported (a bucket that never refills).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// What a take found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Take {
    /// A token was taken: the call may go.
    pub allowed: bool,
    /// When refused, how long until a whole token is back (zero when allowed).
    pub retry_after: Duration,
}

/// One statement: the level now is the stored tokens plus what refilled since, capped at
/// the capacity; a take removes one token if there is a whole one.
const TAKE: &str = "
INSERT INTO mcpproxy_buckets AS b (key, tokens, updated_at, allowed)
VALUES ($1::text, CASE WHEN $2::float8 >= 1 THEN $2::float8 - 1 ELSE $2::float8 END, now(), $2::float8 >= 1)
ON CONFLICT (key) DO UPDATE SET
    tokens = CASE
        WHEN least($2::float8, b.tokens + $3::float8 * greatest(0, extract(epoch FROM now() - b.updated_at)::float8)) >= 1
        THEN least($2::float8, b.tokens + $3::float8 * greatest(0, extract(epoch FROM now() - b.updated_at)::float8)) - 1
        ELSE least($2::float8, b.tokens + $3::float8 * greatest(0, extract(epoch FROM now() - b.updated_at)::float8))
    END,
    allowed =
        least($2::float8, b.tokens + $3::float8 * greatest(0, extract(epoch FROM now() - b.updated_at)::float8)) >= 1,
    updated_at = now()
RETURNING tokens, allowed";

impl Cluster {
    /// Takes one token from the shared bucket `key` (`capacity` tokens at most, refilled at
    /// `refill_per_sec`); creates it full on first use.
    pub async fn take(&self, key: &str, capacity: f64, refill_per_sec: f64) -> Result<Take> {
        if key.is_empty() || key.len() > MAX_KEY_BYTES {
            return Err(Error::Bucket(format!(
                "a bucket key is 1 to {MAX_KEY_BYTES} bytes, not {}",
                key.len()
            )));
        }
        if !(capacity.is_finite() && capacity > 0.0) {
            return Err(Error::Bucket(format!(
                "a bucket's capacity is a positive number of tokens, not {capacity}"
            )));
        }
        if !(refill_per_sec.is_finite() && refill_per_sec >= 0.0) {
            return Err(Error::Bucket(format!(
                "a bucket's refill is zero or more tokens a second, not {refill_per_sec}"
            )));
        }
        let client = self.client().await?;
        let row = client
            .query_one(TAKE, &[&key, &capacity, &refill_per_sec])
            .await
            .map_err(|e| self.db.failed("taking from a shared rate limit", &e))?;
        let tokens: f64 = row
            .try_get(0)
            .map_err(|e| self.db.failed("taking from a shared rate limit", &e))?;
        let allowed: bool = row
            .try_get(1)
            .map_err(|e| self.db.failed("taking from a shared rate limit", &e))?;
        Ok(Take {
            allowed,
            retry_after: if allowed {
                Duration::ZERO
            } else {
                retry_after(tokens, refill_per_sec)
            },
        })
    }
}

/// How long until `tokens` reach one whole token at `refill_per_sec`.
fn retry_after(tokens: f64, refill_per_sec: f64) -> Duration {
    let missing = (1.0 - tokens).max(0.0);
    if refill_per_sec <= 0.0 {
        return MAX_RETRY_AFTER;
    }
    Duration::try_from_secs_f64(missing / refill_per_sec)
        .unwrap_or(MAX_RETRY_AFTER)
        .min(MAX_RETRY_AFTER)
}

/// The rate limits' [`BucketStore`] of a replica in a cluster: every take is a take from the
/// shared bucket in the database ([`Cluster::take`]), so a limit holds across replicas. A
/// take the database cannot answer is an error, and the proxy refuses the call: a limit
/// that cannot be checked is not waived.
pub struct SharedBuckets {
    cluster: Arc<Cluster>,
}

impl SharedBuckets {
    pub fn new(cluster: Arc<Cluster>) -> Self {
        Self { cluster }
    }
}

impl BucketStore for SharedBuckets {
    fn take<'a>(&'a self, key: &'a str, limit: &'a Limit) -> TakeFuture<'a> {
        Box::pin(async move {
            let take = self
                .cluster
                .take(key, f64::from(limit.burst), limit.per_second())
                .await
                .map_err(|e| StoreError(e.to_string()))?;
            Ok(rate_limit::Take {
                allowed: take.allowed,
                retry_after: take.retry_after,
            })
        })
    }
}
