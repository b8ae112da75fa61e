//! Wilson score intervals for failure rates.

use serde::Serialize;

/// A failure rate with its Wilson score interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Interval {
    /// Observations: objects.
    pub objects: u64,
    /// Failures among them.
    pub failures: u64,
    /// `failures / objects` (0 without observations).
    pub rate: f64,
    /// Lower bound of the interval.
    pub low: f64,
    /// Upper bound of the interval.
    pub high: f64,
}

/// The standard normal quantile `z` for a two-sided `confidence` (0.5 to 0.999999), by
/// Abramowitz and Stegun 26.2.23 (absolute error below 4.5e-4).
#[must_use]
pub fn z_for(confidence: f64) -> f64 {
    let p = ((1.0 - confidence) / 2.0).clamp(1e-12, 0.5);
    let t = (-2.0 * p.ln()).sqrt();
    t - (2.515_517 + 0.802_853 * t + 0.010_328 * t * t)
        / (1.0 + 1.432_788 * t + 0.189_269 * t * t + 0.001_308 * t * t * t)
}

/// The Wilson score interval of `failures` in `n` observations at quantile `z`; `[0, 1]`
/// without observations.
#[must_use]
#[allow(clippy::cast_precision_loss)] // counts far below 2^52
pub fn wilson(failures: u64, n: u64, z: f64) -> Interval {
    if n == 0 {
        return Interval {
            objects: n,
            failures,
            rate: 0.0,
            low: 0.0,
            high: 1.0,
        };
    }
    let objects = n;
    let n = n as f64;
    let p = failures as f64 / n;
    let z2 = z * z;
    let denominator = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denominator;
    let half = z / denominator * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    Interval {
        objects,
        failures,
        rate: p,
        low: (center - half).max(0.0),
        high: (center + half).min(1.0),
    }
}

/// Whether `after` lies wholly above `baseline`.
#[must_use]
pub fn separated(after: &Interval, baseline: &Interval) -> bool {
    after.low > baseline.high
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles() {
        assert!((z_for(0.95) - 1.96).abs() < 1e-3, "{}", z_for(0.95));
        assert!((z_for(0.99) - 2.576).abs() < 1e-3, "{}", z_for(0.99));
    }

    #[test]
    fn wilson_matches_the_textbook() {
        // 10 failures in 100 runs at 95%: [0.0552, 0.1744].
        let i = wilson(10, 100, 1.96);
        assert!(
            (i.low - 0.0552).abs() < 1e-3 && (i.high - 0.1744).abs() < 1e-3,
            "{i:?}"
        );
        // No failures: the interval still admits some.
        let i = wilson(0, 30, 1.96);
        assert!(
            i.low.abs() < 1e-12 && (i.high - 0.1135).abs() < 1e-3,
            "{i:?}"
        );
        let i = wilson(0, 0, 1.96);
        assert!(i.low.abs() < 1e-12 && (i.high - 1.0).abs() < 1e-12);
    }

    #[test]
    fn separation_needs_disjoint_intervals() {
        let z = 2.576;
        assert!(separated(&wilson(30, 30, z), &wilson(1, 100, z)));
        assert!(!separated(&wilson(3, 10, z), &wilson(1, 10, z)));
    }
}
