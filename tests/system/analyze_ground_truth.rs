//! The analyzer against a planted truth in the simulated cluster: the real simulator, engine,
//! Parquet sink and files, with faults planted in a known number of objects.
//!
//! The truth planted: some HostedClusters carry a release image without a version, so
//! `ReleaseImageVersion` fails for them, and `OperatorDeployments` really uses the version it
//! parses (no version, no Deployments). The correctly classified plan
//! (`tests/data/hostedcluster-corrected.yaml`) has `ReleaseImageVersion` critical and
//! `OperatorDeployments` depending on it; the misclassified one makes it non-critical and drops
//! the dependency. Other faults (missing secrets) are planted in other objects, some in the same
//! objects: unrelated faults that must not be blamed on each other.
//!
//! What is asserted holds whatever the machine's load: how often an object is reconciled varies
//! with it, and so does which requests the `mixed` scenario's 503s hit, but the evidence is
//! counted in objects, the number of faulty objects is fixed by the population (`Faults`), and
//! the add-on world's conflict storm only ever hits the controller's own writes (never the
//! candidate's dry-run retries), so its retries always resolve.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use shadow_reconciler::analyze::{self, FindingCode, Readiness, Reason, Verdict};
use shadow_reconciler::dataset::{ParquetSink, SinkConfig};
use shadow_reconciler::flag::FlagSpec;
use shadow_reconciler::plan::ReconcilePlan;
use shadow_reconciler::scenario::population::Faults;
use shadow_reconciler::scenario::{self, Scenario};
use shadow_reconciler::vocab::Mode;

/// The population's seed; `GROUND_TRUTH_SEED` replays the tests on another population.
fn seed() -> u64 {
    std::env::var("GROUND_TRUTH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
}

const CORRECTED: &str = include_str!("../data/hostedcluster-corrected.yaml");

fn corrected() -> ReconcilePlan {
    ReconcilePlan::from_yaml("hostedcluster-corrected.yaml", CORRECTED).unwrap()
}

fn addon_plan() -> ReconcilePlan {
    shadow_reconciler::plan::embedded::load("addon-install-progression").unwrap()
}

/// The corrected plan's text with the planted misclassification.
fn misclassified_text() -> String {
    let release = "    - name: ReleaseImageVersion\n      description: Parses the release image version.\n      phase: 10\n      category: critical\n";
    let deployments = "dependsOn: [CPOImageAndNamespace, ReleaseImageVersion]";
    assert!(CORRECTED.contains(release) && CORRECTED.contains(deployments));
    CORRECTED
        .replace(release, &release.replace("critical", "non-critical"))
        .replace(deployments, "dependsOn: [CPOImageAndNamespace]")
}

fn misclassified() -> ReconcilePlan {
    ReconcilePlan::from_yaml("hostedcluster-misclassified.yaml", &misclassified_text()).unwrap()
}

/// A quarter of the HostedClusters carry the unparseable release image; some miss a secret too.
const PLANTED: Faults = Faults {
    missing_ssh_key: 0.10,
    missing_audit_webhook: 0.05,
    missing_pull_secret: 0.05,
    bad_release_image: 0.25,
    stale_ssh_key_copy: 0.0,
    managed_hsm_old_release: 0.0,
};

/// What to simulate for one recording.
struct Run {
    hosted_clusters: usize,
    addons: usize,
    scenario: Scenario,
    faults: Option<Faults>,
    seed: u64,
}

impl Run {
    fn planted(hosted_clusters: usize) -> Self {
        Self {
            hosted_clusters,
            addons: 0,
            scenario: Scenario::MissingSecrets,
            faults: Some(PLANTED),
            seed: seed(),
        }
    }
}

/// Simulates `run` under `plans` into `dir`; every record reaches the files.
async fn record(dir: &Path, plans: &[&ReconcilePlan], run: &Run) -> scenario::Summary {
    let sink = Arc::new(ParquetSink::start(SinkConfig::new(dir), None));
    let settings = scenario::Settings {
        hosted_clusters: run.hosted_clusters,
        addons: run.addons,
        scenario: run.scenario,
        faults: run.faults,
        flag: FlagSpec {
            mode: Mode::Shadow,
            ..FlagSpec::default()
        },
        seed: run.seed,
        // A bound for a broken run, not a speed target (the machine may be loaded).
        duration: Duration::from_mins(10),
        settle: Duration::from_millis(500),
        progress: false,
        parquet: Some(sink.clone()),
        plans: plans.iter().map(|p| Arc::new((*p).clone())).collect(),
        ..scenario::Settings::default()
    };
    let summary = scenario::run(&settings).await.unwrap();
    let stats = tokio::task::spawn_blocking(move || sink.shutdown(Duration::from_secs(30)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stats.dropped + stats.lost, 0, "{stats:?}");
    assert_eq!(stats.written, stats.accepted, "{stats:?}");
    assert!(summary.settled, "the run reached its deadline: {summary}");
    summary
}

fn analyse(dir: &Path, plans: &[&ReconcilePlan], min_samples: u64) -> Vec<analyze::PlanReport> {
    let plans: Vec<ReconcilePlan> = plans.iter().map(|p| (*p).clone()).collect();
    let settings = analyze::Settings {
        min_samples,
        ..analyze::Settings::default()
    };
    let analysis = analyze::analyze(dir, &plans, &settings).unwrap();
    assert!(
        analysis.files_skipped.is_empty(),
        "{:?}",
        analysis.files_skipped
    );
    for report in &analysis.plans {
        common::assert_honest(report, min_samples);
    }
    analysis.plans
}

fn analyse_one(dir: &Path, plan: &ReconcilePlan, min_samples: u64) -> analyze::PlanReport {
    let mut reports = analyse(dir, &[plan], min_samples);
    assert_eq!(reports.len(), 1);
    reports.remove(0)
}

fn verdict<'a>(report: &'a analyze::PlanReport, op: &str) -> &'a analyze::VerdictReport {
    report.verdicts.iter().find(|v| v.operation == op).unwrap()
}

