//! The result of one run: the steps, HyperShift's aggregate and log summary, the condition, the
//! requeue.

use std::sync::Arc;
use std::time::Duration;

use super::ModelKind;
use crate::plan::ReconcilePlan;
use crate::vocab::{OpId, Outcome};

/// The condition type the reconcile writes.
pub const CONDITION_TYPE: &str = "ReconciliationSucceeded";
/// The reason on success. The misspelling is HyperShift's own (`ReconciliatonSucceededReason`);
/// tools that read the condition match this exact string.
pub const REASON_SUCCEEDED: &str = "ReconciliatonSucceeded";
/// The reason on failure.
pub const REASON_ERROR: &str = "ReconciliationError";
/// The message on success.
pub const MESSAGE_SUCCEEDED: &str = "Reconciliation completed successfully";

/// One decided operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The operation.
    pub op: OpId,
    /// What became of it.
    pub outcome: Outcome,
    /// Whether the executor was asked to run it (false for blocked, skipped, unknown-by-dependency).
    pub executed: bool,
    /// Whether it ran as critical in this policy (its effective category).
    pub critical: bool,
    /// The error text, for a failed step.
    pub message: Option<String>,
    /// The requeue the operation asked for.
    pub requeue_after: Option<Duration>,
}

/// `True` or `False`, as Kubernetes conditions spell them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    /// The reconcile succeeded.
    True,
    /// The reconcile failed.
    False,
}

impl ConditionStatus {
    /// `"True"` or `"False"`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
        }
    }
}

/// The `ReconciliationSucceeded` condition a report implies (without `lastTransitionTime`, which
/// the writer sets when the status changes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// Always [`CONDITION_TYPE`].
    pub type_: &'static str,
    /// `True` on success.
    pub status: ConditionStatus,
    /// `REASON_SUCCEEDED` or `REASON_ERROR`.
    pub reason: &'static str,
    /// `MESSAGE_SUCCEEDED` or the aggregate error text.
    pub message: String,
}

/// The report of a finished run.
#[derive(Clone, Debug)]
pub struct Report {
    plan: Arc<ReconcilePlan>,
    kind: ModelKind,
    steps: Vec<Step>,
    index: Vec<u32>,
    requeue_after: Option<Duration>,
}

impl Report {
    pub(super) fn new(
        plan: Arc<ReconcilePlan>,
        kind: ModelKind,
        steps: Vec<Step>,
        index: Vec<u32>,
        requeue_after: Option<Duration>,
    ) -> Self {
        Self {
            plan,
            kind,
            steps,
            index,
            requeue_after,
        }
    }

