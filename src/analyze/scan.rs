//! Reads the dataset and counts: one pass over the `steps` table (reconcile by reconcile) and one
//! over `reconciles`, files in parallel, each file counted on its own and merged only once it was
//! read to the end, so a corrupt file contributes nothing. A part's steps rows are joined to its
//! reconciles as they are counted (`join.rs`): a part whose files disagree counts nothing
//! either. What is counted is in [`super::counts`].
//!
//! Over 600 lines: the two passes share the part bookkeeping (pairs, skips, reasons) and the
//! column decoding; apart, each half would export its private row types to the other.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{TimestampMicrosecondType, UInt32Type};
use arrow_array::{Array, RecordBatch};

use super::counts::{
    EXECUTED_FAILED, EXECUTED_OK, First, ObjectCounts, OpCounts, PlanCounts, REUSED_FAILED, RunKey,
    Signature, flag,
};
use super::join::{Roster, Runs};
use crate::dataset::{Location, Table, reader};
use crate::plan::ReconcilePlan;
use crate::vocab::ErrorClass;

/// Columns of `steps` the analysis reads.
pub const STEP_COLUMNS: [&str; 15] = [
    "time",
    "reconcile_id",
    "plan",
    "plan_hash",
    "kind",
    "namespace",
    "name",
    "policy",
    "seq",
    "operation",
    "execution",
    "outcome",
    "error_class",
    "conflict_resolution",
    "blocked_by",
];
/// Columns of `reconciles` the analysis reads (`cancelled`: in parts written since it exists;
/// `reconcile_id`: to join the part's steps rows to it, `join.rs`).
pub const RECONCILE_COLUMNS: [&str; 7] = [
    "time",
    "reconcile_id",
    "plan",
    "plan_hash",
    "guard_refusals",
    "?cancelled",
    "?comparison_skipped",
];

/// A file that could not be read, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    /// The file.
    pub path: PathBuf,
    /// Why it was skipped.
    pub error: String,
}

/// The counts of a whole dataset.
#[derive(Debug)]
pub struct Counts {
    /// Per analysed plan, in the order given.
    pub plans: Vec<PlanCounts>,
    /// Rows (both tables) of plans analysed, under another plan hash: not counted.
    pub other_versions: Vec<u64>,
    /// Rows of plans not given, by plan name.
    pub unknown_plans: HashMap<String, u64>,
    /// Files read to the end.
    pub files_read: u64,
    /// Files skipped.
    pub skipped: Vec<Skipped>,
    /// Rows read (both tables).
    pub rows: u64,
    /// The clusters whose parts were read, sorted; with each, its own counts per plan when there
    /// are several (empty otherwise: the whole is the one cluster's).
    pub clusters: Vec<(String, Option<Vec<PlanCounts>>)>,
}

impl Counts {
    fn new(plans: &[ReconcilePlan]) -> Self {
        Self {
            plans: plans.iter().map(|p| PlanCounts::new(p.len())).collect(),
            other_versions: vec![0; plans.len()],
            unknown_plans: HashMap::new(),
            files_read: 0,
            skipped: Vec::new(),
            rows: 0,
            clusters: Vec::new(),
        }
    }

    fn merge(&mut self, other: Self) {
        for (a, b) in self.plans.iter_mut().zip(other.plans) {
            a.merge(b);
        }
        for (a, b) in self.other_versions.iter_mut().zip(other.other_versions) {
            *a += b;
        }
        for (k, v) in other.unknown_plans {
            *self.unknown_plans.entry(k).or_default() += v;
        }
        self.files_read += other.files_read;
        self.skipped.extend(other.skipped);
        self.rows += other.rows;
    }
}

/// The cluster of a part: its `cluster=NAME` partition directory, or the default cluster for a
/// dataset written before clusters were recorded.
#[must_use]
pub fn cluster_of(path: &Path) -> &str {
    path.components()
        .rev()
        .filter_map(|c| c.as_os_str().to_str())
        .find_map(|c| c.strip_prefix("cluster="))
        .unwrap_or(crate::dataset::encode::DEFAULT_CLUSTER)
}

