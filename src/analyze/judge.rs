//! The judgement: per-operation reports and verdicts from the counts and the pairs; the plan's
//! report.

use std::fmt::Write as _;

use crate::plan::ReconcilePlan;
use crate::vocab::{Category, ErrorClass, OpId};

use super::counts::{OpCounts, PlanCounts, flag};
use super::pairs::{self, declared};
use super::{
    OperationReport, Pair, PlanReport, Reason, Unblocked, Verdict, VerdictReport, readiness,
};

fn operation_report(
    plan: &ReconcilePlan,
    op: OpId,
    c: &OpCounts,
    failed_objects: u64,
) -> OperationReport {
    let executions = c.executions_real + c.executions_dry_run;
    let failures = c.failures_real + c.failures_dry_run;
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    let failure_rate = if executions == 0 {
        0.0
    } else {
        failures as f64 / executions as f64
    };
    let only = plan.operation(op).only();
    let phased = only != Some(crate::vocab::CodePath::Legacy);
    OperationReport {
        operation: plan.name_of(op).to_owned(),
        only,
        phase: phased.then(|| plan.operation(op).phase()),
        category: phased.then(|| plan.operation(op).category().as_str()),
        executions,
        executions_real: c.executions_real,
        executions_dry_run: c.executions_dry_run,
        failures,
        failures_real: c.failures_real,
        failures_dry_run: c.failures_dry_run,
        failure_rate,
        failures_by_class: ErrorClass::ALL
            .iter()
            .zip(c.by_class)
            .filter(|(_, n)| *n > 0)
            .map(|(class, n)| (class.as_str(), n))
            .collect(),
        first_failure: c.first_failure,
        blocked_in_control: c.blocked_in_control,
        blocked_then_run_by_candidate: c.blocked_then_run,
        blocked_then_succeeded_in_candidate: c.blocked_then_succeeded,
        newly_blocked: c.newly_blocked,
        unblocked: c.unblocked,
        unblocked_succeeded: c.unblocked_succeeded,
        unblocked_failed: c.unblocked_failed,
        unblocked_not_simulated: c.unblocked_not_simulated,
        failed_objects,
    }
}

/// What the objects say about one operation.
struct Evidence {
    /// Objects that executed it.
    executed: u64,
    /// Objects in which it failed (control or candidate).
    failed: u64,
    /// Objects in which it failed under the candidate.
    candidate_failed: u64,
    /// Objects in which the candidate's retry resolved a conflict and it never failed there.
    resolved_by_retry: u64,
    /// Objects in which later operations were observed after its failure.
    exposed: u64,
    /// Objects in which it was observed after another operation's failure.
    ran_after: u64,
    /// Objects in which it failed under the candidate or ran after another failure.
    exercised: u64,
    /// Whether some operation after it in phased order does not depend on it.
    later_free: bool,
    /// Whether any operation comes after it in phased order.
    later: bool,
}

fn evidence(
    plan: &ReconcilePlan,
    op: OpId,
    c: &PlanCounts,
    observed: &pairs::Observed,
) -> Evidence {
    let i = op.index();
    let objects_with = |f: &dyn Fn(&super::counts::ObjectCounts) -> bool| {
        c.objects.values().filter(|o| f(o)).count() as u64
    };
    Evidence {
        executed: objects_with(&|o| o.has(i, flag::EXECUTED)),
        failed: objects_with(&|o| o.has(i, flag::FAILED)),
        candidate_failed: objects_with(&|o| o.has(i, flag::CANDIDATE_FAILED)),
        resolved_by_retry: objects_with(&|o| {
            o.has(i, flag::RETRY_RESOLVED) && !o.has(i, flag::CANDIDATE_FAILED)
        }),
        exposed: observed.exposed[i],
        ran_after: observed.ran_after[i],
        exercised: observed.exercised[i],
        later_free: plan
            .phased_order()
            .iter()
            .skip_while(|&&o| o != op)
            .skip(1)
            .any(|&later| !declared(plan, op, later)),
        later: plan.phased_order().last() != Some(&op),
    }
}

