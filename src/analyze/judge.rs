//! The judgement: per-operation reports, ordering pairs, verdicts and readiness from the counts.

use crate::outcome::{Category, ErrorClass};
use crate::plan::{OpId, ReconcilePlan};

use super::scan::{self, PlanCounts};
use super::stats::{separated, wilson};
use super::{
    GroupReport, OperationReport, Pair, PlanReport, Readiness, Unblocked, Verdict, VerdictReport,
};

/// Whether `later` depends on `failed` in `plan`, directly or through other dependencies.
fn declared(plan: &ReconcilePlan, failed: OpId, later: OpId) -> bool {
    let mut stack = vec![later];
    let mut seen = vec![false; plan.len()];
    while let Some(op) = stack.pop() {
        for &d in plan.operation(op).depends_on().as_slice() {
            if d == failed {
                return true;
            }
            if !std::mem::replace(&mut seen[d.index()], true) {
                stack.push(d);
            }
        }
    }
    false
}

fn operation_report(plan: &ReconcilePlan, op: OpId, c: &scan::OpCounts) -> OperationReport {
    let executions = c.executions_real + c.executions_dry_run;
    let failures = c.failures_real + c.failures_dry_run;
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    let failure_rate = if executions == 0 {
        0.0
    } else {
        failures as f64 / executions as f64
    };
    OperationReport {
        operation: plan.name_of(op).to_owned(),
        phase: plan.operation(op).phase(),
        category: plan.operation(op).category().as_str(),
        executions,
        executions_real: c.executions_real,
        executions_dry_run: c.executions_dry_run,
        failures,
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
    }
}

/// Observations of operations after failures, under an "explains" relation.
struct Observed {
    /// `after[x * n + y]`: `y` executed after `x` failed, every other failure before `y`
    /// explained by `x`.
    after: Vec<scan::Rate>,
    /// `exposed[x]`: runs in which some operation was observed after `x` so.
    exposed: Vec<u64>,
}

/// Counts, over the distinct runs, each later operation after each failure whose other earlier
/// failures it explains (`explains[x * n + w]`: `w`'s failure is attributed to `x`'s).
fn observe(n: usize, c: &PlanCounts, explains: &[bool]) -> Observed {
    let mut after = vec![scan::Rate::default(); n * n];
    let mut exposed = vec![0; n];
    let mut failed: Vec<usize> = Vec::new();
    let mut exposed_here = vec![false; n];
    for (signature, &times) in &c.runs {
        failed.clear();
        exposed_here.fill(false);
        for &step in &**signature {
            let (op, state) = (usize::from(step >> 2), step & 3);
            if op >= n {
                continue;
            }
            if state != scan::REUSED_FAILED && !failed.is_empty() {
                let y_failed = state == scan::EXECUTED_FAILED;
                for &x in &failed {
                    if failed.iter().all(|&w| w == x || explains[x * n + w]) {
                        after[x * n + op].add_times(y_failed, times);
                        exposed_here[x] = true;
                    }
                }
            }
            if state != scan::EXECUTED_OK {
                failed.push(op);
            }
        }
        for (x, _) in exposed_here.iter().enumerate().filter(|(_, e)| **e) {
            exposed[x] += times;
        }
    }
    Observed { after, exposed }
}

/// `explains[x * n + y]`: `y` depends on `x` through declared or detected dependencies.
fn closure(plan: &ReconcilePlan, detected: &[(usize, usize)]) -> Vec<bool> {
    let n = plan.len();
    let mut m = vec![false; n * n];
    for op in plan.operations() {
        for &d in op.depends_on().as_slice() {
            m[d.index() * n + op.id().index()] = true;
        }
    }
    for &(x, y) in detected {
        m[x * n + y] = true;
    }
    for k in 0..n {
        for i in 0..n {
            if m[i * n + k] {
                for j in 0..n {
                    if m[k * n + j] {
                        m[i * n + j] = true;
                    }
                }
            }
        }
    }
    m
}

/// The ordering pairs, and per operation the runs that exposed it (evidence for its verdict).
///
/// A later operation's failure counts after `x` only when every other failure before it is
/// explained by `x` (declared dependents of `x`, or dependents detected in an earlier round):
/// an unrelated failure in between, or a common earlier cause, is not blamed on `x`. Detections
/// feed the next round until nothing new is found, so a chain (the namespace missing makes
/// every later write fail) is found in one analysis.
fn pairs(plan: &ReconcilePlan, c: &PlanCounts, min_samples: u64, z: f64) -> (Vec<Pair>, Vec<u64>) {
    let n = plan.len();
    let mut detected: Vec<(usize, usize)> = Vec::new();
    loop {
        let observed = observe(n, c, &closure(plan, &detected));
        let mut pairs = Vec::new();
        for &x in plan.phased_order() {
            for &y in plan.phased_order() {
                let (xi, yi) = (x.index(), y.index());
                let after = observed.after[xi * n + yi];
                if after.runs == 0 {
                    continue;
                }
                let after_i = wilson(after.failures, after.runs, z);
                let base = c.baseline[yi];
                let baseline = wilson(base.failures, base.runs, z);
                let is_separated = separated(&after_i, &baseline);
                let is_declared = declared(plan, x, y);
                pairs.push(Pair {
                    failed: plan.name_of(x).to_owned(),
                    later: plan.name_of(y).to_owned(),
                    after: after_i,
                    baseline,
                    separated: is_separated,
                    declared: is_declared,
                    dependency: is_separated
                        && !is_declared
                        && after.runs >= min_samples
                        && baseline.runs >= min_samples,
                });
            }
        }
        let before = detected.len();
        for p in pairs.iter().filter(|p| p.dependency) {
            let edge = (
                plan.lookup(&p.failed).map_or(0, OpId::index),
                plan.lookup(&p.later).map_or(0, OpId::index),
            );
            if !detected.contains(&edge) {
                detected.push(edge);
            }
        }
        if detected.len() == before || detected.len() >= n * n {
            return (pairs, observed.exposed);
        }
    }
}

