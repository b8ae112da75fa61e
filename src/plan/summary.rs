//! The human summary `plan check` prints for a valid plan.

use std::collections::BTreeMap;
use std::fmt;

use super::ReconcilePlan;
use crate::vocab::{Category, CodePath, Gate, ShadowPolicy};

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
        let all = plan.operations();
        // The phased model's fields describe the operations of the phased path only.
        let ops: Vec<&super::Operation> = all
            .iter()
            .filter(|op| op.in_path(CodePath::Phased))
            .collect();
        let count =
            |pred: &dyn Fn(&super::Operation) -> bool| ops.iter().filter(|op| pred(op)).count();
        let mut phases: BTreeMap<u32, usize> = BTreeMap::new();
        for op in &ops {
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
        code_paths(f, all)?;
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
        // Positions where the two orders hold different operations, over the longer order.
        let (old_order, new_order) = (plan.legacy_order(), plan.phased_order());
        let longest = old_order.len().max(new_order.len());
        let moved = (0..longest)
            .filter(|&i| old_order.get(i) != new_order.get(i))
            .count();
        writeln!(
            f,
            "  legacy order    differs from phased order at {moved} of {longest} positions"
        )?;
        writes(f, plan, &ops)?;
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

/// The operations of one code path only, when there are any.
fn code_paths(f: &mut fmt::Formatter<'_>, all: &[super::Operation]) -> fmt::Result {
    let only = |path: CodePath| -> Vec<&str> {
        all.iter()
            .filter(|op| op.only() == Some(path))
            .map(super::Operation::name)
            .collect()
    };
    let (legacy_only, phased_only) = (only(CodePath::Legacy), only(CodePath::Phased));
    if !legacy_only.is_empty() || !phased_only.is_empty() {
        let list = |names: &[&str]| {
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        };
        writeln!(
            f,
            "  code paths      {} in both; legacy only: {}; phased only: {}",
            all.len() - legacy_only.len() - phased_only.len(),
            list(&legacy_only),
            list(&phased_only)
        )?;
    }
    Ok(())
}

/// The intended differences and volatile fields, when there are any.
fn writes(
    f: &mut fmt::Formatter<'_>,
    plan: &super::ReconcilePlan,
    ops: &[&super::Operation],
) -> fmt::Result {
    let all = plan.operations();
    let count = |pred: &dyn Fn(&super::Operation) -> bool| ops.iter().filter(|op| pred(op)).count();
    let intended: usize = all.iter().map(|op| op.intended_differences().len()).sum();
    if intended > 0 || !plan.volatile().is_empty() {
        let volatile: Vec<String> = plan.volatile().iter().map(ToString::to_string).collect();
        let on = count(&|op| !op.intended_differences().is_empty());
        writeln!(
            f,
            "  writes          {intended} intended difference{} on {on} operation{}; volatile fields: {}",
            if intended == 1 { "" } else { "s" },
            if on == 1 { "" } else { "s" },
            if volatile.is_empty() {
                "none".to_owned()
            } else {
                volatile.join(", ")
            }
        )?;
    }
    Ok(())
}
