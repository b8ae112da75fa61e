//! Candidate code of its own on a real kube-apiserver: a planted behavioural difference (the
//! candidate's code patches a field the legacy code does not, and deletes an object the legacy
//! code keeps) is reported with the exact objects and field paths, each one what the server's
//! own audit log shows of the candidate's dry runs; identical code compared everywhere reports no
//! difference over a whole default run (`simulate --same-code`: no noise from timestamps,
//! defaults or ordering); and no write of the candidate persisted.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::apiserver::{AuditEvent, ControlPlane};
use common::hostedcluster::{self as fixture, Leftover, PlantedReconciler, reconcile};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use shadow_reconciler::engine::dryrun::USER_AGENT as SHADOW;
use shadow_reconciler::reconcilers::hostedcluster::HostedClusterReconciler;
use shadow_reconciler::scenario::CONTROLLER_USER_AGENT;
use shadow_reconciler::vocab::{Mode, WriteVerb};

/// The shadow's accepted dry-run writes of `resource` `namespace/name` in the audit log, by verb.
fn dry_runs<'a>(
    audit: &'a [AuditEvent],
    resource: &str,
    namespace: &str,
    name: &str,
) -> Vec<&'a str> {
    audit
        .iter()
        .filter(|e| {
            e.user_agent == SHADOW
                && e.resource == resource
                && e.namespace == namespace
                && e.name == name
                && e.succeeded()
                && e.dry_run()
        })
        .map(|e| e.verb.as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_difference_is_reported_as_the_audit_log_shows_it() {
    let plane = ControlPlane::start();
    let client = plane.client(CONTROLLER_USER_AGENT).await;
    fixture::hosted_cluster(&client, "alpha", |_| {}).await;
    fixture::control_plane_object(
        &client,
        "alpha",
        Leftover::ConfigMap("monitoring-dashboard"),
    )
    .await;
    fixture::hosted_cluster(&client, "beta", |spec| spec.ssh_key = None).await;
    fixture::control_plane_object(&client, "beta", Leftover::Secret("ssh-key")).await;

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
    let record = reconcile(&client, HostedClusterReconciler, "beta", Mode::Shadow).await;
    let ssh: Vec<_> = record
        .write_differences
        .iter()
        .filter(|d| d.operation == "SSHKeySync")
        .map(|d| {
            (
                d.kind.as_str(),
                d.name.as_str(),
                d.control,
                d.candidate,
                d.intended,
            )
        })
        .collect();
    assert_eq!(
        ssh,
        [("Secret", "ssh-key", None, Some(WriteVerb::Delete), true)],
        "{:#?}",
        record.write_differences
    );

    // What the audit log shows: the candidate's dry-run delete and patches, the control's real
    // patches without the field, and no persisted write of the candidate.
    let audit = plane.audit();
    assert_eq!(
        dry_runs(
            &audit,
            "configmaps",
            "clusters-alpha",
            "monitoring-dashboard"
        ),
        ["delete", "delete"],
        "one dry-run delete per reconcile"
    );
    assert_eq!(
        dry_runs(&audit, "secrets", "clusters-beta", "ssh-key"),
        ["delete"]
    );
    assert!(
        dry_runs(&audit, "configmaps", "clusters-alpha", "monitoring-config").contains(&"patch")
    );
    common::apiserver::assert_shadow_persisted_nothing(&audit, SHADOW, CONTROLLER_USER_AGENT);
    let cp = Api::<ConfigMap>::namespaced(client.clone(), "clusters-alpha");
    assert!(cp.get("monitoring-dashboard").await.is_ok(), "kept");
    let monitoring = cp.get("monitoring-config").await.unwrap();
    assert!(!monitoring.data.unwrap().contains_key("retention"));
    assert!(
        Api::<Secret>::namespaced(client.clone(), "clusters-beta")
            .get("ssh-key")
            .await
            .is_ok(),
        "the legacy loop keeps the copy; the candidate deleted it in dry-run only"
    );
}

fn simulate_same_code(data: &Path, kubeconfig: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args([
            "simulate",
            "--same-code",
            "--scenario",
            "mixed",
            "--seed",
            "1",
            // A bound for a broken run, not a speed target.
            "--duration",
            "900",
            "--quiet",
            "--parquet-dir",
        ])
        .arg(data)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .output()
        .expect("run simulate");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "simulate failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn identical_code_compared_over_a_default_run_shows_no_difference() {
    let plane = ControlPlane::start();
    let data = tempfile::tempdir().expect("temp dir");
    let printed = simulate_same_code(data.path(), plane.kubeconfig());
    assert!(printed.contains(", 0 guard refusals"), "{printed}");
    let doc = common::analyze_json(data.path());
    let plan = doc["plans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["plan"] == "hostedcluster")
        .expect("the hostedcluster plan");
    // Every operation of both paths was compared: its candidate code ran in dry-run beside the
    // control's real run (the shipped reconciler reuses most of them instead).
    // A control step the candidate blocked (a 409 early in the control, so the candidate's
    // gate held) was not paired: those are its newly blocked steps.
    for op in plan["operations"].as_array().unwrap() {
        let name = op["operation"].as_str().unwrap();
        if !op["only"].is_null() || name == "PlatformOIDCAndCSI" {
            continue; // one code path only; `shadow: skip`
        }
        let count = |field: &str| op[field].as_u64().unwrap();
        assert!(
            count("executions_real") > 0
                && count("executions_dry_run") + count("newly_blocked") >= count("executions_real"),
            "{name} was not compared: {op}"
        );
    }
    let writes = plan["writes"].as_array().unwrap();
    let compared: Vec<_> = writes.iter().filter(|w| w["only"].is_null()).collect();
    assert!(compared.is_empty(), "noise: {compared:#?}");
    // The legacy-only step's writes are there: the comparison ran and recorded.
    assert!(
        writes
            .iter()
            .any(|w| w["operation"] == "ValidConfigurationCondition"
                && w["objects"].as_u64() > Some(0)),
        "{writes:#?}"
    );
    // No finding about writes: identical code, server-allocated values included.
    for group in plan["readiness"].as_array().expect("readiness") {
        for finding in group["findings"].as_array().expect("findings") {
            assert!(
                !["unexpected-writes", "noisy-fields", "unstable-writes"]
                    .contains(&finding["code"].as_str().unwrap_or_default()),
                "a write finding from identical code: {finding}"
            );
        }
    }
    let audit = plane.audit();
    // The comparison met what the server allocates: the private endpoint Service (its cluster
    // IP and node port), created in dry-run beside the real one, and the owners' UIDs.
    let service_writes = |agent: &str, dry: bool| {
        audit
            .iter()
            .filter(|e| {
                e.user_agent == agent
                    && e.resource == "services"
                    && e.is_write()
                    && e.succeeded()
                    && e.dry_run() == dry
            })
            .count()
    };
    assert!(
        service_writes(SHADOW, true) > 0 && service_writes(CONTROLLER_USER_AGENT, false) > 0,
        "no Service written by both runs: the allocated values were not compared"
    );
    common::apiserver::assert_shadow_persisted_nothing(&audit, SHADOW, CONTROLLER_USER_AGENT);
}
