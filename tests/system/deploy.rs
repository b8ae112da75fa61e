//! `deploy/` renders with `kubectl kustomize` (base and both overlays) and every document passes
//! schema validation: built-in kinds with kubernetes-validate (strict, Kubernetes 1.37), our CRD
//! kinds against `deploy/crds`, the prometheus-operator kinds against their published models
//! (`tests/python/check_manifests.py`). The Helm chart renders the same objects as the overlays
//! (`helm template` against `kubectl kustomize`), with Helm built by `scripts/helm.sh`.

use crate::common;

use std::path::Path;
use std::process::Command;

/// The checker, with the Helm it renders the chart with.
fn checker() -> Command {
    let mut command = Command::new(common::python());
    command
        .arg(root().join("tests/python/check_manifests.py"))
        .arg("--helm")
        .arg(common::built_tool("SHADOW_RECONCILER_HELM", "helm.sh"));
    command
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_manifests_render_and_pass_schema_validation() {
    let out = checker().arg(root()).output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "check_manifests.py failed:\n{report}");
    assert!(
        report.contains("documents valid"),
        "a summary of what was validated:\n{report}"
    );
}

/// Copies `deploy/` under a fresh root, applies `edits` (file, from, to), and runs the checker.
fn check_edited(edits: &[(&str, &str, &str)]) -> (bool, String) {
    let tmp = tempfile::tempdir().unwrap();
    common::copy_dir(&root().join("deploy"), &tmp.path().join("deploy"));
    for (file, from, to) in edits {
        let path = tmp.path().join("deploy").join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file} has no {from:?} to edit");
        std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    }
    let out = checker().arg(tmp.path()).output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The least-privilege checks fail on what they guard: a delete for every name, a grant outside
/// the justified table, egress to anywhere, OTLP off loopback, probes on a port `--listen` does
/// not open to the kubelet.
#[test]
fn widened_rbac_listen_addresses_and_egress_fail_the_manifest_test() {
    let (ok, report) = check_edited(&[
        (
            "overlays/standalone/rbac-reconcilers.yaml",
            "    resourceNames: [\"ssh-key\"]\n",
            "",
        ),
        (
            "overlays/standalone/rbac-reconcilers.yaml",
            "    resourceNames: [\"etcd-recovery\"]\n",
            "",
        ),
        (
            "base/apiserver-egress.yaml",
            "cidr: 192.0.2.1/32",
            "cidr: 0.0.0.0/0",
        ),
        (
            "base/networkpolicy.yaml",
            "    - to:\n        - namespaceSelector:",
            "    - to: []\n    - to:\n        - namespaceSelector:",
        ),
        (
            "overlays/sidecar/sidecar-patch.yaml",
            "- --otlp-grpc\n            - 127.0.0.1:4317",
            "- --otlp-grpc\n            - 0.0.0.0:4317",
        ),
        (
            "overlays/standalone/deployment.yaml",
            "            - --listen\n            - 0.0.0.0:8080\n",
            "",
        ),
    ]);
    assert!(!ok, "the checker passed widened manifests:\n{report}");
    for expected in [
        "delete on secrets for every name",
        "create on jobs for every name",
        "patch on jobs for every name",
        "ipBlock.cidr: 0.0.0.0/0 is any destination",
        "to any destination: name them",
        "--otlp-grpc 0.0.0.0:4317: OTLP is unauthenticated",
        "the probes ask port 8080, but `--listen` is not given",
    ] {
        assert!(
            report.contains(expected),
            "no {expected:?} in the report:\n{report}"
        );
    }
}

