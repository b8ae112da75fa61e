//! The engine's mode: which policies run.

use std::fmt;
use std::str::FromStr;

/// Which policies run, ordered from the most cautious (`off`) to `enforce`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    /// The control only (legacy sequential).
    Off,
    /// The noise calibration: the control (legacy sequential) for real, and before each of its
    /// operations the control's own code of it in dry-run, the two codes' writes compared. Code
    /// against itself: every difference found is noise of the comparison on this cluster (no
    /// candidate runs; Scientist's and Diffy's control-against-control).
    Calibrate,
    /// Control legacy sequential; candidate phased, in shadow.
    Shadow,
    /// Control phased with the enforced groups; candidate phased with more groups, in shadow.
    Enforce,
}

impl Mode {
    /// The label used in flags, metrics and Parquet.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Calibrate => "calibrate",
            Self::Shadow => "shadow",
            Self::Enforce => "enforce",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(Self::Off),
            "calibrate" => Ok(Self::Calibrate),
            "shadow" => Ok(Self::Shadow),
            "enforce" => Ok(Self::Enforce),
            other => Err(format!(
                "unknown mode {other:?}; expected off, calibrate, shadow or enforce"
            )),
        }
    }
}

/// Why a reconcile in mode `shadow`, `enforce` or `calibrate` ran its control alone: the
/// candidate (and every paired run) was left out, so nothing of it was compared. The control ran
/// exactly as in mode `off` or as the flag enforces; the reconcile is counted apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ComparisonSkip {
    /// The shadow's own request budget was spent.
    Budget,
    /// The shadow was paused: the API server was shedding or slowing requests.
    Paused,
    /// The comparison would pair the candidate's own code with the control's, and the object is
    /// outside the paired sample (a stable share of the objects, by UID).
    SampledOut,
}

impl ComparisonSkip {
    /// Every reason, in label order.
    pub const ALL: [Self; 3] = [Self::Budget, Self::Paused, Self::SampledOut];

    /// The label used in metrics, spans and Parquet.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Budget => "budget",
            Self::Paused => "paused",
            Self::SampledOut => "sampled-out",
        }
    }
}

impl fmt::Display for ComparisonSkip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ComparisonSkip {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "budget" => Ok(Self::Budget),
            "paused" => Ok(Self::Paused),
            "sampled-out" => Ok(Self::SampledOut),
            other => Err(format!(
                "unknown reason for a skipped comparison {other:?}; expected budget, paused or sampled-out"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ComparisonSkip;

    /// Every reason's label (metrics, spans, Parquet) reads back as that reason: ingest accepts
    /// what either engine writes.
    #[test]
    fn every_skip_reason_reads_back_from_its_label() {
        for reason in ComparisonSkip::ALL {
            assert_eq!(reason.as_str().parse::<ComparisonSkip>(), Ok(reason));
        }
        let error = "skipped".parse::<ComparisonSkip>().unwrap_err();
        assert!(error.contains("budget, paused or sampled-out"), "{error}");
    }
}
