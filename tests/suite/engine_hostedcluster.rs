//! HyperShift's non-blocking cases as candidate predictions, with real API traffic against the
//! simulator: the control (legacy loop) writes for real, the candidate (phased) dry-runs what the
//! control did not reach. The reconciler shares its code between the two paths (the legacy-only
//! step aside), so these cases are about the models' predictions; the cases of candidate code
//! of its own are in `tests/suite/engine_candidate_code.rs`.

use crate::common;

use std::sync::Arc;

use common::hostedcluster::SharedCodeReconciler;
use common::start_sim;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};
use shadow_reconciler::engine::dryrun::USER_AGENT;
use shadow_reconciler::engine::{Engine, MemorySink, ReconcileRecord};
use shadow_reconciler::flag::{FlagSpec, LiveFlag};
use shadow_reconciler::reconcilers::hostedcluster::{
    HostedCluster, HostedClusterReconciler, HostedClusterSpec, HostedControlPlane, LocalRef,
    Release,
};
use shadow_reconciler::sim::{Action, Match, Rule, SimConfig, Simulator};
use shadow_reconciler::vocab::{Execution, Mode};

const NS: &str = "clusters";

struct Fixture {
    sim: Simulator,
    client: kube::Client,
}

fn local(name: &str) -> LocalRef {
    LocalRef { name: name.into() }
}

/// A simulator with the CRDs, the `clusters` namespace, the input secrets, and one HostedCluster
/// whose spec `adjust` may change.
async fn fixture(adjust: impl FnOnce(&mut HostedClusterSpec)) -> Fixture {
    let (sim, client) = start_sim(SimConfig::default()).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [HostedCluster::crd(), HostedControlPlane::crd()] {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let pp = PostParams::default();
    Api::<Namespace>::all(client.clone())
        .create(
            &pp,
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(NS.into()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            },
        )
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    for name in ["pull-secret", "ssh-key", "audit-webhook", "encryption-key"] {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            string_data: Some([("key".to_owned(), "value".to_owned())].into()),
            ..Secret::default()
        };
        secrets.create(&pp, &secret).await.unwrap();
    }
    let bundle = ConfigMap {
        metadata: ObjectMeta {
            name: Some("trust-bundle".into()),
            ..ObjectMeta::default()
        },
        data: Some([("ca.crt".to_owned(), "pem".to_owned())].into()),
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .create(&pp, &bundle)
        .await
        .unwrap();
    let mut spec = HostedClusterSpec {
        release: Release {
            image: "quay.io/openshift-release-dev/ocp-release:4.17.3-x86_64".into(),
        },
        platform: "AWS".into(),
        pull_secret: LocalRef {
            name: "pull-secret".into(),
        },
        ssh_key: Some(local("ssh-key")),
        audit_webhook: Some(local("audit-webhook")),
        additional_trust_bundle: Some(local("trust-bundle")),
        secret_encryption: Some(local("encryption-key")),
        ..HostedClusterSpec::default()
    };
    adjust(&mut spec);
    Api::<HostedCluster>::namespaced(client.clone(), NS)
        .create(&pp, &HostedCluster::new("alpha", spec))
        .await
        .unwrap();
    Fixture { sim, client }
}

impl Fixture {
    async fn reconcile(&self, mode: Mode) -> ReconcileRecord {
        self.reconcile_with(mode, 0.0).await
    }

    async fn reconcile_with(&self, mode: Mode, reexecute_sample_rate: f64) -> ReconcileRecord {
        let sink = MemorySink::new();
        let plan = HostedClusterReconciler::plan();
        let flag = FlagSpec {
            mode,
            ..FlagSpec::default()
        };
        let engine = Engine::new(
            Arc::new(SharedCodeReconciler),
            plan.clone(),
            self.client.clone(),
            Arc::new(LiveFlag::new(flag, vec![plan]).unwrap()),
        )
        .unwrap()
        .with_reexecute_sample_rate(reexecute_sample_rate)
        .with_sink(Arc::new(sink.clone()));
        let hc = Api::<HostedCluster>::namespaced(self.client.clone(), NS)
            .get("alpha")
            .await
            .unwrap();
        engine.reconcile(Arc::new(hc)).await;
        assert_eq!(
            engine.guard().refused(),
            0,
            "the shadow guard never refuses: the dry-run client adds dryRun=All"
        );
        sink.records().pop().expect("one record")
    }

    fn shadow_persisted(&self) -> u64 {
        self.sim.audit(|a| a.persisted_mutations(USER_AGENT))
    }

    fn shadow_dry_runs(&self) -> u64 {
        self.sim.audit(|a| {
            a.totals()
                .get(USER_AGENT)
                .map_or(0, |t| t.dry_run_mutations)
        })
    }
}

fn step<'r>(
    record: &'r ReconcileRecord,
    candidate: bool,
    op: &str,
) -> &'r shadow_reconciler::engine::StepRecord {
    let step = if candidate {
        record.candidate_step(op)
    } else {
        record.control_step(op)
    };
    step.unwrap_or_else(|| panic!("no step {op}"))
}

