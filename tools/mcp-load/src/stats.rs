//! Latency summaries: min, p50, p90, p99 and max of a set of samples, in
//! microseconds, computed exactly from a sorted vector (nearest-rank method).

use std::time::Duration;

use serde::Serialize;

/// The latency distribution of one run, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Latency {
    pub min_us: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

impl Latency {
    /// Summarises `samples`; `None` when there are none.
    pub fn from_durations(samples: &[Duration]) -> Option<Self> {
        let mut micros: Vec<u64> = samples
            .iter()
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
            .collect();
        micros.sort_unstable();
        Self::from_sorted(&micros)
    }

    /// Summarises samples that are already sorted ascending.
    fn from_sorted(sorted: &[u64]) -> Option<Self> {
        Some(Self {
            min_us: *sorted.first()?,
            p50_us: percentile(sorted, 50.0)?,
            p90_us: percentile(sorted, 90.0)?,
            p99_us: percentile(sorted, 99.0)?,
            max_us: *sorted.last()?,
        })
    }
}

/// The `p`-th percentile (0 < p <= 100) of ascending `sorted`, by nearest rank:
/// the smallest sample such that at least `p`% of the samples are <= it.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() || !(p > 0.0 && p <= 100.0) {
        return None;
    }
    let n = sorted.len();
    // Exact integer arithmetic for the rank (ceil(p/100 * n)), with p in
    // hundredths of a percent so 99.9 works too.
    let hundredths = (p * 100.0).round() as u128;
    let rank = (hundredths * n as u128).div_ceil(10_000);
    let index = usize::try_from(rank).unwrap_or(n).clamp(1, n) - 1;
    sorted.get(index).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_to(n: u64) -> Vec<u64> {
        (1..=n).collect()
    }

    #[test]
    fn empty_has_no_percentiles() {
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(Latency::from_durations(&[]), None);
    }

    #[test]
    fn out_of_range_p_is_rejected() {
        assert_eq!(percentile(&[1, 2, 3], 0.0), None);
        assert_eq!(percentile(&[1, 2, 3], 100.5), None);
        assert_eq!(percentile(&[1, 2, 3], f64::NAN), None);
    }

    #[test]
    fn single_sample_is_every_percentile() {
        for p in [0.1, 50.0, 99.0, 100.0] {
            assert_eq!(percentile(&[42], p), Some(42));
        }
    }

    #[test]
    fn nearest_rank_on_one_to_hundred() {
        let v = one_to(100);
        assert_eq!(percentile(&v, 1.0), Some(1));
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 90.0), Some(90));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 100.0), Some(100));
    }

    #[test]
    fn rank_rounds_up() {
        // 10 samples: p50 -> rank 5, p90 -> rank 9, p99 -> rank ceil(9.9) = 10.
        let v = one_to(10);
        assert_eq!(percentile(&v, 50.0), Some(5));
        assert_eq!(percentile(&v, 90.0), Some(9));
        assert_eq!(percentile(&v, 99.0), Some(10));
        // 3 samples: p50 -> rank ceil(1.5) = 2.
        assert_eq!(percentile(&[10, 20, 30], 50.0), Some(20));
    }

    #[test]
    fn fractional_percentiles() {
        let v = one_to(1000);
        assert_eq!(percentile(&v, 99.9), Some(999));
        assert_eq!(percentile(&v, 0.1), Some(1));
    }

    #[test]
    fn summary_sorts_unsorted_durations() {
        let samples: Vec<Duration> = [5u64, 1, 4, 2, 3]
            .iter()
            .map(|&ms| Duration::from_millis(ms))
            .collect();
        let latency = Latency::from_durations(&samples);
        assert_eq!(
            latency,
            Some(Latency {
                min_us: 1000,
                p50_us: 3000,
                p90_us: 5000,
                p99_us: 5000,
                max_us: 5000,
            })
        );
    }

    #[test]
    fn sub_microsecond_durations_truncate() {
        let samples = [Duration::from_nanos(999), Duration::from_nanos(1500)];
        let latency = Latency::from_durations(&samples);
        assert_eq!(latency.map(|l| (l.min_us, l.max_us)), Some((0, 1)));
    }
}