/// Evidence about a non-critical operation: does its failure make later operations fail?
fn non_critical(
    plan: &ReconcilePlan,
    op: OpId,
    counts: &scan::OpCounts,
    exposed_runs: u64,
    dependencies: &[Pair],
    min_samples: u64,
) -> (Verdict, u64, String) {
    let name = plan.name_of(op);
    let harmed: Vec<String> = dependencies
        .iter()
        .filter(|d| d.failed == name)
        .map(|d| {
            format!(
                "{} failed {:.0}% of {} runs after {name} failed (baseline {:.1}% of {})",
                d.later,
                d.after.rate * 100.0,
                d.after.runs,
                d.baseline.rate * 100.0,
                d.baseline.runs
            )
        })
        .collect();
    // With no later operation free to run after it, every failure counts as evidence.
    let exposed = plan
        .phased_order()
        .iter()
        .skip_while(|&&o| o != op)
        .skip(1)
        .any(|&later| !declared(plan, op, later));
    let samples = if exposed {
        exposed_runs
    } else {
        counts.failed_first
    };
    if !harmed.is_empty() {
        let evidence = format!(
            "non-critical, yet its failure makes later operations fail: {}",
            harmed.join("; ")
        );
        (Verdict::Contradicted, samples, evidence)
    } else if samples < min_samples {
        let evidence = format!(
            "its failure was followed by later operations in {samples} runs; {min_samples} needed"
        );
        (Verdict::Inconclusive, samples, evidence)
    } else {
        let evidence = format!(
            "its failure was followed by later operations in {samples} runs; none failed more often than its baseline"
        );
        (Verdict::Supported, samples, evidence)
    }
}

/// Evidence about a critical operation: it blocks the gated operations, as the legacy loop did;
/// the data can only show it runs after a failure it needs and is not gated on it.
fn critical(
    name: &str,
    counts: &scan::OpCounts,
    dependencies: &[Pair],
    min_samples: u64,
) -> (Verdict, u64, String) {
    let executions = counts.executions_real + counts.executions_dry_run;
    let exposed: Vec<String> = dependencies
        .iter()
        .filter(|d| d.later == name)
        .map(|d| {
            format!(
                "runs after {} failed and then fails {:.0}% of {} times",
                d.failed,
                d.after.rate * 100.0,
                d.after.runs
            )
        })
        .collect();
    if !exposed.is_empty() {
        let evidence = format!(
            "critical but not gated on what it needs: {}",
            exposed.join("; ")
        );
        (Verdict::Contradicted, executions, evidence)
    } else if executions < min_samples {
        let evidence = format!("executed {executions} times; {min_samples} needed");
        (Verdict::Inconclusive, executions, evidence)
    } else {
        let evidence = format!(
            "executed {executions} times, failed {} times; as critical it blocks the gated operations, as the legacy loop did",
            counts.failures_real + counts.failures_dry_run
        );
        (Verdict::Supported, executions, evidence)
    }
}

fn verdict(
    plan: &ReconcilePlan,
    op: OpId,
    c: &PlanCounts,
    exposed: &[u64],
    dependencies: &[Pair],
    min_samples: u64,
) -> VerdictReport {
    let name = plan.name_of(op);
    let category = plan.operation(op).category();
    let counts = &c.ops[op.index()];
    let (verdict, samples, evidence) = match category {
        Category::NonCritical => non_critical(
            plan,
            op,
            counts,
            exposed[op.index()],
            dependencies,
            min_samples,
        ),
        Category::Critical => critical(name, counts, dependencies, min_samples),
    };
    // A non-critical operation that fails after a failure it does not depend on is misclassified
    // on its own side too: its gate or dependsOn is missing.
    let from: Vec<&str> = dependencies
        .iter()
        .filter(|d| d.later == name)
        .map(|d| d.failed.as_str())
        .collect();
    let (verdict, evidence) = if category == Category::NonCritical
        && verdict != Verdict::Contradicted
        && !from.is_empty()
    {
        (
            Verdict::Contradicted,
            format!(
                "{evidence}; and it fails after {} failed, which it does not depend on in the plan",
                from.join(", ")
            ),
        )
    } else {
        (verdict, evidence)
    };
    VerdictReport {
        operation: name.to_owned(),
        claim: category.as_str(),
        verdict,
        samples,
        evidence,
    }
}

