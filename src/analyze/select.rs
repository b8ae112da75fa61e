//! Selecting rollout groups of an analysis by `PLAN/GROUP` or `GROUP` (`--group`).

use super::{Analysis, AnalyzeError, GroupReport, PlanReport};
use crate::flag::GroupRef;

impl Analysis {
    /// The groups `selector` names (`PLAN/GROUP`, or `GROUP` in every analysed plan that has it),
    /// as `(plan, group)`.
    pub fn groups(
        &self,
        selector: &GroupRef,
    ) -> Result<Vec<(&PlanReport, &GroupReport)>, AnalyzeError> {
        let (plan, group) = (selector.plan(), selector.name());
        let found: Vec<(&PlanReport, &GroupReport)> = self
            .plans
            .iter()
            .filter(|p| plan.is_none_or(|name| p.plan == name))
            .flat_map(|p| p.readiness.iter().map(move |g| (p, g)))
            .filter(|(_, g)| g.group == group)
            .collect();
        if !found.is_empty() {
            return Ok(found);
        }
        let why = match plan {
            Some(name) if !self.plans.iter().any(|p| p.plan == name) => {
                format!(
                    "plan {name:?} has no analysable rows in {}",
                    self.dir.display()
                )
            }
            Some(name) => format!("plan {name:?} has no rollout group {group:?}"),
            None => format!("no analysed plan has a rollout group {group:?}"),
        };
        Err(AnalyzeError::UnknownGroup {
            selector: selector.to_string(),
            why,
            known: self
                .plans
                .iter()
                .flat_map(|p| {
                    p.readiness
                        .iter()
                        .map(move |g| format!("{}/{}", p.plan, g.group))
                })
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}
