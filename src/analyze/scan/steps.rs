//! The pass over a part's `steps` file: its columns decoded batch by batch (`StepBatch`), its
//! rows resolved to their plan and joined run by run to the part's reconciles, each reconcile's
//! rows gathered and handed to the tally.

use std::collections::HashMap;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{TimestampMicrosecondType, UInt32Type};
use arrow_array::{Array, RecordBatch};

use super::row::{Exec, Outcome, Row};
use super::tally::{Pending, finish};
use super::{Counts, Ctx, Fate, Resolved, STEP_COLUMNS, invalid, string_column};
use crate::analyze::join::Runs;
use crate::dataset::reader;
use crate::plan::ReconcilePlan;
use crate::vocab::ErrorClass;

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
pub(super) fn count_steps(
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
