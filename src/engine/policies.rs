//! The control's and the candidate's policies of one flag for an engine's plan.

use std::sync::Arc;

use crate::flag::{Evaluation, FlagSpec, FlagState, PlanFlag};
use crate::model::Policy;
use crate::plan::{LookupError, ReconcilePlan};
use crate::vocab::Mode;

/// The policies of one flag for this engine's plan, built once per flag change.
pub(super) struct Policies {
    pub(super) spec: Arc<FlagSpec>,
    pub(super) generation: u64,
    /// The flag as this plan sees it.
    pub(super) flag: PlanFlag,
    sequential: Policy,
    /// The control in mode `enforce`, one per set of enforced groups an object can get (the
    /// first: none).
    enforce: Vec<(Vec<String>, Policy)>,
    candidate: Policy,
}

impl Policies {
    pub(super) fn build(plan: &Arc<ReconcilePlan>, state: &FlagState) -> Result<Self, LookupError> {
        let flag = state.spec.for_plan(plan);
        let candidate = match &flag.candidate_groups {
            Some(groups) => Policy::phased(plan.clone(), groups)?,
            None => Policy::phased_all_groups(plan.clone()),
        };
        let enforce = flag
            .enforced_sets()
            .into_iter()
            .map(|set| Ok((set.clone(), Policy::phased(plan.clone(), &set)?)))
            .collect::<Result<_, LookupError>>()?;
        Ok(Self {
            spec: state.spec.clone(),
            generation: state.generation,
            flag,
            sequential: Policy::sequential(plan.clone()),
            enforce,
            candidate,
        })
    }

    /// The control and the candidate of an evaluation.
    pub(super) fn of(&self, evaluation: &Evaluation) -> (&Policy, Option<&Policy>) {
        match evaluation.mode {
            // Calibrate: no candidate; the control's own code is paired with it.
            Mode::Off | Mode::Calibrate => (&self.sequential, None),
            Mode::Shadow => (&self.sequential, Some(&self.candidate)),
            Mode::Enforce => {
                // Every set an evaluation gives is built (`PlanFlag::enforced_sets`); the
                // first, nothing enforced, is the fallback that never serves.
                let control = self
                    .enforce
                    .iter()
                    .find(|(set, _)| *set == evaluation.decision.enforced_groups)
                    .unwrap_or(&self.enforce[0]);
                (&control.1, Some(&self.candidate))
            }
        }
    }
}
