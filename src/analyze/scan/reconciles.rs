//! The pass over a part's `reconciles` file: its reconciles counted (cancelled, guard refusals,
//! skipped comparisons, other plan versions, unknown plans) and listed in the part's roster, each
//! with its fate, for the steps pass to join its rows to.

use std::path::Path;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::UInt32Type;

use super::{Counts, Ctx, Fate, RECONCILE_COLUMNS, Resolved, invalid, string_column};
use crate::analyze::join::Roster;
use crate::dataset::reader;

/// Counts a reconciles file, and lists its reconciles in `roster`.
pub(super) fn count_reconciles(
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
