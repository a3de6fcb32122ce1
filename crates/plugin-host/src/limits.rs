//! Enforcing per-call resource limits on plugins: the memory cap through a
//! `ResourceLimiter` (the deadline is enforced with epoch interruption in `engine`). The
//! limits themselves, and their defaults, are [`mcpproxy_policy::Limits`].

use std::fmt;

/// Tables hold function references; no honest plugin needs more entries than this.
pub(crate) const MAX_TABLE_ELEMENTS: usize = 100_000;

/// Raised (as a trap) when a plugin asks for more memory than its cap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tried to grow its memory to {}, over its cap of {}", Bytes(*.requested), Bytes(*.cap))]
pub struct MemoryCapExceeded {
    pub requested: usize,
    pub cap: usize,
}

/// Enforces [`Limits::memory_bytes`] on one store.
#[derive(Debug)]
pub(crate) struct MemoryLimiter {
    cap: usize,
}

impl MemoryLimiter {
    pub(crate) fn new(cap: usize) -> Self {
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
