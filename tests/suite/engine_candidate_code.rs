//! Candidate code of its own: the legacy loop and the phased reconcile run different code for
//! some operations, and some operations exist in one path only. The candidate's code runs in
//! dry-run on the world the control's code is about to run in, and the record says what it would
//! have written differently, per object and field, on the simulator over real HTTP.

use crate::common;

use std::sync::Arc;

use common::hostedcluster::{self as fixture, Leftover, PlantedReconciler, reconcile};
use common::start_sim;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use shadow_reconciler::engine::dryrun::USER_AGENT;
use shadow_reconciler::engine::{Engine, ReconcileRecord, Reconciler, WriteDifference};
use shadow_reconciler::flag::{FlagSpec, LiveFlag};
use shadow_reconciler::reconcilers::hostedcluster::{
    HostedCluster, HostedClusterReconciler, SameCodeReconciler,
};
use shadow_reconciler::sim::{SimConfig, Simulator};
use shadow_reconciler::vocab::{CodePath, Execution, Mode, WriteVerb};

fn persisted(sim: &Simulator) -> u64 {
    sim.audit(|a| a.persisted_mutations(USER_AGENT))
}

/// The differences of operations that exist in both paths.
fn compared(record: &ReconcileRecord) -> Vec<&WriteDifference> {
    record
        .write_differences
        .iter()
        .filter(|d| d.only.is_none())
        .collect()
}

#[tokio::test]
async fn the_phased_ssh_key_fix_deletes_a_copy_the_legacy_loop_keeps() {
    let (sim, client) = start_sim(SimConfig::default()).await;
    fixture::hosted_cluster(&client, "alpha", |spec| spec.ssh_key = None).await;
    fixture::control_plane_object(&client, "alpha", Leftover::Secret("ssh-key")).await;
    let record = reconcile(&client, HostedClusterReconciler, "alpha", Mode::Shadow).await;
    assert_eq!(record.control_error, None, "{record:#?}");
    let ssh = record.candidate_step("SSHKeySync").unwrap();
    assert_eq!(
        (ssh.execution, ssh.outcome),
        (Execution::DryRun, "succeeded"),
        "the candidate's own code ran in dry-run, not the control's result"
    );
    assert_eq!(
        compared(&record),
        [&WriteDifference {
            operation: "SSHKeySync".into(),
            only: None,
            group: String::new(),
            kind: "Secret".into(),
            namespace: Some("clusters-alpha".into()),
            name: "ssh-key".into(),
            subresource: None,
            control: None,
            candidate: Some(WriteVerb::Delete),
            fields: Vec::new(),
            fields_total: 0,
            intended: true,
        }],
        "{:#?}",
        record.write_differences
    );
    // The candidate deleted in dry-run only.
    Api::<Secret>::namespaced(client.clone(), "clusters-alpha")
        .get("ssh-key")
        .await
        .expect("the copy is still there");
    assert_eq!(persisted(&sim), 0);
}

#[tokio::test]
async fn one_sided_operations_report_their_writes_and_no_unblocking() {
    let (sim, client) = start_sim(SimConfig::default()).await;
    fixture::hosted_cluster(&client, "alpha", |_| {}).await;
    let record = reconcile(&client, HostedClusterReconciler, "alpha", Mode::Shadow).await;
    assert_eq!(record.control_error, None, "{record:#?}");
    // The legacy loop's inline status update: in the control only.
    assert!(record.control_step("ValidConfigurationCondition").is_some());
    assert!(
        record
            .candidate_step("ValidConfigurationCondition")
            .is_none()
    );
    // The phased path's check: in the candidate only, executed by it (a dry run), never
    // counted as unblocked.
    assert!(record.control_step("ManagedHSMVersionCheck").is_none());
    let hsm = record.candidate_step("ManagedHSMVersionCheck").unwrap();
    assert_eq!(
        (hsm.execution, hsm.outcome),
        (Execution::DryRun, "succeeded")
    );
    assert!(record.unblocked.is_empty(), "{:?}", record.unblocked);
    let legacy: Vec<&WriteDifference> = record
        .write_differences
        .iter()
        .filter(|d| d.only == Some(CodePath::Legacy))
        .collect();
    assert_eq!(legacy.len(), 1, "{:#?}", record.write_differences);
    let status = legacy[0];
    assert_eq!(
        (
            status.operation.as_str(),
            status.kind.as_str(),
            status.name.as_str(),
            status.subresource.as_deref(),
            status.control,
            status.candidate,
            status.intended
        ),
        (
            "ValidConfigurationCondition",
            "HostedCluster",
            "alpha",
            Some("status"),
            Some(WriteVerb::Update),
            None,
            true
        )
    );
    assert!(
        compared(&record).is_empty(),
        "{:#?}",
        record.write_differences
    );
    assert_eq!(persisted(&sim), 0);
}

