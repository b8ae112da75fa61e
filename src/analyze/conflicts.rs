//! The 409 Conflicts, per operation: how often the control met one (steps and objects), what the
//! candidate's re-evaluation of each would have done (would have succeeded, still failed), how
//! long the control took to recover (from the reconcile that met the 409 to the object's next
//! reconcile whose control step succeeded), and what else differed in those reconciles.

use std::fmt::Write as _;

use serde::Serialize;

pub use super::counts::{ConflictCounts, ControlEvent};
use super::counts::{ObjectCounts, PlanCounts, flag};
use crate::plan::ReconcilePlan;

/// How long the control took to recover from its 409s.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Recovery {
    /// Recoveries measured: from the first 409 of an episode to the object's next reconcile
    /// whose control step succeeded.
    pub episodes: u64,
    /// Median, in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile, in milliseconds.
    pub p99_ms: f64,
    /// The longest, in milliseconds.
    pub max_ms: f64,
    /// Episodes with no later success in the data (not recovered yet, or the data ends).
    pub unrecovered: u64,
}

/// The conflicts of one operation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConflictReport {
    /// The operation.
    pub operation: String,
    /// Control steps that failed on a 409.
    pub control_409s: u64,
    /// Objects in which the control met a 409 there.
    pub objects: u64,
    /// Objects in which the candidate's re-evaluation of such a step would have succeeded.
    pub would_have_succeeded_objects: u64,
    /// Objects in which it would have failed too.
    pub still_failed_objects: u64,
    /// The same, in steps: re-evaluations that would have succeeded.
    pub would_have_succeeded: u64,
    /// Re-evaluations that would have failed too.
    pub would_have_failed: u64,
    /// Control 409s the candidate did not re-evaluate (it reused the control's failure: the
    /// operation does not retry in the candidate, or is `shadow: skip`).
    pub not_reevaluated: u64,
    /// Reconciles with a control 409 here in which another operation's outcome differed too.
    pub other_changes: u64,
    /// How long the control took to recover; measured for the operations the plan marks
    /// `retryOnConflict: true` (their successes are kept per object), `None` for others.
    pub recovery: Option<Recovery>,
}

/// The conflict reports of a plan's operations that met a 409 in the control, in phased order
/// then the legacy path's own.
#[must_use]
pub fn reports(plan: &ReconcilePlan, c: &PlanCounts) -> Vec<ConflictReport> {
    let order = plan.phased_order().iter().copied().chain(
        plan.legacy_order()
            .iter()
            .copied()
            .filter(|op| !plan.phased_order().contains(op)),
    );
    order
        .filter_map(|op| {
            let i = op.index();
            let k = c.conflicts.get(i).copied().unwrap_or_default();
            if k.control_steps == 0 {
                return None;
            }
            let has = |o: &ObjectCounts, bit: u8| o.has(i, bit);
            Some(ConflictReport {
                operation: plan.name_of(op).to_owned(),
                control_409s: k.control_steps,
                objects: c
                    .objects
                    .values()
                    .filter(|o| has(o, flag::CONTROL_CONFLICT))
                    .count() as u64,
                would_have_succeeded_objects: c
                    .objects
                    .values()
                    .filter(|o| has(o, flag::CONTROL_CONFLICT) && has(o, flag::RETRY_RESOLVED))
                    .count() as u64,
                still_failed_objects: c
                    .objects
                    .values()
                    .filter(|o| has(o, flag::CONTROL_CONFLICT) && has(o, flag::RETRY_FAILED))
                    .count() as u64,
                would_have_succeeded: k.would_have_succeeded,
                would_have_failed: k.would_have_failed,
                not_reevaluated: k
                    .control_steps
                    .saturating_sub(k.would_have_succeeded + k.would_have_failed),
                other_changes: k.other_changes,
                recovery: plan
                    .operation(op)
                    .retry_on_conflict()
                    .then(|| recovery(c, u16::try_from(i).unwrap_or(u16::MAX))),
            })
        })
        .collect()
}

