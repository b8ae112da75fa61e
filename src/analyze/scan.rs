//! Reads the dataset and counts: one pass over the `steps` table (reconcile by reconcile) and one
//! over `reconciles`, files in parallel, each file counted on its own and merged only once it was
//! read to the end, so a corrupt file contributes nothing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::UInt32Type;
use arrow_array::{Array, RecordBatch};

use crate::dataset::{Table, reader};
use crate::outcome::ErrorClass;
use crate::plan::ReconcilePlan;

/// Columns of `steps` the analysis reads.
pub const STEP_COLUMNS: [&str; 9] = [
    "reconcile_id",
    "plan",
    "plan_hash",
    "policy",
    "seq",
    "operation",
    "execution",
    "outcome",
    "error_class",
];
/// Plus, for blocked and skipped steps, who blocked them.
const BLOCKED_BY: &str = "blocked_by";
/// Columns of `reconciles` the analysis reads.
pub const RECONCILE_COLUMNS: [&str; 3] = ["plan", "plan_hash", "guard_refusals"];

/// Counts of one operation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpCounts {
    /// Executed with real writes.
    pub executions_real: u64,
    /// Executed through the dry-run client.
    pub executions_dry_run: u64,
    /// Failures among the real executions.
    pub failures_real: u64,
    /// Failures among the dry-run executions.
    pub failures_dry_run: u64,
    /// Failures (real or dry-run) by error class, in `ErrorClass::ALL` order.
    pub by_class: [u64; 11],
    /// Reconciles whose control failed first at this operation.
    pub first_failure: u64,
    /// Control steps skipped or blocked by this operation's failure.
    pub blocked_in_control: u64,
    /// Of those, run by the candidate.
    pub blocked_then_run: u64,
    /// Of those, succeeded in the candidate.
    pub blocked_then_succeeded: u64,
    /// Runs in which it was the first failure.
    pub failed_first: u64,
    /// Times it ran in the control and was blocked in the candidate.
    pub newly_blocked: u64,
    /// Times its failure blocked, in the candidate, an operation the control ran.
    pub newly_blocked_by: u64,
}

/// Runs and failures of an operation in some condition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rate {
    /// Observations.
    pub runs: u64,
    /// Failures among them.
    pub failures: u64,
}

impl Rate {
    fn add(&mut self, failed: bool) {
        self.add_times(failed, 1);
    }
    /// Adds `times` observations, all failed or all not.
    pub fn add_times(&mut self, failed: bool, times: u64) {
        self.runs += times;
        self.failures += if failed { times } else { 0 };
    }
    fn merge(&mut self, other: Self) {
        self.runs += other.runs;
        self.failures += other.failures;
    }
}

/// Everything counted for one plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanCounts {
    /// Operations, as in the plan.
    pub ops: Vec<OpCounts>,
    /// Reconciles (rows of `reconciles`).
    pub reconciles: u64,
    /// Reconciles seen in `steps`.
    pub step_reconciles: u64,
    /// Shadow guard refusals.
    pub guard_refusals: u64,
    /// `baseline[y]`: y executed with nothing failed before it in the run.
    pub baseline: Vec<Rate>,
    /// Every distinct run that had a failure, as its [signature](Signature), with how often it
    /// occurred: the ordering pairs are judged from these.
    pub runs: HashMap<Signature, u64>,
    /// Runs with a failure not kept in `runs` because [`MAX_SIGNATURES`] distinct ones were.
    pub runs_not_kept: u64,
    /// `unblocked[x * n + y]`: the control failed first at x, the candidate ran y (which the
    /// control did not), and how often y succeeded there.
    pub unblocked: Vec<Rate>,
    /// Step rows naming an operation the plan does not have.
    pub unknown_operations: HashMap<String, u64>,
}

/// The distinct runs kept per plan; real data repeats a few failure patterns, so this bounds
/// memory without losing any in practice (what is not kept is counted).
pub const MAX_SIGNATURES: usize = 200_000;

/// A run reduced to what ordering needs: in decision order, each step that executed (real or
/// dry-run) or failed, as `op << 2 | state` with state 0 executed and succeeded, 1 executed and
/// failed, 2 failed without executing (the candidate reusing the control's failure).
pub type Signature = Box<[u16]>;

/// A step of a signature.
pub const EXECUTED_OK: u16 = 0;
/// A step of a signature.
pub const EXECUTED_FAILED: u16 = 1;
/// A step of a signature.
pub const REUSED_FAILED: u16 = 2;

impl PlanCounts {
    fn keep(&mut self, signature: Signature, n: u64) {
        if self.runs.len() < MAX_SIGNATURES || self.runs.contains_key(&signature) {
            *self.runs.entry(signature).or_default() += n;
        } else {
            self.runs_not_kept += n;
        }
    }

    fn new(n: usize) -> Self {
        Self {
            ops: vec![OpCounts::default(); n],
            reconciles: 0,
            step_reconciles: 0,
            guard_refusals: 0,
            baseline: vec![Rate::default(); n],
            runs: HashMap::new(),
            runs_not_kept: 0,
            unblocked: vec![Rate::default(); n * n],
            unknown_operations: HashMap::new(),
        }
    }

