//! What the scan counts for one plan: per operation and per reconcile (what happened, for the
//! tables), and per object (the evidence the judgement rests on: one object is one unit, however
//! often it was reconciled).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// Counts of one operation, over reconciles.
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
    /// Of those, run by the candidate (dry-run).
    pub blocked_then_run: u64,
    /// Of those, succeeded in the candidate.
    pub blocked_then_succeeded: u64,
    /// Reconciles where the candidate ran it (dry-run or not simulated) and the control did not.
    pub unblocked: u64,
    /// Of those, dry-run and succeeded.
    pub unblocked_succeeded: u64,
    /// Of those, dry-run and failed.
    pub unblocked_failed: u64,
    /// Of those, not simulated (`shadow: skip`): outcome unknown.
    pub unblocked_not_simulated: u64,
    /// Times it ran in the control and was blocked in the candidate.
    pub newly_blocked: u64,
}

impl OpCounts {
    fn merge(&mut self, b: &Self) {
        self.executions_real += b.executions_real;
        self.executions_dry_run += b.executions_dry_run;
        self.failures_real += b.failures_real;
        self.failures_dry_run += b.failures_dry_run;
        for (x, y) in self.by_class.iter_mut().zip(b.by_class) {
            *x += y;
        }
        self.first_failure += b.first_failure;
        self.blocked_in_control += b.blocked_in_control;
        self.blocked_then_run += b.blocked_then_run;
        self.blocked_then_succeeded += b.blocked_then_succeeded;
        self.unblocked += b.unblocked;
        self.unblocked_succeeded += b.unblocked_succeeded;
        self.unblocked_failed += b.unblocked_failed;
        self.unblocked_not_simulated += b.unblocked_not_simulated;
        self.newly_blocked += b.newly_blocked;
    }
}

/// The conflict counts of one operation, over reconciles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConflictCounts {
    /// Control steps that failed on a 409.
    pub control_steps: u64,
    /// Of those, re-evaluated by the candidate: it would have succeeded.
    pub would_have_succeeded: u64,
    /// Of those, re-evaluated by the candidate: it would have failed too.
    pub would_have_failed: u64,
    /// Of those, in reconciles where the candidate's outcome of another operation differed from
    /// the control's (it ran what the control did not, or the two outcomes differ).
    pub other_changes: u64,
}

impl ConflictCounts {
    fn merge(&mut self, b: &Self) {
        self.control_steps += b.control_steps;
        self.would_have_succeeded += b.would_have_succeeded;
        self.would_have_failed += b.would_have_failed;
        self.other_changes += b.other_changes;
    }
}

/// An event of an object's control, for its recovery: at `time_us`, operation `op` failed on a
/// 409 (`conflict`) or succeeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ControlEvent {
    /// The reconcile's start, µs since the epoch.
    pub time_us: i64,
    /// The operation.
    pub op: u16,
    /// A 409 (else a success).
    pub conflict: bool,
}

/// Observations and failures among them (reconciles or objects, as the field using it says).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rate {
    /// Observations.
    pub n: u64,
    /// Failures among them.
    pub failures: u64,
}

impl Rate {
    /// Adds one observation.
    pub fn add(&mut self, failed: bool) {
        self.n += 1;
        self.failures += u64::from(failed);
    }
    fn merge(&mut self, other: Self) {
        self.n += other.n;
        self.failures += other.failures;
    }
}

/// When a run happened, to find an object's first observation of something: the reconcile's
/// start, then its id (only to break a tie), then the control before the candidate.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunKey {
    /// The reconcile's start, µs since the epoch.
    pub time_us: i64,
    /// The reconcile's id.
    pub reconcile_id: Arc<str>,
    /// The candidate's run (after the control's of the same reconcile).
    pub candidate: bool,
}

/// An object's first observation of an operation in some condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct First {
    /// The run it was observed in.
    pub key: RunKey,
    /// Whether the operation failed there.
    pub failed: bool,
}

impl First {
    /// Keeps the earlier of `slot` and the observation `(key, failed)`; of two observations of
    /// the same run (a reconcile recorded twice), the failed one, so the choice never depends on
    /// the order the files are read in.
    pub fn offer(slot: &mut Option<Self>, key: &RunKey, failed: bool) {
        match slot {
            Some(f) if *key == f.key => f.failed |= failed,
            Some(f) if *key > f.key => {}
            _ => {
                *slot = Some(Self {
                    key: key.clone(),
                    failed,
                });
            }
        }
    }
}

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

