//! The gates of a rollout step, from the dataset the process writes, read where it is (a local
//! directory or an object store's prefix), rows since the step began: the analyzer's readiness
//! of the group (`analyze --group --since`), the enforced objects against the others in the same
//! window, the guard's refusals, the undeclared write differences, and optional `PromQL` queries.

use std::collections::{BTreeMap, HashMap};

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};

use crate::analyze::{self, Readiness, stats};
use crate::dataset::{Location, reader};
use crate::flag::GroupRef;
use crate::flag::rollout::{
    GateResult, Gates, INTERIM_CONFIDENCE, Observation, ReadinessGate, Verdict,
};
use crate::plan::ReconcilePlan;

/// The columns of `reconciles` the comparison reads.
const COLUMNS: [&str; 12] = [
    "time",
    "cluster",
    "plan",
    "plan_hash",
    "mode",
    "kind",
    "namespace",
    "name",
    "control_error",
    "newly_blocked",
    "?cancelled",
    "?enforced_groups",
];

/// An object's reconciles on one side of the comparison: its latest outcome in the window.
#[derive(Clone, Copy, Default)]
struct Side {
    seen: bool,
    /// The start of its latest reconcile on this side (µs since the Unix epoch).
    latest_us: i64,
    failed: bool,
    newly_blocked: bool,
}

impl Side {
    /// Takes a reconcile's outcome if it is the latest seen.
    fn record(&mut self, time_us: i64, failed: bool, newly_blocked: bool) {
        if !self.seen || time_us >= self.latest_us {
            *self = Self {
                seen: true,
                latest_us: time_us,
                failed,
                newly_blocked,
            };
        }
    }
}

/// One object's reconciles in the window: with the group enforced, and without.
#[derive(Default)]
struct ObjectWindow {
    enforced: Side,
    other: Side,
}

/// The comparison's counts, in objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Objects reconciled with the group enforced since the step began.
    pub enforced: u64,
    /// Of those, objects whose latest reconcile with the group enforced failed.
    pub enforced_failed: u64,
    /// Of those, objects whose latest reconcile enforced had an operation newly blocked.
    pub enforced_newly_blocked: u64,
    /// Objects of the group's plans reconciled without it, in mode `shadow` or `enforce`, and
    /// never with it in the window.
    pub other: u64,
    /// Of those, objects whose latest reconcile failed.
    pub other_failed: u64,
    /// Of those, objects whose latest reconcile had an operation newly blocked.
    pub other_newly_blocked: u64,
    /// Reconciles of the group's plans in the window (cut-short ones not counted).
    pub reconciles: u64,
}

/// Errors of reading the window.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The dataset could not be listed or a file read.
    #[error(transparent)]
    Read(#[from] reader::ReadError),
    /// The analysis failed (other than for lack of data).
    #[error(transparent)]
    Analyze(#[from] analyze::AnalyzeError),
}

/// The plans of `plans` that have `group`.
fn plans_of<'a>(group: &GroupRef, plans: &'a [ReconcilePlan]) -> Vec<&'a ReconcilePlan> {
    plans
        .iter()
        .filter(|p| group.in_plan(p).is_some())
        .collect()
}

