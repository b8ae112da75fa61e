//! The shadow's own request budget: a token bucket that only the candidate's requests (its dry
//! runs, the paired runs of distinct code, re-evaluations and reads) spend, never the
//! control's.
//!
//! It never waits. A reconcile's comparison starts only when the bucket holds a token
//! ([`ShadowBudget::try_begin`]); otherwise the control runs alone and the skip is counted.
//! Once started, a comparison runs to its end: every request it sends takes a token
//! ([`ShadowBudget::spend`]), into debt if need be, and the debt is paid back by the refill
//! before the next comparison starts. A comparison cut in half would compare nothing, and what
//! it had spent would be wasted; with the debt, the shadow's long-run rate stays at or under
//! the budget's `qps`, and its burst under `burst` plus the requests of the comparisons in
//! flight.

use std::sync::atomic::{AtomicU64, Ordering};

use super::pressure::Pressure;
use crate::flag::{Ramp, sample_bucket};
use crate::vocab::ComparisonSkip;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The default requests per second of `run`'s shadow (`--shadow-qps`).
pub const DEFAULT_QPS: f64 = 10.0;
/// The default burst of `run`'s shadow (`--shadow-burst`).
pub const DEFAULT_BURST: u32 = 20;
/// The default paired sample of `run`'s shadow (`--paired-sample-percent`): a fifth of the
/// objects.
pub const DEFAULT_PAIRED_SAMPLE: Ramp = Ramp::from_basis_points(2_000);

/// A budget that cannot be built.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BudgetError {
    /// The rate is not a positive, finite number.
    #[error("the shadow's request rate must be a positive number of requests per second, not {0}")]
    Qps(f64),
    /// The burst is zero.
    #[error("the shadow's burst must be at least 1 request")]
    Burst,
}

