//! Tests of the in-memory token buckets on a clock the test moves by hand: bursts, refill,
//! separate keys, a clock going back, and the bound on remembered buckets.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mcpproxy_config::{Limit, Per};

use super::*;

/// A clock the test moves by hand (milliseconds).
#[derive(Default)]
struct ManualClock(AtomicU64);

impl ManualClock {
    fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_millis(self.0.load(Ordering::SeqCst))
    }
}

fn limit(rate: f64, per: Per, burst: u32) -> Limit {
    Limit { rate, per, burst }
}

fn store() -> (Arc<ManualClock>, MemoryBuckets) {
    let clock = Arc::new(ManualClock::default());
    (clock.clone(), MemoryBuckets::with_clock(clock))
}

#[test]
fn a_fresh_bucket_allows_its_burst_then_refuses_with_the_wait_for_one_token() {
    let (_, buckets) = store();
    let two_per_second = limit(2.0, Per::Second, 3);
    for _ in 0..3 {
        assert!(buckets.take_now("k", &two_per_second).allowed);
    }
    let refused = buckets.take_now("k", &two_per_second);
    assert!(!refused.allowed);
    assert_eq!(refused.retry_after, Duration::from_millis(500));
}

#[test]
fn tokens_refill_at_the_rate_and_never_past_the_burst() {
    let (clock, buckets) = store();
    let per_minute = limit(6.0, Per::Minute, 2);
    assert!(buckets.take_now("k", &per_minute).allowed);
    assert!(buckets.take_now("k", &per_minute).allowed);
    // One token every ten seconds.
    clock.advance(4_000);
    let refused = buckets.take_now("k", &per_minute);
    assert_eq!(
        (refused.allowed, refused.retry_after),
        (false, Duration::from_secs(6))
    );
    clock.advance(6_000);
    assert!(buckets.take_now("k", &per_minute).allowed);
    assert!(!buckets.take_now("k", &per_minute).allowed);
    // An hour idle fills the bucket to its burst, not beyond.
    clock.advance(3_600_000);
    assert!(buckets.take_now("k", &per_minute).allowed);
    assert!(buckets.take_now("k", &per_minute).allowed);
    assert!(!buckets.take_now("k", &per_minute).allowed);
}

#[test]
fn keys_are_separate_buckets() {
    let (_, buckets) = store();
    let one = limit(1.0, Per::Hour, 1);
    assert!(buckets.take_now(&key::identity("alice"), &one).allowed);
    assert!(buckets.take_now(&key::identity("bob"), &one).allowed);
    assert!(!buckets.take_now(&key::identity("alice"), &one).allowed);
    assert_eq!(
        [
            key::identity("a"),
            key::tool("db", "drop"),
            key::upstream("db")
        ],
        ["identity:a", "tool:db:drop", "upstream:db"]
    );
}

#[test]
fn a_clock_that_goes_back_adds_no_tokens() {
    let mut bucket = Bucket {
        tokens: 0.0,
        at: Duration::from_secs(10),
    };
    let l = limit(1.0, Per::Second, 5);
    assert_eq!(
        bucket.take(&l, Duration::from_secs(5)),
        Some(Duration::from_secs(1))
    );
    assert_eq!(bucket.take(&l, Duration::from_secs(11)), None);
}

#[test]
fn full_buckets_are_forgotten_when_the_map_is_at_its_bound() {
    let (clock, buckets) = store();
    let l = limit(1.0, Per::Second, 1);
    for i in 0..memory::MAX_BUCKETS {
        buckets.take_now(&format!("k{i}"), &l);
    }
    assert_eq!(buckets.len(), memory::MAX_BUCKETS);
    clock.advance(1_000);
    assert!(buckets.take_now("new", &l).allowed);
    assert_eq!(buckets.len(), 1, "only the new bucket is kept");
}

#[tokio::test]
async fn the_store_answers_through_the_trait() {
    let (_, buckets) = store();
    let store: Arc<dyn BucketStore> = Arc::new(buckets);
    let l = limit(1.0, Per::Minute, 1);
    assert!(store.take("k", &l).await.expect("an answer").allowed);
    let refused = store.take("k", &l).await.expect("an answer");
    assert_eq!(
        (refused.allowed, refused.retry_after),
        (false, Duration::from_secs(60))
    );
}
