//! Open Cluster Management's conflict case: status patches that meet 409, with and without the
//! candidate's retry-on-conflict policy.

use crate::common;

use std::sync::Arc;

use common::start_sim;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{Api, PostParams};
use shadow_reconciler::engine::dryrun::USER_AGENT;
use shadow_reconciler::engine::{ConflictResolution, Engine, MemorySink, ReconcileRecord};
use shadow_reconciler::flag::{FlagSpec, GroupRef, LiveFlag};
use shadow_reconciler::reconcilers::addon::{
    AddOnReconciler, ClusterManagementAddOn, ClusterManagementAddOnSpec, ConfigRef,
    InstallStrategy, PlacementRef,
};
use shadow_reconciler::sim::{Action, Match, Rule, SimConfig, Simulator};
use shadow_reconciler::vocab::{ErrorClass, Execution, Mode};

async fn fixture() -> (Simulator, kube::Client) {
    let (sim, client) = start_sim(SimConfig::default()).await;
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &ClusterManagementAddOn::crd())
        .await
        .unwrap();
    let spec = ClusterManagementAddOnSpec {
        install_strategy: InstallStrategy {
            type_: "Placements".into(),
            placements: vec![PlacementRef {
                name: "global".into(),
                namespace: "default".into(),
            }],
        },
        default_configs: vec![ConfigRef {
            group: "addon.open-cluster-management.io".into(),
            resource: "addondeploymentconfigs".into(),
            name: "defaults".into(),
            namespace: "open-cluster-management".into(),
        }],
    };
    Api::<ClusterManagementAddOn>::all(client.clone())
        .create(
            &PostParams::default(),
            &ClusterManagementAddOn::new("observability", spec),
        )
        .await
        .unwrap();
    (sim, client)
}

fn two_conflicts() -> Rule {
    Rule {
        name: "two-409s".into(),
        matches: Match {
            verbs: vec!["patch".into()],
            resource: Some("clustermanagementaddons.example.shadow-reconciler.io".into()),
            subresource: Some("status".into()),
            ..Match::default()
        },
        action: Action {
            status: Some(409),
            ..Action::default()
        },
        probability: None,
        count: Some(2),
        per_object: false,
    }
}

/// One 409 on the next status patch that matches `dry_run` (any when `None`).
fn one_conflict(dry_run: Option<bool>) -> Rule {
    Rule {
        name: "one-409".into(),
        matches: Match {
            dry_run,
            ..two_conflicts().matches
        },
        count: Some(1),
        ..two_conflicts()
    }
}

async fn reconcile(
    client: &kube::Client,
    mode: Mode,
    object: ClusterManagementAddOn,
) -> ReconcileRecord {
    reconcile_sampled(client, mode, object, 0.0).await
}

async fn reconcile_sampled(
    client: &kube::Client,
    mode: Mode,
    object: ClusterManagementAddOn,
    reexecute_sample_rate: f64,
) -> ReconcileRecord {
    let sink = MemorySink::new();
    let flag = FlagSpec {
        mode,
        enforced_groups: vec![
            GroupRef::any_plan("status-patches"),
            GroupRef::any_plan("config-references"),
        ],
        ..FlagSpec::default()
    };
    let plan = AddOnReconciler::plan();
    let engine = Engine::new(
        Arc::new(AddOnReconciler),
        plan.clone(),
        client.clone(),
        Arc::new(LiveFlag::new(flag, vec![plan]).unwrap()),
    )
    .unwrap()
    .with_reexecute_sample_rate(reexecute_sample_rate)
    .with_sink(Arc::new(sink.clone()));
    engine.reconcile(Arc::new(object)).await;
    sink.records().pop().unwrap()
}

async fn progressions(client: &kube::Client) -> usize {
    let addon = Api::<ClusterManagementAddOn>::all(client.clone())
        .get("observability")
        .await
        .unwrap();
    addon
        .status
        .and_then(|s| s.install_progressions)
        .map_or(0, |p| p.len())
}

#[tokio::test]
async fn with_retry_on_conflict_two_409s_then_the_status_is_written() {
    let (sim, client) = fixture().await;
    sim.add_fault(two_conflicts());
    let cached = Api::<ClusterManagementAddOn>::all(client.clone())
        .get("observability")
        .await
        .unwrap();
    let record = reconcile(&client, Mode::Enforce, cached).await;
    let step = record.control_step("PlacementStatus").unwrap();
    assert_eq!(
        (step.outcome, step.conflicts, step.conflict),
        ("succeeded", 2, Some(ConflictResolution::RetriedSucceeded)),
        "{step:?}"
    );
    assert_eq!(progressions(&client).await, 1, "status written");
    let patches = sim.audit(|a| {
        a.records()
            .filter(|r| r.verb == "patch" && !r.dry_run)
            .map(|r| r.code)
            .collect::<Vec<_>>()
    });
    assert_eq!(
        patches,
        [409, 409, 200, 200],
        "two conflicts, the status patch, then the condition"
    );
}

