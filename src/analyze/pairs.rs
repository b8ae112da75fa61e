//! The ordering pairs `(X, Y)`: does `Y` fail more often after `X` failed than on its baseline?
//! Counted in objects (each object's first observation on each side), under an "explains"
//! relation found by a fixpoint whose every round re-judges every dependency.

use std::collections::{BTreeSet, HashSet};

use super::Pair;
use super::counts::{ObjectCounts, PlanCounts, REUSED_FAILED, Rate, RunKey, Signature, flag};
use super::stats::{separated, wilson};
use crate::plan::ReconcilePlan;
use crate::vocab::OpId;

/// A dependency `(x, y)`: `y` depends on `x`, by operation index.
pub type Edge = (usize, usize);

/// Whether `later` depends on `failed` in `plan`, directly or through other dependencies.
pub fn declared(plan: &ReconcilePlan, failed: OpId, later: OpId) -> bool {
    let mut stack = vec![later];
    let mut seen = vec![false; plan.len()];
    while let Some(op) = stack.pop() {
        for &d in plan.operation(op).depends_on().as_slice() {
            if d == failed {
                return true;
            }
            if !std::mem::replace(&mut seen[d.index()], true) {
                stack.push(d);
            }
        }
    }
    false
}

/// `explains[x * n + y]`: `y` depends on `x` through declared or `detected` dependencies.
fn closure(plan: &ReconcilePlan, detected: &BTreeSet<Edge>) -> Vec<bool> {
    let n = plan.len();
    let mut m = vec![false; n * n];
    for op in plan.operations() {
        for &d in op.depends_on().as_slice() {
            m[d.index() * n + op.id().index()] = true;
        }
    }
    for &(x, y) in detected {
        m[x * n + y] = true;
    }
    for k in 0..n {
        for i in 0..n {
            if m[i * n + k] {
                for j in 0..n {
                    if m[k * n + j] {
                        m[i * n + j] = true;
                    }
                }
            }
        }
    }
    m
}

/// Calls `f(x, y, y_failed)` for every observation of `y` after `x` in the run `signature`:
/// `y` executed after `x` failed, and every other failure before `y` is explained by `x`.
fn observations(
    n: usize,
    signature: &Signature,
    explains: &[bool],
    mut f: impl FnMut(usize, usize, bool),
) {
    let mut failed: Vec<usize> = Vec::new();
    for &step in &**signature {
        let (op, state) = (usize::from(step >> 2), step & 3);
        if op >= n {
            continue;
        }
        if state != REUSED_FAILED && !failed.is_empty() {
            let y_failed = state == super::counts::EXECUTED_FAILED;
            for &x in &failed {
                if failed.iter().all(|&w| w == x || explains[x * n + w]) {
                    f(x, op, y_failed);
                }
            }
        }
        if state != super::counts::EXECUTED_OK {
            failed.push(op);
        }
    }
}

/// What one explanation relation makes of the objects.
pub struct Observed {
    /// `after[x * n + y]`: objects with an observation of `y` after `x`, each counted once by its
    /// first such observation.
    pub after: Vec<Rate>,
    /// `exposed[x]`: objects in which some operation was observed after `x` failed.
    pub exposed: Vec<u64>,
    /// `ran_after[y]`: objects in which `y` was observed after some failure.
    pub ran_after: Vec<u64>,
    /// `exercised[y]`: objects in which `y` failed under the candidate or was observed after
    /// some failure.
    pub exercised: Vec<u64>,
    /// `namespaces[x * n + y]`: distinct namespaces of the objects whose first observation of
    /// `y` after `x` failed.
    pub namespaces: Vec<u64>,
}