/// Per-operation facts of one object (bits of [`ObjectCounts::flags`]).
pub mod flag {
    /// It failed in some run, control or candidate.
    pub const FAILED: u8 = 1;
    /// It failed in some candidate run (executed there or reused from the control).
    pub const CANDIDATE_FAILED: u8 = 2;
    /// The candidate's retry on conflict would have succeeded where the control met a 409.
    pub const RETRY_RESOLVED: u8 = 4;
    /// It executed (real or dry-run) in some run.
    pub const EXECUTED: u8 = 8;
    /// It ran in the control and the candidate blocked it, in some reconcile.
    pub const NEWLY_BLOCKED: u8 = 16;
    /// The control met a 409 on it (and failed), in some reconcile.
    pub const CONTROL_CONFLICT: u8 = 32;
    /// The candidate's re-evaluation of a control 409 would have failed too, in some reconcile.
    pub const RETRY_FAILED: u8 = 64;
}

/// The evidence of one object (kind, namespace and name) under one plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectCounts {
    /// Its namespace (`None` for cluster-scoped kinds).
    pub namespace: Option<Box<str>>,
    /// Its reconciles.
    pub reconciles: u64,
    /// Per operation, its first execution with nothing failed before it in the run.
    pub baseline: Vec<Option<First>>,
    /// Its distinct runs that had a failure, each with its earliest occurrence.
    pub runs: HashMap<Signature, RunKey>,
    /// Per operation, [`flag`] bits.
    pub flags: Vec<u8>,
    /// The control's 409s, and its successes of the operations the plan retries on conflict:
    /// how long it took to recover (`analyze::conflicts`).
    pub timeline: Vec<ControlEvent>,
}

impl ObjectCounts {
    /// An object of a plan of `n` operations, not yet reconciled.
    #[must_use]
    pub fn new(n: usize, namespace: Option<&str>) -> Self {
        Self {
            namespace: namespace.map(Into::into),
            reconciles: 0,
            baseline: vec![None; n],
            runs: HashMap::new(),
            flags: vec![0; n],
            timeline: Vec::new(),
        }
    }

    /// Whether `flag` is set for operation `op`.
    #[must_use]
    pub fn has(&self, op: usize, flag: u8) -> bool {
        self.flags.get(op).is_some_and(|f| f & flag != 0)
    }
}

/// The distinct (object, run) patterns kept per plan. Real objects repeat a few failure patterns,
/// so this bounds memory without losing any in practice; what is not kept is counted.
pub const MAX_SIGNATURES: usize = 1_000_000;

/// Reconciles whose comparison was skipped (the control ran alone), by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    /// The shadow's request budget was spent.
    pub budget: u64,
    /// The shadow was paused under load.
    pub paused: u64,
    /// The comparison would pair code and the object is outside the paired sample.
    pub sampled_out: u64,
}

impl Skipped {
    /// Counts one skip.
    pub fn add(&mut self, reason: crate::vocab::ComparisonSkip) {
        match reason {
            crate::vocab::ComparisonSkip::Budget => self.budget += 1,
            crate::vocab::ComparisonSkip::Paused => self.paused += 1,
            crate::vocab::ComparisonSkip::SampledOut => self.sampled_out += 1,
        }
    }

    /// Every skip.
    #[must_use]
    pub const fn total(self) -> u64 {
        self.budget + self.paused + self.sampled_out
    }
}

/// Everything counted for one plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanCounts {
    /// Operations, as in the plan.
    pub ops: Vec<OpCounts>,
    /// Reconciles (rows of `reconciles`, without the cancelled ones).
    pub reconciles: u64,
    /// Reconciles cut short before they finished (rows of `reconciles` marked `cancelled`):
    /// counted, nothing else of them.
    pub cancelled: u64,
    /// Reconciles whose control ran alone in a mode with a shadow (`comparison_skipped`),
    /// counted in `reconciles` as well.
    pub skipped: Skipped,
    /// Reconciles seen in `steps`.
    pub step_reconciles: u64,
    /// Shadow guard refusals.
    pub guard_refusals: u64,
    /// Per object (`kind/namespace/name`).
    pub objects: HashMap<Box<str>, ObjectCounts>,
    /// Distinct runs kept over every object.
    pub signatures: usize,
    /// Runs with a failure not kept because [`MAX_SIGNATURES`] were.
    pub runs_not_kept: u64,
    /// `unblocked[x * n + y]`: the control failed first at x (row `n`: it failed nowhere), the
    /// candidate ran y in dry-run (which the control did not), and how often y failed there.
    pub unblocked: Vec<Rate>,
    /// Step rows naming an operation the plan does not have.
    pub unknown_operations: HashMap<String, u64>,
    /// The `writes` table's differences, by operation and kind of difference.
    pub writes: BTreeMap<WriteKey, WriteCounts>,
    /// The same of reconciles in mode `calibrate` (the control's code against itself): the
    /// comparison's noise.
    pub noise: BTreeMap<WriteKey, WriteCounts>,
    /// Per operation, the control's 409s and the candidate's re-evaluations of them.
    pub conflicts: Vec<ConflictCounts>,
}