/// Counts the comparison over the `reconciles` rows of `plans` (their current versions) that
/// started at `since_us` or later. Each object counts once, by its latest reconcile on its
/// side: an object reconciled more often (retried after failures) weighs no more than another,
/// and a failure its retry repaired counts as repaired.
///
/// # Errors
/// The dataset cannot be listed; a file that cannot be read is skipped with a warning, as the
/// analyzer does.
pub fn compare(
    location: &Location,
    group: &GroupRef,
    plans: &[ReconcilePlan],
    since_us: i64,
) -> Result<Comparison, GateError> {
    let mine = plans_of(group, plans);
    let hashes: Vec<(String, String, String)> = mine
        .iter()
        .filter_map(|p| {
            group
                .in_plan(p)
                .map(|g| (p.name().to_owned(), p.hash().to_hex(), g.to_owned()))
        })
        .collect();
    let mut objects: HashMap<String, ObjectWindow> = HashMap::new();
    let mut reconciles = 0;
    let parts = reader::parts_at(location)?;
    for (path, _) in &parts.pairs {
        let read = (|| -> Result<(), reader::ReadError> {
            for batch in reader::open_at(location, path, &COLUMNS)? {
                let batch = batch?;
                reconciles += count_batch(&batch, path, &hashes, since_us, &mut objects)?;
            }
            Ok(())
        })();
        if let Err(e) = read {
            tracing::warn!(path = %path.display(), error = %e, "rollout gates: skipped a Parquet file that cannot be read");
        }
    }
    let mut c = Comparison {
        reconciles,
        ..Comparison::default()
    };
    for o in objects.values() {
        if o.enforced.seen {
            c.enforced += 1;
            c.enforced_failed += u64::from(o.enforced.failed);
            c.enforced_newly_blocked += u64::from(o.enforced.newly_blocked);
        } else if o.other.seen {
            c.other += 1;
            c.other_failed += u64::from(o.other.failed);
            c.other_newly_blocked += u64::from(o.other.newly_blocked);
        }
    }
    Ok(c)
}

/// Adds one batch's rows to the objects; returns the reconciles counted.
fn count_batch(
    batch: &RecordBatch,
    path: &std::path::Path,
    plans: &[(String, String, String)],
    since_us: i64,
    objects: &mut HashMap<String, ObjectWindow>,
) -> Result<u64, reader::ReadError> {
    let invalid = |what: &str| reader::ReadError::Invalid {
        path: path.to_owned(),
        message: format!("column {what}"),
    };
    let string = |name: &str| {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_string_opt::<i32>())
            .ok_or_else(|| invalid(&format!("{name} is not a string column")))
    };
    let time = reader::time_column(batch, path)?;
    let (cluster, plan, hash, mode) = (
        string("cluster")?,
        string("plan")?,
        string("plan_hash")?,
        string("mode")?,
    );
    let (kind, namespace, name, error) = (
        string("kind")?,
        string("namespace")?,
        string("name")?,
        string("control_error")?,
    );
    let newly = batch
        .column_by_name("newly_blocked")
        .and_then(|c| c.as_list_opt::<i32>())
        .ok_or_else(|| invalid("newly_blocked is not a list"))?;
    let cancelled = batch
        .column_by_name("cancelled")
        .and_then(|c| c.as_boolean_opt());
    let enforced = batch
        .column_by_name("enforced_groups")
        .and_then(|c| c.as_list_opt::<i32>());
    let mut counted = 0;
    for i in 0..batch.num_rows() {
        if time.value(i) < since_us || cancelled.is_some_and(|c| c.is_valid(i) && c.value(i)) {
            continue;
        }
        let Some((_, _, group)) = plans
            .iter()
            .find(|(p, h, _)| p == plan.value(i) && h == hash.value(i))
        else {
            continue;
        };
        let mode = mode.value(i);
        if mode != "shadow" && mode != "enforce" {
            continue;
        }
        counted += 1;
        let with_group = mode == "enforce"
            && enforced.is_some_and(|e| {
                e.is_valid(i)
                    && e.value(i)
                        .as_string_opt::<i32>()
                        .is_some_and(|names| names.iter().flatten().any(|n| n == group))
            });
        let key = format!(
            "{}/{}/{}/{}/{}",
            cluster.value(i),
            plan.value(i),
            kind.value(i),
            if namespace.is_valid(i) {
                namespace.value(i)
            } else {
                ""
            },
            name.value(i)
        );
        let failed = error.is_valid(i);
        let newly_blocked = newly.is_valid(i) && !newly.value(i).is_empty();
        let o = objects.entry(key).or_default();
        let side = if with_group {
            &mut o.enforced
        } else {
            &mut o.other
        };
        side.record(time.value(i), failed, newly_blocked);
    }
    Ok(counted)
}

