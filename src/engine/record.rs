//! The `ReconcileRecord`: one reconcile's control and candidate steps and their diff, the one
//! type every sink consumes; how it is assembled from the two runs and their traces; and the
//! record of a drawn world (`record_of_world`), for datasets with a known truth.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use crate::flag::FlagDecision;
use crate::model::{Diff, Report, Step};
use crate::plan::ReconcilePlan;
use crate::vocab::{Category, ComparisonSkip, ErrorClass, Execution, Mode, Outcome};

/// Which object was reconciled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectKey {
    /// Kind.
    pub kind: String,
    /// Namespace, for namespaced kinds.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// UID, when known.
    pub uid: Option<String>,
}

/// `namespace/name`, or `name` alone for a cluster-scoped object.
impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) if !ns.is_empty() => write!(f, "{ns}/{}", self.name),
            _ => f.write_str(&self.name),
        }
    }
}

/// How a step's 409 Conflicts ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConflictResolution {
    /// Retried under the retry-on-conflict policy, and succeeded.
    RetriedSucceeded,
    /// Retried until `DefaultRetry` gave up.
    Exhausted,
    /// Not retried (the legacy policy): the step failed.
    NotRetried,
    /// Shadow: the candidate's retry, dry-run, would have succeeded.
    WouldHaveSucceeded,
    /// Shadow: the candidate's retry, dry-run, would have failed too.
    WouldHaveFailed,
}

impl ConflictResolution {
    /// Every resolution, in the order above.
    pub const ALL: [Self; 5] = [
        Self::RetriedSucceeded,
        Self::Exhausted,
        Self::NotRetried,
        Self::WouldHaveSucceeded,
        Self::WouldHaveFailed,
    ];

    /// The label used in metrics and Parquet.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::RetriedSucceeded => "retried-succeeded",
            Self::Exhausted => "exhausted",
            Self::NotRetried => "not-retried",
            Self::WouldHaveSucceeded => "would-have-succeeded",
            Self::WouldHaveFailed => "would-have-failed",
        }
    }

    /// How the conflicts of step `i` of a run ended. A real step that met a 409: retried and
    /// succeeded, exhausted, or not retried. A candidate step counts only when it re-evaluates a
    /// step the control failed on a 409: would have succeeded or failed, by its outcome, whether
    /// or not its own attempts met a 409 (re-evaluated after the cache caught up, its first
    /// attempt may succeed). The candidate's other dry runs (unblocked steps, sampled
    /// re-executions of reusable ones, which may conflict with the control's own fresh write)
    /// answer nothing about the control's conflicts and count nowhere.
    pub(crate) fn of_step(
        execution: Execution,
        trace: &Trace,
        i: usize,
        succeeded: bool,
    ) -> Option<Self> {
        match execution {
            Execution::Real if trace.conflicts[i] > 0 => {
                Some(match (trace.retried[i], succeeded) {
                    (true, true) => Self::RetriedSucceeded,
                    (true, false) => Self::Exhausted,
                    (false, _) => Self::NotRetried,
                })
            }
            Execution::DryRun if trace.reevaluated[i] => Some(if succeeded {
                Self::WouldHaveSucceeded
            } else {
                Self::WouldHaveFailed
            }),
            _ => None,
        }
    }
}

/// One operation in one policy's run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepRecord {
    /// Operation name.
    pub operation: String,
    /// Its phase.
    pub phase: u32,
    /// The category it ran under (effective in this policy).
    pub category: Category,
    /// How its result was obtained.
    pub execution: Execution,
    /// `succeeded`, `failed`, `blocked`, `skipped` or `unknown`.
    pub outcome: &'static str,
    /// The error class of a failure.
    pub error_class: Option<ErrorClass>,
    /// The error text of a failure.
    pub message: Option<String>,
    /// For blocked/skipped/unknown steps: the operations responsible.
    pub blocked_by: Vec<String>,
    /// When it started, from the start of the reconcile (zero when not executed or reused).
    pub offset: Duration,
    /// Wall time spent executing it (zero when not executed or reused).
    pub duration: Duration,
    /// 409 Conflicts it met (each retried or not).
    pub conflicts: u32,
    /// How those conflicts ended, when there were any.
    pub conflict: Option<ConflictResolution>,
}

