//! The analyzer against exactly known worlds: objects with planted faults and dependencies,
//! reconciled as often as a test says, recorded by the real Parquet sink and analysed from the
//! files. No API server, so the object counts, the retries and the truth are fixed by the test:
//! nothing here depends on timing.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use shadow_reconciler::analyze::{self, FindingCode, Readiness, Reason, Verdict};
use shadow_reconciler::plan::ReconcilePlan;
use shadow_reconciler::util::Rng;

/// Four independent non-critical operations (the hypothesis), one rollout group.
const PLAN: &str = "apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata:
  name: synthetic
spec:
  operations:
    - name: Namespace
      phase: 1
      category: non-critical
      shadow: dry-run
    - name: Secret
      phase: 2
      category: non-critical
      shadow: dry-run
    - name: Config
      phase: 3
      category: non-critical
      shadow: dry-run
    - name: Deploy
      phase: 4
      category: non-critical
      shadow: dry-run
  legacy:
    order: [Namespace, Secret, Config, Deploy]
  rollout:
    groups:
      - name: everything
        operations: [Namespace, Secret, Config, Deploy]
";

fn synthetic(text: &str) -> Arc<ReconcilePlan> {
    Arc::new(ReconcilePlan::from_yaml("synthetic.yaml", text).unwrap())
}

use common::{Object, Truth, record_world as record};

fn analyse(dir: &Path, plan: &ReconcilePlan, min_samples: u64) -> analyze::PlanReport {
    let settings = analyze::Settings {
        min_samples,
        ..analyze::Settings::default()
    };
    let analysis = analyze::analyze(dir, std::slice::from_ref(plan), &settings).unwrap();
    let report = analysis.plans[0].clone();
    common::assert_honest(&report, min_samples);
    report
}

/// `n` objects with `fault` drawn independently at `rate` each, reconciled 1 to 40 times.
fn population(rng: &mut Rng, n: usize, faults: &[(&'static str, f64)]) -> Vec<Object> {
    (0..n)
        .map(|_| {
            let drawn: Vec<&'static str> = faults
                .iter()
                .filter(|(_, rate)| rng.next_f64() < *rate)
                .map(|(f, _)| *f)
                .collect();
            Object::new(&drawn, 1 + rng.below(40))
        })
        .collect()
}

/// The pair (Namespace, Secret), which every world here observes.
fn namespace_then_secret(report: &analyze::PlanReport) -> &analyze::Pair {
    report
        .pairs
        .iter()
        .find(|p| p.failed == "Namespace" && p.later == "Secret")
        .unwrap_or_else(|| panic!("no pair (Namespace, Secret): {:#?}", report.pairs))
}

fn verdict<'a>(report: &'a analyze::PlanReport, op: &str) -> &'a analyze::VerdictReport {
    report.verdicts.iter().find(|v| v.operation == op).unwrap()
}

