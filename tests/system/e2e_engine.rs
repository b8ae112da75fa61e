//! The engine on a real kube-apiserver: the `mixed` scenario's population (missing secrets, bad
//! release images, a second writer racing the add-on controller) created in the server, both
//! controllers in shadow, run by the same `simulate` a user runs (`--kubeconfig`). The server's
//! own audit log must show no persisted write from the shadow's user agent, the controllers'
//! writes must be there, and `analyze` must find the dependencies it finds on the simulator.
//!
//! `SHADOW_RECONCILER_E2E_KUBECONFIG=FILE` runs it on a cluster of your own instead (it must be
//! fresh; see docs/testing.md): the audit log is then not ours to read, and the objects' field
//! managers stand in for it.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use common::apiserver::ControlPlane;
use shadow_reconciler::engine::dryrun::USER_AGENT as SHADOW;
use shadow_reconciler::scenario::CONTROLLER_USER_AGENT;

const HOSTED_CLUSTERS: &str = "200";
const ADDONS: &str = "60";

fn simulate(data: &Path, kubeconfig: Option<&Path>) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"));
    command.args([
        "simulate",
        "--scenario",
        "mixed",
        "--seed",
        "1",
        "--hosted-clusters",
        HOSTED_CLUSTERS,
        "--addons",
        ADDONS,
        // A bound for a broken run, not a speed target: a run ends when every object was
        // reconciled and the controllers have been quiet for the settle time.
        "--duration",
        "900",
        "--parquet-dir",
    ]);
    command.arg(data);
    if let Some(kubeconfig) = kubeconfig {
        command.arg("--kubeconfig").arg(kubeconfig);
    }
    let out = command.output().expect("run simulate");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "simulate failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `analyze`'s detected dependencies, as `plan: first -> then`.
/// The dependencies analyze finds from the planted faults: those whose first operation failed
/// otherwise than on 409s and 503s (which scheduling decides on both servers, and only the
/// simulator injects 503s: docs/analyze.md, "Limits").
fn dependencies(data: &Path) -> BTreeSet<String> {
    let doc = common::analyze_json(data);
    let mut found = BTreeSet::new();
    for plan in doc["plans"].as_array().expect("plans") {
        let planted = |op: &str| {
            plan["operations"]
                .as_array()
                .expect("operations")
                .iter()
                .find(|o| o["operation"] == op)
                .and_then(|o| o["failures_by_class"].as_object())
                .is_some_and(|c| c.keys().any(|k| k != "conflict" && k != "server"))
        };
        for dep in plan["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .filter(|d| planted(d["failed"].as_str().unwrap_or_default()))
        {
            found.insert(format!(
                "{}: {} -> {}",
                plan["plan"].as_str().unwrap_or_default(),
                dep["failed"]
                    .as_str()
                    .expect("a dependency names the failed operation"),
                dep["later"]
                    .as_str()
                    .expect("a dependency names the later operation"),
            ));
        }
    }
    found
}

/// The field managers of every object of the population (what persisted writes leave behind).
fn managers(kubeconfig: &Path, kubectl: &Path) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for kind in [
        "hostedclusters.example.shadow-reconciler.io",
        "hostedcontrolplanes.example.shadow-reconciler.io",
        "clustermanagementaddons.example.shadow-reconciler.io",
        "secrets",
        "configmaps",
    ] {
        let out = Command::new(kubectl)
            .env("KUBECONFIG", kubeconfig)
            .args(["get", kind, "-A", "-o", "json", "--show-managed-fields"])
            .output()
            .expect("run kubectl");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("list JSON");
        for item in list["items"].as_array().into_iter().flatten() {
            for entry in item["metadata"]["managedFields"]
                .as_array()
                .into_iter()
                .flatten()
            {
                found.insert(entry["manager"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    found
}

#[test]
fn shadow_on_kube_apiserver_persists_nothing_and_finds_what_the_simulator_finds() {
    let external =
        std::env::var_os("SHADOW_RECONCILER_E2E_KUBECONFIG").map(std::path::PathBuf::from);
    let plane = external.is_none().then(ControlPlane::start);
    let kubeconfig = external
        .clone()
        .or_else(|| plane.as_ref().map(|p| p.kubeconfig().to_path_buf()))
        .expect("a cluster");
    let data = tempfile::tempdir().expect("temp dir");
    let (real_data, sim_data) = (data.path().join("real"), data.path().join("simulated"));

    let printed = simulate(&real_data, Some(&kubeconfig));
    assert!(printed.contains("guard refusals (must be 0)"), "{printed}");
    assert!(printed.contains(", 0 guard refusals"), "{printed}");

    // The shadow's managers never appear on any object: no shadow write persisted.
    let managers = managers(
        &kubeconfig,
        &common::apiserver::kube_bin_dir().join("kubectl"),
    );
    let shadow_manager = SHADOW.split('/').next().unwrap_or(SHADOW);
    assert!(
        !managers.iter().any(|m| m.starts_with(shadow_manager)),
        "a shadow write persisted: managers {managers:?}"
    );

    if let Some(plane) = &plane {
        common::apiserver::assert_shadow_persisted_nothing(
            &plane.audit(),
            SHADOW,
            CONTROLLER_USER_AGENT,
        );
    }

    simulate(&sim_data, None);
    let (real, simulated) = (dependencies(&real_data), dependencies(&sim_data));
    assert!(!simulated.is_empty(), "the simulator found no dependency");
    assert_eq!(
        real, simulated,
        "analyze finds other dependencies on the real server than on the simulator"
    );
    eprintln!("dependencies found on both: {real:?}");
}

/// `simulate --kubeconfig` says what is wrong with the cluster it was given, and where.
#[test]
fn simulate_on_a_cluster_refuses_a_used_one_and_a_missing_kubeconfig() {
    let missing = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args([
            "simulate",
            "--no-parquet",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ])
        .output()
        .expect("run simulate");
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success());
    assert!(
        stderr.contains("cannot read the kubeconfig /nonexistent/kubeconfig"),
        "{stderr}"
    );

    let plane = ControlPlane::start();
    plane.kubectl(&["create", "namespace", "team-0"]);
    let used = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args([
            "simulate",
            "--no-parquet",
            "--hosted-clusters",
            "2",
            "--addons",
            "1",
        ])
        .arg("--kubeconfig")
        .arg(plane.kubeconfig())
        .output()
        .expect("run simulate");
    let stderr = String::from_utf8_lossy(&used.stderr);
    assert!(!used.status.success());
    assert!(
        stderr.contains("the cluster already holds a population (namespace team-0 exists)"),
        "{stderr}"
    );
    // It refused before changing anything: not even the CRDs were applied.
    let crd = plane.kubectl_output(&[
        "get",
        "customresourcedefinition",
        "hostedclusters.example.shadow-reconciler.io",
    ]);
    assert!(
        !crd.status.success() && String::from_utf8_lossy(&crd.stderr).contains("NotFound"),
        "the CRD was applied before the refusal: {}",
        String::from_utf8_lossy(&crd.stdout)
    );
}