#[tokio::test]
async fn a_planted_difference_names_the_objects_and_fields() {
    let (sim, client) = start_sim(SimConfig::default()).await;
    fixture::hosted_cluster(&client, "alpha", |_| {}).await;
    fixture::control_plane_object(
        &client,
        "alpha",
        Leftover::ConfigMap("monitoring-dashboard"),
    )
    .await;
    for round in 0..2 {
        let record = reconcile(&client, PlantedReconciler, "alpha", Mode::Shadow).await;
        assert_eq!(record.control_error, None, "{record:#?}");
        let found = fixture::compared(&record);
        assert_eq!(
            found,
            fixture::planted_alpha(),
            "round {round}: {:#?}",
            record.write_differences
        );
    }
    // The control's code ran for real and the candidate's persisted nothing.
    let monitoring = Api::<ConfigMap>::namespaced(client.clone(), "clusters-alpha")
        .get("monitoring-config")
        .await
        .unwrap();
    assert!(!monitoring.data.unwrap().contains_key("retention"));
    Api::<ConfigMap>::namespaced(client.clone(), "clusters-alpha")
        .get("monitoring-dashboard")
        .await
        .expect("kept");
    assert_eq!(persisted(&sim), 0);
}

#[tokio::test]
async fn identical_code_compared_everywhere_shows_no_difference() {
    let (sim, client) = start_sim(SimConfig::default()).await;
    fixture::hosted_cluster(&client, "alpha", |_| {}).await;
    fixture::hosted_cluster(&client, "beta", |spec| {
        spec.ssh_key = Some(fixture::local("missing"));
    })
    .await;
    // The first reconciles create everything, the later ones meet what the first wrote.
    for round in 0..3 {
        for name in ["alpha", "beta"] {
            let record = reconcile(&client, SameCodeReconciler, name, Mode::Shadow).await;
            let dry_run = record
                .candidate
                .iter()
                .filter(|s| s.execution == Execution::DryRun)
                .count();
            assert!(dry_run >= 5, "{name}: the candidate ran its own code");
            assert!(
                compared(&record).is_empty(),
                "round {round}, {name}: {:#?}",
                record.write_differences
            );
        }
    }
    assert_eq!(persisted(&sim), 0);
}

#[tokio::test]
async fn legacy_code_for_a_phased_only_operation_is_refused() {
    struct Wrong;
    impl Reconciler for Wrong {
        type Object = HostedCluster;
        type State = shadow_reconciler::reconcilers::hostedcluster::State;
        fn operations(&self) -> &'static [&'static str] {
            shadow_reconciler::reconcilers::hostedcluster::OPERATIONS
        }
        fn run<'a>(
            &'a self,
            op: &'a str,
            ctx: &'a mut shadow_reconciler::engine::OpContext<HostedCluster, Self::State>,
        ) -> impl std::future::Future<Output = shadow_reconciler::engine::OpResult> + Send + 'a
        {
            HostedClusterReconciler.run(op, ctx)
        }
        fn legacy_code(&self) -> &'static [&'static str] {
            shadow_reconciler::reconcilers::hostedcluster::PHASED_ONLY
        }
    }
    let (_sim, client) = start_sim(SimConfig::default()).await;
    let plan = HostedClusterReconciler::plan();
    let error = Engine::new(
        Arc::new(Wrong),
        plan.clone(),
        client,
        Arc::new(LiveFlag::new(FlagSpec::default(), vec![plan]).unwrap()),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        error,
        "plan hostedcluster: the reconciler gives operation ManagedHSMVersionCheck legacy code, but it has `only: phased` in the plan: the legacy loop never runs it, so it has no legacy code"
    );
}
