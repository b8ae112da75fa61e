//! One reconcile's record from its spans: the control run is what its operation spans show,
//! replayed through the control's model; the candidate takes its dry-run spans, else reuses the
//! control's result, else is not simulated; the write differences come from the spans' events.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::convention::{Object, SpanFacts};
use crate::engine::{ObjectKey, ReconcileRecord, Trace, assemble};
use crate::flag::FlagDecision;
use crate::model::{Decision, Policy, StepResult};
use crate::plan::ReconcilePlan;
use crate::vocab::{ErrorClass, Execution, Mode, OpId};

/// Which run an operation span reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Side {
    /// The control's real execution (every span of a legacy loop).
    Control,
    /// The candidate's dry run of an operation the control did not run.
    DryRun,
    /// A candidate step the span only reports (`reused`, `not-simulated`): the models derive it.
    Derived,
}

impl Side {
    pub(super) fn of(policy: Option<&str>, execution: Option<&str>) -> Result<Self, String> {
        match (policy, execution) {
            (None | Some("control"), _) => Ok(Self::Control),
            (Some("candidate"), Some("dry-run")) => Ok(Self::DryRun),
            (Some("candidate"), Some("reused" | "not-simulated")) => Ok(Self::Derived),
            (Some("candidate"), other) => Err(format!(
                "a candidate operation span has shadow_reconciler.execution {:?}; expected dry-run, reused or not-simulated",
                other.unwrap_or_default()
            )),
            (Some(other), _) => Err(format!(
                "an operation span has shadow_reconciler.policy {other:?}; expected control or candidate"
            )),
        }
    }
}

/// A buffered operation span.
#[derive(Clone, Debug)]
pub(super) struct Child {
    pub(super) name: String,
    pub(super) explicit: bool,
    pub(super) failure: Option<(ErrorClass, String)>,
    /// It ran and said it had nothing to do.
    pub(super) idle: bool,
    pub(super) side: Side,
    pub(super) conflicts: u32,
    pub(super) retried: bool,
    pub(super) reevaluated: Option<bool>,
    pub(super) writes: Vec<crate::engine::WriteDifference>,
    pub(super) start: u64,
    pub(super) end: u64,
}

/// The runs one reconcile span asks for.
pub(super) struct Policies {
    pub(super) mode: Mode,
    pub(super) control: Policy,
    pub(super) candidate: Option<Policy>,
    /// The flag's evaluation, when the span carries one (`feature_flag.result.reason`).
    pub(super) flag: Option<FlagDecision>,
}

fn result_of(child: &Child) -> StepResult {
    match &child.failure {
        Some((class, message)) => StepResult::failed(*class, message.clone()),
        None if child.idle => StepResult::idle(),
        None => StepResult::succeeded(),
    }
}

pub(super) fn build(
    plan: &Arc<ReconcilePlan>,
    policies: &Policies,
    facts: &SpanFacts,
    object: &Object,
    seen: &HashMap<OpId, Child>,
    dry: &HashMap<OpId, Child>,
) -> ReconcileRecord {
    let origin = Instant::now();
    // The candidate's step: its own dry run when it reports one, else the control's result
    // (reused), else not simulated. The control's: its span, else not simulated.
    let step = |op: OpId, candidate: bool| -> Option<(&Child, Execution)> {
        if candidate && let Some(child) = dry.get(&op) {
            return Some((child, Execution::DryRun));
        }
        let present = if candidate {
            Execution::Reused
        } else {
            Execution::Real
        };
        seen.get(&op).map(|child| (child, present))
    };
    // A candidate's dry run re-evaluates a control step that failed on a 409 as its span says
    // (`shadow_reconciler.reevaluated`); a span without the attribute (an SDK before it) is
    // taken as one when it ran under retry-on-conflict where the control's step failed on a 409.
    let reevaluates = |child: &Child, control: Option<&crate::model::Report>, op: OpId| {
        child.reevaluated.unwrap_or_else(|| {
            child.retried
                && control
                    .and_then(|r| r.get(op))
                    .and_then(|s| s.outcome.error_class())
                    == Some(ErrorClass::Conflict)
        })
    };
    let run = |policy: &Policy, control: Option<&crate::model::Report>| {
        let candidate = control.is_some();
        let mut trace = Trace::new(plan.len(), origin);
        let mut run = policy.start();
        while let Some(decision) = run.next() {
            let Decision::Run(op) = decision else {
                continue;
            };
            let i = op.index();
            let result = if let Some((child, execution)) = step(op, candidate) {
                trace.executions[i] = execution;
                trace.offsets[i] = Duration::from_nanos(child.start.saturating_sub(facts.start));
                trace.durations[i] = Duration::from_nanos(child.end.saturating_sub(child.start));
                trace.conflicts[i] = child.conflicts;
                trace.retried[i] = child.retried;
                trace.reevaluated[i] =
                    execution == Execution::DryRun && reevaluates(child, control, op);
                result_of(child)
            } else {
                trace.executions[i] = Execution::NotSimulated;
                StepResult::not_simulated()
            };
            run.complete(op, result)
                .expect("the pending operation is completed");
        }
        (run.into_report().expect("every operation decided"), trace)
    };
    let (control_report, control) = run(&policies.control, None);
    let candidate = policies
        .candidate
        .as_ref()
        .map(|p| run(p, Some(&control_report)));
    let mut record = assemble(
        plan,
        ObjectKey {
            kind: object.kind.clone(),
            namespace: object.namespace.clone(),
            name: object.name.clone(),
            uid: object.uid.clone(),
        },
        (policies.mode, policies.flag.clone()),
        SystemTime::UNIX_EPOCH + Duration::from_nanos(facts.start),
        (&control_report, &control),
        candidate.as_ref().map(|(report, trace)| (report, trace)),
        Some(opentelemetry::trace::TraceId::from_bytes(facts.trace_id).to_string()),
    );
    record.duration = Duration::from_nanos(facts.end.saturating_sub(facts.start));
    // The reconcile failed where no operation span shows it (a legacy loop that marked no step):
    // its error is the control's.
    if record.control_error.is_none()
        && let super::convention::Role::Reconcile { run, .. } = &facts.role
        && let Some(error) = &run.error
    {
        record.control_error = Some(error.clone());
    }
    if policies.candidate.is_some() || policies.mode == Mode::Calibrate {
        record.write_differences = differences(plan, seen, dry);
    }
    record
}

/// The write differences the spans carry: the candidate's dry runs' events, and the control's
/// for an operation of the legacy path only, named after their operation.
fn differences(
    plan: &ReconcilePlan,
    seen: &HashMap<OpId, Child>,
    dry: &HashMap<OpId, Child>,
) -> Vec<crate::engine::WriteDifference> {
    let mut out = Vec::new();
    for op in plan.operations() {
        let child = if op.only() == Some(crate::vocab::CodePath::Legacy) {
            seen.get(&op.id())
        } else {
            dry.get(&op.id())
        };
        for d in child.map(|c| c.writes.as_slice()).unwrap_or_default() {
            let mut d = d.clone();
            op.name().clone_into(&mut d.operation);
            d.only = op.only();
            out.push(d);
        }
    }
    out
}