/// The recoveries of operation `op` over every object: an episode starts at a 409 with no 409
/// of it open, and ends at the object's next control success of the operation.
fn recovery(c: &PlanCounts, op: u16) -> Recovery {
    let mut durations: Vec<i64> = Vec::new();
    let mut unrecovered = 0;
    for object in c.objects.values() {
        let mut events: Vec<ControlEvent> = object
            .timeline
            .iter()
            .copied()
            .filter(|e| e.op == op)
            .collect();
        events.sort_unstable();
        let mut open: Option<i64> = None;
        for e in events {
            match (e.conflict, open) {
                (true, None) => open = Some(e.time_us),
                (false, Some(since)) if e.time_us > since => {
                    durations.push(e.time_us - since);
                    open = None;
                }
                _ => {}
            }
        }
        unrecovered += u64::from(open.is_some());
    }
    durations.sort_unstable();
    #[allow(clippy::cast_precision_loss)] // durations far below 2^52 µs (142 years)
    let ms = |us: i64| us as f64 / 1000.0;
    let at = |percent: usize| {
        if durations.is_empty() {
            return 0.0;
        }
        // Nearest rank: the smallest duration with at least percent of them at or below it.
        let rank = (durations.len() * percent)
            .div_ceil(100)
            .clamp(1, durations.len());
        ms(durations[rank - 1])
    };
    Recovery {
        episodes: durations.len() as u64,
        p50_ms: at(50),
        p99_ms: at(99),
        max_ms: durations.last().copied().map_or(0.0, ms),
        unrecovered,
    }
}

/// One sentence per operation, for the text and Markdown renderings: "control 409s N (in M
/// objects): the candidate would have succeeded in A objects, still failed in B; ...".
#[must_use]
pub fn sentence(r: &ConflictReport) -> String {
    let mut s = format!(
        "{}: control 409s {} (in {} objects); the candidate would have succeeded in {} objects, still failed in {}",
        r.operation,
        r.control_409s,
        r.objects,
        r.would_have_succeeded_objects,
        r.still_failed_objects
    );
    if r.not_reevaluated > 0 {
        let _ = write!(
            s,
            "; {} not re-evaluated (the candidate does not retry it)",
            r.not_reevaluated
        );
    }
    match &r.recovery {
        Some(rec) if rec.episodes > 0 => {
            let _ = write!(
                s,
                "; the control recovered on requeue in p50 {} / p99 {} ({} recoveries",
                duration(rec.p50_ms),
                duration(rec.p99_ms),
                rec.episodes
            );
            if rec.unrecovered > 0 {
                let _ = write!(s, ", {} not recovered in the data", rec.unrecovered);
            }
            s.push(')');
        }
        Some(rec) => {
            let _ = write!(
                s,
                "; no recovery in the data ({} episodes open)",
                rec.unrecovered
            );
        }
        None => s += "; recovery not measured (the plan does not retry it on conflict)",
    }
    if r.other_changes > 0 {
        let _ = write!(
            s,
            "; in {} of those reconciles another operation's outcome differed too",
            r.other_changes
        );
    } else {
        s += "; nothing else differed in those reconciles";
    }
    s
}

/// The HTML section of `reports` (nothing when there is none), its text escaped by `escape`.
#[must_use]
pub fn html(reports: &[ConflictReport], escape: fn(&str) -> String) -> String {
    if reports.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "<details open><summary>Conflicts (409) the control met ({})</summary><ul>",
        reports.len()
    );
    for r in reports {
        let _ = write!(out, "<li>{}.</li>", escape(&sentence(r)));
    }
    out.push_str("</ul></details>");
    out
}

/// A duration in milliseconds, readable: `850 ms`, `2.4 s`, `3.1 min`.
fn duration(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else if ms < 60_000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else {
        format!("{:.1} min", ms / 60_000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_episode_runs_from_its_first_409_to_the_next_success_whatever_the_order() {
        let mut c = PlanCounts::new(1);
        let o = c.object("K/x", None);
        // Two 409s, then a success: one episode of 30 ms; a 409 never followed by a success.
        for (t, conflict) in [
            (50_000, false),
            (10_000, true),
            (20_000, true),
            (40_000, false),
            (90_000, true),
        ] {
            o.timeline.push(ControlEvent {
                time_us: t,
                op: 0,
                conflict,
            });
        }
        let r = recovery(&c, 0);
        assert_eq!((r.episodes, r.unrecovered), (1, 1));
        assert!((r.p50_ms - 30.0).abs() < 1e-9 && (r.max_ms - 30.0).abs() < 1e-9);
    }
}