fn pct(failures: u64, objects: u64) -> String {
    format!("{failures} of {}", count(objects))
}

/// "1 object", "3 objects".
fn count(objects: u64) -> String {
    if objects == 1 {
        "1 object".to_owned()
    } else {
        format!("{objects} objects")
    }
}

/// "Y failed in a of b objects after X failed (baseline c of d)".
fn pair_words(d: &Pair, subject: &str) -> String {
    format!(
        "{subject} failed in {} after {} failed (baseline {}){}",
        pct(d.after.failures, d.after.objects),
        d.failed,
        pct(d.baseline.failures, d.baseline.objects),
        if d.concentrated {
            ", every such failure in one namespace"
        } else {
            ""
        }
    )
}

/// Why `objects` (those that tested the claim, `tested` says how) are not enough: the
/// inconclusive reason and its sentence.
fn inconclusive(
    ev: &Evidence,
    critical: bool,
    objects: u64,
    tested: &str,
    min_samples: u64,
) -> (Reason, String) {
    if ev.failed > 0
        && ev.candidate_failed == 0
        && ev.resolved_by_retry > 0
        && objects < min_samples
    {
        (
            Reason::ResolvedByRetry,
            format!(
                "failed in {}, only in the control, where the candidate's retry on conflict would have succeeded (in {}): under the candidate its failure was never observed; {tested} in {objects}",
                count(ev.failed),
                count(ev.resolved_by_retry)
            ),
        )
    } else if objects == 0 && ev.failed == 0 {
        (
            Reason::NotExercised,
            format!(
                "never failed{} in the {} objects that executed it: its classification was not tested",
                if critical {
                    " nor ran after another failure"
                } else {
                    ""
                },
                ev.executed
            ),
        )
    } else {
        (
            Reason::TooFewObjects,
            format!(
                "failed in {}; {tested} in {objects}; {min_samples} needed ({} more)",
                count(ev.failed),
                min_samples - objects
            ),
        )
    }
}

/// A verdict before it is attached to its operation: verdict, reason, objects, evidence.
type Judged = (Verdict, Reason, u64, String);

/// The contradictions: a detected dependency that starts at a non-critical operation, or ends at
/// any operation.
fn contradiction(category: Category, name: &str, ev: &Evidence, deps: &[Pair]) -> Option<Judged> {
    let harms: Vec<String> = deps
        .iter()
        .filter(|d| d.failed == name)
        .map(|d| pair_words(d, &d.later))
        .collect();
    let needs: Vec<String> = deps
        .iter()
        .filter(|d| d.later == name)
        .map(|d| pair_words(d, "it"))
        .collect();
    if category == Category::NonCritical && !harms.is_empty() {
        let mut evidence = format!(
            "non-critical, yet its failure makes later operations fail: {}",
            harms.join("; ")
        );
        if !needs.is_empty() {
            let _ = write!(
                evidence,
                "; and {}, which it does not depend on",
                needs.join("; ")
            );
        }
        Some((
            Verdict::Contradicted,
            Reason::HarmsLater,
            ev.exposed,
            evidence,
        ))
    } else if needs.is_empty() {
        None
    } else {
        Some((
            Verdict::Contradicted,
            Reason::UndeclaredDependency,
            ev.ran_after,
            format!("{}, without depending on it in the plan", needs.join("; ")),
        ))
    }
}

/// A pair that separates and is not declared, but has fewer than `min_samples` objects on a side:
/// a dependency the data points at without enough objects to say so. It keeps the operations it
/// touches from `supported` (`suspects` of [`verdict`]).
fn underpowered(p: &Pair) -> bool {
    p.separated && !p.declared && !p.dependency
}

