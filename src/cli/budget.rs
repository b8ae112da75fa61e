//! `--shadow-qps` and `--shadow-burst`: the shadow's own request budget, for `run` and
//! `simulate`.

use std::sync::Arc;

use clap::Args;
use shadow_reconciler::engine::budget::{
    DEFAULT_BURST, DEFAULT_PAIRED_SAMPLE, DEFAULT_QPS, ShadowBudget,
};
use shadow_reconciler::flag::Ramp;

/// The shadow's own request budget.
#[derive(Args, Clone, Debug)]
pub(super) struct BudgetArgs {
    /// The shadow's own request budget, in requests per second: the candidate's dry runs,
    /// paired runs and reads take from it, never from the control's. It never waits: a
    /// reconcile that finds it spent runs its control alone, counted in the metrics and
    /// marked in its record (docs/engine.md, "The shadow's budget"). With a rate the shadow
    /// also pauses under load (429s, the control slowing down: "Backing off").
    /// `unlimited`: no bound and no pause [default: run 10; simulate unlimited unless
    /// --shadow-qps or --shadow-burst is given].
    #[arg(long, value_name = "QPS|unlimited", value_parser = parse_qps)]
    pub shadow_qps: Option<Qps>,
    /// The most requests the shadow's budget holds at once [default: 20].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub shadow_burst: Option<u32>,
    /// The share of objects (0 to 100, a stable hash of each UID) whose reconciles are compared
    /// when the comparison pairs code: the candidate's own code of an operation (or a legacy
    /// loop of its own) run beside the control's, or calibrate's. The others run their control
    /// alone, counted as `sampled-out`: the paired runs' CPU and requests are bounded by it
    /// (docs/engine.md, "The paired sample") [default: 20 with a rate; 100 with
    /// --shadow-qps unlimited, and in simulate unless --shadow-qps is given].
    #[arg(long, value_name = "P", value_parser = parse_sample)]
    pub paired_sample_percent: Option<Ramp>,
}

fn parse_sample(s: &str) -> Result<Ramp, String> {
    s.parse::<f64>().ok().and_then(Ramp::from_percent).ok_or_else(|| {
        format!("{s:?} is not a share of the objects: give a percentage from 0 to 100, at most two decimals")
    })
}

/// A rate given on the command line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Qps {
    /// No bound.
    Unlimited,
    /// Requests per second (positive, finite).
    PerSecond(f64),
}

fn parse_qps(s: &str) -> Result<Qps, String> {
    if s == "unlimited" {
        return Ok(Qps::Unlimited);
    }
    match s.parse::<f64>() {
        Ok(qps) if qps.is_finite() && qps > 0.0 => Ok(Qps::PerSecond(qps)),
        _ => Err(format!(
            "{s:?} is not a rate: give a positive number of requests per second (0.5, 10) or `unlimited`"
        )),
    }
}

impl BudgetArgs {
    /// The budget; `bounded_by_default`: whether no option means the defaults (`run`) rather
    /// than no bound (`simulate`).
    pub(super) fn budget(&self, bounded_by_default: bool) -> anyhow::Result<Arc<ShadowBudget>> {
        let qps = match (self.shadow_qps, self.shadow_burst) {
            (Some(Qps::Unlimited), Some(_)) => anyhow::bail!(
                "--shadow-burst bounds a budget, and --shadow-qps unlimited has none: give a rate, or leave --shadow-burst out"
            ),
            (Some(Qps::Unlimited), None) => None,
            (None, None) if !bounded_by_default => None,
            (Some(Qps::PerSecond(qps)), _) => Some(qps),
            (None, _) => Some(DEFAULT_QPS),
        };
        let (budget, sample) = match qps {
            Some(qps) => (
                ShadowBudget::new(qps, self.shadow_burst.unwrap_or(DEFAULT_BURST))?,
                DEFAULT_PAIRED_SAMPLE,
            ),
            None => (ShadowBudget::unlimited(), Ramp::ALL),
        };
        Ok(Arc::new(budget.with_paired_sample(
            self.paired_sample_percent.unwrap_or(sample),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(qps: Option<Qps>, burst: Option<u32>) -> BudgetArgs {
        BudgetArgs {
            shadow_qps: qps,
            shadow_burst: burst,
            paired_sample_percent: None,
        }
    }

    #[test]
    fn the_paired_sample_follows_the_bound_unless_given() {
        let sample = |a: BudgetArgs, bounded| a.budget(bounded).unwrap().paired_sample();
        let default = DEFAULT_PAIRED_SAMPLE;
        assert_eq!(sample(args(None, None), true), default);
        assert_eq!(sample(args(None, None), false), Ramp::ALL);
        assert_eq!(sample(args(Some(Qps::Unlimited), None), true), Ramp::ALL);
        assert_eq!(
            sample(args(Some(Qps::PerSecond(3.0)), None), false),
            default
        );
        let mut given = args(Some(Qps::Unlimited), None);
        given.paired_sample_percent = Some(parse_sample("12.5").unwrap());
        assert_eq!(sample(given, true), Ramp::from_basis_points(1_250));
        for bad in ["-1", "101", "1.234", "x"] {
            assert!(
                parse_sample(bad).unwrap_err().contains("not a share"),
                "{bad}"
            );
        }
    }

    #[test]
    fn defaults_bound_run_and_leave_simulate_unbounded() {
        assert_eq!(
            args(None, None).budget(true).unwrap().rate(),
            Some((DEFAULT_QPS, DEFAULT_BURST))
        );
        assert_eq!(args(None, None).budget(false).unwrap().rate(), None);
        assert_eq!(
            args(None, Some(5)).budget(false).unwrap().rate(),
            Some((DEFAULT_QPS, 5))
        );
        assert_eq!(
            args(Some(Qps::PerSecond(2.5)), None)
                .budget(false)
                .unwrap()
                .rate(),
            Some((2.5, DEFAULT_BURST))
        );
        assert_eq!(
            args(Some(Qps::Unlimited), None)
                .budget(true)
                .unwrap()
                .rate(),
            None
        );
    }

    #[test]
    fn bad_rates_are_refused() {
        assert!(parse_qps("0").unwrap_err().contains("positive number"));
        assert!(parse_qps("-1").is_err());
        assert!(parse_qps("inf").is_err());
        assert_eq!(parse_qps("0.5"), Ok(Qps::PerSecond(0.5)));
        let refused = args(Some(Qps::Unlimited), Some(3))
            .budget(true)
            .unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("--shadow-burst bounds a budget")
        );
    }
}