/// The clusters a dataset holds, sorted, from its parts' paths.
pub fn clusters(location: &Location) -> Result<Vec<String>, reader::ReadError> {
    let mut found: Vec<String> = reader::parts_at(location)?
        .pairs
        .iter()
        .map(|(r, _)| cluster_of(r).to_owned())
        .collect();
    found.sort();
    found.dedup();
    Ok(found)
}

/// [`scan_at`] of a local directory.
pub fn scan(
    dir: &Path,
    plans: &[ReconcilePlan],
    threads: usize,
    only: &[String],
) -> Result<Counts, reader::ReadError> {
    scan_at(&Location::Local(dir.to_owned()), plans, threads, only)
}

/// Counts every file of the dataset at `location` against `plans` on `threads` threads: every
/// cluster's, or those of `only` when it is not empty. With several clusters, an object is one of a cluster (the same
/// name in two clusters is two objects), and each cluster is also counted on its own.
///
/// # Panics
/// If a counting thread panicked (a bug), rather than return partial counts.
pub fn scan_at(
    location: &Location,
    plans: &[ReconcilePlan],
    threads: usize,
    only: &[String],
) -> Result<Counts, reader::ReadError> {
    scan_since(location, plans, threads, only, None)
}

/// [`scan_at`] of the reconciles that started at `since_us` (microseconds since the Unix
/// epoch) or later, every table alike: a reconcile counts whole or not at all.
///
/// # Panics
/// If a counting thread panicked (a bug), rather than return partial counts.
pub fn scan_since(
    location: &Location,
    plans: &[ReconcilePlan],
    threads: usize,
    only: &[String],
    since_us: Option<i64>,
) -> Result<Counts, reader::ReadError> {
    // Only whole parts: a file whose sibling in the other table is missing (a writer died
    // between its two renames) is reported as skipped, never counted. A part counts whole or
    // not at all: when one of its files cannot be read, its sibling is skipped too, so that no
    // reconcile is counted without its steps (or steps without their reconcile).
    let parts = reader::parts_at(location)?;
    let pairs: Vec<(PathBuf, PathBuf)> = parts
        .pairs
        .into_iter()
        .filter(|(r, _)| only.is_empty() || only.iter().any(|c| c == cluster_of(r)))
        .collect();
    let mut names: Vec<String> = pairs
        .iter()
        .map(|(r, _)| cluster_of(r).to_owned())
        .collect();
    names.sort();
    names.dedup();
    let several = names.len() > 1;
    let threads = threads.clamp(1, pairs.len().max(1));
    let hashes: Vec<String> = plans.iter().map(|p| p.hash().to_hex()).collect();
    let ctx = Ctx {
        location,
        plans,
        hashes,
        several,
        since_us: since_us.unwrap_or(i64::MIN),
    };
    let mut total = Counts::new(plans);
    total.skipped.extend(parts.orphans.iter().map(|o| Skipped {
        error: match o.table {
            Table::Reconciles => "part of a rotation: this reconciles file has no steps file of the same name; not counted".to_owned(),
            table => format!(
                "part of a rotation: this {} file has no reconciles file of the same name (a writer stopped between committing them); not counted",
                table.as_str()
            ),
        },
        path: o.path.clone(),
    }));
    let writes = &parts.writes;
    let mut by_cluster: std::collections::BTreeMap<String, Vec<PlanCounts>> =
        std::collections::BTreeMap::new();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let pairs = &pairs;
                let ctx = &ctx;
                scope.spawn(move || {
                    let mut mine = Counts::new(ctx.plans);
                    let mut clusters = std::collections::BTreeMap::new();
                    for (reconciles, steps) in pairs.iter().skip(t).step_by(threads) {
                        let files = (
                            reconciles.as_path(),
                            steps.as_path(),
                            writes.get(reconciles).map(PathBuf::as_path),
                        );
                        count_part(files, ctx, &mut mine, &mut clusters);
                    }
                    (mine, clusters)
                })
            })
            .collect();
        for handle in handles {
            // A panic in a counting thread is a bug; surface it rather than hide data.
            let (mine, clusters) = handle.join().expect("a counting thread panicked");
            total.merge(mine);
            for (name, plans) in clusters {
                merge_plans(&mut by_cluster, name, plans);
            }
        }
    });
    total.skipped.sort_by(|a, b| a.path.cmp(&b.path));
    total.clusters = names
        .into_iter()
        .map(|name| {
            let own = by_cluster.remove(&name);
            (name, own)
        })
        .collect();
    Ok(total)
}

