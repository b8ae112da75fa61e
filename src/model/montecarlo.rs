//! Model-only simulation: both models over a plan with randomly drawn operation results.
//!
//! Each reconcile draws one result per operation (a "world"); the control (`sequential`) and the
//! candidate (`phased`, with the chosen rollout groups enforced) are then driven over that same
//! world. A candidate step the control already ran reuses its result; one it did not run takes the
//! drawn result, unless the plan declares it `shadow: skip`, in which case it is not simulated.
//! No API server is involved: this answers "what would the phased model change under these
//! failure rates", not "what does the cluster do".

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::model::{Diff, Policy, Report, StepResult, drive};
use crate::plan::{LookupError, ReconcilePlan};
use crate::util::Rng;
use crate::vocab::{ErrorClass, OpId, Outcome, ShadowPolicy};

/// Draws one world: a result per operation, each failing with probability `failure_rate`.
pub fn draw_world(plan: &ReconcilePlan, failure_rate: f64, rng: &mut Rng) -> Vec<StepResult> {
    const CLASSES: [ErrorClass; 5] = [
        ErrorClass::NotFound,
        ErrorClass::Conflict,
        ErrorClass::Server,
        ErrorClass::Timeout,
        ErrorClass::Precondition,
    ];
    plan.operations()
        .iter()
        .map(|op| {
            if rng.next_f64() < failure_rate {
                let class = CLASSES[rng.below(CLASSES.len())];
                StepResult::failed(class, format!("{}: simulated {class} error", op.name()))
            } else {
                StepResult::succeeded()
            }
        })
        .collect()
}

/// Drives the candidate over the world, reusing the control's results where it ran.
pub fn drive_candidate(candidate: &Policy, control: &Report, world: &[StepResult]) -> Report {
    drive(candidate, |op| candidate_result(op, control, world))
}

/// The candidate's result for `op` in `world`: the control's result where the control ran it,
/// "not simulated" for a `shadow: skip` operation it did not run, else the world's draw.
pub fn candidate_result(
    op: &crate::plan::Operation,
    control: &Report,
    world: &[StepResult],
) -> StepResult {
    if control.get(op.id()).is_some_and(|s| s.executed) {
        world[op.id().index()].clone()
    } else if op.shadow() == ShadowPolicy::Skip {
        StepResult::not_simulated()
    } else {
        world[op.id().index()].clone()
    }
}

/// What a simulation is asked to do.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Reconciles to run.
    pub reconciles: u64,
    /// Probability that an operation fails in a reconcile.
    pub failure_rate: f64,
    /// Seed of the random draws.
    pub seed: u64,
    /// Rollout groups enforced in the candidate; `None` enforces every group.
    pub candidate_groups: Option<Vec<String>>,
}

/// Per-operation counts.
#[derive(Clone, Debug, Default)]
struct OpCounts {
    candidate_failed: u64,
    first_failure: u64,
    unblocked: u64,
    unblocked_succeeded: u64,
    unblocked_failed: u64,
    unblocked_unknown: u64,
    newly_blocked: u64,
}

/// The totals of a simulation.
#[derive(Clone, Debug)]
pub struct Summary {
    plan: Arc<ReconcilePlan>,
    settings: Settings,
    control_failed: u64,
    candidate_failed: u64,
    per_op: Vec<OpCounts>,
    first_failure_unblocks: BTreeMap<(OpId, OpId), u64>,
}

/// Runs the simulation.
///
/// # Panics
/// Never: both policies follow the same plan, so their reports can always be compared.
pub fn run(plan: Arc<ReconcilePlan>, settings: Settings) -> Result<Summary, LookupError> {
    let control = Policy::sequential(plan.clone());
    let candidate = if let Some(groups) = &settings.candidate_groups {
        Policy::phased(plan.clone(), groups)?
    } else {
        Policy::phased_all_groups(plan.clone())
    };
    let mut rng = Rng::new(settings.seed);
    let mut summary = Summary {
        per_op: vec![OpCounts::default(); plan.len()],
        plan,
        settings,
        control_failed: 0,
        candidate_failed: 0,
        first_failure_unblocks: BTreeMap::new(),
    };
    for _ in 0..summary.settings.reconciles {
        let world = draw_world(&summary.plan, summary.settings.failure_rate, &mut rng);
        let control_report = drive(&control, |op| world[op.id().index()].clone());
        let candidate_report = drive_candidate(&candidate, &control_report, &world);
        let diff = Diff::between(&control_report, &candidate_report)
            .expect("both runs follow the same plan");
        summary.add(&control_report, &candidate_report, &diff);
    }
    Ok(summary)
}

