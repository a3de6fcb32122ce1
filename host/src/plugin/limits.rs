//! Per-call resource limits for plugins: a deadline enforced with epoch interruption
//! and a linear-memory cap enforced by a `ResourceLimiter`.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The default deadline per call (DESIGN.md section 4).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);
/// The default deadline of one sink delivery, HTTP waits included: a remote store may be
/// slow, and a sink is not on any call's path.
pub const DEFAULT_SINK_TIMEOUT: Duration = Duration::from_secs(30);
/// The default linear-memory cap per instance (DESIGN.md section 4).
pub const DEFAULT_MEMORY_BYTES: usize = 32 << 20;
/// Tables hold function references; no honest plugin needs more entries than this.
pub const MAX_TABLE_ELEMENTS: usize = 100_000;

/// Limits that apply to each call into a plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Wall-clock budget for instantiating the plugin and running one call.
    #[serde(with = "duration_ms", rename = "timeout_ms")]
    pub timeout: Duration,
    /// The most linear memory one instance may hold, in bytes.
    pub memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            memory_bytes: DEFAULT_MEMORY_BYTES,
        }
    }
}

mod duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis().try_into().unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// Raised (as a trap) when a plugin asks for more memory than its cap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tried to grow its memory to {}, over its cap of {}", Bytes(*.requested), Bytes(*.cap))]
pub struct MemoryCapExceeded {
    pub requested: usize,
    pub cap: usize,
}

/// Enforces [`Limits::memory_bytes`] on one store.
#[derive(Debug)]
pub struct MemoryLimiter {
    cap: usize,
}

impl MemoryLimiter {
    pub fn new(cap: usize) -> Self {
        Self { cap }
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.cap {
            return Err(wasmtime::Error::new(MemoryCapExceeded {
                requested: desired,
                cap: self.cap,
            }));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// A byte count printed for people: `32 MiB`, `1.5 KiB`, `312 B`.
#[derive(Debug, Clone, Copy)]
pub struct Bytes(pub usize);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
        let mut value = self.0 as f64;
        let mut unit = 0;
        while value >= 1024.0 && unit < UNITS.len() - 1 {
            value /= 1024.0;
            unit += 1;
        }
        if unit == 0 || value.fract() == 0.0 {
            write!(f, "{value:.0} {}", UNITS[unit])
        } else {
            write!(f, "{value:.1} {}", UNITS[unit])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    #[test]
    fn limiter_refuses_growth_past_the_cap_with_a_readable_error() {
        let mut limiter = MemoryLimiter::new(1 << 20);
        assert!(limiter.memory_growing(0, 1 << 20, None).unwrap());
        let err = limiter.memory_growing(1 << 20, 2 << 20, None).unwrap_err();
        let cap = err.downcast_ref::<MemoryCapExceeded>().unwrap();
        assert_eq!(cap.cap, 1 << 20);
        assert_eq!(
            err.to_string(),
            "tried to grow its memory to 2 MiB, over its cap of 1 MiB"
        );
    }

    #[test]
    fn bytes_print_for_people() {
        assert_eq!(Bytes(312).to_string(), "312 B");
        assert_eq!(Bytes(1536).to_string(), "1.5 KiB");
        assert_eq!(Bytes(32 << 20).to_string(), "32 MiB");
    }
}