/// Inconclusive because of suspect pairs: their numbers and how many objects are missing.
fn suspected(suspects: &[&Pair], min_samples: u64) -> Judged {
    let words: Vec<String> = suspects
        .iter()
        .map(|d| {
            format!(
                "{} failed in {} after {} failed (baseline {})",
                d.later,
                pct(d.after.failures, d.after.objects),
                d.failed,
                pct(d.baseline.failures, d.baseline.objects)
            )
        })
        .collect();
    let needed = suspects
        .iter()
        .map(|d| {
            min_samples
                .saturating_sub(d.after.objects)
                .max(min_samples.saturating_sub(d.baseline.objects))
        })
        .max()
        .unwrap_or(0);
    (
        Verdict::Inconclusive,
        Reason::TooFewObjects,
        min_samples.saturating_sub(needed),
        format!(
            "{}: that would be an undeclared dependency, but a side has fewer than {min_samples} objects ({needed} more needed)",
            words.join("; ")
        ),
    )
}

/// A non-critical claim: its failure need not block the operations after it.
fn non_critical(ev: &Evidence, min_samples: u64) -> Judged {
    if ev.later_free {
        if ev.exposed >= min_samples {
            return (
                Verdict::Supported,
                Reason::FailureHarmless,
                ev.exposed,
                format!(
                    "failed in {}; in {} of them later operations ran after it and none failed more often than its baseline",
                    count(ev.failed),
                    ev.exposed
                ),
            );
        }
        let tested = "later operations ran after its failure";
        let (reason, evidence) = inconclusive(ev, false, ev.exposed, tested, min_samples);
        return (Verdict::Inconclusive, reason, ev.exposed, evidence);
    }
    if ev.candidate_failed >= min_samples {
        return (
            Verdict::Supported,
            Reason::NothingToBlock,
            ev.candidate_failed,
            format!(
                "failed under the candidate in {}; {}, so its failure cannot block anything",
                count(ev.candidate_failed),
                if ev.later {
                    "every operation after it in phased order depends on it"
                } else {
                    "nothing comes after it in phased order"
                }
            ),
        );
    }
    let tested = "it failed under the candidate (its failure can block nothing else)";
    let (reason, evidence) = inconclusive(ev, false, ev.candidate_failed, tested, min_samples);
    (Verdict::Inconclusive, reason, ev.candidate_failed, evidence)
}

/// A critical claim: its failure blocks the gated operations, and it needs nothing undeclared.
fn critical(ev: &Evidence, min_samples: u64) -> Judged {
    if ev.exercised >= min_samples {
        return (
            Verdict::Supported,
            Reason::Exercised,
            ev.exercised,
            format!(
                "failed under the candidate in {} (its failure blocked the gated operations, as the legacy loop did) and ran after another failure in {}{}; {} objects in all",
                count(ev.candidate_failed),
                count(ev.ran_after),
                if ev.ran_after == 0 {
                    " (so whether it needs an operation it does not depend on is untested)"
                } else {
                    " without failing more often than its baseline"
                },
                ev.exercised
            ),
        );
    }
    let tested = "it failed under the candidate or ran after another failure";
    let (reason, evidence) = inconclusive(ev, true, ev.exercised, tested, min_samples);
    (Verdict::Inconclusive, reason, ev.exercised, evidence)
}