#[test]
fn a_planted_dependency_is_found_and_the_suggested_plan_raises_no_alarm() {
    let plan = synthetic(PLAN);
    let truth: Truth = &[("Namespace", "Secret")];
    for seed in [1, 2, 3] {
        let mut rng = Rng::new(seed);
        let objects = population(&mut rng, 300, &[("Namespace", 0.2), ("Config", 0.2)]);
        let dir = tempfile::tempdir().unwrap();
        record(dir.path(), &plan, &objects, truth);
        let report = analyse(dir.path(), &plan, 30);
        let deps: Vec<(&str, &str)> = report
            .dependencies
            .iter()
            .map(|d| (d.failed.as_str(), d.later.as_str()))
            .collect();
        assert_eq!(deps, [("Namespace", "Secret")], "seed {seed}");
        let namespace = verdict(&report, "Namespace");
        assert_eq!(
            (namespace.verdict, namespace.reason),
            (Verdict::Contradicted, Reason::HarmsLater),
            "{namespace:?}"
        );
        let secret = verdict(&report, "Secret");
        assert_eq!(
            (secret.verdict, secret.reason),
            (Verdict::Contradicted, Reason::UndeclaredDependency)
        );
        // The unrelated fault is judged harmless: enough objects ran later operations after it.
        let config = verdict(&report, "Config");
        assert_eq!(
            (config.verdict, config.reason),
            (Verdict::Supported, Reason::FailureHarmless),
            "{config:?}"
        );
        let group = &report.readiness[0];
        assert_eq!(group.readiness, Readiness::NotReady);
        let fixes: Vec<&str> = group
            .findings
            .iter()
            .filter_map(|f| f.fix.as_deref())
            .collect();
        assert!(
            fixes.contains(&"add Namespace to Secret's dependsOn"),
            "{fixes:?}"
        );

        // The suggestion, recorded over the same world, raises no alarm.
        let suggestion = analyze::suggest::suggest(&plan, PLAN, &report).unwrap();
        let suggested = synthetic(&suggestion.text);
        let again = tempfile::tempdir().unwrap();
        record(again.path(), &suggested, &objects, truth);
        let report = analyse(again.path(), &suggested, 30);
        assert!(report.dependencies.is_empty(), "{:#?}", report.dependencies);
        assert!(
            report
                .verdicts
                .iter()
                .all(|v| v.verdict != Verdict::Contradicted),
            "{:#?}",
            report.verdicts
        );
        assert_eq!(
            verdict(&report, "Namespace").verdict,
            Verdict::Supported,
            "now critical, and exercised in {} objects",
            verdict(&report, "Namespace").objects
        );
    }
}

#[test]
fn overlapping_unrelated_faults_raise_no_alarm() {
    let plan = synthetic(PLAN);
    for seed in 0..20 {
        let mut rng = Rng::new(seed);
        // About 9% of the objects carry both faults, each reconciled up to 40 times.
        let objects = population(&mut rng, 300, &[("Namespace", 0.3), ("Config", 0.3)]);
        let dir = tempfile::tempdir().unwrap();
        record(dir.path(), &plan, &objects, &[]);
        let report = analyse(dir.path(), &plan, 30);
        assert!(
            report.dependencies.is_empty(),
            "seed {seed}: {:#?}",
            report.dependencies
        );
        assert!(
            report
                .verdicts
                .iter()
                .all(|v| v.verdict != Verdict::Contradicted),
            "seed {seed}: {:#?}",
            report.verdicts
        );
    }
}

#[test]
fn one_stubborn_object_retried_many_times_proves_nothing() {
    let plan = synthetic(PLAN);
    let mut objects = vec![Object::new(&[], 2); 100];
    // One object with two unrelated faults, retried 2,000 times.
    objects.push(Object::new(&["Namespace", "Secret"], 2_000));
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), &plan, &objects, &[]);
    let report = analyse(dir.path(), &plan, 30);
    assert!(report.dependencies.is_empty(), "{:#?}", report.dependencies);
    let pair = namespace_then_secret(&report);
    assert_eq!((pair.after.failures, pair.after.objects), (1, 1));
    // Namespace's failure was followed by later operations in that one object; Secret's never on
    // its own (Namespace's unexplained failure always came first).
    for (op, objects) in [("Namespace", 1), ("Secret", 0)] {
        let v = verdict(&report, op);
        assert_eq!(
            (v.verdict, v.reason, v.objects),
            (Verdict::Inconclusive, Reason::TooFewObjects, objects),
            "{v:?}"
        );
        assert_eq!(v.objects_needed, 30 - objects);
        assert!(v.evidence.starts_with("failed in 1 object;"), "{v:?}");
    }
    assert_eq!(report.reconciles, 100 * 2 + 2_000);
    assert_eq!(report.objects, 101);
}

