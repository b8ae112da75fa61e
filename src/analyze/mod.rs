//! The offline analyzer: reads the Parquet dataset and judges the plan's classification
//! (verdicts per operation), finds ordering dependencies the plan does not declare, and says
//! whether each rollout group is ready to enforce. Output formats: [`render`]; the JSON is
//! documented in `docs/analyze.md`.

pub mod render;
pub mod scan;
pub mod stats;
pub mod suggest;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::outcome::{Category, ErrorClass};
use crate::plan::{OpId, ReconcilePlan};
use scan::{PlanCounts, Skipped};
use stats::{Interval, separated, wilson};

/// The JSON document's schema identifier; bumped on any incompatible change.
pub const SCHEMA: &str = "shadow-reconciler.io/analysis/v1";

/// How the analysis judges.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Fewer observations than this make a verdict `inconclusive`.
    pub min_samples: u64,
    /// Confidence of the Wilson intervals (two-sided).
    pub confidence: f64,
    /// Threads reading files.
    pub threads: usize,
}

impl Default for Settings {
    /// 30 samples, 99% intervals (a plan has hundreds of operation pairs: 95% would raise false
    /// alarms by chance alone), one thread per core.
    fn default() -> Self {
        Self {
            min_samples: 30,
            confidence: 0.99,
            threads: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        }
    }
}

/// Errors of the analysis itself (bad files are skipped and reported, not errors).
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// The directory cannot be listed.
    #[error(transparent)]
    Read(#[from] crate::dataset::reader::ReadError),
    /// The directory does not exist.
    #[error("{0}: no such directory")]
    NoDirectory(PathBuf),
    /// Nothing to analyse: no rows of any given plan.
    #[error("{dir}: no rows of the plans {plans:?} (found: {found})")]
    NoData {
        /// The directory.
        dir: PathBuf,
        /// The plans asked for.
        plans: Vec<String>,
        /// What the directory holds instead.
        found: String,
    },
}

/// A verdict on a classification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The data agrees with the claim.
    Supported,
    /// The data contradicts it.
    Contradicted,
    /// Too little data.
    Inconclusive,
}

/// Readiness of a rollout group to enforce.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Readiness {
    /// Nothing in the data stops it.
    Ready,
    /// Too little data to say.
    Inconclusive,
    /// Something in the data stops it.
    NotReady,
}

impl Readiness {
    /// The label in every format.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Inconclusive => "inconclusive",
            Self::NotReady => "not-ready",
        }
    }
    /// The process exit code a pipeline gates on: 0 ready, 1 not ready, 3 inconclusive.
    #[must_use]
    pub const fn exit_code(self) -> u8 {
        match self {
            Self::Ready => 0,
            Self::NotReady => 1,
            Self::Inconclusive => 3,
        }
    }
}

impl Verdict {
    /// The label in every format.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Supported => "supported",
            Self::Contradicted => "contradicted",
            Self::Inconclusive => "inconclusive",
        }
    }
}

/// What the data says about one operation.
#[derive(Clone, Debug, Serialize)]
pub struct OperationReport {
    /// The operation.
    pub operation: String,
    /// Its phase.
    pub phase: u32,
    /// Its category in the plan.
    pub category: &'static str,
    /// Executions, real and dry-run (reused results are not executions).
    pub executions: u64,
    /// Real executions (the control's writes).
    pub executions_real: u64,
    /// Dry-run executions (the candidate's).
    pub executions_dry_run: u64,
    /// Failed executions.
    pub failures: u64,
    /// `failures / executions`.
    pub failure_rate: f64,
    /// Failures by error class (classes that occurred).
    pub failures_by_class: std::collections::BTreeMap<&'static str, u64>,
    /// Reconciles whose control failed first here.
    pub first_failure: u64,
    /// Control steps its failure skipped or blocked.
    pub blocked_in_control: u64,
    /// Of those, run by the candidate.
    pub blocked_then_run_by_candidate: u64,
    /// Of those, succeeded in the candidate.
    pub blocked_then_succeeded_in_candidate: u64,
    /// Runs where it ran in the control and was blocked in the candidate.
    pub newly_blocked: u64,
}

/// An ordering pair: `later` executed after `failed` failed earlier in the same run.
#[derive(Clone, Debug, Serialize)]
pub struct Pair {
    /// The operation that failed first.
    pub failed: String,
    /// The operation that ran after it.
    pub later: String,
    /// `later`'s failure rate in runs whose first failure was `failed`, earlier.
    pub after: Interval,
    /// `later`'s failure rate in runs where nothing failed before it.
    pub baseline: Interval,
    /// Whether the intervals separate (after above baseline).
    pub separated: bool,
    /// Whether the plan declares `later` dependent on `failed`.
    pub declared: bool,
    /// Separated, enough samples, and not declared: a detected ordering dependency.
    pub dependency: bool,
}

/// The control failed first at `first_failure`; the candidate ran `operation`, which the control
/// did not.
#[derive(Clone, Debug, Serialize)]
pub struct Unblocked {
    /// The control's first failure.
    pub first_failure: String,
    /// The operation the candidate ran.
    pub operation: String,
    /// How often.
    pub unblocked: u64,
    /// How often it succeeded there.
    pub succeeded: u64,
}