#[tokio::test]
async fn happy_path_reuses_everything_and_writes_the_condition() {
    let f = fixture(|_| {}).await;
    let record = f.reconcile(Mode::Shadow).await;
    assert_eq!(record.control_error, None, "{record:#?}");
    assert!(
        record
            .control
            .iter()
            .all(|s| s.execution == Execution::Real && s.outcome == "succeeded")
    );
    let reused = record
        .candidate
        .iter()
        .filter(|s| s.execution == Execution::Reused)
        .count();
    assert_eq!(reused, 20, "every candidate step reuses the control");
    assert!(record.unblocked.is_empty() && record.newly_blocked.is_empty());
    assert_eq!(
        f.shadow_dry_runs(),
        0,
        "the happy path makes no dry-run request"
    );
    let hc = Api::<HostedCluster>::namespaced(f.client.clone(), NS)
        .get("alpha")
        .await
        .unwrap();
    let conditions = hc.status.unwrap().conditions;
    let condition = conditions
        .iter()
        .find(|c| c["type"] == "ReconciliationSucceeded")
        .expect("condition written");
    assert_eq!(
        (condition["status"].as_str(), condition["reason"].as_str()),
        (Some("True"), Some("ReconciliatonSucceeded"))
    );
    Api::<HostedControlPlane>::namespaced(f.client.clone(), "clusters-alpha")
        .get("alpha")
        .await
        .expect("the control created the HCP");
}

#[tokio::test]
async fn ssh_key_missing_the_candidate_would_still_create_the_hcp_and_operators() {
    let f = fixture(|spec| spec.ssh_key = Some(local("missing-ssh-key"))).await;
    let record = f.reconcile(Mode::Shadow).await;
    assert_eq!(record.control_first_failure.as_deref(), Some("SSHKeySync"));
    assert_eq!(
        step(&record, false, "CoreHCPChain").outcome,
        "skipped",
        "the legacy loop stops at the SSH key"
    );
    for op in ["CoreHCPChain", "OperatorDeployments", "RBACAndPolicies"] {
        let s = step(&record, true, op);
        assert_eq!(
            (s.execution, s.outcome),
            (Execution::DryRun, "succeeded"),
            "{op}: {s:?}"
        );
        assert!(record.unblocked.iter().any(|u| u == op), "{op} unblocked");
    }
    assert_eq!(
        step(&record, true, "SSHKeySync").execution,
        Execution::Reused
    );
    assert_eq!(
        step(&record, true, "PlatformOIDCAndCSI").execution,
        Execution::NotSimulated
    );
    // Nothing the candidate did persisted.
    assert_eq!(f.shadow_persisted(), 0);
    assert!(f.shadow_dry_runs() > 0);
    let hcp = Api::<HostedControlPlane>::namespaced(f.client.clone(), "clusters-alpha")
        .get_opt("alpha")
        .await
        .unwrap();
    assert!(hcp.is_none(), "the dry-run HCP does not exist");
    let cpo = Api::<Deployment>::namespaced(f.client.clone(), "clusters-alpha")
        .get_opt("control-plane-operator")
        .await
        .unwrap();
    assert!(cpo.is_none());
    let error = record.control_error.unwrap();
    assert!(error.contains("missing-ssh-key"), "{error}");
}

