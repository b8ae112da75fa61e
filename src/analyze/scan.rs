//! Reads the dataset and counts: one pass over the `steps` table (reconcile by reconcile) and one
//! over `reconciles`, files in parallel, each file counted on its own and merged only once it was
//! read to the end, so a corrupt file contributes nothing. A part's steps rows are joined to its
//! reconciles as they are counted (`join.rs`): a part whose files disagree counts nothing
//! either. What is counted is in [`super::counts`].
//!
//! This file holds the driver: which parts are read (whole parts, of the clusters asked for), the
//! threads, the merging of their counts, and what the passes share (the plan lookup, a row's
//! fate, column decoding). Its parts:
//!
//! - `reconciles.rs`: the pass over a part's `reconciles` file;
//! - `steps.rs`: the pass over a part's `steps` file, its columns decoded batch by batch;
//! - `row.rs`: one steps row, decoded to indices;
//! - `tally.rs`: one reconcile's rows counted (executions, failures, conflicts, unblocked and
//!   newly blocked operations, the runs' signatures).

mod reconciles;
mod row;
mod steps;
mod tally;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;

use super::counts::PlanCounts;
use super::join::{Roster, Runs};
use crate::dataset::{Location, Table, reader};
use crate::plan::ReconcilePlan;
use reconciles::count_reconciles;
use steps::count_steps;

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
