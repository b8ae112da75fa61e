//! What a simulated run guarantees from run to run, and its deadline: the same seed gives the same
//! population, the same planted and injected faults per object, the same objects failing at the
//! end and the same verdicts, however the reconciles interleave; `--duration` ends a run that
//! cannot settle, and the summary says so. Counts that depend on scheduling (reconciles, requests,
//! conflicts from a stale cache) are not compared: docs/performance.md, "Reproducibility".

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shadow_reconciler::analyze;
use shadow_reconciler::dataset::{ParquetSink, SinkConfig};
use shadow_reconciler::plan::embedded;
use shadow_reconciler::scenario;

/// One `mixed` run of 60 HostedClusters and 20 add-ons, its records in `dir`.
async fn run(dir: &Path) -> scenario::Summary {
    let parquet = Arc::new(ParquetSink::start(SinkConfig::new(dir), None));
    let settings = scenario::Settings {
        hosted_clusters: 60,
        addons: 20,
        seed: 11,
        progress: false,
        parquet: Some(parquet.clone()),
        // Ample: the run settles long before on any machine.
        duration: Duration::from_mins(10),
        ..scenario::Settings::default()
    };
    let summary = scenario::run(&settings).await.expect("run");
    tokio::task::spawn_blocking(move || parquet.shutdown(Duration::from_mins(1)))
        .await
        .expect("join")
        .expect("parquet");
    summary
}

/// Every operation's verdict and every group's readiness, by plan.
fn verdicts(dir: &Path) -> BTreeMap<String, Vec<String>> {
    let plans = ["hostedcluster", "addon-install-progression"]
        .map(|p| embedded::load(p).expect("shipped plan"));
    let analysis = analyze::analyze(dir, &plans, &analyze::Settings::default()).expect("analysis");
    analysis
        .plans
        .iter()
        .map(|plan| {
            let mut lines: Vec<String> = plan
                .verdicts
                .iter()
                .map(|v| format!("{} {:?} {:?}", v.operation, v.verdict, v.reason))
                .collect();
            lines.extend(
                plan.readiness
                    .iter()
                    .map(|g| format!("group {} {:?}", g.group, g.readiness)),
            );
            (plan.plan.clone(), lines)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_seed_gives_the_same_faults_per_object_and_the_same_verdicts() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = run(a.path()).await;
    let second = run(b.path()).await;
    assert!(first.settled && second.settled, "both runs settle");
    assert_eq!(first.planted, second.planted, "the same population");
    assert_eq!(first.objects, second.objects, "every object reconciled");
    assert_eq!(
        first.failing_objects, second.failing_objects,
        "the same objects failing at the end"
    );
    let hc_failing = first.failing_objects["hostedcluster"];
    assert!(
        hc_failing > 0,
        "the mixed scenario leaves failing HostedClusters"
    );
    assert_eq!(
        first.failing_objects.get("addon-install-progression"),
        Some(&0),
        "every add-on's conflicts are transient"
    );
    assert_eq!(verdicts(a.path()), verdicts(b.path()), "the same verdicts");
}

#[test]
fn the_deadline_ends_a_run_that_cannot_settle_and_the_summary_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    // Settling takes 2 s of quiet after the last object's first reconcile: never within 2 s.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .current_dir(dir.path())
        .args([
            "simulate",
            "--quiet",
            "--no-parquet",
            "--hosted-clusters",
            "20",
            "--duration",
            "2",
        ])
        .output()
        .expect("simulate runs");
    let elapsed = started.elapsed();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    // Either the population was created in time and the run was cut short, or it was not
    // (a loaded machine, a debug build): both are said, neither hangs.
    let cut_short = out.status.success()
        && stdout
            .lines()
            .next()
            .is_some_and(|l| l.contains("ended by the deadline (--duration) before it settled"));
    let not_created = !out.status.success()
        && stderr.contains("the population was not created within the run's 2 s");
    assert!(cut_short || not_created, "{stdout}\n{stderr}");
    // The bound that holds on any machine: the run does not go on to settle.
    assert!(elapsed < Duration::from_mins(1), "{elapsed:?}");
}