#[tokio::test]
async fn secret_encryption_failing_creates_the_hcp_and_blocks_the_gated_phase() {
    let f = fixture(|spec| spec.secret_encryption = Some(local("missing-kms-key"))).await;
    let record = f.reconcile(Mode::Shadow).await;
    assert_eq!(
        record.control_first_failure.as_deref(),
        Some("SecretEncryptionSync")
    );
    let hcp = step(&record, true, "CoreHCPChain");
    assert_eq!(
        (hcp.execution, hcp.outcome),
        (Execution::DryRun, "succeeded")
    );
    for op in [
        "KubeconfigAndPasswordSync",
        "MonitoringAndCLISecrets",
        "OperatorDeployments",
        "RBACAndPolicies",
        "PublicEndpointExposed",
        "PlatformOIDCAndCSI",
    ] {
        let s = step(&record, true, op);
        assert_eq!(s.outcome, "blocked", "{op}");
        assert_eq!(s.blocked_by, ["SecretEncryptionSync"], "{op}");
    }
    assert_eq!(
        record.newly_blocked,
        ["MonitoringAndCLISecrets"],
        "the legacy loop ran CLI secrets early"
    );
    let candidate = record.candidate_error.unwrap();
    assert!(candidate.starts_with("critical error: "), "{candidate}");
    assert_eq!(f.shadow_persisted(), 0);
}

#[tokio::test]
async fn hcp_creation_failing_blocks_the_gated_phase() {
    let f = fixture(|_| {}).await;
    f.sim.add_fault(Rule {
        name: "hcp-create-fails".into(),
        matches: Match {
            verbs: vec!["patch".into(), "create".into()],
            resource: Some("hostedcontrolplanes.example.shadow-reconciler.io".into()),
            ..Match::default()
        },
        action: Action {
            status: Some(500),
            ..Action::default()
        },
        probability: None,
        count: None,
        per_object: false,
    });
    let record = f.reconcile(Mode::Shadow).await;
    assert_eq!(
        record.control_first_failure.as_deref(),
        Some("CoreHCPChain")
    );
    assert_eq!(
        step(&record, true, "CoreHCPChain").execution,
        Execution::Reused
    );
    for op in [
        "KubeconfigAndPasswordSync",
        "OperatorDeployments",
        "RBACAndPolicies",
        "PublicEndpointExposed",
    ] {
        assert_eq!(step(&record, true, op).blocked_by, ["CoreHCPChain"], "{op}");
    }
    assert_eq!(f.shadow_persisted(), 0);
}

#[tokio::test]
async fn happy_path_shadow_makes_as_many_requests_as_off() {
    let mut counts = Vec::new();
    for mode in [Mode::Off, Mode::Shadow] {
        let f = fixture(|_| {}).await;
        f.reconcile(mode).await; // first reconcile creates everything
        let before = f.sim.audit(shadow_reconciler::sim::Audit::len);
        let record = f.reconcile(mode).await; // steady state
        assert_eq!(record.control_error, None);
        let after = f.sim.audit(shadow_reconciler::sim::Audit::len);
        counts.push(after - before - 1); // minus the test's own GET of the HostedCluster
    }
    assert_eq!(
        counts[0], counts[1],
        "shadow adds no request on the happy path (off, shadow) = {counts:?}"
    );
    assert!(counts[0] > 20);
}

#[tokio::test]
async fn engine_refuses_a_plan_that_does_not_match_the_code() {
    let (_sim, client) = start_sim(SimConfig::default()).await;
    let plan =
        Arc::new(shadow_reconciler::plan::embedded::load("addon-install-progression").unwrap());
    let err = Engine::new(
        Arc::new(HostedClusterReconciler),
        plan.clone(),
        client,
        Arc::new(LiveFlag::new(FlagSpec::default(), vec![plan]).unwrap()),
    )
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("plan addon-install-progression and reconciler disagree: operations in the plan but not in code: DefaultConfigReferences"), "{err}");
    assert!(
        err.contains("operations in code but not in the plan: CPOImageAndNamespace"),
        "{err}"
    );
}

#[tokio::test]
async fn a_sample_rate_re_executes_reused_steps_in_dry_run() {
    let f = fixture(|_| {}).await;
    f.reconcile(Mode::Shadow).await; // create everything
    let record = f.reconcile_with(Mode::Shadow, 1.0).await;
    let dry_run = record
        .candidate
        .iter()
        .filter(|s| s.execution == Execution::DryRun)
        .count();
    assert_eq!(
        dry_run, 20,
        "every step re-executed but the not-simulated one (and the phased-only one, which the control never has): {:#?}",
        record.candidate
    );
    assert!(
        record.changed.is_empty(),
        "the phased order changes no outcome here: {:?}",
        record.changed
    );
    assert_eq!(f.shadow_persisted(), 0);
    assert!(f.shadow_dry_runs() > 0);
}