fn merge_plans(
    into: &mut std::collections::BTreeMap<String, Vec<PlanCounts>>,
    cluster: String,
    plans: Vec<PlanCounts>,
) {
    match into.entry(cluster) {
        std::collections::btree_map::Entry::Vacant(v) => {
            v.insert(plans);
        }
        std::collections::btree_map::Entry::Occupied(mut o) => {
            for (a, b) in o.get_mut().iter_mut().zip(plans) {
                a.merge(b);
            }
        }
    }
}

/// Counts one whole part into `into`: every file, or none (each unreadable file skipped with
/// its error, a readable one with the reason it is not counted).
fn count_part(
    (reconciles, steps, writes): (&Path, &Path, Option<&Path>),
    ctx: &Ctx,
    into: &mut Counts,
    clusters: &mut std::collections::BTreeMap<String, Vec<PlanCounts>>,
) {
    let mut counts = Counts::new(ctx.plans);
    let cluster = ctx.several.then(|| cluster_of(reconciles));
    let mut roster = Roster::new(reconciles);
    let read = reader::guarded(reconciles, || {
        count_reconciles(reconciles, ctx, &mut counts, &mut roster)
    });
    // Without its reconciles the part is skipped: its steps file is read for its own errors.
    let roster = read.is_ok().then_some(&mut roster);
    let mut results = vec![
        (Table::Reconciles, reconciles, read),
        (
            Table::Steps,
            steps,
            reader::guarded(steps, || {
                count_steps(steps, ctx, (cluster, Runs::new(roster)), &mut counts)
            }),
        ),
    ];
    if let Some(writes) = writes {
        results.push((
            Table::Writes,
            writes,
            reader::guarded(writes, || {
                let resolve = |plan: &str, hash: &str| match ctx.resolve(plan, hash) {
                    Resolved::Plan(p) => Some(p),
                    Resolved::OtherVersion(_) | Resolved::Unknown => None,
                };
                super::writes::count_writes(
                    writes,
                    ctx.location,
                    (ctx.plans, &resolve),
                    (cluster, ctx.since_us),
                    &mut counts.plans,
                )
            }),
        ));
    }
    if results.iter().all(|(_, _, r)| r.is_ok()) {
        counts.files_read = results.len() as u64;
        if let Some(cluster) = cluster {
            merge_plans(clusters, cluster.to_owned(), counts.plans.clone());
        }
        into.merge(counts);
        return;
    }
    for (table, path, result) in results {
        let error = match result {
            Err(e) => e.to_string(),
            Ok(()) => format!(
                "another file of its part cannot be read or disagrees with it, so this {} file is not counted either (a part counts whole or not at all)",
                table.as_str()
            ),
        };
        into.skipped.push(Skipped {
            path: path.to_owned(),
            error,
        });
    }
}

struct Ctx<'a> {
    location: &'a Location,
    plans: &'a [ReconcilePlan],
    hashes: Vec<String>,
    /// Several clusters: objects and namespaces are named with their cluster.
    several: bool,
    /// Rows of reconciles that started before this time (µs) are not counted.
    since_us: i64,
}

