//! `--shadow-qps` and `--shadow-burst`: the shadow's own request budget, for `run` and
//! `simulate`.

use std::sync::Arc;

use clap::Args;
use shadow_reconciler::engine::budget::{DEFAULT_BURST, DEFAULT_QPS, ShadowBudget};

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
            (Some(Qps::Unlimited), None) => return Ok(Arc::new(ShadowBudget::unlimited())),
            (None, None) if !bounded_by_default => {
                return Ok(Arc::new(ShadowBudget::unlimited()));
            }
            (Some(Qps::PerSecond(qps)), _) => qps,
            (None, _) => DEFAULT_QPS,
        };
        let burst = self.shadow_burst.unwrap_or(DEFAULT_BURST);
        Ok(Arc::new(ShadowBudget::new(qps, burst)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(qps: Option<Qps>, burst: Option<u32>) -> BudgetArgs {
        BudgetArgs {
            shadow_qps: qps,
            shadow_burst: burst,
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
