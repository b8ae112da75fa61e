//! The offline analyzer: reads the Parquet dataset and judges the plan's classification
//! (verdicts per operation), finds ordering dependencies the plan does not declare, and says
//! whether each rollout group is ready to enforce. Output formats: [`render`]; the JSON is
//! documented in `docs/analyze.md`.
//!
//! Layer 5 of the crate (docs/design.md, "Layers"): builds on [`dataset`](crate::dataset),
//! [`engine`](crate::engine), [`flag`](crate::flag), [`plan`](crate::plan), [`vocab`](crate::vocab);
//! nothing here may use a module of its layer or above.

pub mod answer;
pub mod clusters;
pub mod conflicts;
pub mod counts;
mod entry;
mod join;
mod judge;
pub mod noise;
pub mod pairs;
mod readiness;
pub mod render;
pub mod scan;
mod select;
pub mod stats;
pub mod suggest;
pub mod writes;

pub use entry::{analyze, analyze_at};

use std::path::PathBuf;

use serde::Serialize;

use scan::Skipped;
use stats::Interval;

/// The JSON document's schema identifier; bumped on any incompatible change (v2: evidence is
/// counted in objects, verdicts and readiness carry reason codes).
pub const SCHEMA: &str = "shadow-reconciler.io/analysis/v2";

/// How the analysis judges.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Fewer objects than this make a verdict `inconclusive` (and a pair undetectable).
    pub min_samples: u64,
    /// Confidence of the Wilson intervals (two-sided).
    pub confidence: f64,
    /// Threads reading files.
    pub threads: usize,
    /// Only these clusters' data (empty: every cluster's).
    pub clusters: Vec<String>,
    /// Only the reconciles that started at this time or later (µs since the Unix epoch); every
    /// reconcile when `None`.
    pub since_us: Option<i64>,
}