    /// The plan the run followed.
    #[must_use]
    pub fn plan(&self) -> &Arc<ReconcilePlan> {
        &self.plan
    }
    /// The model that ran.
    #[must_use]
    pub const fn kind(&self) -> ModelKind {
        self.kind
    }
    /// Every operation, in the order the model decided them.
    #[must_use]
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }
    /// The step of `op`.
    ///
    /// # Panics
    /// If `op` is not in this run's code path (an operation with `only:` the other path): use
    /// [`Report::get`] where that can happen.
    #[must_use]
    pub fn step(&self, op: OpId) -> &Step {
        self.get(op).unwrap_or_else(|| {
            panic!(
                "operation {} is not in the {} run of plan {}",
                self.plan.name_of(op),
                self.kind,
                self.plan.name()
            )
        })
    }
    /// The step of `op`, `None` when `op` is not in this run's code path (`only:`).
    #[must_use]
    pub fn get(&self, op: OpId) -> Option<&Step> {
        let at = *self.index.get(op.index())?;
        self.steps.get(at as usize)
    }
    /// The outcome of `op`.
    ///
    /// # Panics
    /// As [`Report::step`].
    #[must_use]
    pub fn outcome(&self, op: OpId) -> &Outcome {
        &self.step(op).outcome
    }
    /// The failed steps, in execution order.
    pub fn failures(&self) -> impl Iterator<Item = &Step> {
        self.steps
            .iter()
            .filter(|s| matches!(s.outcome, Outcome::Failed { .. }))
    }
    /// The failed steps that ran as critical, in execution order.
    pub fn critical_failures(&self) -> impl Iterator<Item = &Step> {
        self.failures().filter(|s| s.critical)
    }
    /// Whether any operation that ran as critical failed.
    #[must_use]
    pub fn has_critical_failure(&self) -> bool {
        self.critical_failures().next().is_some()
    }
    /// The first operation that failed (for `sequential`, the one the loop stopped at).
    #[must_use]
    pub fn first_failure(&self) -> Option<OpId> {
        self.failures().next().map(|s| s.op)
    }
    /// Whether no operation failed.
    #[must_use]
    pub fn succeeded(&self) -> bool {
        self.first_failure().is_none()
    }
    /// The smallest requeue any operation asked for.
    #[must_use]
    pub const fn requeue_after(&self) -> Option<Duration> {
        self.requeue_after
    }
    /// Names of the blocked operations, sorted and de-duplicated.
    #[must_use]
    pub fn blocked(&self) -> Vec<&str> {
        self.names_where(|o| matches!(o, Outcome::Blocked { .. }))
    }
    /// Names of the skipped operations (fail-fast), sorted.
    #[must_use]
    pub fn skipped(&self) -> Vec<&str> {
        self.names_where(|o| matches!(o, Outcome::Skipped { .. }))
    }

    fn names_where(&self, pred: impl Fn(&Outcome) -> bool) -> Vec<&str> {
        self.plan
            .sorted_names(self.steps.iter().filter(|s| pred(&s.outcome)).map(|s| s.op))
    }

    /// The reconcile's error text, `None` on success.
    ///
    /// `phased`, as HyperShift's `reconcileReport.aggregate()`: without a critical failure, every
    /// error; with one, only the critical errors, as `critical error: <errors>; blocked operations:
    /// [A, B]` (or `critical error: <errors>` when nothing was blocked). `sequential`, as the legacy
    /// loop: the error it stopped at. Several errors are joined as Kubernetes' aggregate does:
    /// `[e1, e2]`, identical messages once.
    #[must_use]
    pub fn aggregate(&self) -> Option<String> {
        self.first_failure()?;
        if self.kind == ModelKind::Phased && self.has_critical_failure() {
            let errors = join_errors(self.critical_failures());
            let blocked = self.blocked();
            Some(if blocked.is_empty() {
                format!("critical error: {errors}")
            } else {
                format!(
                    "critical error: {errors}; blocked operations: [{}]",
                    blocked.join(", ")
                )
            })
        } else {
            Some(join_errors(self.failures()))
        }
    }

    /// The one-line summary for logs. `phased`: `critical failures: [X]; blocked operations: [A,
    /// B]`, empty without a critical failure (critical as the step ran: an operation of a group
    /// not enforced runs fail-fast). `sequential`, the legacy loop, which stops at any failure
    /// whatever the plan's category: `failed: [X]; skipped operations: [A, B]`, empty without a
    /// failure.
    #[must_use]
    pub fn log_summary(&self) -> String {
        if !self.has_critical_failure() {
            return String::new();
        }
        let failed = self
            .plan
            .sorted_names(self.critical_failures().map(|s| s.op));
        let (heading, label, rest) = match self.kind {
            ModelKind::Phased => ("critical failures", "blocked", self.blocked()),
            ModelKind::Sequential => ("failed", "skipped", self.skipped()),
        };
        let summary = format!("{heading}: [{}]", failed.join(", "));
        if rest.is_empty() {
            summary
        } else {
            format!("{summary}; {label} operations: [{}]", rest.join(", "))
        }
    }

    /// The `ReconciliationSucceeded` condition this report implies.
    #[must_use]
    pub fn condition(&self) -> Condition {
        match self.aggregate() {
            None => Condition {
                type_: CONDITION_TYPE,
                status: ConditionStatus::True,
                reason: REASON_SUCCEEDED,
                message: MESSAGE_SUCCEEDED.to_owned(),
            },
            Some(message) => Condition {
                type_: CONDITION_TYPE,
                status: ConditionStatus::False,
                reason: REASON_ERROR,
                message,
            },
        }
    }
}

/// Kubernetes' `utilerrors.NewAggregate(errs).Error()`: one error as itself, several as
/// `[e1, e2]`, each distinct message once, in order.
fn join_errors<'a>(steps: impl Iterator<Item = &'a Step>) -> String {
    let mut messages: Vec<&str> = Vec::new();
    for step in steps {
        let message = step.message.as_deref().unwrap_or_default();
        if !messages.contains(&message) {
            messages.push(message);
        }
    }
    match messages.as_slice() {
        [one] => (*one).to_owned(),
        many => format!("[{}]", many.join(", ")),
    }
}