/// The lower bound of the difference of two rates (`a` minus `b`) by Newcombe's hybrid score
/// method (his method 10), from the Wilson intervals of each at `z`.
#[must_use]
#[allow(clippy::cast_precision_loss)] // counts far below 2^52
pub fn difference_low(a: (u64, u64), b: (u64, u64), z: f64) -> f64 {
    let wa = stats::wilson(a.0, a.1, z);
    let wb = stats::wilson(b.0, b.1, z);
    let d = wa.rate - wb.rate;
    d - ((wa.rate - wa.low).powi(2) + (wb.high - wb.rate).powi(2)).sqrt()
}

/// Which look at a step a comparison is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Look {
    /// An evaluation before the step's decisive one: the bound at [`INTERIM_CONFIDENCE`] (or
    /// the gate's confidence, if higher).
    Interim,
    /// The evaluation at which the step would advance: the bound at the gate's confidence.
    Decisive,
}

/// The gate comparing a rate of the enforced objects with the others'.
#[allow(clippy::cast_precision_loss)] // counts far below 2^52
fn rate_gate(
    name: &str,
    what: &str,
    (enforced, other): ((u64, u64), (u64, u64)),
    gates: &Gates,
    look: Look,
) -> GateResult {
    let confidence = match look {
        Look::Interim => gates.confidence.max(INTERIM_CONFIDENCE),
        Look::Decisive => gates.confidence,
    };
    let z = stats::z_for(confidence);
    let low = difference_low(enforced, other, z);
    let tolerance = gates.tolerance_points / 100.0;
    let rate = |(f, n): (u64, u64)| if n == 0 { 0.0 } else { f as f64 / n as f64 };
    let figures = BTreeMap::from([
        ("enforcedObjects".to_owned(), enforced.1 as f64),
        (format!("enforced{what}"), enforced.0 as f64),
        ("otherObjects".to_owned(), other.1 as f64),
        (format!("other{what}"), other.0 as f64),
        ("differenceLow".to_owned(), low),
        ("confidence".to_owned(), confidence),
    ]);
    let text = format!(
        "{}: {:.1}% of {} enforced objects against {:.1}% of {} others; the difference's lower bound at {}% confidence is {:+.1} points (limit {:+.1})",
        match look {
            Look::Interim => "interim look",
            Look::Decisive => "decisive look",
        },
        rate(enforced) * 100.0,
        enforced.1,
        rate(other) * 100.0,
        other.1,
        confidence * 100.0,
        low * 100.0,
        gates.tolerance_points
    );
    let result = if enforced.1 == 0 {
        Verdict::Waiting
    } else if low > tolerance {
        Verdict::Failed
    } else {
        Verdict::Passed
    };
    GateResult {
        name: name.to_owned(),
        result,
        message: text,
        figures,
    }
}

/// What the analyzer says of the group over the window.
struct Analysed {
    /// The worst readiness of the group over its plans, with its summary.
    readiness: Option<(Readiness, String)>,
    /// The window holds too few objects for the analyzer to judge anything.
    too_few: bool,
    /// Guard refusals in the window.
    refusals: u64,
    /// Objects written differently, undeclared, by the group's operations.
    differences: u64,
    /// Those differences, described.
    difference_names: Vec<String>,
}