/// The shadow's request budget of one process, shared by every engine in it.
#[derive(Debug)]
pub struct ShadowBudget {
    /// `None`: unlimited (every comparison starts; the requests are still counted).
    rate: Option<(f64, f64)>,
    bucket: Mutex<Bucket>,
    sent: AtomicU64,
    refused: AtomicU64,
    pressure: std::sync::Arc<Pressure>,
    /// The objects whose comparisons may pair code.
    paired_sample: Ramp,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl ShadowBudget {
    /// `qps` requests per second, up to `burst` at once; the bucket starts full. Every object is
    /// in its paired sample ([`with_paired_sample`](Self::with_paired_sample) to bound it; `run`
    /// gives [`DEFAULT_PAIRED_SAMPLE`]).
    ///
    /// # Errors
    /// A rate that is not positive and finite, or a burst of 0.
    pub fn new(qps: f64, burst: u32) -> Result<Self, BudgetError> {
        if !(qps.is_finite() && qps > 0.0) {
            return Err(BudgetError::Qps(qps));
        }
        if burst == 0 {
            return Err(BudgetError::Burst);
        }
        let burst = f64::from(burst);
        Ok(Self {
            rate: Some((qps, burst)),
            bucket: Mutex::new(Bucket {
                tokens: burst,
                at: Instant::now(),
            }),
            sent: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            pressure: std::sync::Arc::default(),
            paired_sample: Ramp::ALL,
        })
    }

    /// No bound and no pause: every comparison starts, every object in the paired sample
    /// (`simulate`'s default, where the cluster is the embedded simulator and a bound would make
    /// the run depend on the machine's speed). [`with_pressure`](Self::with_pressure) adds the
    /// pauses back.
    #[must_use]
    pub fn unlimited() -> Self {
        Self {
            rate: None,
            bucket: Mutex::new(Bucket {
                tokens: 0.0,
                at: Instant::now(),
            }),
            sent: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            pressure: std::sync::Arc::new(Pressure::disabled()),
            paired_sample: Ramp::ALL,
        }
    }

    /// The same budget, pairing code in the comparisons of the objects inside `sample` only
    /// (by [`sample_bucket`]); the others' reconciles whose comparison would pair code run their
    /// control alone ([`ComparisonSkip::SampledOut`]).
    #[must_use]
    pub fn with_paired_sample(mut self, sample: Ramp) -> Self {
        self.paired_sample = sample;
        self
    }

    /// The share of objects whose comparisons may pair code.
    #[must_use]
    pub fn paired_sample(&self) -> Ramp {
        self.paired_sample
    }

    /// The same budget, pausing by `pressure`'s rules ([`Pressure::default`] otherwise).
    #[must_use]
    pub fn with_pressure(mut self, pressure: Pressure) -> Self {
        self.pressure = std::sync::Arc::new(pressure);
        self
    }

    /// Its pause state: the shadow's and the control's clients signal load to it.
    #[must_use]
    pub fn pressure(&self) -> &std::sync::Arc<Pressure> {
        &self.pressure
    }

    /// Whether a comparison may start now: not for an object outside the paired sample when it
    /// would pair code (`paired`: the object's UID, when it would), not while the shadow is
    /// paused under load ([`Pressure`]), nor when the bucket is spent. A refusal for the bucket
    /// is counted.
    ///
    /// # Errors
    /// Why the comparison is skipped.
    pub fn admit(&self, paired: Option<&str>) -> Result<(), ComparisonSkip> {
        if let Some(uid) = paired
            && !self.paired_sample.includes(sample_bucket(uid))
        {
            return Err(ComparisonSkip::SampledOut);
        }
        let now = Instant::now();
        if self.pressure.refuses_at(now) {
            return Err(ComparisonSkip::Paused);
        }
        if self.try_begin_at(now) {
            Ok(())
        } else {
            Err(ComparisonSkip::Budget)
        }
    }

    /// `(qps, burst)`, `None` when unlimited.
    #[must_use]
    pub fn rate(&self) -> Option<(f64, u32)> {
        // The burst was a u32: the conversion back is exact.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        self.rate.map(|(qps, burst)| (qps, burst as u32))
    }

    /// Whether a comparison may start now: the bucket holds a token (it takes none: the
    /// comparison's requests do). A refusal is counted.
    pub fn try_begin(&self) -> bool {
        self.try_begin_at(Instant::now())
    }

    /// [`try_begin`](Self::try_begin) at `now`.
    pub fn try_begin_at(&self, now: Instant) -> bool {
        let Some((qps, burst)) = self.rate else {
            return true;
        };
        let mut bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        bucket.refill(now, qps, burst);
        let open = bucket.tokens >= 1.0;
        if !open {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        open
    }

    /// One request the shadow sends: a token taken, into debt if the bucket is empty.
    pub fn spend(&self) {
        self.spend_at(Instant::now());
    }

    /// [`spend`](Self::spend) at `now`.
    pub fn spend_at(&self, now: Instant) {
        self.sent.fetch_add(1, Ordering::Relaxed);
        let Some((qps, burst)) = self.rate else {
            return;
        };
        let mut bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        bucket.refill(now, qps, burst);
        bucket.tokens -= 1.0;
    }

    /// Requests the shadow sent through this budget.
    #[must_use]
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Comparisons refused because the budget was spent.
    #[must_use]
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// How long until the bucket holds a token again (zero when it does, or unlimited).
    #[must_use]
    pub fn wait_at(&self, now: Instant) -> Duration {
        let Some((qps, burst)) = self.rate else {
            return Duration::ZERO;
        };
        let mut bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        bucket.refill(now, qps, burst);
        Duration::from_secs_f64(((1.0 - bucket.tokens) / qps).max(0.0))
    }
}

impl Default for ShadowBudget {
    /// [`DEFAULT_QPS`] and [`DEFAULT_BURST`].
    fn default() -> Self {
        Self::new(DEFAULT_QPS, DEFAULT_BURST).expect("the defaults are valid")
    }
}

impl Bucket {
    fn refill(&mut self, now: Instant, qps: f64, burst: f64) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * qps).min(burst);
        self.at = self.at.max(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_started_comparison_runs_into_debt_and_the_next_waits_for_it() {
        let budget = ShadowBudget::new(10.0, 5).unwrap();
        let t0 = Instant::now();
        assert!(budget.try_begin_at(t0));
        // A comparison of 8 requests: 5 tokens, then 3 of debt.
        for _ in 0..8 {
            budget.spend_at(t0);
        }
        assert!(!budget.try_begin_at(t0));
        // -3 + 10/s: a token again after 0.4 s, not before.
        assert!(!budget.try_begin_at(t0 + Duration::from_millis(390)));
        assert!(budget.try_begin_at(t0 + Duration::from_millis(400)));
        assert_eq!(budget.sent(), 8);
        assert_eq!(budget.refused(), 2);
    }

    #[test]
    fn the_bucket_holds_no_more_than_its_burst() {
        let budget = ShadowBudget::new(100.0, 3).unwrap();
        let t0 = Instant::now();
        let later = t0 + Duration::from_mins(1);
        for _ in 0..3 {
            assert!(budget.try_begin_at(later));
            budget.spend_at(later);
        }
        assert!(!budget.try_begin_at(later));
        assert_eq!(budget.wait_at(later), Duration::from_millis(10));
    }

    #[test]
    fn unlimited_never_refuses_and_still_counts() {
        let budget = ShadowBudget::unlimited();
        for _ in 0..1000 {
            budget.spend();
        }
        assert!(budget.try_begin());
        assert_eq!(
            (budget.sent(), budget.refused(), budget.rate()),
            (1000, 0, None)
        );
    }

    #[test]
    fn bad_rates_are_refused() {
        assert_eq!(
            ShadowBudget::new(0.0, 1).unwrap_err(),
            BudgetError::Qps(0.0)
        );
        assert!(ShadowBudget::new(f64::NAN, 1).is_err());
        assert_eq!(ShadowBudget::new(1.0, 0).unwrap_err(), BudgetError::Burst);
        assert_eq!(ShadowBudget::default().rate(), Some((10.0, 20)));
    }
}
