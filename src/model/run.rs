//! One reconcile's walk through a policy: the model decides, the caller executes.

use std::time::Duration;

use super::report::{Report, Step};
use super::{ModelKind, Policy};
use crate::vocab::{ErrorClass, OpId, OpSet, Outcome};

/// Misuse of a [`Run`] by its caller (a bug in the executor, never bad input).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// `complete` was called for an operation the model had not asked to run.
    #[error("operation {op} completed, but the model is waiting for {}", pending.as_deref().unwrap_or("nothing"))]
    NotPending {
        /// The operation reported.
        op: String,
        /// The operation the model asked to run, if any.
        pending: Option<String>,
    },
    /// The report was asked for before every operation was decided.
    #[error("run of plan {plan} is unfinished: {remaining} operations not yet decided")]
    Unfinished {
        /// The plan's name.
        plan: String,
        /// Operations not yet decided.
        remaining: usize,
    },
    /// Two reports of different plans (or plan versions) were compared.
    #[error("cannot compare runs of different plans: {control} and {candidate}")]
    PlanMismatch {
        /// The control's plan name and hash.
        control: String,
        /// The candidate's plan name and hash.
        candidate: String,
    },
}

/// What the model says about the next operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Execute this operation, then report its result with [`Run::complete`].
    Run(OpId),
    /// The model decided this operation without running it (blocked, skipped or unknown); its
    /// outcome is in [`Run::outcome`].
    NotRun(OpId),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Result_ {
    Succeeded,
    Idle,
    Failed { class: ErrorClass, message: String },
    NotSimulated,
}

/// The result of executing one operation, as its executor reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepResult {
    result: Result_,
    requeue_after: Option<Duration>,
}

impl StepResult {
    /// The operation returned no error.
    #[must_use]
    pub const fn succeeded() -> Self {
        Self {
            result: Result_::Succeeded,
            requeue_after: None,
        }
    }
    /// The operation returned no error and said it had nothing to do.
    #[must_use]
    pub const fn idle() -> Self {
        Self {
            result: Result_::Idle,
            requeue_after: None,
        }
    }
    /// The operation returned an error of this class; `message` is its text.
    #[must_use]
    pub fn failed(class: ErrorClass, message: impl Into<String>) -> Self {
        Self {
            result: Result_::Failed {
                class,
                message: message.into(),
            },
            requeue_after: None,
        }
    }
    /// The operation was not simulated (`shadow: skip`); its outcome is unknown.
    #[must_use]
    pub const fn not_simulated() -> Self {
        Self {
            result: Result_::NotSimulated,
            requeue_after: None,
        }
    }
    /// The operation also asked to be requeued after `after`.
    #[must_use]
    pub const fn with_requeue(mut self, after: Duration) -> Self {
        self.requeue_after = Some(after);
        self
    }
    /// The error class, if the operation failed.
    #[must_use]
    pub const fn error_class(&self) -> Option<ErrorClass> {
        match &self.result {
            Result_::Failed { class, .. } => Some(*class),
            _ => None,
        }
    }
}

/// One reconcile in progress. See the [module docs](super).
#[derive(Debug)]
pub struct Run<'p> {
    policy: &'p Policy,
    cursor: usize,
    pending: Option<OpId>,
    steps: Vec<Step>,
    /// Index into `steps` per operation, `u32::MAX` while undecided.
    decided: Vec<u32>,
    critical_failures: OpSet,
    /// Not-simulated operations behind an effectively critical unknown outcome.
    unknown_critical: OpSet,
    first_failure: Option<OpId>,
    requeue_after: Option<Duration>,
}

const UNDECIDED: u32 = u32::MAX;

impl<'p> Run<'p> {
    pub(super) fn new(policy: &'p Policy) -> Self {
        let n = policy.plan.len();
        Self {
            policy,
            cursor: 0,
            pending: None,
            steps: Vec::with_capacity(n),
            decided: vec![UNDECIDED; n],
            critical_failures: OpSet::new(),
            unknown_critical: OpSet::new(),
            first_failure: None,
            requeue_after: None,
        }
    }

    /// The next decision, or `None` when every operation is decided. While an operation is
    /// pending, asking again returns the same `Run` decision.
    #[allow(clippy::should_implement_trait)] // not an iterator: `complete` must be called between
    pub fn next(&mut self) -> Option<Decision> {
        if let Some(op) = self.pending {
            return Some(Decision::Run(op));
        }
        let op = *self.policy.order.get(self.cursor)?;
        self.cursor += 1;
        let decided = match self.policy.kind {
            ModelKind::Sequential => self.decide_sequential(),
            ModelKind::Phased => self.decide_phased(op),
        };
        if let Some(outcome) = decided {
            self.record(op, outcome, false, None, None);
            Some(Decision::NotRun(op))
        } else {
            self.pending = Some(op);
            Some(Decision::Run(op))
        }
    }