/// Nothing listens beyond loopback unless asked: the defaults `--help` shows.
#[test]
fn run_and_ingest_listen_on_loopback_by_default() {
    for command in ["run", "ingest"] {
        let out = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
            .args([command, "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{command} --help failed");
        assert!(
            !help.contains("0.0.0.0:8080]") && !help.contains("default: 0.0.0.0"),
            "{command} listens on every interface by default:\n{help}"
        );
        assert!(
            help.contains("[default: 127.0.0.1:8080]"),
            "{command}'s --listen default:\n{help}"
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args(["ingest", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for default in ["[default: 127.0.0.1:4317]", "[default: 127.0.0.1:4318]"] {
        assert!(
            help.contains(default),
            "ingest --help lacks {default}:\n{help}"
        );
    }
}

/// The API server's CIDR must land on the API server's rule, and be a CIDR: a replacement
/// pointing at another rule, or a value that is no CIDR, fails the manifest test.
#[test]
fn the_api_server_cidr_lands_on_the_api_server_rule() {
    let (ok, report) = check_edited(&[
        (
            "base/kustomization.yaml",
            "spec.egress.1.to.0.ipBlock.cidr",
            "spec.egress.2.to.0.ipBlock.cidr",
        ),
        (
            "base/networkpolicy.yaml",
            "cidr: API_SERVER_CIDR",
            "cidr: 10.9.0.0/16",
        ),
        // Another rule with an ipBlock, for the replacement to land on (a path to no ipBlock
        // fails the render).
        (
            "base/networkpolicy.yaml",
            "        - namespaceSelector:\n            matchLabels:\n              kubernetes.io/metadata.name: observability",
            "        - ipBlock:\n            cidr: 10.1.0.0/16",
        ),
        (
            "base/apiserver-egress.yaml",
            "cidr: 192.0.2.1/32",
            "cidr: 10.0.0.0/33",
        ),
    ]);
    assert!(!ok, "the checker passed a misplaced CIDR:\n{report}");
    for expected in [
        "10.9.0.0/16 is not the API server's CIDR of deploy/base/apiserver-egress.yaml (10.0.0.0/33)",
        "'10.0.0.0/33' is not a CIDR",
    ] {
        assert!(
            report.contains(expected),
            "no {expected:?} in the report:\n{report}"
        );
    }
}

/// The chart and the overlays are held equal field by field: a probe changed in the chart's
/// Deployment, a grant added to the kustomize RBAC the chart's template was generated from (the
/// chart stale), and a chart object kustomize does not render are each reported.
#[test]
fn a_chart_that_drifts_from_the_overlays_fails_the_manifest_test() {
    let (ok, report) = check_edited(&[
        (
            "helm/shadow-reconciler/templates/deployment.yaml",
            "            periodSeconds: 5\n",
            "            periodSeconds: 7\n",
        ),
        (
            "overlays/standalone/rbac-reconcilers.yaml",
            "    verbs: [\"get\", \"list\", \"watch\"]\n",
            "    verbs: [\"get\", \"list\", \"watch\", \"update\"]\n",
        ),
        (
            "helm/shadow-reconciler/templates/service.yaml",
            "apiVersion: v1\nkind: Service\n",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: {{ .Release.Namespace }}\n---\napiVersion: v1\nkind: Service\n",
        ),
    ]);
    assert!(!ok, "a drifted chart passed:\n{report}");
    for expected in [
        "helm:standalone: deploy/helm/shadow-reconciler/templates/deployment.yaml: Deployment shadow-reconciler/shadow-reconciler: spec.template.spec.containers[0].readinessProbe.periodSeconds: chart gives 7, kustomize",
        "helm:standalone: deploy/helm/shadow-reconciler/templates/rbac-reconcilers.yaml: ClusterRole shadow-reconciler-hostedcluster: rules[0].verbs: chart gives [\"get\", \"list\", \"watch\"], kustomize",
        "helm:standalone: deploy/helm/shadow-reconciler/templates/service.yaml: ConfigMap shadow-reconciler/extra: (document): rendered by the chart, not by kustomize",
    ] {
        assert!(
            report.contains(expected),
            "not reported: {expected}\n{report}"
        );
    }
}
