//! One reconcile's rows counted, once the steps pass has gathered them (`Pending`): per
//! operation its executions and failures by class, per object its baselines and flags, the runs'
//! signatures the ordering pairs are judged from, the conflicts and the control's events their
//! recovery is measured from, and what the candidate unblocked or newly blocked.

use super::row::{Exec, Outcome, Row};
use super::{Counts, Ctx};
use crate::analyze::counts::{
    EXECUTED_FAILED, EXECUTED_OK, First, ObjectCounts, OpCounts, PlanCounts, REUSED_FAILED, RunKey,
    Signature, flag,
};
use crate::plan::ReconcilePlan;
use crate::vocab::ErrorClass;

/// The rows of the reconcile being assembled.
pub(super) struct Pending {
    pub(super) id: String,
    pub(super) plan: usize,
    pub(super) time_us: i64,
    /// `kind/namespace/name`.
    pub(super) object: String,
    pub(super) namespace: Option<String>,
    pub(super) rows: Vec<Row>,
}

/// Counts one reconcile's rows.
pub(super) fn finish(pending: Option<Pending>, ctx: &Ctx, counts: &mut Counts) {
    let Some(mut p) = pending else { return };
    let n = ctx.plans[p.plan].len();
    let c = &mut counts.plans[p.plan];
    c.step_reconciles += 1;
    p.rows.sort_by_key(|r| (!r.control, r.seq));
    let split = p
        .rows
        .iter()
        .position(|r| !r.control)
        .unwrap_or(p.rows.len());
    let (control, candidate) = p.rows.split_at(split);
    let id: std::sync::Arc<str> = p.id.into();
    for (run, is_candidate) in [(control, false), (candidate, true)] {
        let at = RunKey {
            time_us: p.time_us,
            reconcile_id: id.clone(),
            candidate: is_candidate,
        };
        let object = c
            .objects
            .entry(p.object.as_str().into())
            .or_insert_with(|| ObjectCounts::new(n, p.namespace.as_deref()));
        object.reconciles += u64::from(!is_candidate);
        if let Some(signature) = count_run(run, &at, &mut c.ops, object) {
            c.keep(&p.object, signature, &at);
        }
    }
    count_conflicts(
        (control, candidate),
        &ctx.plans[p.plan],
        p.time_us,
        c,
        &p.object,
    );
    // The control's first failure, what it blocked there, and what the candidate made of it.
    let first = control
        .iter()
        .find(|r| r.outcome == Outcome::Failed)
        .map(|r| r.op);
    let in_candidate = |op: usize| candidate.iter().find(|r| r.op == op);
    if let Some(x) = first {
        c.ops[x].first_failure += 1;
        for y in control
            .iter()
            .filter(|r| r.outcome == Outcome::Blocked && r.blocked_by.contains(&x))
        {
            c.ops[x].blocked_in_control += 1;
            if let Some(theirs) =
                in_candidate(y.op).filter(|r| r.exec == Exec::DryRun && r.evidence())
            {
                c.ops[x].blocked_then_run += 1;
                c.ops[x].blocked_then_succeeded += u64::from(theirs.outcome == Outcome::Succeeded);
            }
        }
    }
    // The unblocked matrix, by the control's first failure (row `n`: it failed nowhere).
    let row = first.unwrap_or(n);
    for y in candidate
        .iter()
        .filter(|r| r.exec == Exec::DryRun && r.evidence())
    {
        if unblocked(control, y.op) {
            c.unblocked[row * n + y.op].add(y.outcome == Outcome::Failed);
        }
    }
    // Unblocked: the candidate ran it (its executor was asked to), the control did not, and it
    // did not say it had nothing to do; the definition of the records' `unblocked` list.
    for y in candidate.iter().filter(|r| {
        matches!(r.exec, Exec::DryRun | Exec::NotSimulated) && r.outcome != Outcome::Idle
    }) {
        if unblocked(control, y.op) {
            let op = &mut c.ops[y.op];
            op.unblocked += 1;
            match (y.exec, y.outcome) {
                (Exec::NotSimulated, _) => op.unblocked_not_simulated += 1,
                (_, Outcome::Failed) => op.unblocked_failed += 1,
                (_, Outcome::Succeeded) => op.unblocked_succeeded += 1,
                _ => {}
            }
        }
    }
    // Newly blocked: ran in the control, blocked in the candidate.
    for y in candidate.iter().filter(|r| r.outcome == Outcome::Blocked) {
        if control.iter().any(|r| r.op == y.op && r.executed()) {
            c.ops[y.op].newly_blocked += 1;
            if let Some(o) = c.objects.get_mut(p.object.as_str()) {
                o.flags[y.op] |= flag::NEWLY_BLOCKED;
            }
        }
    }
}