    fn decide_sequential(&self) -> Option<Outcome> {
        if let Some(after) = self.first_failure {
            Some(Outcome::Skipped { after })
        } else if !self.unknown_critical.is_empty() {
            Some(Outcome::Unknown {
                on: self.unknown_critical.clone(),
            })
        } else {
            None
        }
    }

    fn decide_phased(&self, op: OpId) -> Option<Outcome> {
        let mut by = OpSet::new();
        let mut unknown_on = OpSet::new();
        for &dep in self.policy.plan.operation(op).depends_on().as_slice() {
            // Validation guarantees dependencies come earlier in phased order, so they are decided.
            match self.outcome(dep) {
                Some(Outcome::Failed { .. }) => by.insert(dep),
                Some(Outcome::Blocked { by: roots }) => by.extend(roots),
                Some(Outcome::Skipped { after }) => by.insert(*after),
                Some(Outcome::Unknown { on }) => unknown_on.extend(on),
                Some(Outcome::Succeeded | Outcome::Idle) | None => {}
            }
        }
        if self.policy.effective[op.index()].gated {
            if self.critical_failures.is_empty() {
                unknown_on.extend(&self.unknown_critical);
            } else {
                by.extend(&self.critical_failures);
            }
        }
        if !by.is_empty() {
            Some(Outcome::Blocked { by })
        } else if !unknown_on.is_empty() {
            Some(Outcome::Unknown { on: unknown_on })
        } else {
            None
        }
    }

    /// Reports the result of the operation the model asked to run.
    pub fn complete(&mut self, op: OpId, result: StepResult) -> Result<(), ModelError> {
        if self.pending != Some(op) {
            let plan = &self.policy.plan;
            return Err(ModelError::NotPending {
                op: plan
                    .operations()
                    .get(op.index())
                    .map_or_else(|| op.to_string(), |o| o.name().to_owned()),
                pending: self.pending.map(|p| plan.name_of(p).to_owned()),
            });
        }
        self.pending = None;
        let critical = self.policy.effective[op.index()].critical;
        let (outcome, message) = match result.result {
            Result_::Succeeded => (Outcome::Succeeded, None),
            Result_::Idle => (Outcome::Idle, None),
            Result_::Failed { class, message } => {
                self.first_failure.get_or_insert(op);
                if critical {
                    self.critical_failures.insert(op);
                }
                (Outcome::Failed { class }, Some(message))
            }
            Result_::NotSimulated => {
                if critical {
                    self.unknown_critical.insert(op);
                }
                (
                    Outcome::Unknown {
                        on: OpSet::from_iter([op]),
                    },
                    None,
                )
            }
        };
        if let Some(after) = result.requeue_after {
            self.requeue_after = Some(self.requeue_after.map_or(after, |r| r.min(after)));
        }
        self.record(op, outcome, true, message, result.requeue_after);
        Ok(())
    }

    fn record(
        &mut self,
        op: OpId,
        outcome: Outcome,
        executed: bool,
        message: Option<String>,
        requeue_after: Option<Duration>,
    ) {
        if let Outcome::Unknown { on } = &outcome {
            // An unknown critical outcome may be a critical failure: gated operations after it
            // become unknown too (an unknown dependency of a critical operation counts the same).
            if !executed && self.policy.effective[op.index()].critical {
                self.unknown_critical.extend(on);
            }
        }
        self.decided[op.index()] =
            u32::try_from(self.steps.len()).expect("plans hold far fewer than 2^32 operations");
        let critical = self.policy.effective[op.index()].critical;
        self.steps.push(Step {
            op,
            outcome,
            executed,
            critical,
            message,
            requeue_after,
        });
    }

    /// The outcome of `op`, once decided.
    #[must_use]
    pub fn outcome(&self, op: OpId) -> Option<&Outcome> {
        let at = *self.decided.get(op.index())?;
        (at != UNDECIDED).then(|| &self.steps[at as usize].outcome)
    }

    /// The policy this run follows.
    #[must_use]
    pub const fn policy(&self) -> &'p Policy {
        self.policy
    }

    /// The finished run's report.
    pub fn into_report(self) -> Result<Report, ModelError> {
        let remaining = self.policy.order.len() - self.cursor + usize::from(self.pending.is_some());
        if remaining > 0 {
            return Err(ModelError::Unfinished {
                plan: self.policy.plan.name().to_owned(),
                remaining,
            });
        }
        Ok(Report::new(
            self.policy.plan.clone(),
            self.policy.kind,
            self.steps,
            self.decided,
            self.requeue_after,
        ))
    }
}