fn readiness(
    plan: &ReconcilePlan,
    c: &PlanCounts,
    verdicts: &[VerdictReport],
    dependencies: &[Pair],
    min_samples: u64,
) -> Vec<GroupReport> {
    let mut groups: Vec<(String, Vec<OpId>)> = plan
        .groups()
        .iter()
        .map(|g| (g.name().to_owned(), g.operations().as_slice().to_vec()))
        .collect();
    if !groups.iter().any(|(g, _)| g == "all") {
        groups.push(("all".to_owned(), plan.phased_order().to_vec()));
    }
    groups
        .into_iter()
        .map(|(group, ops)| {
            let names: Vec<&str> = ops.iter().map(|&o| plan.name_of(o)).collect();
            let mut not_ready = Vec::new();
            let mut inconclusive = Vec::new();
            if c.guard_refusals > 0 {
                not_ready.push(format!(
                    "{} shadow guard refusals: the candidate tried to persist a write",
                    c.guard_refusals
                ));
            }
            for v in verdicts
                .iter()
                .filter(|v| names.contains(&v.operation.as_str()))
            {
                match v.verdict {
                    Verdict::Contradicted => not_ready.push(format!(
                        "{} {}: {}",
                        v.operation,
                        v.verdict.as_str(),
                        v.evidence
                    )),
                    Verdict::Inconclusive => inconclusive.push(format!(
                        "{} {}: {}",
                        v.operation,
                        v.verdict.as_str(),
                        v.evidence
                    )),
                    Verdict::Supported => {}
                }
            }
            for d in dependencies
                .iter()
                .filter(|d| names.contains(&d.failed.as_str()) || names.contains(&d.later.as_str()))
            {
                not_ready.push(format!(
                    "undeclared ordering dependency: {} fails after {} failed ({:.0}% vs {:.1}%)",
                    d.later,
                    d.failed,
                    d.after.rate * 100.0,
                    d.baseline.rate * 100.0
                ));
            }
            for &op in &ops {
                let counts = &c.ops[op.index()];
                if counts.newly_blocked > 0 {
                    not_ready.push(format!(
                        "{} newly blocked {} times (it ran in the control)",
                        plan.name_of(op),
                        counts.newly_blocked
                    ));
                }
                if counts.newly_blocked_by > 0 {
                    not_ready.push(format!(
                        "{}'s failure newly blocked operations the control ran {} times",
                        plan.name_of(op),
                        counts.newly_blocked_by
                    ));
                }
            }
            if c.reconciles.max(c.step_reconciles) < min_samples {
                inconclusive.push(format!(
                    "{} reconciles; {min_samples} needed",
                    c.reconciles.max(c.step_reconciles)
                ));
            }
            let (readiness, reasons) = if !not_ready.is_empty() {
                (Readiness::NotReady, not_ready)
            } else if !inconclusive.is_empty() {
                (Readiness::Inconclusive, inconclusive)
            } else {
                (Readiness::Ready, Vec::new())
            };
            GroupReport {
                group,
                operations: names.into_iter().map(str::to_owned).collect(),
                readiness,
                reasons,
            }
        })
        .collect()
}

pub(super) fn judge(
    plan: &ReconcilePlan,
    c: &PlanCounts,
    other: u64,
    min_samples: u64,
    z: f64,
) -> PlanReport {
    let n = plan.len();
    let (all_pairs, exposed) = pairs(plan, c, min_samples, z);
    let dependencies: Vec<Pair> = all_pairs.iter().filter(|p| p.dependency).cloned().collect();
    let verdicts: Vec<VerdictReport> = plan
        .phased_order()
        .iter()
        .map(|&op| verdict(plan, op, c, &exposed, &dependencies, min_samples))
        .collect();
    let mut unblocked = Vec::new();
    for &x in plan.phased_order() {
        for &y in plan.phased_order() {
            let r = c.unblocked[x.index() * n + y.index()];
            if r.runs > 0 {
                unblocked.push(Unblocked {
                    first_failure: plan.name_of(x).to_owned(),
                    operation: plan.name_of(y).to_owned(),
                    unblocked: r.runs,
                    succeeded: r.runs - r.failures,
                });
            }
        }
    }
    PlanReport {
        plan: plan.name().to_owned(),
        plan_hash: plan.hash().to_hex(),
        reconciles: c.reconciles.max(c.step_reconciles),
        other_version_rows: other,
        guard_refusals: c.guard_refusals,
        unknown_operations: c
            .unknown_operations
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect(),
        operations: plan
            .phased_order()
            .iter()
            .map(|&op| operation_report(plan, op, &c.ops[op.index()]))
            .collect(),
        readiness: readiness(plan, c, &verdicts, &dependencies, min_samples),
        pairs: all_pairs,
        dependencies,
        unblocked,
        verdicts,
    }
}
