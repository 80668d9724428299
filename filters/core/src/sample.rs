//! Per-call sampling: a splitmix64 generator compared with a threshold.
//!
//! The adapter keeps one [`Sampler`] per plugin instance (root context),
//! seeded at configure time from the host clock (the filter does not import
//! WASI `random_get`), and asks it once per call, in the request-headers
//! callback. The decision needs no cryptographic quality, only an unbiased,
//! cheap stream: splitmix64 spreads even a low-entropy seed over all bits.

use std::sync::atomic::{AtomicU64, Ordering};

/// Sampling decision source (constant size, `Copy` so it fits in a `Cell`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sampler {
    state: u64,
    /// A call is sampled when the next value is below this; `None`: always.
    threshold: Option<u64>,
}

impl Sampler {
    /// `rate` in [0, 1] (clamped; NaN means 1): 1 samples every call without
    /// drawing, 0 none.
    pub fn new(rate: f64, seed: u64) -> Self {
        let threshold = if rate.is_nan() || rate >= 1.0 {
            None
        } else if rate <= 0.0 {
            Some(0)
        } else {
            // rate * 2^64, saturating; 0 < rate < 1.
            Some((rate * 18_446_744_073_709_551_616.0) as u64)
        };
        Sampler {
            state: seed,
            threshold,
        }
    }

    /// The decision for the next call.
    pub fn sample(&mut self) -> bool {
        match self.threshold {
            None => true,
            Some(0) => false,
            Some(t) => self.next_u64() < t,
        }
    }

    /// splitmix64.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        mix(self.state)
    }
}

const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// splitmix64's output function.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A [`Sampler`] many threads share (the native module: one configuration,
/// every worker's streams). splitmix64 is a counter run through a mixer, so
/// a shared one is an atomic counter: each decision takes the next value
/// with one relaxed `fetch_add`, no lock; rate 1 and rate 0 touch nothing.
#[derive(Debug)]
pub struct SharedSampler {
    state: AtomicU64,
    threshold: Option<u64>,
}

impl SharedSampler {
    /// As [`Sampler::new`].
    pub fn new(rate: f64, seed: u64) -> Self {
        let Sampler { state, threshold } = Sampler::new(rate, seed);
        SharedSampler {
            state: AtomicU64::new(state),
            threshold,
        }
    }

    /// The decision for the next call (of any thread).
    pub fn sample(&self) -> bool {
        match self.threshold {
            None => true,
            Some(0) => false,
            Some(t) => {
                let z = self
                    .state
                    .fetch_add(GAMMA, Ordering::Relaxed)
                    .wrapping_add(GAMMA);
                mix(z) < t
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extremes() {
        let mut s = Sampler::new(1.0, 0);
        assert!((0..1000).all(|_| s.sample()));
        assert_eq!(s, Sampler::new(1.0, 0), "rate 1 draws nothing");
        let mut s = Sampler::new(0.0, 0);
        assert!((0..1000).all(|_| !s.sample()));
        let mut s = Sampler::new(f64::NAN, 0);
        assert!(s.sample());
        let mut s = Sampler::new(-1.0, 0);
        assert!(!s.sample());
    }

    #[test]
    fn rate_is_respected() {
        for (rate, seed) in [(0.25, 1u64), (0.5, 1_700_000_000_000_000_000), (0.01, 7)] {
            let mut s = Sampler::new(rate, seed);
            let n = 200_000;
            let hits = (0..n).filter(|_| s.sample()).count() as f64 / n as f64;
            assert!((hits - rate).abs() < 0.01, "rate {rate}: {hits}");
        }
    }

    #[test]
    fn shared_sampler_draws_what_a_sampler_draws() {
        for (rate, seed) in [(1.0, 3u64), (0.0, 3), (0.25, 1), (0.5, 99)] {
            let mut a = Sampler::new(rate, seed);
            let b = SharedSampler::new(rate, seed);
            for _ in 0..1000 {
                assert_eq!(a.sample(), b.sample(), "rate {rate}");
            }
        }
    }

    #[test]
    fn seeds_differ() {
        let mut a = Sampler::new(0.5, 1_000);
        let mut b = Sampler::new(0.5, 1_001);
        let da: Vec<bool> = (0..64).map(|_| a.sample()).collect();
        let db: Vec<bool> = (0..64).map(|_| b.sample()).collect();
        assert_ne!(da, db);
    }
}