impl Ctx<'_> {
    /// The index of the plan a row belongs to, or why not.
    fn resolve(&self, plan: &str, hash: &str) -> Resolved {
        match self.plans.iter().position(|p| p.name() == plan) {
            Some(i) if self.hashes[i] == hash => Resolved::Plan(i),
            Some(i) => Resolved::OtherVersion(i),
            None => Resolved::Unknown,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Resolved {
    Plan(usize),
    OtherVersion(usize),
    Unknown,
}

/// What counting makes of a row: the plan it belongs to, and whether it is counted (not before
/// `--since`; of `reconciles`, not cancelled). A reconcile's steps rows have its fate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Fate {
    resolved: Resolved,
    counted: bool,
}

fn invalid(path: &Path, message: String) -> reader::ReadError {
    reader::ReadError::Invalid {
        path: path.to_owned(),
        message,
    }
}

/// Counts a reconciles file, and lists its reconciles in `roster`.
fn count_reconciles(
    path: &Path,
    ctx: &Ctx,
    counts: &mut Counts,
    roster: &mut Roster<Fate>,
) -> Result<(), reader::ReadError> {
    for batch in reader::open_at(ctx.location, path, &RECONCILE_COLUMNS)? {
        let batch = batch?;
        let id = string_column(path, &batch, "reconcile_id")?;
        roster.reserve(batch.num_rows());
        let plan = string_column(path, &batch, "plan")?;
        let hash = string_column(path, &batch, "plan_hash")?;
        let time = reader::time_column(&batch, path)?;
        let refusals = batch
            .column_by_name("guard_refusals")
            .and_then(|c| c.as_primitive_opt::<UInt32Type>())
            .ok_or_else(|| invalid(path, "column guard_refusals is not uint32".into()))?;
        let cancelled = match batch.column_by_name("cancelled") {
            Some(c) => Some(
                c.as_boolean_opt()
                    .ok_or_else(|| invalid(path, "column cancelled is not boolean".into()))?,
            ),
            None => None,
        };
        let skipped = match batch.column_by_name("comparison_skipped") {
            Some(c) => Some(c.as_string_opt::<i32>().ok_or_else(|| {
                invalid(
                    path,
                    "column comparison_skipped is not a string column".into(),
                )
            })?),
            None => None,
        };
        counts.rows += batch.num_rows() as u64;
        for i in 0..batch.num_rows() {
            let resolved = ctx.resolve(plan.value(i), hash.value(i));
            let cancelled = cancelled.is_some_and(|c| c.value(i));
            let before = time.value(i) < ctx.since_us;
            let counted = !(before || cancelled);
            roster.add(id.value(i), Fate { resolved, counted });
            if before {
                continue;
            }
            match resolved {
                Resolved::Plan(p) if cancelled => {
                    counts.plans[p].cancelled += 1;
                }
                Resolved::Plan(p) => {
                    counts.plans[p].reconciles += 1;
                    counts.plans[p].guard_refusals += u64::from(refusals.value(i));
                    if let Some(reason) = skipped
                        .filter(|c| c.is_valid(i))
                        .and_then(|c| c.value(i).parse().ok())
                    {
                        counts.plans[p].skipped.add(reason);
                    }
                }
                Resolved::OtherVersion(p) => counts.other_versions[p] += 1,
                Resolved::Unknown => {
                    *counts
                        .unknown_plans
                        .entry(plan.value(i).to_owned())
                        .or_default() += 1;
                }
            }
        }
    }
    Ok(())
}

fn string_column<'a>(
    path: &Path,
    batch: &'a RecordBatch,
    name: &str,
) -> Result<&'a arrow_array::StringArray, reader::ReadError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_string_opt::<i32>())
        .ok_or_else(|| invalid(path, format!("column {name} is not a string column")))
}

/// One step row, decoded to indices.
#[derive(Clone, Debug)]
struct Row {
    control: bool,
    seq: u32,
    op: usize,
    exec: Exec,
    outcome: Outcome,
    class: Option<usize>,
    blocked_by: Vec<usize>,
    /// The candidate's retry on conflict would have succeeded.
    retry_resolved: bool,
    /// The candidate's re-evaluation of a control 409 would have failed too.
    retry_failed: bool,
}

/// How a row's result was obtained, as far as counting goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exec {
    Real,
    DryRun,
    Reused,
    NotSimulated,
    NotExecuted,
}

impl Row {
    /// Executed now (really or in dry-run), not reused.
    fn executed(&self) -> bool {
        matches!(self.exec, Exec::Real | Exec::DryRun)
    }

