//! The human summary `plan check` prints for a valid plan.

use std::collections::BTreeMap;
use std::fmt;

use super::ReconcilePlan;
use crate::vocab::{Category, Gate, ShadowPolicy};

/// Counts that let a reviewer see the shape of a plan at a glance.
#[derive(Debug)]
pub struct Summary<'p> {
    plan: &'p ReconcilePlan,
}

impl<'p> Summary<'p> {
    pub(super) const fn new(plan: &'p ReconcilePlan) -> Self {
        Self { plan }
    }
}

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plan = self.plan;
        let ops = plan.operations();
        let count =
            |pred: &dyn Fn(&super::Operation) -> bool| ops.iter().filter(|op| pred(op)).count();
        let mut phases: BTreeMap<u32, usize> = BTreeMap::new();
        for op in ops {
            *phases.entry(op.phase()).or_default() += 1;
        }
        writeln!(f, "{}: plan {} is valid", plan.source(), plan.name())?;
        writeln!(f, "  hash            {}", plan.hash())?;
        let per_phase: Vec<String> = phases.iter().map(|(p, n)| format!("{p}: {n}")).collect();
        writeln!(
            f,
            "  operations      {} in {} phases ({})",
            ops.len(),
            phases.len(),
            per_phase.join(", ")
        )?;
        writeln!(
            f,
            "  critical        {} (non-critical {})",
            count(&|op| op.category() == Category::Critical),
            count(&|op| op.category() == Category::NonCritical)
        )?;
        writeln!(
            f,
            "  gated           {} (gate no-critical-failure)",
            count(&|op| op.gate() == Gate::NoCriticalFailure)
        )?;
        writeln!(
            f,
            "  dependencies    {} declared on {} operations",
            ops.iter().map(|op| op.depends_on().len()).sum::<usize>(),
            count(&|op| !op.depends_on().is_empty())
        )?;
        writeln!(
            f,
            "  shadow          {} dry-run, {} skip; retryOnConflict on {}",
            count(&|op| op.shadow() == ShadowPolicy::DryRun),
            count(&|op| op.shadow() == ShadowPolicy::Skip),
            count(&|op| op.retry_on_conflict())
        )?;
        let moved = plan
            .legacy_order()
            .iter()
            .zip(plan.phased_order())
            .filter(|(legacy, phased)| legacy != phased)
            .count();
        writeln!(
            f,
            "  legacy order    differs from phased order at {moved} of {} positions",
            ops.len()
        )?;
        let groups: Vec<String> = plan
            .groups()
            .iter()
            .map(|g| format!("{} ({})", g.name(), g.operations().len()))
            .collect();
        let grouped: usize = plan.groups().iter().map(|g| g.operations().len()).sum();
        write!(
            f,
            "  rollout groups  {}{}",
            groups.join(", "),
            if plan.groups_declared() {
                ""
            } else {
                " (implicit)"
            }
        )?;
        if grouped < ops.len() {
            write!(
                f,
                "; {} operations in no group stay fail-fast",
                ops.len() - grouped
            )?;
        }
        Ok(())
    }
}