#[test]
fn thin_data_is_inconclusive_until_the_objects_reach_min_samples() {
    let plan = synthetic(PLAN);
    let truth: Truth = &[("Namespace", "Secret")];
    for objects_n in 5..=15 {
        // Every other object carries the planted fault; each is reconciled 60 times.
        let objects: Vec<Object> = (0..objects_n)
            .map(|i| Object::new(if i % 2 == 0 { &["Namespace"] } else { &[] }, 60))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        record(dir.path(), &plan, &objects, truth);
        let report = analyse(dir.path(), &plan, 30);
        assert!(report.dependencies.is_empty(), "{objects_n} objects");
        for v in &report.verdicts {
            assert_eq!(
                v.verdict,
                Verdict::Inconclusive,
                "{objects_n} objects: {v:?}"
            );
        }
        let group = &report.readiness[0];
        assert_eq!(group.readiness, Readiness::Inconclusive);
        assert!(
            group
                .findings
                .iter()
                .any(|f| f.code == FindingCode::TooFewObjects && f.operations.is_empty()),
            "the plan's own object count is named: {group:#?}"
        );
        // A lower bar judges only what reaches it (`analyse` holds every report to it), and does
        // judge what does: from 14 objects (7 after, 7 baseline) 7 of 7 against 0 of 7 separates.
        let low = analyse(dir.path(), &plan, 5);
        let found = low
            .dependencies
            .iter()
            .any(|d| d.failed == "Namespace" && d.later == "Secret");
        assert_eq!(
            found,
            objects_n >= 14,
            "{objects_n} objects: {:#?}",
            low.pairs
        );
    }
}

#[test]
fn a_healthy_world_is_inconclusive_and_says_how_to_get_evidence() {
    let plan = synthetic(PLAN);
    let objects = vec![Object::new(&[], 3); 80];
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), &plan, &objects, &[]);
    let report = analyse(dir.path(), &plan, 30);
    for v in &report.verdicts {
        assert_eq!(
            (v.verdict, v.reason),
            (Verdict::Inconclusive, Reason::NotExercised)
        );
        assert!(
            v.evidence.contains("never failed in the 80 objects"),
            "{v:?}"
        );
    }
    let group = &report.readiness[0];
    assert_eq!(group.readiness, Readiness::Inconclusive);
    assert!(
        group.summary.contains("never exercised") && group.summary.contains("changes nothing"),
        "{}",
        group.summary
    );
    for f in &group.findings {
        assert_eq!(f.code, FindingCode::NotExercised);
        let next = f.next_step.as_deref().unwrap();
        assert!(
            next.contains("changes nothing observed so far") && next.contains("simulate"),
            "{next}"
        );
    }
}

#[test]
fn retries_that_fail_differently_from_the_first_observation_change_nothing() {
    let plan = synthetic(PLAN);
    // 60 objects fail at Namespace; Secret fails after it only on their retries (19 of their 20
    // reconciles). Counted per reconcile that is 95% against a baseline of 0%; per object (first
    // observation) it is 0 of 60.
    let mut objects = vec![Object::new(&[], 20); 140];
    for _ in 0..60 {
        let mut o = Object::new(&["Namespace"], 20);
        o.retry_faults = vec!["Secret"];
        objects.push(o);
    }
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), &plan, &objects, &[]);
    let report = analyse(dir.path(), &plan, 30);
    assert!(report.dependencies.is_empty(), "{:#?}", report.dependencies);
    let pair = namespace_then_secret(&report);
    assert_eq!(
        (pair.after.failures, pair.after.objects),
        (0, 60),
        "{pair:?}"
    );
    let secret = &report
        .operations
        .iter()
        .find(|o| o.operation == "Secret")
        .unwrap();
    assert_eq!(
        secret.failures,
        60 * 19,
        "the retries' failures are still counted as failures"
    );
}

#[test]
fn a_dependency_the_data_points_at_without_enough_objects_holds_the_verdict_back() {
    let plan = synthetic(PLAN);
    let truth: Truth = &[("Namespace", "Secret")];
    // 180 objects fail at Namespace, and Secret after it; only 20 show Secret's baseline.
    let mut objects = vec![Object::new(&["Namespace"], 2); 180];
    objects.extend(vec![Object::new(&[], 2); 20]);
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), &plan, &objects, truth);
    let report = analyse(dir.path(), &plan, 30);
    let pair = namespace_then_secret(&report);
    assert!(pair.separated && !pair.dependency, "{pair:?}");
    // Namespace's failure was followed by later operations in 180 objects: without the pair it
    // would read `failure-harmless`. The pair holds it back, naming the 10 missing objects.
    let v = verdict(&report, "Namespace");
    assert_eq!(
        (v.verdict, v.reason, v.objects_needed),
        (Verdict::Inconclusive, Reason::TooFewObjects, 10),
        "{v:?}"
    );
    assert!(
        v.evidence
            .contains("that would be an undeclared dependency"),
        "{v:?}"
    );
    assert_eq!(verdict(&report, "Secret").verdict, Verdict::Inconclusive);
    assert_eq!(report.readiness[0].readiness, Readiness::Inconclusive);
}