/// No detected dependency and no contradicted verdict: what a correct plan must get.
/// No dependency, no contradiction, from the faults a run plants. A dependency that starts at an
/// operation whose every failure is a 409 is not one of the world's: those 409s come from the
/// controller's cache lagging behind its own writes, and land more often on the objects a fault
/// makes retry (docs/analyze.md, "Limits"); it is reported, not failed on, and so are the
/// contradictions it alone explains.
fn assert_no_alarm(report: &analyze::PlanReport, context: &str) {
    let conflict_only = |op: &str| {
        report
            .operations
            .iter()
            .find(|o| o.operation == op)
            .is_some_and(|o| {
                o.failures_by_class.len() == 1 && o.failures_by_class.contains_key("conflict")
            })
    };
    let (scheduled, planted): (Vec<_>, Vec<_>) = report
        .dependencies
        .iter()
        .partition(|d| conflict_only(&d.failed));
    if !scheduled.is_empty() {
        eprintln!("{context}: dependencies from 409s only (not the world's): {scheduled:?}");
    }
    assert!(planted.is_empty(), "{context}: false alarm: {planted:#?}");
    let explained = |op: &str| scheduled.iter().any(|d| d.failed == op || d.later == op);
    let contradicted: Vec<_> = report
        .verdicts
        .iter()
        .filter(|v| v.verdict == Verdict::Contradicted && !explained(&v.operation))
        .collect();
    assert!(
        contradicted.is_empty(),
        "{context}: false alarm: {contradicted:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misclassified_operation_is_contradicted_and_the_suggestion_raises_no_alarm() {
    let dir = tempfile::tempdir().unwrap();
    let plan = misclassified();
    let run = Run::planted(200);
    let summary = record(dir.path(), &[&plan], &run).await;
    assert_eq!(summary.planted.bad_release_image, 50, "{summary}");
    let report = analyse_one(dir.path(), &plan, 30);
    let pairs: Vec<(&str, &str)> = report
        .dependencies
        .iter()
        .map(|d| (d.failed.as_str(), d.later.as_str()))
        .collect();
    assert!(
        pairs.contains(&("ReleaseImageVersion", "OperatorDeployments")),
        "the planted dependency is found: {pairs:?}"
    );
    assert!(
        pairs
            .iter()
            .all(|(failed, _)| *failed == "ReleaseImageVersion"),
        "nothing else is blamed: {pairs:?}"
    );
    let release = verdict(&report, "ReleaseImageVersion");
    assert_eq!(
        (release.verdict, release.reason),
        (Verdict::Contradicted, Reason::HarmsLater),
        "{release:?}"
    );
    assert!(
        release.evidence.contains("OperatorDeployments"),
        "{release:?}"
    );
    let group = report
        .readiness
        .iter()
        .find(|g| g.group == "critical-core")
        .unwrap();
    assert_eq!(group.readiness, Readiness::NotReady, "{group:?}");
    let fixes: Vec<&str> = group
        .findings
        .iter()
        .filter_map(|f| f.fix.as_deref())
        .collect();
    assert!(
        fixes.contains(&"add ReleaseImageVersion to OperatorDeployments's dependsOn"),
        "{fixes:?}"
    );

    // The suggestion puts the classification and the dependency back, and validates.
    let suggestion = analyze::suggest::suggest(&plan, &misclassified_text(), &report).unwrap();
    let suggested = ReconcilePlan::from_yaml("suggested.yaml", &suggestion.text).unwrap();
    let release = suggested.lookup("ReleaseImageVersion").unwrap();
    let deployments = suggested.lookup("OperatorDeployments").unwrap();
    assert_eq!(
        suggested.operation(release).category(),
        shadow_reconciler::vocab::Category::Critical
    );
    assert!(
        suggested
            .operation(deployments)
            .depends_on()
            .contains(release),
        "{}",
        suggestion.text
    );
    assert!(
        suggestion
            .text
            .contains("# analyze: depends on ReleaseImageVersion"),
        "every change carries its evidence: {}",
        suggestion.text
    );

    // Recorded again under the suggestion, the same population raises no alarm.
    let again = tempfile::tempdir().unwrap();
    record(again.path(), &[&suggested], &run).await;
    let report = analyse_one(again.path(), &suggested, 30);
    assert_no_alarm(&report, "the suggested plan");
    assert_eq!(
        verdict(&report, "ReleaseImageVersion").verdict,
        Verdict::Supported
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correct_plan_under_the_same_faults_raises_no_alarm() {
    let dir = tempfile::tempdir().unwrap();
    let plan = corrected();
    record(dir.path(), &[&plan], &Run::planted(200)).await;
    let report = analyse_one(dir.path(), &plan, 30);
    assert_no_alarm(&report, "the corrected plan");
    let release = verdict(&report, "ReleaseImageVersion");
    assert_eq!(
        (release.verdict, release.reason),
        (Verdict::Supported, Reason::Exercised),
        "{release:?}"
    );
    assert!(release.objects >= 50, "{release:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn populations_of_5_to_15_objects_are_inconclusive() {
    for hosted_clusters in [5, 9, 12, 15] {
        let dir = tempfile::tempdir().unwrap();
        let plan = misclassified();
        let run = Run {
            faults: Some(Faults {
                bad_release_image: 0.4,
                missing_pull_secret: 0.2,
                ..PLANTED
            }),
            ..Run::planted(hosted_clusters)
        };
        record(dir.path(), &[&plan], &run).await;
        let report = analyse_one(dir.path(), &plan, 30);
        assert!(report.dependencies.is_empty(), "{:#?}", report.dependencies);
        for v in &report.verdicts {
            assert_eq!(v.verdict, Verdict::Inconclusive, "{hosted_clusters}: {v:?}");
        }
        for g in &report.readiness {
            assert_eq!(g.readiness, Readiness::Inconclusive, "{g:?}");
            assert!(
                g.findings
                    .iter()
                    .any(|f| f.code == FindingCode::TooFewObjects
                        && f.objects_needed == Some(30 - hosted_clusters as u64)),
                "{g:#?}"
            );
        }
        // With a bar the population can reach, only what reaches it is judged (assert_honest).
        analyse_one(dir.path(), &plan, 5);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_add_on_world_says_why_its_status_patches_stay_inconclusive() {
    let dir = tempfile::tempdir().unwrap();
    let plan = addon_plan();
    let run = Run {
        hosted_clusters: 0,
        addons: 60,
        scenario: Scenario::ConflictStorm,
        faults: None,
        seed: seed(),
    };
    let summary = record(dir.path(), &[&plan], &run).await;
    assert!(summary.would_be_retry_successes() > 0, "{summary}");
    let report = analyse_one(dir.path(), &plan, 30);
    assert_no_alarm(&report, "the add-on plan");
    let group = report
        .readiness
        .iter()
        .find(|g| g.group == "status-patches")
        .unwrap();
    assert_eq!(group.readiness, Readiness::Inconclusive);
    let retried: Vec<&str> = group
        .findings
        .iter()
        .filter(|f| f.code == FindingCode::ResolvedByRetry)
        .flat_map(|f| f.operations.iter().map(String::as_str))
        .collect();
    assert!(!retried.is_empty(), "{group:#?}");
    for op in retried {
        let v = verdict(&report, op);
        assert_eq!(v.reason, Reason::ResolvedByRetry, "{v:?}");
        assert!(v.evidence.contains("retry on conflict"), "{v:?}");
    }
    assert!(group.summary.contains("retry"), "{}", group.summary);
    let config = verdict(&report, "DefaultConfigReferences");
    assert_eq!(
        (config.verdict, config.reason),
        (Verdict::Inconclusive, Reason::NotExercised)
    );
}

/// Seeds per scenario of the sweep below; `GROUND_TRUTH_SEEDS` widens it.
fn sweep_seeds() -> u64 {
    std::env::var("GROUND_TRUTH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
}

/// The sweep's population and bar: `GROUND_TRUTH_SWEEP=HOSTED_CLUSTERS,ADDONS,MIN_SAMPLES`
/// (default `40,20,5`; `200,60,30` is `simulate`'s default population at the default bar, a
/// longer run: `cargo test --release --features system-tests --test system analyze_ground_truth::correct_plans`).
fn sweep_size() -> (usize, usize, u64) {
    std::env::var("GROUND_TRUTH_SWEEP")
        .ok()
        .and_then(|s| {
            let v: Vec<u64> = s.split(',').filter_map(|n| n.trim().parse().ok()).collect();
            let [h, a, m] = v.as_slice() else { return None };
            Some((usize::try_from(*h).ok()?, usize::try_from(*a).ok()?, *m))
        })
        .unwrap_or((40, 20, 5))
}

/// Simulations of the sweep in flight at once: a run mostly waits (the controllers' requeue
/// backoffs, the faults' delays, the settling), so more than the two cores keep them busy;
/// `GROUND_TRUTH_CONCURRENCY` changes it.
fn sweep_concurrency() -> usize {
    std::env::var("GROUND_TRUTH_CONCURRENCY")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(4)
}

/// The correct plans, 20 seeds of every scenario: no alarm ever. The populations are small by
/// default to keep the suite fast (a few simulations at a time), so the bar is lowered to 5
/// objects, where verdicts and dependencies can appear; `assert_honest` holds every report to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn correct_plans_raise_no_alarm_on_any_seed_of_any_scenario() {
    use futures_util::StreamExt;
    let (hosted_clusters, addons, min_samples) = sweep_size();
    let runs: Vec<(Scenario, u64)> = Scenario::ALL
        .into_iter()
        .flat_map(|scenario| (1000..1000 + sweep_seeds()).map(move |seed| (scenario, seed)))
        .collect();
    let judged_per_run: Vec<usize> = futures_util::stream::iter(runs)
        .map(|(scenario, seed)| {
            tokio::spawn(async move {
                let plans = [corrected(), addon_plan()];
                let dir = tempfile::tempdir().unwrap();
                let run = Run {
                    hosted_clusters,
                    addons,
                    scenario,
                    faults: None,
                    seed,
                };
                record(dir.path(), &plans.iter().collect::<Vec<_>>(), &run).await;
                // The analysis on a thread of its own: the other runs' controllers keep the
                // runtime's workers.
                tokio::task::spawn_blocking(move || {
                    let mut judged = 0;
                    for report in
                        analyse(dir.path(), &plans.iter().collect::<Vec<_>>(), min_samples)
                    {
                        assert_no_alarm(
                            &report,
                            &format!("{scenario} seed {seed} {}", report.plan),
                        );
                        judged += report
                            .verdicts
                            .iter()
                            .filter(|v| v.verdict != Verdict::Inconclusive)
                            .count();
                    }
                    judged
                })
                .await
                .unwrap()
            })
        })
        .buffer_unordered(sweep_concurrency())
        .map(|run| run.expect("a run of the sweep panicked"))
        .collect()
        .await;
    assert!(
        judged_per_run.iter().sum::<usize>() > 0,
        "the sweep judged something: the bar is reachable"
    );
}
