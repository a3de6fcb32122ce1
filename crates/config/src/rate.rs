//! A rate limit as data: so many calls per second, minute or hour, with a burst. The config
//! reads them (`rate_limits`); the proxy's token buckets apply them.

use std::fmt;

/// The unit a rate is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    Second,
    Minute,
    Hour,
}

impl Per {
    /// Seconds in one unit.
    pub fn seconds(self) -> f64 {
        match self {
            Self::Second => 1.0,
            Self::Minute => 60.0,
            Self::Hour => 3600.0,
        }
    }

    /// The unit's name: `second`, `minute`, `hour`.
    pub fn word(self) -> &'static str {
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
    pub fn per_second(&self) -> f64 {
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