#[test]
fn an_operation_the_candidate_newly_blocks_is_a_notice_not_a_stop() {
    // Deploy runs first in the legacy loop; in phased order it comes last, gated on critical
    // failures, so when the critical Namespace fails the candidate blocks what the control ran.
    let text = PLAN
        .replace(
            "    - name: Namespace\n      phase: 1\n      category: non-critical",
            "    - name: Namespace\n      phase: 1\n      category: critical",
        )
        .replace(
            "    - name: Deploy\n      phase: 4\n      category: non-critical",
            "    - name: Deploy\n      phase: 4\n      category: non-critical\n      gate: no-critical-failure",
        )
        .replace(
            "order: [Namespace, Secret, Config, Deploy]",
            "order: [Deploy, Namespace, Secret, Config]",
        );
    let plan = synthetic(&text);
    let mut objects = vec![Object::new(&["Namespace"], 3); 40];
    objects.extend(vec![Object::new(&[], 3); 60]);
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), &plan, &objects, &[]);
    let report = analyse(dir.path(), &plan, 30);
    let group = &report.readiness[0];
    assert_ne!(group.readiness, Readiness::NotReady, "{group:#?}");
    let notice = group
        .findings
        .iter()
        .find(|f| f.code == FindingCode::NewlyBlocked)
        .unwrap_or_else(|| panic!("{group:#?}"));
    assert_eq!(notice.operations, ["Deploy"]);
    assert!(
        notice.evidence.contains("in 120 reconciles of 40 objects"),
        "{notice:?}"
    );
    assert!(notice.fix.as_deref().unwrap().contains("gate: none"));
    assert!(
        group
            .summary
            .contains("note: enforcing blocks Deploy, which the legacy loop ran"),
        "{}",
        group.summary
    );
    assert_eq!(
        report
            .operations
            .iter()
            .find(|o| o.operation == "Deploy")
            .unwrap()
            .newly_blocked,
        120
    );
}

/// A step that had nothing to do (a branch the object does not take) runs, but is no evidence:
/// the candidate never "unblocked" it, and the ordering pairs do not observe it.
#[test]
fn steps_with_nothing_to_do_are_neither_unblocked_nor_observed() {
    let plan = synthetic(PLAN);
    let mut objects = Vec::new();
    for faulty in [true, false] {
        for idle in [true, false] {
            for _ in 0..50 {
                let mut o = Object::new(if faulty { &["Namespace"] } else { &[] }, 3);
                if idle {
                    o.idle = vec!["Secret"];
                }
                objects.push(o);
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), &plan, &objects, &[]);
    let report = analyse(dir.path(), &plan, 30);
    let op = |name: &str| {
        report
            .operations
            .iter()
            .find(|o| o.operation == name)
            .unwrap()
    };
    // The control stops at Namespace in the 100 faulty objects' 300 reconciles; the candidate
    // runs the rest there, and Secret did something in 50 of those objects only.
    assert_eq!(
        (op("Secret").unblocked, op("Secret").unblocked_succeeded),
        (150, 150)
    );
    assert_eq!(op("Config").unblocked, 300);
    assert_eq!(
        (
            op("Namespace").blocked_in_control,
            op("Namespace").blocked_then_run_by_candidate
        ),
        (900, 750),
        "Secret's idle dry runs are not runs of what the failure blocked"
    );
    assert_eq!(
        op("Secret").executions_dry_run,
        300,
        "an idle step is still an execution"
    );
    let pair = namespace_then_secret(&report);
    assert_eq!(
        (pair.after.objects, pair.baseline.objects),
        (50, 50),
        "only the objects where Secret did something are observations: {pair:?}"
    );
}