impl Default for Settings {
    /// 30 objects, 99% intervals (a plan has hundreds of operation pairs: 95% would raise false
    /// alarms by chance alone), one thread per core.
    fn default() -> Self {
        Self {
            min_samples: 30,
            confidence: 0.99,
            threads: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            clusters: Vec::new(),
            since_us: None,
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
    /// `--group` names no rollout group of the analysed plans.
    #[error("--group {selector}: {why}; the analysed groups are: {known}")]
    UnknownGroup {
        /// What was asked for.
        selector: String,
        /// Why it matches nothing.
        why: String,
        /// `PLAN/GROUP` of every group analysed.
        known: String,
    },
    /// `--cluster` names a cluster the dataset does not hold.
    #[error("--cluster {cluster}: {dir} holds no data of this cluster; it holds: {known}")]
    UnknownCluster {
        /// What was asked for.
        cluster: String,
        /// The dataset.
        dir: PathBuf,
        /// The clusters it holds.
        known: String,
    },
    /// Nothing to analyse: no rows of any given plan.
    #[error("{dir}: no rows of the plans {plans:?} (found: {found}){hint}")]
    NoData {
        /// The directory.
        dir: PathBuf,
        /// The plans asked for.
        plans: Vec<String>,
        /// What the directory holds instead.
        found: String,
        /// What to do about it: pass the plan the data was recorded with (empty when the
        /// directory holds no rows of any plan).
        hint: String,
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
    /// `legacy` or `phased` when the operation exists in that code path only, else `None`
    /// (both paths).
    pub only: Option<crate::vocab::CodePath>,
    /// Its phase (`None` for an operation of the legacy path only: the phased model has none).
    pub phase: Option<u32>,
    /// Its category in the plan (`None` for an operation of the legacy path only).
    pub category: Option<&'static str>,
    /// Executions, real and dry-run (reused results are not executions).
    pub executions: u64,
    /// Real executions (the control's writes).
    pub executions_real: u64,
    /// Dry-run executions (the candidate's).
    pub executions_dry_run: u64,
    /// Failed executions.
    pub failures: u64,
    /// Failed real executions (the control's failures).
    pub failures_real: u64,
    /// Failed dry-run executions.
    pub failures_dry_run: u64,
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
    /// Reconciles where the candidate ran it and the control did not (the records' `unblocked`).
    pub unblocked: u64,
    /// Of those, dry-run and succeeded.
    pub unblocked_succeeded: u64,
    /// Of those, dry-run and failed.
    pub unblocked_failed: u64,
    /// Of those, not simulated (`shadow: skip`): outcome unknown.
    pub unblocked_not_simulated: u64,
    /// Objects in which it failed at least once (control or candidate).
    pub failed_objects: u64,
}

/// An ordering pair: `later` executed after `failed` failed earlier in the same run.
// The flags are fields of the JSON document, each documented there; an enum would hide them.
#[allow(clippy::struct_excessive_bools)]
#[derive(Clone, Debug, Serialize)]
pub struct Pair {
    /// The operation that failed first.
    pub failed: String,
    /// The operation that ran after it.
    pub later: String,
    /// `later`'s failure rate after `failed` failed (every other earlier failure explained by
    /// it), over objects: each object's first such observation.
    pub after: Interval,
    /// `later`'s failure rate with nothing failed before it, over objects: each object's first.
    pub baseline: Interval,
    /// Whether the intervals separate (after above baseline).
    pub separated: bool,
    /// Whether the plan declares `later` dependent on `failed`.
    pub declared: bool,
    /// Separated, at least `min_samples` objects on each side, and not declared: a detected
    /// ordering dependency.
    pub dependency: bool,
    /// Distinct namespaces of the objects in which `later` failed after `failed`.
    pub after_failed_namespaces: u64,
    /// Every failure after `failed` comes from one namespace while the plan's objects span
    /// several: a cause shared within that namespace would look the same.
    pub concentrated: bool,
}

/// The control failed first at `first_failure`; the candidate ran `operation`, which the control
/// did not.
#[derive(Clone, Debug, Serialize)]
pub struct Unblocked {
    /// The control's first failure (`None`: the control failed nowhere, yet did not run the
    /// operation: a step it left unknown).
    pub first_failure: Option<String>,
    /// The operation the candidate ran.
    pub operation: String,
    /// How often.
    pub unblocked: u64,
    /// How often it succeeded there.
    pub succeeded: u64,
}

/// Why a verdict is what it is: one code per verdict (documented in `docs/analyze.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// Contradicted: non-critical, yet a detected dependency starts at it (its failure makes a
    /// later operation fail).
    HarmsLater,
    /// Contradicted: it fails after a failure it does not depend on in the plan (a detected
    /// dependency ends at it).
    UndeclaredDependency,
    /// Supported: non-critical, and in enough objects later operations ran after its failure
    /// without failing more often than their baselines.
    FailureHarmless,
    /// Supported: non-critical, it failed in enough objects, and every operation after it in
    /// phased order depends on it, so its failure cannot block anything else.
    NothingToBlock,
    /// Supported: critical, and in enough objects it failed under the candidate or ran after
    /// another failure, with no undeclared dependency found.
    Exercised,
    /// Inconclusive: the claim was never tested (no failure of it observed, and for a critical
    /// operation no run after another failure either).
    NotExercised,
    /// Inconclusive: it failed only where the candidate's retry on conflict would have succeeded,
    /// so under the candidate its failure was not observed often enough.
    ResolvedByRetry,
    /// Inconclusive: the claim was tested in fewer than `min_samples` objects.
    TooFewObjects,
}

impl Reason {
    /// The code in every format.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::HarmsLater => "harms-later",
            Self::UndeclaredDependency => "undeclared-dependency",
            Self::FailureHarmless => "failure-harmless",
            Self::NothingToBlock => "nothing-to-block",
            Self::Exercised => "exercised",
            Self::NotExercised => "not-exercised",
            Self::ResolvedByRetry => "resolved-by-retry",
            Self::TooFewObjects => "too-few-objects",
        }
    }
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
    /// Why, as a code.
    pub reason: Reason,
    /// Objects whose observations test the claim (not those it failed in: `failed_objects`).
    pub objects: u64,
    /// Objects in which it failed, in the control or the candidate.
    pub failed_objects: u64,
    /// More objects testing the claim needed before the verdict can be other than inconclusive
    /// (0 when it is not inconclusive).
    pub objects_needed: u64,
    /// Why, in one sentence, with the numbers that decided it.
    pub evidence: String,
}

/// What a group's readiness rests on: one finding per fact (documented in `docs/analyze.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingCode {
    /// Not ready: an operation fails after another fails without depending on it.
    UndeclaredDependency,
    /// Not ready: a non-critical operation's failure makes later operations fail.
    HarmsLater,
    /// A notice, whatever the readiness: the candidate blocked operations the control ran (what
    /// a gate or a dependency asks for; enforcing changes it).
    NewlyBlocked,
    /// Not ready: the shadow guard refused a write of the candidate.
    GuardRefusals,
    /// Inconclusive: a member's claim was tested in too few objects.
    TooFewObjects,
    /// Inconclusive: a member's claim was never tested; enforcing changes nothing seen so far.
    NotExercised,
    /// Inconclusive: a member failed only where the candidate's retry resolved the conflict.
    ResolvedByRetry,
    /// Inconclusive: the memory bound left failing runs out of the ordering pairs.
    RunsNotKept,
    /// Not ready: the candidate's code of a member writes differently from the legacy code, and
    /// the plan does not declare the difference intended.
    UnexpectedWrites,
    /// A notice: a member's candidate code writes differently, as the plan declares.
    IntendedWrites,
    /// A notice: a member of the phased path only (`only: phased`), which enforcing adds.
    PhasedOnly,
    /// A notice in every group: an operation of the legacy path only, which enforcing drops.
    LegacyOnly,
    /// A notice, from mode `calibrate`: a member's own code writes fields with other values
    /// from one run to the next; the fix declares them in `compare.volatile`.
    NoisyFields,
    /// A notice, from mode `calibrate`: a member's own code writes an object in one run and not
    /// in the next (or deletes it): the comparison cannot be trusted for it.
    UnstableWrites,
}