impl Summary {
    fn add(&mut self, control: &Report, candidate: &Report, diff: &Diff) {
        self.control_failed += u64::from(!control.succeeded());
        self.candidate_failed += u64::from(!candidate.succeeded());
        for step in candidate.failures() {
            self.per_op[step.op.index()].candidate_failed += 1;
        }
        let first = control.first_failure();
        if let Some(first) = first {
            self.per_op[first.index()].first_failure += 1;
        }
        for &op in diff.unblocked() {
            let counts = &mut self.per_op[op.index()];
            counts.unblocked += 1;
            match candidate.outcome(op) {
                Outcome::Succeeded => counts.unblocked_succeeded += 1,
                Outcome::Failed { .. } => counts.unblocked_failed += 1,
                _ => counts.unblocked_unknown += 1,
            }
            if let Some(first) = first {
                *self.first_failure_unblocks.entry((first, op)).or_default() += 1;
            }
        }
        for &op in diff.newly_blocked() {
            self.per_op[op.index()].newly_blocked += 1;
        }
    }

    /// Reconciles whose control run failed.
    #[must_use]
    pub const fn control_failed(&self) -> u64 {
        self.control_failed
    }
    /// Operations the candidate ran that the control did not, over all reconciles.
    #[must_use]
    pub fn unblocked(&self) -> u64 {
        self.per_op.iter().map(|c| c.unblocked).sum()
    }
    /// Of those, how many succeeded.
    #[must_use]
    pub fn unblocked_succeeded(&self) -> u64 {
        self.per_op.iter().map(|c| c.unblocked_succeeded).sum()
    }
    /// Operations the control ran that the candidate blocked, over all reconciles.
    #[must_use]
    pub fn newly_blocked(&self) -> u64 {
        self.per_op.iter().map(|c| c.newly_blocked).sum()
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.settings;
        writeln!(
            f,
            "model-only simulation of plan {} ({}): {} reconciles, failure rate {}, seed {}",
            self.plan.name(),
            self.plan.hash().short(),
            s.reconciles,
            s.failure_rate,
            s.seed
        )?;
        writeln!(
            f,
            "control (sequential) failed {} reconciles; candidate (phased, enforcing {}) failed {}",
            self.control_failed,
            s.candidate_groups
                .as_ref()
                .map_or_else(|| "every group".to_owned(), |g| g.join(", ")),
            self.candidate_failed
        )?;
        writeln!(
            f,
            "unblocked by the candidate: {} operations, {} would have succeeded, {} failed, {} not simulated (shadow: skip); newly blocked: {}",
            self.unblocked(),
            self.unblocked_succeeded(),
            self.per_op.iter().map(|c| c.unblocked_failed).sum::<u64>(),
            self.per_op.iter().map(|c| c.unblocked_unknown).sum::<u64>(),
            self.newly_blocked()
        )?;
        writeln!(f)?;
        writeln!(f, "{}", super::COUNTS_LEGEND)?;
        writeln!(
            f,
            "{:<28} {:>13} {:>18} {:>9} {:>13} {:>13} {:>13}",
            "operation",
            "first failure",
            "candidate failures",
            "unblocked",
            "would succeed",
            "not simulated",
            "newly blocked"
        )?;
        for &op in self.plan.phased_order() {
            let c = &self.per_op[op.index()];
            writeln!(
                f,
                "{:<28} {:>13} {:>18} {:>9} {:>13} {:>13} {:>13}",
                self.plan.name_of(op),
                c.first_failure,
                c.candidate_failed,
                c.unblocked,
                c.unblocked_succeeded,
                c.unblocked_unknown,
                c.newly_blocked
            )?;
        }
        let mut top: Vec<_> = self.first_failure_unblocks.iter().collect();
        top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        if !top.is_empty() {
            writeln!(f)?;
            writeln!(
                f,
                "most frequent (control's first failure -> operation unblocked):"
            )?;
            for ((first, op), n) in top.into_iter().take(5) {
                writeln!(
                    f,
                    "  {} -> {}: {n}",
                    self.plan.name_of(*first),
                    self.plan.name_of(*op)
                )?;
            }
        }
        Ok(())
    }
}