/// The conflicts of one reconcile: each control step that failed on a 409, what the candidate's
/// re-evaluation of it would have done, whether another operation's outcome differed too; and
/// the object's control events its recovery is measured from (its 409s, and its successes of
/// the operations the plan retries on conflict).
fn count_conflicts(
    (control, candidate): (&[Row], &[Row]),
    plan: &ReconcilePlan,
    time_us: i64,
    c: &mut PlanCounts,
    object: &str,
) {
    let conflict = ErrorClass::ALL
        .iter()
        .position(|k| *k == ErrorClass::Conflict);
    let mut events = Vec::new();
    for r in control.iter().filter(|r| r.exec == Exec::Real) {
        let op = u16::try_from(r.op).unwrap_or(u16::MAX);
        if r.outcome == Outcome::Failed && r.class.is_some() && r.class == conflict {
            let theirs = candidate.iter().find(|y| y.op == r.op);
            let k = &mut c.conflicts[r.op];
            k.control_steps += 1;
            k.would_have_succeeded += u64::from(theirs.is_some_and(|y| y.retry_resolved));
            k.would_have_failed += u64::from(theirs.is_some_and(|y| y.retry_failed));
            // Of the operations both runs have: an outcome that differs (run where the
            // control was blocked, or the other way round, or another result). A candidate step
            // that had nothing to do differs from nothing, and "nothing to do" is a success.
            let ok = |o: Outcome| {
                if o == Outcome::Idle {
                    Outcome::Succeeded
                } else {
                    o
                }
            };
            let differs = |y: &Row| {
                y.op != r.op
                    && y.outcome != Outcome::Idle
                    && control
                        .iter()
                        .find(|x| x.op == y.op)
                        .is_some_and(|x| ok(x.outcome) != y.outcome)
            };
            k.other_changes += u64::from(candidate.iter().any(differs));
            events.push((op, true));
        } else if matches!(r.outcome, Outcome::Succeeded | Outcome::Idle)
            && plan
                .operations()
                .get(r.op)
                .is_some_and(crate::plan::Operation::retry_on_conflict)
        {
            events.push((op, false));
        }
    }
    if events.is_empty() {
        return;
    }
    if let Some(o) = c.objects.get_mut(object) {
        for (op, conflict) in events {
            if conflict {
                o.flags[usize::from(op)] |= flag::CONTROL_CONFLICT;
            }
            o.timeline.push(crate::analyze::conflicts::ControlEvent {
                time_us,
                op,
                conflict,
            });
        }
    }
}

/// Whether the control had `op` (its code path does: `only:` in the plan) and did not execute
/// it: what the candidate then ran, it unblocked.
fn unblocked(control: &[Row], op: usize) -> bool {
    control
        .iter()
        .find(|r| r.op == op)
        .is_some_and(|r| r.exec != Exec::Real)
}

/// Per-run counts: executions, failures, the object's baselines and flags; returns the run's
/// signature when it had a failure (the ordering pairs are judged from the signatures).
fn count_run(
    run: &[Row],
    at: &RunKey,
    ops: &mut [OpCounts],
    o: &mut ObjectCounts,
) -> Option<Signature> {
    let mut failures_before = 0u32;
    let mut signature: Vec<u16> = Vec::new();
    for r in run {
        let failed = r.outcome == Outcome::Failed;
        if r.executed() {
            let op = &mut ops[r.op];
            if r.exec == Exec::Real {
                op.executions_real += 1;
                op.failures_real += u64::from(failed);
            } else {
                op.executions_dry_run += 1;
                op.failures_dry_run += u64::from(failed);
            }
            if let Some(class) = r.class.filter(|_| failed) {
                op.by_class[class] += 1;
            }
        }
        if r.evidence() {
            o.flags[r.op] |= flag::EXECUTED;
            if failures_before == 0 {
                First::offer(&mut o.baseline[r.op], at, failed);
            }
        }
        if failed {
            o.flags[r.op] |= flag::FAILED;
            if at.candidate {
                o.flags[r.op] |= flag::CANDIDATE_FAILED;
            }
        }
        if at.candidate && r.retry_resolved {
            o.flags[r.op] |= flag::RETRY_RESOLVED;
        }
        if at.candidate && r.retry_failed {
            o.flags[r.op] |= flag::RETRY_FAILED;
        }
        if r.evidence() || failed {
            let state = match (r.evidence(), failed) {
                (true, false) => EXECUTED_OK,
                (true, true) => EXECUTED_FAILED,
                (false, _) => REUSED_FAILED,
            };
            let op = u16::try_from(r.op).unwrap_or(u16::MAX >> 2);
            signature.push(op << 2 | state);
        }
        if failed {
            failures_before += 1;
        }
    }
    (failures_before > 0).then(|| signature.into_boxed_slice())
}