/// Counts, object by object, the first observation of each pair under `explains`.
fn observe(n: usize, c: &PlanCounts, explains: &[bool]) -> Observed {
    let mut after = vec![Rate::default(); n * n];
    let mut exposed = vec![0; n];
    let mut ran_after = vec![0; n];
    let mut exercised = vec![0; n];
    let mut namespaces: Vec<HashSet<&str>> = vec![HashSet::new(); n * n];
    let mut first: Vec<Option<(&RunKey, bool)>> = vec![None; n * n];
    let mut touched: Vec<usize> = Vec::new();
    for object in c.objects.values() {
        for (signature, at) in &object.runs {
            observations(n, signature, explains, |x, y, y_failed| {
                let slot = &mut first[x * n + y];
                match slot {
                    None => {
                        touched.push(x * n + y);
                        *slot = Some((at, y_failed));
                    }
                    // The same run twice (a reconcile recorded twice): the failed observation.
                    Some((earliest, failed)) if at == *earliest => *failed |= y_failed,
                    Some((earliest, _)) if at < *earliest => *slot = Some((at, y_failed)),
                    Some(_) => {}
                }
            });
        }
        let mut exposed_here = vec![false; n];
        let mut ran_after_here = vec![false; n];
        for &i in &touched {
            let (_, failed) = first[i]
                .take()
                .expect("a touched slot holds an observation");
            after[i].add(failed);
            if failed {
                namespaces[i].insert(object.namespace.as_deref().unwrap_or(""));
            }
            exposed_here[i / n] = true;
            ran_after_here[i % n] = true;
        }
        touched.clear();
        for (x, _) in exposed_here.iter().enumerate().filter(|(_, e)| **e) {
            exposed[x] += 1;
        }
        for (y, here) in ran_after_here.iter().enumerate() {
            ran_after[y] += u64::from(*here);
            exercised[y] += u64::from(*here || object.has(y, flag::CANDIDATE_FAILED));
        }
    }
    Observed {
        after,
        exposed,
        ran_after,
        exercised,
        namespaces: namespaces.iter().map(|s| s.len() as u64).collect(),
    }
}

/// Per operation, the objects whose first execution with nothing failed before it failed.
pub fn baselines(n: usize, objects: &[&ObjectCounts]) -> Vec<Rate> {
    let mut baseline = vec![Rate::default(); n];
    for object in objects {
        for (rate, first) in baseline.iter_mut().zip(&object.baseline) {
            if let Some(f) = first {
                rate.add(f.failed);
            }
        }
    }
    baseline
}

/// Rounds after which the fixpoint is given up as if it cycled (each round adds or removes at
/// least one dependency; real data settles in a handful).
const MAX_ROUNDS: u32 = 64;

/// The ordering pairs of a plan, and how the fixpoint that found them ended.
pub struct Pairs {
    /// Every pair with at least one object observed after a failure, in phased order.
    pub pairs: Vec<Pair>,
    /// What the final explanation relation made of the objects.
    pub observed: Observed,
    /// Rounds run.
    pub rounds: u32,
    /// Whether the rounds reached a fixpoint (else they cycled; see `judge`).
    pub converged: bool,
}

struct Settings {
    min_samples: u64,
    z: f64,
    namespaces: u64,
}

fn judge_round(
    plan: &ReconcilePlan,
    baseline: &[Rate],
    observed: &Observed,
    s: &Settings,
) -> Vec<Pair> {
    let n = plan.len();
    let mut pairs = Vec::new();
    for &x in plan.phased_order() {
        for &y in plan.phased_order() {
            let (xi, yi) = (x.index(), y.index());
            let after = observed.after[xi * n + yi];
            if after.n == 0 {
                continue;
            }
            let after_i = wilson(after.failures, after.n, s.z);
            let base = baseline[yi];
            let baseline_i = wilson(base.failures, base.n, s.z);
            let is_separated = separated(&after_i, &baseline_i);
            let is_declared = declared(plan, x, y);
            let ns = observed.namespaces[xi * n + yi];
            pairs.push(Pair {
                failed: plan.name_of(x).to_owned(),
                later: plan.name_of(y).to_owned(),
                after: after_i,
                baseline: baseline_i,
                separated: is_separated,
                declared: is_declared,
                dependency: is_separated
                    && !is_declared
                    && after.n >= s.min_samples
                    && base.n >= s.min_samples,
                after_failed_namespaces: ns,
                concentrated: after.failures > 1 && ns == 1 && s.namespaces > 1,
            });
        }
    }
    pairs
}

fn edges(plan: &ReconcilePlan, pairs: &[Pair]) -> BTreeSet<Edge> {
    pairs
        .iter()
        .filter(|p| p.dependency)
        .filter_map(|p| {
            Some((
                plan.lookup(&p.failed)?.index(),
                plan.lookup(&p.later)?.index(),
            ))
        })
        .collect()
}

