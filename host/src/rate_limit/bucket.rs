//! One token bucket's arithmetic: refill at the limit's rate up to its burst, take one
//! token per call, and how long until the next token. Time comes in as an argument (a
//! [`Duration`] since any fixed origin), so the math is tested without a clock.

use std::fmt;
use std::time::Duration;

/// The unit a rate is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    Second,
    Minute,
    Hour,
}

impl Per {
    pub(crate) fn seconds(self) -> f64 {
        match self {
            Self::Second => 1.0,
            Self::Minute => 60.0,
            Self::Hour => 3600.0,
        }
    }

    pub(crate) fn word(self) -> &'static str {
        match self {
            Self::Second => "second",
            Self::Minute => "minute",
            Self::Hour => "hour",
        }
    }
}

/// A bucket's limit: `rate` tokens per `per`, at most `burst` saved up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    pub rate: f64,
    pub per: Per,
    pub burst: u32,
}

impl Limit {
    /// Tokens added per second.
    pub(crate) fn per_second(&self) -> f64 {
        self.rate / self.per.seconds()
    }
}

impl fmt::Display for Limit {
    /// `10 per minute, burst 5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} per {}, burst {}",
            self.rate,
            self.per.word(),
            self.burst
        )
    }
}

/// A bucket's state: the tokens it holds at `at`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bucket {
    pub(crate) tokens: f64,
    pub(crate) at: Duration,
}

impl Bucket {
    /// A full bucket at `now`.
    pub(crate) fn full(limit: &Limit, now: Duration) -> Self {
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
    pub(crate) fn is_full(&self, limit: &Limit, now: Duration) -> bool {
        self.refilled(limit, now) >= f64::from(limit.burst)
    }

    /// Takes one token at `now`: `None` when taken, else how long until one is there.
    pub(crate) fn take(&mut self, limit: &Limit, now: Duration) -> Option<Duration> {
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