impl PlanCounts {
    /// Empty counts for a plan of `n` operations.
    #[must_use]
    pub fn new(n: usize) -> Self {
        Self {
            ops: vec![OpCounts::default(); n],
            reconciles: 0,
            cancelled: 0,
            skipped: Skipped::default(),
            step_reconciles: 0,
            guard_refusals: 0,
            objects: HashMap::new(),
            signatures: 0,
            runs_not_kept: 0,
            unblocked: vec![Rate::default(); (n + 1) * n],
            unknown_operations: HashMap::new(),
            writes: BTreeMap::new(),
            noise: BTreeMap::new(),
            conflicts: vec![ConflictCounts::default(); n],
        }
    }

    /// The object `key`, created on first use.
    pub fn object(&mut self, key: &str, namespace: Option<&str>) -> &mut ObjectCounts {
        let n = self.ops.len();
        self.objects
            .entry(key.into())
            .or_insert_with(|| ObjectCounts::new(n, namespace))
    }

    /// Keeps the run `signature` of object `key` at `at`, unless the bound is reached.
    pub fn keep(&mut self, key: &str, signature: Signature, at: &RunKey) {
        let full = self.signatures >= MAX_SIGNATURES;
        let Some(object) = self.objects.get_mut(key) else {
            return;
        };
        match object.runs.get_mut(&signature) {
            Some(earliest) => {
                if *at < *earliest {
                    *earliest = at.clone();
                }
            }
            None if full => self.runs_not_kept += 1,
            None => {
                object.runs.insert(signature, at.clone());
                self.signatures += 1;
            }
        }
    }

    /// Adds `other`'s counts (another file's).
    pub fn merge(&mut self, other: Self) {
        for (a, b) in self.ops.iter_mut().zip(&other.ops) {
            a.merge(b);
        }
        self.reconciles += other.reconciles;
        self.cancelled += other.cancelled;
        self.skipped.budget += other.skipped.budget;
        self.skipped.paused += other.skipped.paused;
        self.skipped.sampled_out += other.skipped.sampled_out;
        self.step_reconciles += other.step_reconciles;
        self.guard_refusals += other.guard_refusals;
        for (a, b) in self.unblocked.iter_mut().zip(other.unblocked) {
            a.merge(b);
        }
        for (a, b) in self.conflicts.iter_mut().zip(&other.conflicts) {
            a.merge(b);
        }
        self.runs_not_kept += other.runs_not_kept;
        for (k, v) in other.unknown_operations {
            *self.unknown_operations.entry(k).or_default() += v;
        }
        for (key, counts) in other.writes {
            self.writes.entry(key).or_default().merge(counts);
        }
        for (key, counts) in other.noise {
            self.noise.entry(key).or_default().merge(counts);
        }
        for (key, theirs) in other.objects {
            let ns = theirs.namespace.as_deref().map(str::to_owned);
            let mine = self.object(&key, ns.as_deref());
            mine.reconciles += theirs.reconciles;
            for (slot, first) in mine.baseline.iter_mut().zip(theirs.baseline) {
                if let Some(f) = first {
                    First::offer(slot, &f.key, f.failed);
                }
            }
            for (a, b) in mine.flags.iter_mut().zip(theirs.flags) {
                *a |= b;
            }
            mine.timeline.extend(theirs.timeline);
            for (signature, at) in theirs.runs {
                self.keep(&key, signature, &at);
            }
        }
    }

    /// Objects with at least one reconcile.
    #[must_use]
    pub fn object_count(&self) -> u64 {
        self.objects.len() as u64
    }
}

/// Distinct written object names kept per kind of difference (the rest are counted).
pub const MAX_NAMES: usize = 8;
/// Distinct field paths kept per kind of difference (the rest are counted).
pub const MAX_FIELDS: usize = 16;
/// Distinct field patterns (list elements made `*`) kept per kind of difference, to declare
/// them all; beyond, the declaration covers every field.
pub const MAX_PATTERNS: usize = 64;

/// One kind of difference of one operation: what each side did to objects of one kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WriteKey {
    /// The operation (its index in the plan).
    pub op: usize,
    /// The written object's kind.
    pub kind: String,
    /// The subresource written, if any.
    pub subresource: Option<String>,
    /// What the control did: `none`, `write` or `delete`.
    pub control: String,
    /// What the candidate did.
    pub candidate: String,
    /// Whether the plan declares it.
    pub intended: bool,
}

