//! `deploy/` renders with `kubectl kustomize` (base and both overlays) and every document passes
//! schema validation: built-in kinds with kubernetes-validate (strict, Kubernetes 1.37), our CRD
//! kinds against `deploy/crds`, the prometheus-operator kinds against their published models
//! (`tests/python/check_manifests.py`).

mod common;

use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_manifests_render_and_pass_schema_validation() {
    let out = Command::new(common::python())
        .arg(root().join("tests/python/check_manifests.py"))
        .arg(root())
        .output()
        .unwrap();
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