impl FindingCode {
    /// Whether its fix is a plan change that `analyze --suggest` writes (a dependency, a
    /// category, a declared write difference); the other findings' fixes are advice.
    #[must_use]
    pub const fn edits_plan(self) -> bool {
        matches!(
            self,
            Self::UndeclaredDependency
                | Self::HarmsLater
                | Self::UnexpectedWrites
                | Self::NoisyFields
        )
    }
}

/// One fact behind a group's readiness.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    /// What kind of fact.
    pub code: FindingCode,
    /// The operations concerned (for a dependency: the one that failed, then the later one).
    pub operations: Vec<String>,
    /// The numbers, in one sentence.
    pub evidence: String,
    /// What fixes it: for the findings whose code edits the plan
    /// ([`FindingCode::edits_plan`]), the plan change `--suggest` writes; for the others, advice.
    pub fix: Option<String>,
    /// How to get the evidence that is missing, for inconclusive findings.
    pub next_step: Option<String>,
    /// More objects needed, for `too-few-objects` (null otherwise).
    pub objects_needed: Option<u64>,
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
    /// The readiness and what to do about it, in one sentence.
    pub summary: String,
    /// What it rests on: the findings that stop it first, then what is open, then notices (only
    /// notices when ready).
    pub findings: Vec<Finding>,
}

/// The analysis of one plan.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PlanReport {
    /// The plan's name.
    pub plan: String,
    /// The plan's hash: only rows recorded under it are analysed.
    pub plan_hash: crate::plan::PlanHash,
    /// Reconciles (those cut short before they finished are counted apart, in `cancelled`).
    pub reconciles: u64,
    /// Reconciles cut short before they finished (the process's shutdown, a cancelled
    /// context): counted, never a failure or a write difference, nothing else of them read.
    pub cancelled: u64,
    /// Reconciles (among `reconciles`) whose control ran alone, their comparison skipped: the
    /// shadow's budget spent, or the shadow paused under load. The candidate's figures rest on
    /// the others.
    pub comparisons_skipped: counts::Skipped,
    /// Distinct objects (kind, namespace, name) reconciled: the unit of evidence.
    pub objects: u64,
    /// Rounds of the pairs' fixpoint.
    pub rounds: u32,
    /// Whether the rounds reached a fixpoint (false: they cycled, see `docs/analyze.md`).
    pub rounds_converged: bool,
    /// Runs with a failure left out of the pairs because too many distinct ones were kept.
    pub runs_not_kept: u64,
    /// Rows recorded under other versions of the plan (not analysed).
    pub other_version_rows: u64,
    /// Shadow guard refusals (must be 0).
    pub guard_refusals: u64,
    /// Step rows naming operations the plan does not have, by name.
    pub unknown_operations: std::collections::BTreeMap<String, u64>,
    /// Per operation of the plan: the phased path's in phased order, then the legacy path's
    /// own (`only: legacy`) in legacy order. Every total of the analysis is the sum of these
    /// rows.
    pub operations: Vec<OperationReport>,
    /// Ordering pairs with observations after a failure.
    pub pairs: Vec<Pair>,
    /// The detected ordering dependencies (also among `pairs`).
    pub dependencies: Vec<Pair>,
    /// First failure x unblocked operation.
    pub unblocked: Vec<Unblocked>,
    /// Per operation that met a 409 in the control: its conflicts, what the candidate's
    /// re-evaluations of them would have done, and how long the control took to recover.
    pub conflicts: Vec<conflicts::ConflictReport>,
    /// What the candidate's code would have written differently, per operation and kind of
    /// difference (`writes` table).
    pub writes: Vec<writes::WriteReport>,
    /// What the control's code wrote differently from itself in mode `calibrate`: the
    /// comparison's noise.
    pub noise: Vec<noise::NoiseReport>,
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
    /// The answer first: every group's readiness, the plan edits that fix what is not ready,
    /// the next steps for what is inconclusive ([`answer`]).
    pub answer: answer::Answer,
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
    /// Per cluster whose data was read (one entry when the data is one cluster's: the whole),
    /// its readiness judged on its own data. The fleet's verdicts (`plans`) count an object of
    /// one cluster apart from a namesake in another.
    pub clusters: Vec<clusters::ClusterReport>,
    /// The rollout driver's record (`table=rollouts`): every evaluation of every rollout's
    /// step, oldest first; absent when no driver wrote to the dataset.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rollouts: Vec<crate::dataset::rollouts::Row>,
}
