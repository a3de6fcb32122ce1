//! One token bucket's arithmetic: refill at the limit's rate up to its burst, take one
//! token per call, and how long until the next token. Time comes in as an argument (a
//! [`Duration`] since any fixed origin), so the math is tested without a clock.

use std::time::Duration;

use mcpproxy_config::Limit;

/// A bucket's state: the tokens it holds at `at`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub tokens: f64,
    pub at: Duration,
}

impl Bucket {
    /// A full bucket at `now`.
    pub fn full(limit: &Limit, now: Duration) -> Self {
        Self {
            tokens: f64::from(limit.burst),
            at: now,
        }
    }

    /// The tokens at `now` (a clock that went back adds nothing).
    fn refilled(&self, limit: &Limit, now: Duration) -> f64 {
        let elapsed = now.saturating_sub(self.at).as_secs_f64();
        (self.tokens + elapsed * limit.per_second()).min(f64::from(limit.burst))
    }

    /// Whether the bucket would be full at `now` (a store may forget it then).
    pub fn is_full(&self, limit: &Limit, now: Duration) -> bool {
        self.refilled(limit, now) >= f64::from(limit.burst)
    }

    /// Takes one token at `now`: `None` when taken, else how long until one is there.
    pub fn take(&mut self, limit: &Limit, now: Duration) -> Option<Duration> {
        let tokens = self.refilled(limit, now);
        self.at = now.max(self.at);
        if tokens >= 1.0 {
            self.tokens = tokens - 1.0;
            return None;
        }
        self.tokens = tokens;
        let rate = limit.per_second();
        let wait = if rate > 0.0 {
            (1.0 - tokens) / rate
        } else {
            f64::from(u32::MAX)
        };
        Some(Duration::from_secs_f64(wait.min(f64::from(u32::MAX))))
    }
}
