//! The offline analyzer: reads the Parquet dataset and judges the plan's classification
//! (verdicts per operation), finds ordering dependencies the plan does not declare, and says
//! whether each rollout group is ready to enforce. Output formats: [`render`]; the JSON is
//! documented in `docs/analyze.md`.

mod judge;
pub mod render;
pub mod scan;
pub mod stats;
pub mod suggest;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::plan::ReconcilePlan;
use scan::Skipped;
use stats::Interval;

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
        .map(|((plan, c), &other)| judge::judge(plan, c, other, settings.min_samples, z))
        .collect();
    if reports.is_empty() {
        let mut found: Vec<String> = counts
            .unknown_plans
            .iter()
            .map(|(k, v)| format!("{v} rows of plan {k}"))
            .collect();
        for (plan, other) in plans.iter().zip(&counts.other_versions) {
            if *other > 0 {
                found.push(format!(
                    "{other} rows of another version of plan {}",
                    plan.name()
                ));
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