    fn merge(&mut self, other: Self) {
        for (a, b) in self.ops.iter_mut().zip(other.ops) {
            a.executions_real += b.executions_real;
            a.executions_dry_run += b.executions_dry_run;
            a.failures_real += b.failures_real;
            a.failures_dry_run += b.failures_dry_run;
            for (x, y) in a.by_class.iter_mut().zip(b.by_class) {
                *x += y;
            }
            a.first_failure += b.first_failure;
            a.blocked_in_control += b.blocked_in_control;
            a.blocked_then_run += b.blocked_then_run;
            a.blocked_then_succeeded += b.blocked_then_succeeded;
            a.failed_first += b.failed_first;
            a.newly_blocked += b.newly_blocked;
            a.newly_blocked_by += b.newly_blocked_by;
        }
        self.reconciles += other.reconciles;
        self.step_reconciles += other.step_reconciles;
        self.guard_refusals += other.guard_refusals;
        for (dst, src) in [
            (&mut self.baseline, other.baseline),
            (&mut self.unblocked, other.unblocked),
        ] {
            for (a, b) in dst.iter_mut().zip(src) {
                a.merge(b);
            }
        }
        for (signature, n) in other.runs {
            self.keep(signature, n);
        }
        self.runs_not_kept += other.runs_not_kept;
        for (k, v) in other.unknown_operations {
            *self.unknown_operations.entry(k).or_default() += v;
        }
    }
}

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

/// Counts every file of `dir` against `plans` on `threads` threads.
///
/// # Panics
/// If a counting thread panicked (a bug), rather than return partial counts.
pub fn scan(
    dir: &Path,
    plans: &[ReconcilePlan],
    threads: usize,
) -> Result<Counts, reader::ReadError> {
    let mut files: Vec<(Table, PathBuf)> = Vec::new();
    for table in Table::ALL {
        files.extend(reader::files(dir, table)?.into_iter().map(|f| (table, f)));
    }
    let threads = threads.clamp(1, files.len().max(1));
    let hashes: Vec<String> = plans.iter().map(|p| p.hash().to_hex()).collect();
    let ctx = Ctx { plans, hashes };
    let mut total = Counts::new(plans);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let files = &files;
                let ctx = &ctx;
                scope.spawn(move || {
                    let mut mine = Counts::new(ctx.plans);
                    for (table, path) in files.iter().skip(t).step_by(threads) {
                        let mut counts = Counts::new(ctx.plans);
                        let result = match table {
                            Table::Steps => count_steps(path, ctx, &mut counts),
                            Table::Reconciles => count_reconciles(path, ctx, &mut counts),
                        };
                        match result {
                            Ok(()) => {
                                counts.files_read = 1;
                                mine.merge(counts);
                            }
                            Err(e) => mine.skipped.push(Skipped {
                                path: path.clone(),
                                error: e.to_string(),
                            }),
                        }
                    }
                    mine
                })
            })
            .collect();
        for handle in handles {
            // A panic in a counting thread is a bug; surface it rather than hide data.
            total.merge(handle.join().expect("a counting thread panicked"));
        }
    });
    total.skipped.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(total)
}

struct Ctx<'a> {
    plans: &'a [ReconcilePlan],
    hashes: Vec<String>,
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

#[derive(Clone, Copy, PartialEq, Eq)]
enum Resolved {
    Plan(usize),
    OtherVersion(usize),
    Unknown,
}

fn invalid(path: &Path, message: String) -> reader::ReadError {
    reader::ReadError::Invalid {
        path: path.to_owned(),
        message,
    }
}