/// One reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReconcileRecord {
    /// The object.
    pub object: ObjectKey,
    /// Plan name.
    pub plan: String,
    /// Plan content hash.
    pub plan_hash: crate::plan::PlanHash,
    /// The mode the reconcile ran in.
    pub mode: Mode,
    /// How the flag decided that mode (`None` when no flag decided, e.g. a record rebuilt from
    /// another process's data).
    pub flag: Option<FlagDecision>,
    /// When it started.
    pub started_at: SystemTime,
    /// How long the whole reconcile took (control, candidate and condition write).
    pub duration: Duration,
    /// The control's steps, in decision order.
    pub control: Vec<StepRecord>,
    /// The candidate's steps, in decision order (empty in mode `off`).
    pub candidate: Vec<StepRecord>,
    /// Ran in the candidate, not in the control.
    pub unblocked: Vec<String>,
    /// Ran in the control, blocked in the candidate.
    pub newly_blocked: Vec<String>,
    /// Ran in both with different outcomes.
    pub changed: Vec<String>,
    /// The control's first failed operation.
    pub control_first_failure: Option<String>,
    /// The control's aggregate error text.
    pub control_error: Option<String>,
    /// The candidate's aggregate error text.
    pub candidate_error: Option<String>,
    /// The trace id of the reconcile span, when traces are on.
    pub trace_id: Option<String>,
    /// Mutating requests of the candidate the shadow guard refused (must be 0).
    pub guard_refusals: u32,
    /// Dry-run mutating requests the candidate sent.
    pub dry_run_requests: u32,
    /// What the candidate's code would have written differently from the control's, per
    /// operation and object (operations whose legacy and phased code differ, and the writes of
    /// operations that exist in one code path only).
    pub write_differences: Vec<super::WriteDifference>,
    /// The reconcile was cut short before it finished (the process's shutdown, its context
    /// cancelled): it is counted and shown, never a failure or a write difference, so its steps,
    /// diff and differences are left empty.
    pub cancelled: bool,
    /// The control ran alone in a mode with a shadow: its comparison was skipped, for this
    /// reason (the shadow's budget spent, the shadow paused). The candidate's steps, the diff and
    /// the write differences are then empty, as in mode `off`; the reconcile is counted apart.
    pub comparison_skipped: Option<ComparisonSkip>,
}

impl ReconcileRecord {
    /// The steps of one policy as records. `executions[op]` and `durations[op]` come from the run.
    pub(super) fn steps(report: &Report, trace: &Trace) -> Vec<StepRecord> {
        let plan = report.plan();
        report
            .steps()
            .iter()
            .map(|step: &Step| {
                let op = plan.operation(step.op);
                let i = step.op.index();
                let names = |ops: &[crate::vocab::OpId]| {
                    ops.iter().map(|&o| plan.name_of(o).to_owned()).collect()
                };
                let blocked_by = match &step.outcome {
                    Outcome::Blocked { by } => names(by.as_slice()),
                    Outcome::Unknown { on } => names(on.as_slice()),
                    Outcome::Skipped { after } => vec![plan.name_of(*after).to_owned()],
                    Outcome::Succeeded | Outcome::Idle | Outcome::Failed { .. } => Vec::new(),
                };
                let execution = if step.executed {
                    trace.executions[i]
                } else {
                    Execution::NotRun
                };
                let conflict = ConflictResolution::of_step(execution, trace, i, step.outcome.ok());
                StepRecord {
                    operation: op.name().to_owned(),
                    phase: op.phase(),
                    category: if step.critical {
                        Category::Critical
                    } else {
                        Category::NonCritical
                    },
                    execution,
                    outcome: step.outcome.as_str(),
                    error_class: step.outcome.error_class(),
                    message: step.message.clone(),
                    blocked_by,
                    offset: trace.offsets[i],
                    duration: trace.durations[i],
                    conflicts: trace.conflicts[i],
                    conflict,
                }
            })
            .collect()
    }

    pub(super) fn diff_names(
        report: &Report,
        diff: &Diff,
    ) -> (Vec<String>, Vec<String>, Vec<String>) {
        let plan = report.plan();
        let names =
            |ops: &[crate::vocab::OpId]| ops.iter().map(|&o| plan.name_of(o).to_owned()).collect();
        (
            names(diff.unblocked()),
            names(diff.newly_blocked()),
            names(diff.changed()),
        )
    }

    /// The candidate step of an operation.
    #[must_use]
    pub fn candidate_step(&self, operation: &str) -> Option<&StepRecord> {
        self.candidate.iter().find(|s| s.operation == operation)
    }

