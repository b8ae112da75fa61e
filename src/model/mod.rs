//! The models: pure schedulers that decide, operation by operation, what runs next.
//!
//! A model never runs anything. Bound to a plan as a [`Policy`], it hands out a [`Run`] per
//! reconcile: the caller asks [`Run::next`], executes the operation when told to, reports the
//! result with [`Run::complete`], and finally takes the [`Report`]. Blocked and skipped operations
//! are decided by the model alone and never reach the caller's executor.
//!
//! - `sequential` is the legacy loop: legacy order, stop at the first failure.
//! - `phased` is HyperShift's error-collecting reconcile: phase order, gates and dependencies,
//!   errors collected with their category. Operations outside the enforced rollout groups behave
//!   fail-fast (critical, gated), so with no group enforced and the phased order equal to the
//!   legacy order it reproduces `sequential` exactly.
//!
//! Layer 2 of the crate (docs/design.md, "Layers"): builds on [`plan`](crate::plan),
//! [`util`](crate::util), [`vocab`](crate::vocab); nothing here may use a module of its layer or
//! above.

/// What the per-operation count columns of `simulate` and `simulate --model-only` mean, printed
/// above both tables so the two read the same.
pub const COUNTS_LEGEND: &str = "first failure: the control stopped there; control/candidate failures: that policy ran it and it failed; unblocked: the candidate ran it, the control did not; would succeed: of those, succeeded; not simulated: of those, `shadow: skip`; newly blocked: the control ran it, the candidate blocked it";

mod diff;
mod driver;
pub mod montecarlo;
mod report;
mod run;

use std::fmt;
use std::sync::Arc;

pub use diff::Diff;
pub use driver::drive;
pub use report::{CONDITION_TYPE, Condition, ConditionStatus, REASON_ERROR, Report, Step};
pub use run::{Decision, ModelError, Run, StepResult};

/// How the candidate obtains an operation's result, the rule both engines (Rust, Go) follow and
/// the shared vectors hold them to: its own code's dry run where its code differs from the
/// control's (`distinct`) or the control did not run it; the control's result, reused, where the
/// control ran the same code; not simulated where it would have to run an operation declared
/// `shadow: skip`. (An engine may re-execute a reusable step instead: a conflict the candidate
/// would retry, or a sampled re-execution.)
#[must_use]
pub fn candidate_execution(
    op: &crate::plan::Operation,
    control: &Report,
    distinct: bool,
) -> crate::vocab::Execution {
    use crate::vocab::{Execution, ShadowPolicy};
    let ran = control.get(op.id()).is_some_and(|s| s.executed);
    if ran && !distinct {
        Execution::Reused
    } else if op.shadow() == ShadowPolicy::Skip {
        Execution::NotSimulated
    } else {
        Execution::DryRun
    }
}

use crate::plan::{LookupError, ReconcilePlan};
use crate::vocab::{Category, CodePath, Gate, OpId, OpSet};

/// Which scheduler a policy uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ModelKind {
    /// Legacy order, stop at the first error.
    Sequential,
    /// Phase order, gates and dependencies, collect errors.
    Phased,
}

impl ModelKind {
    /// The label used in metrics, Parquet and flags.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Sequential => "sequential",
            Self::Phased => "phased",
        }
    }
}

impl fmt::Display for ModelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The classification an operation actually runs under in one policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Effective {
    critical: bool,
    gated: bool,
}

impl Effective {
    const FAIL_FAST: Self = Self {
        critical: true,
        gated: true,
    };
}

/// A model bound to a plan and its enforced rollout groups. Built once (per plan and flag
/// change) and shared by every reconcile.
#[derive(Clone, Debug)]
pub struct Policy {
    plan: Arc<ReconcilePlan>,
    kind: ModelKind,
    enforced: OpSet,
    order: Vec<OpId>,
    effective: Vec<Effective>,
}

impl Policy {
    /// The legacy loop: legacy order, stop at the first failure. It runs the operations of the
    /// legacy code path (every one but those with `only: phased`).
    #[must_use]
    pub fn sequential(plan: Arc<ReconcilePlan>) -> Self {
        let order = plan.legacy_order().to_vec();
        let effective = vec![Effective::FAIL_FAST; plan.len()];
        Self {
            plan,
            kind: ModelKind::Sequential,
            enforced: OpSet::new(),
            order,
            effective,
        }
    }

    /// The phased model with the named rollout groups enforced. It runs the operations of the
    /// phased code path (every one but those with `only: legacy`).
    pub fn phased<S: AsRef<str>>(
        plan: Arc<ReconcilePlan>,
        enforced_groups: &[S],
    ) -> Result<Self, LookupError> {
        let enforced = plan.group_members(enforced_groups)?;
        Ok(Self::phased_enforcing(plan, enforced))
    }

    /// The phased model with every rollout group enforced: the plan exactly as classified.
    #[must_use]
    pub fn phased_all_groups(plan: Arc<ReconcilePlan>) -> Self {
        let every = plan.phased_order().iter().copied().collect();
        Self::phased_enforcing(plan, every)
    }

    /// The phased model with exactly these operations enforced (classified as the plan says);
    /// every other operation behaves fail-fast.
    #[must_use]
    pub fn phased_enforcing(plan: Arc<ReconcilePlan>, enforced: OpSet) -> Self {
        let effective = plan
            .operations()
            .iter()
            .map(|op| {
                if enforced.contains(op.id()) {
                    Effective {
                        critical: op.category() == Category::Critical,
                        gated: op.gate() == Gate::NoCriticalFailure,
                    }
                } else {
                    Effective::FAIL_FAST
                }
            })
            .collect();
        let order = plan.phased_order().to_vec();
        Self {
            plan,
            kind: ModelKind::Phased,
            enforced,
            order,
            effective,
        }
    }

    /// The plan this policy schedules.
    #[must_use]
    pub fn plan(&self) -> &Arc<ReconcilePlan> {
        &self.plan
    }
    /// Sequential or phased.
    #[must_use]
    pub const fn kind(&self) -> ModelKind {
        self.kind
    }
    /// The operations classified as the plan says (empty for `sequential`).
    #[must_use]
    pub const fn enforced(&self) -> &OpSet {
        &self.enforced
    }
    /// The order in which operations are considered.
    #[must_use]
    pub fn order(&self) -> &[OpId] {
        &self.order
    }
    /// The code path whose operations this policy runs: legacy for `sequential`, phased for
    /// `phased`.
    #[must_use]
    pub const fn path(&self) -> CodePath {
        match self.kind {
            ModelKind::Sequential => CodePath::Legacy,
            ModelKind::Phased => CodePath::Phased,
        }
    }
    /// The category `op` runs under in this policy.
    #[must_use]
    pub fn effective_category(&self, op: OpId) -> Category {
        if self.effective[op.index()].critical {
            Category::Critical
        } else {
            Category::NonCritical
        }
    }
    /// The gate `op` runs under in this policy.
    #[must_use]
    pub fn effective_gate(&self, op: OpId) -> Gate {
        if self.effective[op.index()].gated {
            Gate::NoCriticalFailure
        } else {
            Gate::None
        }
    }
    /// Starts one reconcile's run.
    #[must_use]
    pub fn start(&self) -> Run<'_> {
        Run::new(self)
    }
}