    /// Executed now and did something: evidence of what the operation does. A step that said
    /// it had nothing to do ran, but says nothing (it is never unblocked, and no observation).
    fn evidence(&self) -> bool {
        self.executed() && self.outcome != Outcome::Idle
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Succeeded,
    Idle,
    Failed,
    Blocked,
    Other,
}

/// The rows of the reconcile being assembled.
struct Pending {
    id: String,
    plan: usize,
    time_us: i64,
    /// `kind/namespace/name`.
    object: String,
    namespace: Option<String>,
    rows: Vec<Row>,
}

/// The columns of one `steps` batch.
struct StepBatch<'a> {
    time: &'a arrow_array::TimestampMicrosecondArray,
    id: &'a arrow_array::StringArray,
    plan: &'a arrow_array::StringArray,
    hash: &'a arrow_array::StringArray,
    kind: &'a arrow_array::StringArray,
    namespace: &'a arrow_array::StringArray,
    name: &'a arrow_array::StringArray,
    policy: &'a arrow_array::StringArray,
    operation: &'a arrow_array::StringArray,
    execution: &'a arrow_array::StringArray,
    outcome: &'a arrow_array::StringArray,
    class: &'a arrow_array::StringArray,
    resolution: &'a arrow_array::StringArray,
    seq: &'a arrow_array::UInt32Array,
    blocked_by: &'a arrow_array::ListArray,
    blocked_names: &'a arrow_array::StringArray,
}

impl<'a> StepBatch<'a> {
    fn new(path: &Path, batch: &'a RecordBatch) -> Result<Self, reader::ReadError> {
        let col = |name| string_column(path, batch, name);
        let blocked_by = batch
            .column_by_name("blocked_by")
            .and_then(|c| c.as_list_opt::<i32>())
            .ok_or_else(|| invalid(path, "column blocked_by is not a list".into()))?;
        Ok(Self {
            time: batch
                .column_by_name("time")
                .and_then(|c| c.as_primitive_opt::<TimestampMicrosecondType>())
                .ok_or_else(|| invalid(path, "column time is not a timestamp in µs".into()))?,
            id: col("reconcile_id")?,
            plan: col("plan")?,
            hash: col("plan_hash")?,
            kind: col("kind")?,
            namespace: col("namespace")?,
            name: col("name")?,
            policy: col("policy")?,
            operation: col("operation")?,
            execution: col("execution")?,
            outcome: col("outcome")?,
            class: col("error_class")?,
            resolution: col("conflict_resolution")?,
            seq: batch
                .column_by_name("seq")
                .and_then(|c| c.as_primitive_opt::<UInt32Type>())
                .ok_or_else(|| invalid(path, "column seq is not uint32".into()))?,
            blocked_names: blocked_by.values().as_string_opt::<i32>().ok_or_else(|| {
                invalid(path, "column blocked_by is not a list of strings".into())
            })?,
            blocked_by,
        })
    }

    /// Row `i` against `plan`; `Err(name)` when the plan has no such operation.
    fn row<'b>(
        &'b self,
        i: usize,
        plan: &ReconcilePlan,
        classes: &HashMap<&str, usize>,
    ) -> Result<Row, &'b str> {
        let op = plan
            .lookup(self.operation.value(i))
            .ok_or(self.operation.value(i))?;
        let outcome = match self.outcome.value(i) {
            "succeeded" => Outcome::Succeeded,
            "idle" => Outcome::Idle,
            "failed" => Outcome::Failed,
            "blocked" | "skipped" => Outcome::Blocked,
            _ => Outcome::Other,
        };
        let blocked_by = if outcome == Outcome::Blocked {
            let offsets = self.blocked_by.value_offsets();
            let start = usize::try_from(offsets[i]).unwrap_or(0);
            let end = usize::try_from(offsets[i + 1]).unwrap_or(start);
            (start..end)
                .filter_map(|j| plan.lookup(self.blocked_names.value(j)))
                .map(crate::vocab::OpId::index)
                .collect()
        } else {
            Vec::new()
        };
        Ok(Row {
            control: self.policy.value(i) == crate::dataset::schema::policy::CONTROL,
            seq: self.seq.value(i),
            op: op.index(),
            exec: match self.execution.value(i) {
                "real" => Exec::Real,
                "dry-run" => Exec::DryRun,
                "reused" => Exec::Reused,
                "not-simulated" => Exec::NotSimulated,
                _ => Exec::NotExecuted,
            },
            outcome,
            class: (self.class.is_valid(i))
                .then(|| classes.get(self.class.value(i)).copied())
                .flatten(),
            blocked_by,
            retry_resolved: self.resolution.is_valid(i)
                && self.resolution.value(i)
                    == crate::engine::ConflictResolution::WouldHaveSucceeded.as_str(),
            retry_failed: self.resolution.is_valid(i)
                && self.resolution.value(i)
                    == crate::engine::ConflictResolution::WouldHaveFailed.as_str(),
        })
    }

    /// The object of row `i`: `kind/namespace/name` (namespace empty when cluster-scoped).
    fn object(&self, i: usize) -> (String, Option<String>) {
        let namespace = self
            .namespace
            .is_valid(i)
            .then(|| self.namespace.value(i).to_owned());
        (
            format!(
                "{}/{}/{}",
                self.kind.value(i),
                namespace.as_deref().unwrap_or(""),
                self.name.value(i)
            ),
            namespace,
        )
    }
}