#[tokio::test]
async fn without_retry_the_control_fails_and_the_shadow_says_the_retry_would_have_succeeded() {
    let (sim, client) = fixture().await;
    sim.add_fault(two_conflicts());
    let cached = Api::<ClusterManagementAddOn>::all(client.clone())
        .get("observability")
        .await
        .unwrap();
    let record = reconcile(&client, Mode::Shadow, cached).await;
    let control = record.control_step("PlacementStatus").unwrap();
    assert_eq!(
        (control.outcome, control.error_class, control.conflict),
        (
            "failed",
            Some(ErrorClass::Conflict),
            Some(ConflictResolution::NotRetried)
        )
    );
    let candidate = record.candidate_step("PlacementStatus").unwrap();
    assert_eq!(
        (candidate.execution, candidate.outcome, candidate.conflict),
        (
            Execution::DryRun,
            "succeeded",
            Some(ConflictResolution::WouldHaveSucceeded)
        ),
        "{candidate:?}"
    );
    assert_eq!(record.changed, ["PlacementStatus"]);
    assert_eq!(
        progressions(&client).await,
        0,
        "nothing the shadow did persisted"
    );
    assert_eq!(sim.audit(|a| a.persisted_mutations(USER_AGENT)), 0);
    let error = record.control_error.unwrap();
    assert!(error.contains("Operation cannot be fulfilled"), "{error}");
}

#[tokio::test]
async fn a_second_writer_makes_the_cached_object_stale() {
    let (sim, client) = fixture().await;
    let cached = Api::<ClusterManagementAddOn>::all(client.clone())
        .get("observability")
        .await
        .unwrap();
    // Another controller writes the object after our cache saw it.
    sim.store(|store| {
        let rt = store
            .registry()
            .get(
                "example.shadow-reconciler.io",
                "v1",
                "clustermanagementaddons",
            )
            .cloned()
            .unwrap();
        store.bump(&rt, None, "observability").unwrap();
    });
    let record = reconcile(&client, Mode::Shadow, cached).await;
    assert_eq!(
        record.control_first_failure.as_deref(),
        Some("PlacementStatus")
    );
    let candidate = record.candidate_step("PlacementStatus").unwrap();
    assert_eq!(
        candidate.conflict,
        Some(ConflictResolution::WouldHaveSucceeded),
        "{candidate:?}"
    );
    assert_eq!(
        candidate.conflicts, 1,
        "the dry-run first attempt met the same stale version, then re-fetched"
    );
}

#[tokio::test]
async fn an_unchanged_status_is_not_patched() {
    let (sim, client) = fixture().await;
    let api = Api::<ClusterManagementAddOn>::all(client.clone());
    reconcile(
        &client,
        Mode::Shadow,
        api.get("observability").await.unwrap(),
    )
    .await;
    let before = sim.audit(|a| a.records().filter(|r| r.verb == "patch").count());
    let record = reconcile(
        &client,
        Mode::Shadow,
        api.get("observability").await.unwrap(),
    )
    .await;
    assert_eq!(record.control_error, None);
    let after = sim.audit(|a| a.records().filter(|r| r.verb == "patch").count());
    assert_eq!(
        after, before,
        "no status patch and no condition write when nothing changed"
    );
}

/// The control met a 409; by the time the candidate re-evaluates the step, the conflict is gone
/// (its cache caught up, or the other writer is done): its first attempt succeeds. That is the
/// answer to "would the candidate have succeeded", counted as such though the candidate itself
/// met no 409.
#[tokio::test]
async fn a_reevaluation_that_succeeds_at_its_first_attempt_counts_as_would_have_succeeded() {
    let (sim, client) = fixture().await;
    sim.add_fault(one_conflict(Some(false)));
    let cached = Api::<ClusterManagementAddOn>::all(client.clone())
        .get("observability")
        .await
        .unwrap();
    let record = reconcile(&client, Mode::Shadow, cached).await;
    let control = record.control_step("PlacementStatus").unwrap();
    assert_eq!(
        (control.conflicts, control.conflict),
        (1, Some(ConflictResolution::NotRetried))
    );
    let candidate = record.candidate_step("PlacementStatus").unwrap();
    assert_eq!(
        (
            candidate.execution,
            candidate.outcome,
            candidate.conflicts,
            candidate.conflict
        ),
        (
            Execution::DryRun,
            "succeeded",
            0,
            Some(ConflictResolution::WouldHaveSucceeded)
        ),
        "{candidate:?}"
    );
    let dry_patches = sim.audit(|a| {
        a.records()
            .filter(|r| r.verb == "patch" && r.dry_run && r.code == 200)
            .count()
    });
    assert_eq!(
        dry_patches, 1,
        "the candidate's one dry-run patch succeeded"
    );
}

/// A sampled re-execution of a step the control ran without a conflict answers nothing about
/// conflicts: a 409 it meets (against the control's own fresh write, typically) is counted in
/// no resolution.
#[tokio::test]
async fn a_sampled_reexecution_that_meets_a_409_counts_in_no_resolution() {
    let (sim, client) = fixture().await;
    sim.add_fault(one_conflict(Some(true)));
    let cached = Api::<ClusterManagementAddOn>::all(client.clone())
        .get("observability")
        .await
        .unwrap();
    let record = reconcile_sampled(&client, Mode::Shadow, cached, 1.0).await;
    let control = record.control_step("PlacementStatus").unwrap();
    assert_eq!((control.outcome, control.conflict), ("succeeded", None));
    let candidate = record.candidate_step("PlacementStatus").unwrap();
    assert_eq!(candidate.execution, Execution::DryRun, "{candidate:?}");
    assert!(candidate.conflicts >= 1, "the fault met it: {candidate:?}");
    assert_eq!(candidate.conflict, None, "{candidate:?}");
    for step in record.control.iter().chain(&record.candidate) {
        assert!(
            !matches!(
                step.conflict,
                Some(ConflictResolution::WouldHaveSucceeded | ConflictResolution::WouldHaveFailed)
            ),
            "{step:?}"
        );
    }
}