/// The verdict on one operation's classification.
#[derive(Clone, Debug, Serialize)]
pub struct VerdictReport {
    /// The operation.
    pub operation: String,
    /// The claim judged: its category.
    pub claim: &'static str,
    /// The verdict.
    pub verdict: Verdict,
    /// Observations the verdict rests on.
    pub samples: u64,
    /// Why, in words, with the numbers.
    pub evidence: String,
}

/// A rollout group's readiness to enforce.
#[derive(Clone, Debug, Serialize)]
pub struct GroupReport {
    /// The group (`all` is every operation).
    pub group: String,
    /// Its operations.
    pub operations: Vec<String>,
    /// The readiness.
    pub readiness: Readiness,
    /// What stops it (empty when ready).
    pub reasons: Vec<String>,
}

/// The analysis of one plan.
#[derive(Clone, Debug, Serialize)]
pub struct PlanReport {
    /// The plan's name.
    pub plan: String,
    /// The plan's hash: only rows recorded under it are analysed.
    pub plan_hash: String,
    /// Reconciles.
    pub reconciles: u64,
    /// Rows recorded under other versions of the plan (not analysed).
    pub other_version_rows: u64,
    /// Shadow guard refusals (must be 0).
    pub guard_refusals: u64,
    /// Step rows naming operations the plan does not have, by name.
    pub unknown_operations: std::collections::BTreeMap<String, u64>,
    /// Per operation, in phased order.
    pub operations: Vec<OperationReport>,
    /// Ordering pairs with observations after a failure.
    pub pairs: Vec<Pair>,
    /// The detected ordering dependencies (also among `pairs`).
    pub dependencies: Vec<Pair>,
    /// First failure x unblocked operation.
    pub unblocked: Vec<Unblocked>,
    /// Per operation.
    pub verdicts: Vec<VerdictReport>,
    /// Per rollout group.
    pub readiness: Vec<GroupReport>,
}

/// A whole analysis.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The dataset directory.
    pub dir: PathBuf,
    /// Files read.
    pub files_read: u64,
    /// Files skipped, and why.
    pub files_skipped: Vec<Skipped>,
    /// Rows read.
    pub rows: u64,
    /// Rows of plans not analysed, by name.
    pub unknown_plans: std::collections::BTreeMap<String, u64>,
    /// `min_samples`.
    pub min_samples: u64,
    /// Interval confidence.
    pub confidence: f64,
    /// Per plan.
    pub plans: Vec<PlanReport>,
    /// The worst readiness over every plan and group considered.
    pub readiness: Readiness,
}

/// Analyses `dir` against `plans`.
pub fn analyze(
    dir: &Path,
    plans: &[ReconcilePlan],
    settings: &Settings,
) -> Result<Analysis, AnalyzeError> {
    if !dir.is_dir() {
        return Err(AnalyzeError::NoDirectory(dir.to_owned()));
    }
    let counts = scan::scan(dir, plans, settings.threads)?;
    for s in &counts.skipped {
        tracing::warn!(path = %s.path.display(), error = %s.error, "skipped a Parquet file that cannot be read");
    }
    let z = stats::z_for(settings.confidence);
    let reports: Vec<PlanReport> = plans
        .iter()
        .zip(&counts.plans)
        .zip(&counts.other_versions)
        .filter(|((_, c), _)| c.reconciles > 0 || c.step_reconciles > 0)
        .map(|((plan, c), &other)| judge(plan, c, other, settings.min_samples, z))
        .collect();
    if reports.is_empty() {
        let mut found: Vec<String> = counts
            .unknown_plans
            .iter()
            .map(|(k, v)| format!("{v} rows of plan {k}"))
            .collect();
        for (plan, other) in plans.iter().zip(&counts.other_versions) {
            if *other > 0 {
                found.push(format!("{other} rows of another version of plan {}", plan.name()));
            }
        }
        if found.is_empty() {
            found.push(format!("{} readable files, no rows", counts.files_read));
        }
        return Err(AnalyzeError::NoData {
            dir: dir.to_owned(),
            plans: plans.iter().map(|p| p.name().to_owned()).collect(),
            found: found.join(", "),
        });
    }
    let readiness = reports
        .iter()
        .flat_map(|p| p.readiness.iter().map(|g| g.readiness))
        .max()
        .unwrap_or(Readiness::Inconclusive);
    Ok(Analysis {
        schema: SCHEMA,
        dir: dir.to_owned(),
        files_read: counts.files_read,
        files_skipped: counts.skipped,
        rows: counts.rows,
        unknown_plans: counts.unknown_plans.into_iter().collect(),
        min_samples: settings.min_samples,
        confidence: settings.confidence,
        plans: reports,
        readiness,
    })
}

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