/// The counts of one [`WriteKey`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteCounts {
    /// Rows (one per written object per reconcile).
    pub rows: u64,
    /// The reconciled objects (`kind/namespace/name`) it appeared in.
    pub objects: BTreeSet<Box<str>>,
    /// Written object names and their rows, at most [`MAX_NAMES`].
    pub names: BTreeMap<String, u64>,
    /// Rows whose name was not kept.
    pub other_names: u64,
    /// Differing fields and their rows, at most [`MAX_FIELDS`].
    pub fields: BTreeMap<String, u64>,
    /// Field rows not kept.
    pub other_fields: u64,
    /// Rows whose written object is the reconciled object itself.
    pub itself: u64,
    /// Every differing field as a pattern (list elements made `*`), at most [`MAX_PATTERNS`].
    pub patterns: BTreeSet<String>,
    /// Whether `patterns` holds every differing field of every row (a row lists at most 32 of
    /// its fields; more than [`MAX_PATTERNS`] patterns are not kept).
    pub patterns_incomplete: bool,
}

impl WriteCounts {
    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: Self) {
        self.rows += other.rows;
        self.itself += other.itself;
        self.objects.extend(other.objects);
        for (name, n) in other.names {
            add_bounded(&mut self.names, &mut self.other_names, &name, n, MAX_NAMES);
        }
        self.other_names += other.other_names;
        for (field, n) in other.fields {
            add_bounded(
                &mut self.fields,
                &mut self.other_fields,
                &field,
                n,
                MAX_FIELDS,
            );
        }
        self.other_fields += other.other_fields;
        self.patterns_incomplete |= other.patterns_incomplete;
        for pattern in other.patterns {
            self.add_pattern(pattern);
        }
    }

    /// Keeps a differing field's pattern, unless [`MAX_PATTERNS`] are kept.
    pub fn add_pattern(&mut self, pattern: String) {
        if self.patterns.len() < MAX_PATTERNS || self.patterns.contains(&pattern) {
            self.patterns.insert(pattern);
        } else {
            self.patterns_incomplete = true;
        }
    }
}

/// Adds `n` to `key` of `map`, which keeps at most `max` keys; what does not fit goes to `other`.
pub fn add_bounded(
    map: &mut BTreeMap<String, u64>,
    other: &mut u64,
    key: &str,
    n: u64,
    max: usize,
) {
    if let Some(count) = map.get_mut(key) {
        *count += n;
    } else if map.len() < max {
        map.insert(key.to_owned(), n);
    } else {
        *other += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(time_us: i64, id: &str, candidate: bool) -> RunKey {
        RunKey {
            time_us,
            reconcile_id: id.into(),
            candidate,
        }
    }

    #[test]
    fn the_first_observation_is_the_earliest_run_whatever_the_order_offered() {
        let mut slot = None;
        First::offer(&mut slot, &key(20, "b", false), true);
        First::offer(&mut slot, &key(10, "c", true), false);
        First::offer(&mut slot, &key(10, "c", false), true);
        First::offer(&mut slot, &key(30, "a", false), false);
        assert_eq!(slot.unwrap().key, key(10, "c", false));
        // A tie in time is broken by the reconcile id.
        let mut slot = None;
        First::offer(&mut slot, &key(5, "z", false), true);
        First::offer(&mut slot, &key(5, "a", true), false);
        assert!(!slot.unwrap().failed);
        // The same run offered twice (a reconcile recorded twice): the failed one, in any order.
        for order in [[true, false], [false, true]] {
            let mut slot = None;
            for failed in order {
                First::offer(&mut slot, &key(5, "a", true), failed);
            }
            assert!(slot.unwrap().failed);
        }
    }

    #[test]
    fn merging_keeps_each_objects_earliest_runs_and_is_order_independent() {
        let signature: Signature = vec![1, 4].into_boxed_slice();
        let mut a = PlanCounts::new(2);
        a.object("K/ns/x", Some("ns")).reconciles = 2;
        a.keep("K/ns/x", signature.clone(), &key(50, "r2", true));
        First::offer(
            &mut a.object("K/ns/x", Some("ns")).baseline[1],
            &key(50, "r2", false),
            true,
        );
        let mut b = PlanCounts::new(2);
        b.object("K/ns/x", Some("ns")).reconciles = 1;
        b.keep("K/ns/x", signature.clone(), &key(7, "r1", true));
        First::offer(
            &mut b.object("K/ns/x", Some("ns")).baseline[1],
            &key(7, "r1", false),
            false,
        );
        b.object("K/ns/y", Some("ns")).flags[0] = flag::FAILED;
        let mut ab = a.clone();
        ab.merge(b.clone());
        let mut ba = b;
        ba.merge(a);
        assert_eq!(ab, ba);
        let x = &ab.objects["K/ns/x"];
        assert_eq!(x.reconciles, 3);
        assert_eq!(x.runs[&signature], key(7, "r1", true));
        assert_eq!(x.baseline[1].as_ref().map(|f| f.failed), Some(false));
        assert_eq!(ab.signatures, 1);
        assert!(ab.objects["K/ns/y"].has(0, flag::FAILED));
    }
}