    /// The control step of an operation.
    #[must_use]
    pub fn control_step(&self, operation: &str) -> Option<&StepRecord> {
        self.control.iter().find(|s| s.operation == operation)
    }
}

/// A consumer of records (metrics, traces, Parquet, logs). Called inline after each reconcile:
/// it must not block.
pub trait Sink: Send + Sync {
    /// Takes one record.
    fn record(&self, record: &ReconcileRecord);
}

/// Keeps every record in memory, for tests (`simulate` keeps counters: `scenario::Tally`).
#[derive(Debug, Default, Clone)]
pub struct MemorySink {
    records: Arc<Mutex<Vec<ReconcileRecord>>>,
}

impl MemorySink {
    /// An empty sink.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
    /// A copy of every record so far.
    #[must_use]
    pub fn records(&self) -> Vec<ReconcileRecord> {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
    /// How many records arrived.
    #[must_use]
    pub fn len(&self) -> usize {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
    /// Whether none arrived.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Sink for MemorySink {
    fn record(&self, record: &ReconcileRecord) {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(record.clone());
    }
}

/// Logs one line per reconcile with `tracing`: HyperShift's "successfully reconciled" /
/// "reconciliation completed with errors", and what the candidate would have changed; "reconcile
/// cancelled before it finished" for one cut short.
#[derive(Debug, Default, Clone, Copy)]
pub struct LogSink;

impl Sink for LogSink {
    fn record(&self, r: &ReconcileRecord) {
        let trace_id = r.trace_id.as_deref().unwrap_or("");
        let object = r.object.to_string();
        if r.cancelled {
            tracing::info!(plan = %r.plan, mode = r.mode.as_str(), %object, trace_id,
                "reconcile cancelled before it finished (recorded as cancelled, not as a failure)");
            return;
        }
        match &r.control_error {
            None => {
                tracing::info!(plan = %r.plan, mode = r.mode.as_str(), %object, trace_id, unblocked = r.unblocked.len(), "successfully reconciled");
            }
            Some(error) => {
                tracing::info!(plan = %r.plan, mode = r.mode.as_str(), %object, trace_id, error = %error,
                    first_failure = r.control_first_failure.as_deref().unwrap_or(""),
                    unblocked = ?r.unblocked, newly_blocked = ?r.newly_blocked,
                    "reconciliation completed with errors"
                );
            }
        }
    }
}

/// One reconcile's record from its runs: the steps of both, their diff, the aggregate texts.
/// `duration` is left zero for the caller to set.
///
/// # Panics
/// Never for runs of the same plan (the caller's invariant: both follow `plan`).
pub(crate) fn assemble(
    plan: &ReconcilePlan,
    object: ObjectKey,
    (mode, flag): (Mode, Option<FlagDecision>),
    started_at: SystemTime,
    (control_report, control): (&crate::model::Report, &Trace),
    candidate: Option<(&crate::model::Report, &Trace)>,
    trace_id: Option<String>,
) -> ReconcileRecord {
    let mut record = ReconcileRecord {
        object,
        plan: plan.name().to_owned(),
        plan_hash: *plan.hash(),
        mode,
        flag,
        started_at,
        duration: Duration::ZERO,
        control: ReconcileRecord::steps(control_report, control),
        candidate: Vec::new(),
        unblocked: Vec::new(),
        newly_blocked: Vec::new(),
        changed: Vec::new(),
        control_first_failure: control_report
            .first_failure()
            .map(|op| plan.name_of(op).to_owned()),
        control_error: control_report.aggregate(),
        candidate_error: None,
        trace_id,
        guard_refusals: 0,
        dry_run_requests: 0,
        write_differences: Vec::new(),
        cancelled: false,
        comparison_skipped: None,
    };
    if let Some((report, trace)) = candidate {
        let diff = Diff::between(control_report, report).expect("both runs follow the plan");
        (record.unblocked, record.newly_blocked, record.changed) =
            ReconcileRecord::diff_names(control_report, &diff);
        record.candidate = ReconcileRecord::steps(report, trace);
        record.candidate_error = report.aggregate();
    }
    record
}

/// The record of a reconcile cut short before it finished: its object, plan, mode, start and
/// duration, marked cancelled, with no steps, diff or write differences (what ran before the cut
/// is not evidence: the next reconcile of the object does it again).
#[must_use]
pub fn cancelled_record(
    plan: &ReconcilePlan,
    object: ObjectKey,
    (mode, flag): (Mode, Option<FlagDecision>),
    started_at: SystemTime,
    duration: Duration,
    trace_id: Option<String>,
) -> ReconcileRecord {
    ReconcileRecord {
        object,
        plan: plan.name().to_owned(),
        plan_hash: *plan.hash(),
        mode,
        flag,
        started_at,
        duration,
        control: Vec::new(),
        candidate: Vec::new(),
        unblocked: Vec::new(),
        newly_blocked: Vec::new(),
        changed: Vec::new(),
        control_first_failure: None,
        control_error: None,
        candidate_error: None,
        trace_id,
        guard_refusals: 0,
        dry_run_requests: 0,
        write_differences: Vec::new(),
        cancelled: true,
        comparison_skipped: None,
    }
}

/// Per-operation facts of one run that the model does not keep.
pub(crate) struct Trace {
    pub(crate) executions: Vec<Execution>,
    pub(crate) durations: Vec<Duration>,
    pub(crate) conflicts: Vec<u32>,
    /// Whether the operation ran under the retry-on-conflict policy.
    pub(crate) retried: Vec<bool>,
    /// The candidate's: whether its run of the operation re-evaluates a step the control failed
    /// on a 409 Conflict (a dry run under the candidate's retry, or the candidate's own code of
    /// it, paired). Only these runs answer "would the candidate have succeeded where the control
    /// met a 409", whatever their own attempts met; a sampled re-execution is not one.
    pub(crate) reevaluated: Vec<bool>,
    /// When the operation started, from the start of the reconcile.
    pub(crate) offsets: Vec<Duration>,
    /// The start of the reconcile.
    pub(crate) origin: Instant,
}

impl Trace {
    pub(crate) fn new(n: usize, origin: Instant) -> Self {
        Self {
            origin,
            executions: vec![Execution::NotRun; n],
            durations: vec![Duration::ZERO; n],
            conflicts: vec![0; n],
            retried: vec![false; n],
            reevaluated: vec![false; n],
            offsets: vec![Duration::ZERO; n],
        }
    }
}

/// The record of one shadow reconcile of `object` over `world` (one result per operation), as
/// the engine would have written it: the control runs `control`'s decisions for real, the
/// candidate reuses what the control ran, runs the rest in dry-run with the world's result, and
/// leaves `shadow: skip` operations not simulated. For building datasets with a known truth
/// (the analyzer's ground-truth tests) without an API server.
///
/// # Panics
/// Never: both policies follow `plan`.
#[must_use]
pub fn record_of_world(
    control: &crate::model::Policy,
    candidate: &crate::model::Policy,
    object: ObjectKey,
    started_at: std::time::SystemTime,
    world: &[crate::model::StepResult],
    trace_id: Option<String>,
) -> ReconcileRecord {
    use crate::model::drive;
    use crate::model::montecarlo::candidate_result;
    use crate::vocab::{Execution, ShadowPolicy};
    let plan = control.plan().clone();
    let origin = std::time::Instant::now();
    let mut control_trace = Trace::new(plan.len(), origin);
    let control_report = drive(control, |op| {
        control_trace.executions[op.id().index()] = Execution::Real;
        world[op.id().index()].clone()
    });
    let mut candidate_trace = Trace::new(plan.len(), origin);
    let candidate_report = drive(candidate, |op| {
        let i = op.id().index();
        candidate_trace.executions[i] = if control_report.get(op.id()).is_some_and(|s| s.executed) {
            Execution::Reused
        } else if op.shadow() == ShadowPolicy::Skip {
            Execution::NotSimulated
        } else {
            Execution::DryRun
        };
        candidate_result(op, &control_report, world)
    });
    assemble(
        &plan,
        object,
        (crate::vocab::Mode::Shadow, None),
        started_at,
        (&control_report, &control_trace),
        Some((&candidate_report, &candidate_trace)),
        trace_id,
    )
}

#[cfg(test)]
mod tests {
    use super::ObjectKey;

    #[test]
    fn a_cluster_scoped_object_is_named_without_a_slash() {
        let key = |namespace: Option<&str>| ObjectKey {
            kind: "ClusterManagementAddOn".into(),
            namespace: namespace.map(str::to_owned),
            name: "addon-27".into(),
            uid: None,
        };
        assert_eq!(key(None).to_string(), "addon-27");
        assert_eq!(key(Some("")).to_string(), "addon-27");
        assert_eq!(key(Some("team-0")).to_string(), "team-0/addon-27");
    }
}