/// The pairs, found by a fixpoint over the explanation relation.
///
/// A later operation's failure counts after `x` only when every other failure before it is
/// explained by `x` (declared dependents of `x`, or dependents detected in the previous round):
/// an unrelated failure in between, or a common earlier cause, is not blamed on `x`. Each round
/// recomputes every pair under the dependencies the previous round detected and keeps exactly
/// those it detects itself, so a dependency that stops separating once others explain failures
/// leaves the explanation too. The rounds stop when a round detects the set it was given (a
/// fixpoint: the reported dependencies are the explanation used). If a set repeats without that
/// (a cycle, which needs contradictory data), the explanation is the dependencies every set of the
/// cycle agrees on, the pairs are judged once more under it, and `converged` is false.
pub fn find(plan: &ReconcilePlan, c: &PlanCounts, min_samples: u64, z: f64) -> Pairs {
    let n = plan.len();
    let objects: Vec<&ObjectCounts> = c.objects.values().collect();
    let baseline = baselines(n, &objects);
    let settings = Settings {
        min_samples,
        z,
        namespaces: c
            .objects
            .values()
            .map(|o| o.namespace.as_deref().unwrap_or(""))
            .collect::<HashSet<_>>()
            .len() as u64,
    };
    let mut explanation: BTreeSet<Edge> = BTreeSet::new();
    let mut seen: Vec<BTreeSet<Edge>> = Vec::new();
    let mut rounds = 0;
    loop {
        rounds += 1;
        let observed = observe(n, c, &closure(plan, &explanation));
        let pairs = judge_round(plan, &baseline, &observed, &settings);
        let detected = edges(plan, &pairs);
        if detected == explanation {
            return Pairs {
                pairs,
                observed,
                rounds,
                converged: true,
            };
        }
        seen.push(std::mem::replace(&mut explanation, detected));
        let repeated = seen.iter().position(|s| *s == explanation);
        if repeated.is_some() || rounds >= MAX_ROUNDS {
            // The states of the cycle; at the round limit, the last two.
            let cycle = &seen[repeated.unwrap_or(seen.len().saturating_sub(2))..];
            let agreed: BTreeSet<Edge> = cycle.iter().skip(1).fold(cycle[0].clone(), |acc, s| {
                acc.intersection(s).copied().collect()
            });
            let observed = observe(n, c, &closure(plan, &agreed));
            let pairs = judge_round(plan, &baseline, &observed, &settings);
            return Pairs {
                pairs,
                observed,
                rounds: rounds + 1,
                converged: false,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::counts::{EXECUTED_FAILED, EXECUTED_OK, First};

    const PLAN: &str = "apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata: {name: abcd}
spec:
  operations:
    - {name: A, phase: 1, category: non-critical, shadow: dry-run}
    - {name: B, phase: 2, category: non-critical, shadow: dry-run}
    - {name: C, phase: 3, category: non-critical, shadow: dry-run}
    - {name: D, phase: 4, category: non-critical, shadow: dry-run}
  legacy: {order: [A, B, C, D]}
";

    fn plan() -> ReconcilePlan {
        ReconcilePlan::from_yaml("abcd.yaml", PLAN).unwrap()
    }

    /// Adds `objects` objects named `prefix-i` whose one run is `steps` (`(op, failed)`), in
    /// namespace `ns-{i % 4}`; `times` repeats the run (later reconciles of the same object).
    fn objects(c: &mut PlanCounts, prefix: &str, n: usize, steps: &[(usize, bool)], times: i64) {
        let signature: Signature = steps
            .iter()
            .map(|&(op, failed)| {
                let op = u16::try_from(op).unwrap() << 2;
                op | if failed { EXECUTED_FAILED } else { EXECUTED_OK }
            })
            .collect();
        for i in 0..n {
            let key = format!("K/ns/{prefix}-{i}");
            let ns = format!("ns-{}", i % 4);
            for t in 0..times {
                let at = RunKey {
                    time_us: t,
                    reconcile_id: format!("{prefix}-{i}-{t}").into(),
                    candidate: false,
                };
                let o = c.object(&key, Some(&ns));
                o.reconciles += 1;
                let mut failed_before = false;
                for &(op, failed) in steps {
                    if !failed_before {
                        First::offer(&mut o.baseline[op], &at, failed);
                    }
                    failed_before |= failed;
                }
                if failed_before {
                    c.keep(&key, signature.clone(), &at);
                }
            }
        }
    }

    fn dependencies(found: &Pairs) -> Vec<(&str, &str)> {
        found
            .pairs
            .iter()
            .filter(|p| p.dependency)
            .map(|p| (p.failed.as_str(), p.later.as_str()))
            .collect()
    }

    const Z: f64 = 2.576;

    #[test]
    fn a_dependency_that_stops_separating_leaves_the_explanation() {
        let plan = plan();
        let mut c = PlanCounts::new(4);
        objects(
            &mut c,
            "healthy",
            200,
            &[(0, false), (1, false), (2, false)],
            1,
        );
        // Round 1 sees C fail after A in 30 objects (B's failures elsewhere are unexplained)...
        objects(&mut c, "ac", 30, &[(0, true), (1, false), (2, true)], 1);
        // ... and B fail after A in 1,000 objects, where C then succeeds. Once A -> B explains
        // B's failure, those 1,000 objects count for (A, C) too: 30 of 1,030 is no separation.
        objects(&mut c, "ab", 1000, &[(0, true), (1, true), (2, false)], 1);
        let found = find(&plan, &c, 30, Z);
        assert!(found.converged);
        assert_eq!(dependencies(&found), [("A", "B")]);
        let ac = found
            .pairs
            .iter()
            .find(|p| p.failed == "A" && p.later == "C")
            .unwrap();
        assert_eq!((ac.after.failures, ac.after.objects), (30, 1030));
        assert!(!ac.separated, "{ac:?}");
        assert!(
            found.rounds >= 3,
            "A -> C was detected, then dropped: {}",
            found.rounds
        );
    }

    #[test]
    fn a_chain_is_found_in_rounds() {
        let plan = plan();
        let mut c = PlanCounts::new(4);
        objects(
            &mut c,
            "healthy",
            100,
            &[(0, false), (1, false), (2, false), (3, false)],
            1,
        );
        // A's failure makes B fail, B's makes C fail, C's makes D fail.
        objects(
            &mut c,
            "chain",
            40,
            &[(0, true), (1, true), (2, true), (3, true)],
            1,
        );
        let found = find(&plan, &c, 30, Z);
        assert!(found.converged);
        let mut deps = dependencies(&found);
        deps.sort_unstable();
        assert_eq!(deps, [("A", "B"), ("A", "C"), ("A", "D")]);
        assert!(found.rounds >= 3, "{}", found.rounds);
    }

    #[test]
    fn retries_of_one_object_are_one_observation() {
        let plan = plan();
        let judged = |times| {
            let mut c = PlanCounts::new(4);
            objects(&mut c, "healthy", 100, &[(0, false), (1, false)], 1);
            // Three objects carrying two unrelated faults, reconciled `times` times each.
            objects(&mut c, "stubborn", 3, &[(0, true), (1, true)], times);
            let found = find(&plan, &c, 30, Z);
            let ab = found
                .pairs
                .iter()
                .find(|p| p.failed == "A" && p.later == "B")
                .unwrap()
                .clone();
            (ab, dependencies(&found).is_empty())
        };
        let (once, none_once) = judged(1);
        let (retried, none_retried) = judged(500);
        assert_eq!((retried.after.failures, retried.after.objects), (3, 3));
        assert_eq!(retried.baseline.objects, 100);
        assert_eq!(
            format!("{once:?}"),
            format!("{retried:?}"),
            "retries change nothing"
        );
        assert!(
            none_once && none_retried,
            "3 objects are below --min-samples 30"
        );
    }

    #[test]
    fn the_first_observation_decides_for_each_object() {
        let plan = plan();
        let mut c = PlanCounts::new(4);
        // The same object: B failed after A at t=0, succeeded after A at t=1 and t=2.
        let key = "K/ns/x";
        c.object(key, Some("ns"));
        for (t, b_failed) in [(2, false), (0, true), (1, false)] {
            let at = RunKey {
                time_us: t,
                reconcile_id: format!("r{t}").into(),
                candidate: true,
            };
            let b = u16::from(1u8) << 2
                | if b_failed {
                    EXECUTED_FAILED
                } else {
                    EXECUTED_OK
                };
            c.keep(key, vec![EXECUTED_FAILED, b].into_boxed_slice(), &at);
        }
        let found = find(&plan, &c, 1, Z);
        let ab = found
            .pairs
            .iter()
            .find(|p| p.failed == "A" && p.later == "B")
            .unwrap();
        assert_eq!((ab.after.failures, ab.after.objects), (1, 1));
    }

    #[test]
    fn failures_from_one_namespace_are_flagged_as_concentrated() {
        let plan = plan();
        let mut c = PlanCounts::new(4);
        objects(&mut c, "healthy", 200, &[(0, false), (1, false)], 1);
        let signature: Signature = vec![EXECUTED_FAILED, 1 << 2 | EXECUTED_FAILED].into();
        for i in 0..40 {
            let key = format!("K/team-a/x{i}");
            c.object(&key, Some("team-a"));
            let at = RunKey {
                time_us: 0,
                reconcile_id: format!("x{i}").into(),
                candidate: true,
            };
            c.keep(&key, signature.clone(), &at);
        }
        let found = find(&plan, &c, 30, Z);
        let ab = found
            .pairs
            .iter()
            .find(|p| p.failed == "A" && p.later == "B")
            .unwrap();
        assert!(ab.dependency && ab.concentrated, "{ab:?}");
        assert_eq!(ab.after_failed_namespaces, 1);
    }
}