/// The analyzer over the window, for the group's plans: `analyze --group --since`.
fn analysed(
    location: &Location,
    group: &GroupRef,
    plans: &[ReconcilePlan],
    since_us: i64,
) -> Result<Analysed, GateError> {
    let mine: Vec<ReconcilePlan> = plans_of(group, plans).into_iter().cloned().collect();
    let settings = analyze::Settings {
        since_us: Some(since_us),
        threads: 1,
        ..analyze::Settings::default()
    };
    let analysis = match analyze::analyze_at(location, &mine, &settings) {
        Ok(a) => Some(a),
        Err(analyze::AnalyzeError::NoData { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let mut out = Analysed {
        readiness: None,
        too_few: false,
        refusals: 0,
        differences: 0,
        difference_names: Vec::new(),
    };
    for report in analysis.iter().flat_map(|a| &a.plans) {
        let Some(plan) = mine.iter().find(|p| p.name() == report.plan) else {
            continue;
        };
        let Some(name) = group.in_plan(plan) else {
            continue;
        };
        out.refusals += report.guard_refusals;
        let Some(g) = report.readiness.iter().find(|g| g.group == name) else {
            continue;
        };
        // The plan's data covers too few objects to judge anything (a finding of no
        // operation); a member tested in too few objects is not this.
        out.too_few |= g
            .findings
            .iter()
            .any(|f| f.code == analyze::FindingCode::TooFewObjects && f.operations.is_empty());
        if out.readiness.as_ref().is_none_or(|(r, _)| g.readiness > *r) {
            out.readiness = Some((
                g.readiness,
                format!("{}/{}: {}", report.plan, name, g.summary),
            ));
        }
        for w in report
            .writes
            .iter()
            .filter(|w| !w.intended && g.operations.contains(&w.operation))
        {
            out.differences += w.objects;
            out.difference_names
                .push(format!("{} {} {}", w.operation, w.kind, w.text));
        }
    }
    Ok(out)
}

/// The records the gates read: since the step began, and for readiness since the rollout
/// started (µs since the Unix epoch).
#[derive(Clone, Copy, Debug)]
pub struct Windows {
    /// The step's start.
    pub step_us: i64,
    /// The rollout's start (or its last restart).
    pub readiness_us: i64,
}

/// Every gate of the data: readiness, the two comparisons, guard refusals, write differences.
///
/// # Errors
/// The dataset cannot be listed or analysed.
#[allow(clippy::cast_precision_loss)] // counts far below 2^52
pub fn observe(
    location: &Location,
    group: &GroupRef,
    plans: &[ReconcilePlan],
    gates: &Gates,
    windows: Windows,
) -> Result<Observation, GateError> {
    let since_us = windows.step_us;
    let c = compare(location, group, plans, since_us)?;
    // Readiness judges the plan for the group from every step's records since the rollout
    // started: the evidence does not expire with a step (a step's window alone often holds too
    // few objects to judge anything), and the records before the rollout, all in shadow, are
    // what `analyze --group` judged before anyone created it. The rest judges the step, from
    // its window.
    let Analysed {
        readiness, too_few, ..
    } = analysed(location, group, plans, windows.readiness_us)?;
    let Analysed {
        refusals,
        differences,
        difference_names,
        ..
    } = analysed(location, group, plans, since_us)?;
    let mut results = Vec::new();
    if gates.readiness != ReadinessGate::Off {
        let no_data = readiness.is_none();
        let (r, summary) = readiness.unwrap_or((
            Readiness::Inconclusive,
            "no reconcile of the group's plans recorded".to_owned(),
        ));
        // An analysis of too few objects judged nothing: the step waits for more, whatever
        // the gate asks; `inconclusive` for any other reason (members never exercised, or
        // tested in too few objects) passes with `BlockNotReady`: the same objects reconciled
        // again add no evidence, and the comparisons of enforced and other objects are the
        // direct measure of the step.
        let result = match (r, gates.readiness) {
            (Readiness::NotReady, _) => Verdict::Failed,
            (Readiness::Inconclusive, ReadinessGate::RequireReady) => Verdict::Waiting,
            (Readiness::Inconclusive, _) if too_few || no_data => Verdict::Waiting,
            _ => Verdict::Passed,
        };
        results.push(GateResult {
            name: "readiness".to_owned(),
            result,
            message: format!("{}: {summary}", r.as_str()),
            figures: BTreeMap::from([("readiness".to_owned(), f64::from(r.exit_code()))]),
        });
    }
    let comparisons = |look| {
        [
            rate_gate(
                "failure-rate",
                "Failed",
                ((c.enforced_failed, c.enforced), (c.other_failed, c.other)),
                gates,
                look,
            ),
            rate_gate(
                "newly-blocked",
                "NewlyBlocked",
                (
                    (c.enforced_newly_blocked, c.enforced),
                    (c.other_newly_blocked, c.other),
                ),
                gates,
                look,
            ),
        ]
    };
    results.extend(comparisons(Look::Interim));
    results.push(GateResult {
        name: "guard-refusals".to_owned(),
        result: if refusals == 0 {
            Verdict::Passed
        } else {
            Verdict::Failed
        },
        message: format!(
            "{refusals} mutating requests of the candidate refused by the guard (must be 0)"
        ),
        figures: BTreeMap::from([("guardRefusals".to_owned(), refusals as f64)]),
    });
    results.push(GateResult {
        name: "write-differences".to_owned(),
        result: if differences == 0 {
            Verdict::Passed
        } else {
            Verdict::Failed
        },
        message: if differences == 0 {
            "no undeclared write difference of the group's operations".to_owned()
        } else {
            format!(
                "{differences} objects written differently, undeclared: {}",
                difference_names.join("; ")
            )
        },
        figures: BTreeMap::from([("objects".to_owned(), differences as f64)]),
    });
    Ok(Observation {
        enforced_objects: c.enforced,
        gates: results,
        decisive: comparisons(Look::Decisive).to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newcombe_matches_his_worked_example() {
        // Newcombe (1998), Table II, example (a): 56/70 against 48/80, method 10:
        // difference 0.2, interval 0.0524 to 0.3339.
        let low = difference_low((56, 70), (48, 80), 1.959_964);
        assert!((low - 0.0524).abs() < 5e-4, "{low}");
    }

    fn verdict(enforced: (u64, u64), other: (u64, u64), look: Look) -> Verdict {
        rate_gate("f", "Failed", (enforced, other), &Gates::default(), look).result
    }

    #[test]
    fn the_rate_gate_fails_only_beyond_the_bound() {
        for look in [Look::Interim, Look::Decisive] {
            // 12 of 20 against 30 of 400: clearly worse, at either look.
            assert_eq!(verdict((12, 20), (30, 400), look), Verdict::Failed);
            // 2 of 20 against 30 of 400: within chance.
            assert_eq!(verdict((2, 20), (30, 400), look), Verdict::Passed);
            // Nothing enforced yet.
            assert_eq!(verdict((0, 0), (30, 400), look), Verdict::Waiting);
            // Nothing to compare with (the last step at 100%): a bound of 0 to 1 for the others.
            assert_eq!(verdict((3, 50), (0, 0), look), Verdict::Passed);
        }
    }

    #[test]
    fn an_interim_look_needs_stronger_evidence_than_the_decisive_one() {
        // 13 of 21 against 19 of 54 (62% against 35%): beyond the 95% bound, within 99.9%'s.
        assert_eq!(verdict((13, 21), (19, 54), Look::Decisive), Verdict::Failed);
        assert_eq!(verdict((13, 21), (19, 54), Look::Interim), Verdict::Passed);
        // A gate asking for more confidence than the interim bound keeps it at every look.
        let strict = Gates {
            confidence: 0.9999,
            ..Gates::default()
        };
        let g = rate_gate("f", "Failed", ((13, 21), (19, 54)), &strict, Look::Interim);
        assert!((g.figures["confidence"] - 0.9999).abs() < 1e-12, "{g:?}");
    }

    #[test]
    fn an_object_counts_by_its_latest_reconcile() {
        let mut side = Side::default();
        side.record(10, true, true);
        side.record(30, false, false);
        // An older row read after a newer one (files are not read in time order).
        side.record(20, true, true);
        assert!(side.seen && !side.failed && !side.newly_blocked);
        assert_eq!(side.latest_us, 30);
    }
}