/// The verdict on one operation's classification.
fn verdict(
    plan: &ReconcilePlan,
    op: OpId,
    ev: &Evidence,
    (pairs, dependencies): (&[Pair], &[Pair]),
    min_samples: u64,
) -> VerdictReport {
    let name = plan.name_of(op);
    let category = plan.operation(op).category();
    let judged =
        contradiction(category, name, ev, dependencies).unwrap_or_else(|| match category {
            Category::NonCritical => non_critical(ev, min_samples),
            Category::Critical => critical(ev, min_samples),
        });
    // A claim the data would support is held back by a dependency it points at without enough
    // objects: one that ends here, or (non-critical) starts here.
    let suspects: Vec<&Pair> = pairs
        .iter()
        .filter(|p| underpowered(p))
        .filter(|p| p.later == name || (category == Category::NonCritical && p.failed == name))
        .collect();
    let (verdict, reason, objects, evidence) =
        if judged.0 == Verdict::Supported && !suspects.is_empty() {
            suspected(&suspects, min_samples)
        } else {
            judged
        };
    VerdictReport {
        operation: name.to_owned(),
        claim: category.as_str(),
        verdict,
        reason,
        objects,
        failed_objects: ev.failed,
        objects_needed: if verdict == Verdict::Inconclusive {
            min_samples.saturating_sub(objects)
        } else {
            0
        },
        evidence,
    }
}

/// The operations in the order every report lists them: the phased path's in phased order,
/// then the legacy path's own in legacy order.
pub(super) fn report_order(plan: &ReconcilePlan) -> impl Iterator<Item = OpId> + '_ {
    plan.phased_order().iter().copied().chain(
        plan.legacy_order()
            .iter()
            .copied()
            .filter(|&op| plan.operation(op).only() == Some(crate::vocab::CodePath::Legacy)),
    )
}

pub(super) fn judge(
    plan: &ReconcilePlan,
    c: &PlanCounts,
    other: u64,
    min_samples: u64,
    z: f64,
) -> PlanReport {
    let n = plan.len();
    let found = pairs::find(plan, c, min_samples, z);
    let dependencies: Vec<Pair> = found
        .pairs
        .iter()
        .filter(|p| p.dependency)
        .cloned()
        .collect();
    let evidences: Vec<Evidence> = (0..n)
        .map(|i| evidence(plan, plan.operations()[i].id(), c, &found.observed))
        .collect();
    let verdicts: Vec<VerdictReport> = plan
        .phased_order()
        .iter()
        .map(|&op| {
            verdict(
                plan,
                op,
                &evidences[op.index()],
                (&found.pairs, &dependencies),
                min_samples,
            )
        })
        .collect();
    let mut unblocked = Vec::new();
    // Every control's first failure, the legacy path's own operations too, and none (the row
    // `n`: the control failed nowhere, yet did not run the operation).
    let firsts = report_order(plan)
        .map(|x| (Some(x), x.index()))
        .chain([(None, n)]);
    for (x, row) in firsts {
        for &y in plan.phased_order() {
            let r = c.unblocked[row * n + y.index()];
            if r.n > 0 {
                unblocked.push(Unblocked {
                    first_failure: x.map(|x| plan.name_of(x).to_owned()),
                    operation: plan.name_of(y).to_owned(),
                    unblocked: r.n,
                    succeeded: r.n - r.failures,
                });
            }
        }
    }
    let objects = c.object_count();
    let writes = super::writes::reports(plan, &c.writes);
    let noise = super::noise::reports(plan, &c.noise);
    let conflicts = super::conflicts::reports(plan, c);
    PlanReport {
        plan: plan.name().to_owned(),
        plan_hash: *plan.hash(),
        reconciles: c.reconciles.max(c.step_reconciles),
        cancelled: c.cancelled,
        comparisons_skipped: c.skipped,
        objects,
        rounds: found.rounds,
        rounds_converged: found.converged,
        runs_not_kept: c.runs_not_kept,
        other_version_rows: other,
        guard_refusals: c.guard_refusals,
        unknown_operations: c
            .unknown_operations
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect(),
        operations: report_order(plan)
            .map(|op| operation_report(plan, op, &c.ops[op.index()], evidences[op.index()].failed))
            .collect(),
        readiness: readiness::groups(
            plan,
            c,
            (objects, min_samples),
            &verdicts,
            &dependencies,
            (&writes, &noise),
        ),
        pairs: found.pairs,
        dependencies,
        unblocked,
        conflicts,
        writes,
        noise,
        verdicts,
    }
}
