//! The simulated cluster end to end: population, scenarios, both controllers, the summary.

use std::time::Duration;

use shadow_reconciler::flag::FlagSpec;
use shadow_reconciler::scenario::{Scenario, Settings, run};
use shadow_reconciler::vocab::Mode;

fn small(scenario: Scenario, mode: Mode) -> Settings {
    Settings {
        hosted_clusters: 40,
        addons: 10,
        scenario,
        flag: FlagSpec {
            mode,
            ..FlagSpec::default()
        },
        seed: 11,
        // A bound for a broken run, not a speed target: the tests assert that the run settled.
        duration: Duration::from_mins(10),
        progress: false,
        ..Settings::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_scenario_finds_unblocked_operations_and_would_be_retry_successes_without_persisting()
{
    let summary = run(&small(Scenario::Mixed, Mode::Shadow)).await.unwrap();
    assert_eq!(summary.shadow_persisted, 0, "{summary}");
    assert_eq!(summary.guard_refusals, 0, "{summary}");
    assert!(summary.shadow_dry_runs > 0, "{summary}");
    assert!(
        summary.planted.missing_ssh_key + summary.planted.missing_audit_webhook > 0,
        "the seed plants missing secrets"
    );
    assert!(
        summary.unblocked() > 0 && summary.unblocked_succeeded() > 0,
        "{summary}"
    );
    assert!(
        summary.would_be_retry_successes() > 0,
        "the conflict storm's 409s would be retried successfully: {summary}"
    );
    assert!(summary.faulted > 0, "1% 503s fired: {summary}");
    assert_eq!(
        summary.reconciles.len(),
        2,
        "both reconcilers ran: {summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_scenario_settles_without_failures_or_shadow_writes() {
    let summary = run(&small(Scenario::Healthy, Mode::Shadow)).await.unwrap();
    // Nothing is planted, so the only failures a healthy world can have are the documented 409s
    // of HostedCluster status writes from a cache lagging behind the reconcile's own writes (how
    // many depends on the machine's load).
    let failures: u64 = summary
        .operations
        .values()
        .map(|c| c.control_failures)
        .sum();
    assert!(
        failures <= summary.conflicts,
        "every control failure is a 409: {summary}"
    );
    // Every HostedCluster reconcile dry-runs the SSH key copy of `SSHKeySync`'s phased code,
    // paired with the legacy code or, when a 409 stopped the control before it, as a step the
    // candidate unblocked (`ValidConfigurationCondition`, `only: legacy`, has no phased code).
    // The candidate's other dry runs are the steps a 409 left unrun in the control: with none
    // unblocked, the paired runs are the shadow's only writes.
    assert!(
        summary.shadow_dry_runs >= summary.reconciles["hostedcluster"],
        "at least one dry run per HostedCluster reconcile: {summary}"
    );
    if summary.unblocked() == 0 {
        assert_eq!(
            summary.shadow_dry_runs, summary.reconciles["hostedcluster"],
            "nothing unblocked: one paired dry run per HostedCluster reconcile, nothing more: {summary}"
        );
    }
    if failures == 0 {
        assert_eq!(summary.unblocked(), 0, "{summary}");
    }
    assert_eq!(summary.shadow_persisted, 0, "{summary}");
    assert!(
        summary.settled,
        "the run settled before its deadline: {summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mode_off_runs_no_candidate() {
    let summary = run(&small(Scenario::MissingSecrets, Mode::Off))
        .await
        .unwrap();
    assert_eq!(summary.shadow_dry_runs, 0, "{summary}");
    assert_eq!(summary.unblocked(), 0, "{summary}");
    assert!(
        summary.control_failed.values().sum::<u64>() > 0,
        "the planted failures still fail: {summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_faulty_scenario_dry_runs_and_never_persists_from_the_shadow() {
    for scenario in [Scenario::MissingSecrets, Scenario::ConflictStorm] {
        let summary = run(&small(scenario, Mode::Shadow)).await.unwrap();
        assert_eq!(summary.shadow_persisted, 0, "{scenario}: {summary}");
        assert_eq!(summary.guard_refusals, 0, "{scenario}: {summary}");
        assert!(summary.shadow_dry_runs > 0, "{scenario}: {summary}");
    }
}
