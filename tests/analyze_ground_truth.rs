//! The analyzer against a planted truth: simulated clusters whose faults are known, recorded to
//! Parquet by the real sink, analysed from the files.
//!
//! The truth planted: 8% of the HostedClusters carry a release image without a version, so
//! `ReleaseImageVersion` fails for them, and `OperatorDeployments` really uses the version it
//! parses (no version, no Deployments). The correctly classified plan
//! (`tests/data/hostedcluster-corrected.yaml`) has `ReleaseImageVersion` critical and
//! `OperatorDeployments` depending on it; the misclassified one makes it non-critical and drops
//! the dependency.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use shadow_reconciler::analyze::{self, Readiness, Verdict};
use shadow_reconciler::dataset::{ParquetSink, SinkConfig};
use shadow_reconciler::engine::Mode;
use shadow_reconciler::plan::ReconcilePlan;
use shadow_reconciler::scenario::{self, Scenario};

/// The population's seed; `GROUND_TRUTH_SEED` replays the tests on another population.
fn seed() -> u64 {
    std::env::var("GROUND_TRUTH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
}

const CORRECTED: &str = include_str!("data/hostedcluster-corrected.yaml");

fn corrected() -> ReconcilePlan {
    ReconcilePlan::from_yaml("hostedcluster-corrected.yaml", CORRECTED).unwrap()
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

/// Simulates `hosted_clusters` HostedClusters with missing inputs under `plan`, into `dir`.
async fn record(dir: &Path, plan: &ReconcilePlan, hosted_clusters: usize, seed: u64) {
    let sink = Arc::new(ParquetSink::start(SinkConfig::new(dir), None));
    let settings = scenario::Settings {
        hosted_clusters,
        addons: 0,
        scenario: Scenario::MissingSecrets,
        mode: Mode::Shadow,
        seed,
        duration: Duration::from_mins(1),
        progress: false,
        parquet: Some(sink.clone()),
        plans: vec![Arc::new(plan.clone())],
        ..scenario::Settings::default()
    };
    let summary = scenario::run(&settings).await.unwrap();
    assert!(
        summary.planted.bad_release_image > 0 || hosted_clusters < 20,
        "{summary}"
    );
    let stats = tokio::task::spawn_blocking(move || sink.shutdown(Duration::from_secs(30)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stats.dropped + stats.lost, 0, "{stats:?}");
    assert_eq!(stats.written, stats.accepted, "{stats:?}");
}

fn analyse(dir: &Path, plan: &ReconcilePlan) -> analyze::PlanReport {
    let analysis = analyze::analyze(
        dir,
        std::slice::from_ref(plan),
        &analyze::Settings::default(),
    )
    .unwrap();
    assert!(
        analysis.files_skipped.is_empty(),
        "{:?}",
        analysis.files_skipped
    );
    let [report] = analysis.plans.as_slice() else {
        panic!("one plan analysed: {analysis:#?}")
    };
    report.clone()
}

fn verdict<'a>(report: &'a analyze::PlanReport, op: &str) -> &'a analyze::VerdictReport {
    report.verdicts.iter().find(|v| v.operation == op).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misclassified_operation_is_contradicted_and_its_dependency_found() {
    let dir = tempfile::tempdir().unwrap();
    let plan = misclassified();
    record(dir.path(), &plan, 200, seed()).await;
    let report = analyse(dir.path(), &plan);
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
    assert_eq!(release.verdict, Verdict::Contradicted, "{release:?}");
    assert!(
        release.evidence.contains("OperatorDeployments"),
        "{release:?}"
    );
    let group = report
        .readiness
        .iter()
        .find(|g| g.operations.iter().any(|o| o == "ReleaseImageVersion"))
        .unwrap();
    assert_eq!(group.readiness, Readiness::NotReady, "{group:?}");

    // The suggestion puts the classification and the dependency back, and validates.
    let suggestion = analyze::suggest::suggest(&plan, &misclassified_text(), &report).unwrap();
    let suggested = ReconcilePlan::from_yaml("suggested.yaml", &suggestion.text).unwrap();
    let release = suggested.lookup("ReleaseImageVersion").unwrap();
    let deployments = suggested.lookup("OperatorDeployments").unwrap();
    assert_eq!(
        suggested.operation(release).category(),
        shadow_reconciler::outcome::Category::Critical
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correct_plan_under_the_same_faults_raises_no_alarm() {
    let dir = tempfile::tempdir().unwrap();
    let plan = corrected();
    record(dir.path(), &plan, 200, seed()).await;
    let report = analyse(dir.path(), &plan);
    assert!(
        report.dependencies.is_empty(),
        "no false alarm: {:#?}",
        report.dependencies
    );
    for v in &report.verdicts {
        assert!(
            matches!(v.verdict, Verdict::Supported | Verdict::Inconclusive),
            "{v:?}"
        );
    }
    assert_eq!(
        verdict(&report, "ReleaseImageVersion").verdict,
        Verdict::Supported
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_little_data_is_inconclusive_not_a_guess() {
    let dir = tempfile::tempdir().unwrap();
    let plan = misclassified();
    record(dir.path(), &plan, 6, seed()).await;
    let report = analyse(dir.path(), &plan);
    assert!(report.dependencies.is_empty(), "{:#?}", report.dependencies);
    for v in &report.verdicts {
        assert_eq!(v.verdict, Verdict::Inconclusive, "{v:?}");
    }
    for g in &report.readiness {
        assert_ne!(g.readiness, Readiness::Ready, "{g:?}");
    }
}