fn pairs(plan: &ReconcilePlan, c: &PlanCounts, min_samples: u64, z: f64) -> Vec<Pair> {
    let n = plan.len();
    let mut pairs = Vec::new();
    for &x in plan.phased_order() {
        for &y in plan.phased_order() {
            let (xi, yi) = (x.index(), y.index());
            let after = c.after[xi * n + yi];
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
    pairs
}

fn verdict(
    plan: &ReconcilePlan,
    op: OpId,
    c: &PlanCounts,
    dependencies: &[Pair],
    min_samples: u64,
) -> VerdictReport {
    let name = plan.name_of(op);
    let category = plan.operation(op).category();
    let counts = &c.ops[op.index()];
    let executions = counts.executions_real + counts.executions_dry_run;
    let (verdict, samples, evidence) = match category {
        Category::NonCritical => {
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
            let exposed = plan.phased_order().iter().skip_while(|&&o| o != op).skip(1).any(|&later| !declared(plan, op, later));
            let samples = if exposed { counts.failed_with_later } else { counts.failed_first };
            if !harmed.is_empty() {
                (
                    Verdict::Contradicted,
                    samples,
                    format!("non-critical, yet its failure makes later operations fail: {}", harmed.join("; ")),
                )
            } else if samples < min_samples {
                (
                    Verdict::Inconclusive,
                    samples,
                    format!("failed first with later operations run {samples} times; {min_samples} needed"),
                )
            } else {
                (
                    Verdict::Supported,
                    samples,
                    format!("failed first {samples} times; no later operation failed more often than its baseline"),
                )
            }
        }
        Category::Critical => {
            let exposed: Vec<String> = dependencies
                .iter()
                .filter(|d| d.later == name)
                .map(|d| format!("runs after {} failed and then fails {:.0}% of {} times", d.failed, d.after.rate * 100.0, d.after.runs))
                .collect();
            if !exposed.is_empty() {
                (
                    Verdict::Contradicted,
                    executions,
                    format!("critical but not gated on what it needs: {}", exposed.join("; ")),
                )
            } else if executions < min_samples {
                (
                    Verdict::Inconclusive,
                    executions,
                    format!("executed {executions} times; {min_samples} needed"),
                )
            } else {
                (
                    Verdict::Supported,
                    executions,
                    format!("executed {executions} times, failed {} times; as critical it blocks the gated operations, as the legacy loop did", counts.failures_real + counts.failures_dry_run),
                )
            }
        }
    };
    // A non-critical operation that runs after a failure it depends on is misclassified on the
    // other side too: its gate or dependsOn is missing.
    let (verdict, evidence) = match (verdict, category) {
        (Verdict::Supported | Verdict::Inconclusive, Category::NonCritical)
            if dependencies.iter().any(|d| d.later == name) =>
        {
            let from: Vec<&str> = dependencies
                .iter()
                .filter(|d| d.later == name)
                .map(|d| d.failed.as_str())
                .collect();
            (
                Verdict::Contradicted,
                format!("{evidence}; and it fails after {} failed, which it does not depend on in the plan", from.join(", ")),
            )
        }
        other => (other.0, evidence),
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
                not_ready.push(format!("{} shadow guard refusals: the candidate tried to persist a write", c.guard_refusals));
            }
            for v in verdicts.iter().filter(|v| names.contains(&v.operation.as_str())) {
                match v.verdict {
                    Verdict::Contradicted => not_ready.push(format!("{} {}: {}", v.operation, v.verdict.as_str(), v.evidence)),
                    Verdict::Inconclusive => inconclusive.push(format!("{} {}: {}", v.operation, v.verdict.as_str(), v.evidence)),
                    Verdict::Supported => {}
                }
            }
            for d in dependencies.iter().filter(|d| names.contains(&d.failed.as_str()) || names.contains(&d.later.as_str())) {
                not_ready.push(format!("undeclared ordering dependency: {} fails after {} failed ({:.0}% vs {:.1}%)", d.later, d.failed, d.after.rate * 100.0, d.baseline.rate * 100.0));
            }
            for &op in &ops {
                let counts = &c.ops[op.index()];
                if counts.newly_blocked > 0 {
                    not_ready.push(format!("{} newly blocked {} times (it ran in the control)", plan.name_of(op), counts.newly_blocked));
                }
                if counts.newly_blocked_by > 0 {
                    not_ready.push(format!("{}'s failure newly blocked operations the control ran {} times", plan.name_of(op), counts.newly_blocked_by));
                }
            }
            if c.reconciles.max(c.step_reconciles) < min_samples {
                inconclusive.push(format!("{} reconciles; {min_samples} needed", c.reconciles.max(c.step_reconciles)));
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

fn judge(plan: &ReconcilePlan, c: &PlanCounts, other: u64, min_samples: u64, z: f64) -> PlanReport {
    let n = plan.len();
    let all_pairs = pairs(plan, c, min_samples, z);
    let dependencies: Vec<Pair> = all_pairs.iter().filter(|p| p.dependency).cloned().collect();
    let verdicts: Vec<VerdictReport> = plan
        .phased_order()
        .iter()
        .map(|&op| verdict(plan, op, c, &dependencies, min_samples))
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
        unknown_operations: c.unknown_operations.iter().map(|(k, v)| (k.clone(), *v)).collect(),
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