/// Counts a steps file, run by run, each run's reconcile taken from the part's roster (`runs`);
/// with `cluster`, objects and namespaces are named `CLUSTER/...`.
fn count_steps(
    path: &Path,
    ctx: &Ctx,
    (cluster, mut runs): (Option<&str>, Runs<Fate>),
    counts: &mut Counts,
) -> Result<(), reader::ReadError> {
    let mut pending: Option<Pending> = None;
    let classes: HashMap<&str, usize> = ErrorClass::ALL
        .iter()
        .enumerate()
        .map(|(i, c)| (c.as_str(), i))
        .collect();
    for batch in reader::open_at(ctx.location, path, &STEP_COLUMNS)? {
        let batch = batch?;
        counts.rows += batch.num_rows() as u64;
        let b = StepBatch::new(path, &batch)?;
        let mut previous = Resolved::Unknown;
        for i in 0..batch.num_rows() {
            // Plan lookups are cached: consecutive rows nearly always share the plan.
            let same = i > 0
                && b.plan.value(i) == b.plan.value(i - 1)
                && b.hash.value(i) == b.hash.value(i - 1);
            let resolved = if same {
                previous
            } else {
                ctx.resolve(b.plan.value(i), b.hash.value(i))
            };
            previous = resolved;
            // After the lookup, which caches it for the next row.
            let counted = b.time.value(i) >= ctx.since_us;
            let fate = Fate { resolved, counted };
            // A run is one reconcile: its rows counted together, its reconcile in the roster.
            if runs
                .next(b.id.value(i), fate)
                .map_err(|why| invalid(path, why))?
            {
                finish(pending.take(), ctx, counts);
            }
            if !counted {
                continue;
            }
            let p = match resolved {
                Resolved::Plan(p) => p,
                Resolved::OtherVersion(p) => {
                    counts.other_versions[p] += 1;
                    continue;
                }
                Resolved::Unknown => {
                    *counts
                        .unknown_plans
                        .entry(b.plan.value(i).to_owned())
                        .or_default() += 1;
                    continue;
                }
            };
            match b.row(i, &ctx.plans[p], &classes) {
                Ok(row) => pending
                    .get_or_insert_with(|| {
                        let (mut object, mut namespace) = b.object(i);
                        if let Some(cluster) = cluster {
                            object = format!("{cluster}/{object}");
                            namespace = namespace.map(|n| format!("{cluster}/{n}"));
                        }
                        Pending {
                            id: b.id.value(i).to_owned(),
                            plan: p,
                            time_us: b.time.value(i),
                            object,
                            namespace,
                            rows: Vec::with_capacity(48),
                        }
                    })
                    .rows
                    .push(row),
                Err(unknown) => {
                    *counts.plans[p]
                        .unknown_operations
                        .entry(unknown.to_owned())
                        .or_default() += 1;
                }
            }
        }
    }
    finish(pending, ctx, counts);
    Ok(())
}

/// Counts one reconcile's rows.
fn finish(pending: Option<Pending>, ctx: &Ctx, counts: &mut Counts) {
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
            o.timeline.push(super::conflicts::ControlEvent {
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