fn count_reconciles(path: &Path, ctx: &Ctx, counts: &mut Counts) -> Result<(), reader::ReadError> {
    for batch in reader::open(path, &RECONCILE_COLUMNS)? {
        let batch = batch?;
        let plan = string_column(path, &batch, "plan")?;
        let hash = string_column(path, &batch, "plan_hash")?;
        let refusals = batch
            .column_by_name("guard_refusals")
            .and_then(|c| c.as_primitive_opt::<UInt32Type>())
            .ok_or_else(|| invalid(path, "column guard_refusals is not uint32".into()))?;
        counts.rows += batch.num_rows() as u64;
        for i in 0..batch.num_rows() {
            match ctx.resolve(plan.value(i), hash.value(i)) {
                Resolved::Plan(p) => {
                    counts.plans[p].reconciles += 1;
                    counts.plans[p].guard_refusals += u64::from(refusals.value(i));
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
}

/// How a row's result was obtained, as far as counting goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exec {
    Real,
    DryRun,
    Reused,
    NotExecuted,
}

impl Row {
    /// Executed now (really or in dry-run), not reused.
    fn executed(&self) -> bool {
        matches!(self.exec, Exec::Real | Exec::DryRun)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Succeeded,
    Failed,
    Blocked,
    Other,
}

/// The rows of the reconcile being assembled.
struct Pending {
    id: String,
    plan: usize,
    rows: Vec<Row>,
}

/// The columns of one `steps` batch.
struct StepBatch<'a> {
    id: &'a arrow_array::StringArray,
    plan: &'a arrow_array::StringArray,
    hash: &'a arrow_array::StringArray,
    policy: &'a arrow_array::StringArray,
    operation: &'a arrow_array::StringArray,
    execution: &'a arrow_array::StringArray,
    outcome: &'a arrow_array::StringArray,
    class: &'a arrow_array::StringArray,
    seq: &'a arrow_array::UInt32Array,
    blocked_by: &'a arrow_array::ListArray,
    blocked_names: &'a arrow_array::StringArray,
}

impl<'a> StepBatch<'a> {
    fn new(path: &Path, batch: &'a RecordBatch) -> Result<Self, reader::ReadError> {
        let col = |name| string_column(path, batch, name);
        let blocked_by = batch
            .column_by_name(BLOCKED_BY)
            .and_then(|c| c.as_list_opt::<i32>())
            .ok_or_else(|| invalid(path, "column blocked_by is not a list".into()))?;
        Ok(Self {
            id: col("reconcile_id")?,
            plan: col("plan")?,
            hash: col("plan_hash")?,
            policy: col("policy")?,
            operation: col("operation")?,
            execution: col("execution")?,
            outcome: col("outcome")?,
            class: col("error_class")?,
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
                .map(crate::plan::OpId::index)
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
                _ => Exec::NotExecuted,
            },
            outcome,
            class: (self.class.is_valid(i))
                .then(|| classes.get(self.class.value(i)).copied())
                .flatten(),
            blocked_by,
        })
    }
}

fn count_steps(path: &Path, ctx: &Ctx, counts: &mut Counts) -> Result<(), reader::ReadError> {
    let mut columns: Vec<&str> = STEP_COLUMNS.to_vec();
    columns.push(BLOCKED_BY);
    let mut pending: Option<Pending> = None;
    let classes: HashMap<&str, usize> = ErrorClass::ALL
        .iter()
        .enumerate()
        .map(|(i, c)| (c.as_str(), i))
        .collect();
    for batch in reader::open(path, &columns)? {
        let batch = batch?;
        counts.rows += batch.num_rows() as u64;
        let b = StepBatch::new(path, &batch)?;
        let mut previous = Resolved::Unknown;
        for i in 0..batch.num_rows() {
            if pending.as_ref().is_some_and(|p| p.id != b.id.value(i)) {
                finish(pending.take(), ctx, counts);
            }
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
                    .get_or_insert_with(|| Pending {
                        id: b.id.value(i).to_owned(),
                        plan: p,
                        rows: Vec::with_capacity(48),
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
    for run in [control, candidate] {
        count_run(run, c);
    }
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
            if let Some(theirs) = in_candidate(y.op).filter(|r| r.exec != Exec::NotExecuted) {
                c.ops[x].blocked_then_run += 1;
                c.ops[x].blocked_then_succeeded += u64::from(theirs.outcome == Outcome::Succeeded);
            }
        }
        for y in candidate.iter().filter(|r| r.exec == Exec::DryRun) {
            let ran_in_control = control.iter().any(|r| r.op == y.op && r.executed());
            if !ran_in_control {
                c.unblocked[x * n + y.op].add(y.outcome == Outcome::Failed);
            }
        }
    }
    // Newly blocked: ran in the control, blocked in the candidate.
    for y in candidate.iter().filter(|r| r.outcome == Outcome::Blocked) {
        if control.iter().any(|r| r.op == y.op && r.executed()) {
            c.ops[y.op].newly_blocked += 1;
            for &x in &y.blocked_by {
                c.ops[x].newly_blocked_by += 1;
            }
        }
    }
}

/// Per-run counts: executions, failures, baselines; and the run's signature when it had a
/// failure (the ordering pairs are judged from the signatures).
fn count_run(run: &[Row], c: &mut PlanCounts) {
    let mut failures_before = 0u32;
    let mut signature: Vec<u16> = Vec::new();
    for r in run {
        let failed = r.outcome == Outcome::Failed;
        if r.executed() {
            let op = &mut c.ops[r.op];
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
            if failures_before == 0 {
                c.baseline[r.op].add(failed);
            }
        }
        if r.executed() || failed {
            let state = match (r.executed(), failed) {
                (true, false) => EXECUTED_OK,
                (true, true) => EXECUTED_FAILED,
                (false, _) => REUSED_FAILED,
            };
            let op = u16::try_from(r.op).unwrap_or(u16::MAX >> 2);
            signature.push(op << 2 | state);
        }
        if failed {
            if failures_before == 0 {
                c.ops[r.op].failed_first += 1;
            }
            failures_before += 1;
        }
    }
    if failures_before > 0 {
        c.keep(signature.into_boxed_slice(), 1);
    }
}
