//! The committed CRDs in `deploy/crds/` are what the Rust types generate now.

use std::path::Path;

use shadow_reconciler::manifests;

#[test]
fn the_committed_manifests_are_up_to_date() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let stale = manifests::stale(root).unwrap();
    assert!(
        stale.is_empty(),
        "stale generated manifests: {stale:?}; run `cargo run -- manifests` and commit the result"
    );
}

#[test]
fn a_changed_or_missing_manifest_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let written = manifests::write(dir.path()).unwrap();
    assert!(
        written.len() >= 7,
        "three CRDs, their kustomization and the chart's copies"
    );
    assert!(manifests::stale(dir.path()).unwrap().is_empty());
    let edited = &written[0];
    let text = std::fs::read_to_string(edited).unwrap();
    std::fs::write(edited, text.replace("type: string", "type: integer")).unwrap();
    std::fs::remove_file(&written[1]).unwrap();
    let stale = manifests::stale(dir.path()).unwrap();
    assert_eq!(stale.len(), 2, "{stale:?}");
    assert!(stale.iter().all(|p| p.starts_with("deploy/")));
}

/// The example rollouts of `deploy/rollout/example-rollouts.yaml` are rollouts the driver accepts, their `PromQL`
/// parses, and the driver's Role grants writes only to its flag ConfigMap and its rollouts.
#[test]
fn the_shipped_rollouts_and_the_drivers_role_are_what_the_driver_needs() {
    use shadow_reconciler::flag::rollout::{Policy, ShadowRollout};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("deploy/rollout/example-rollouts.yaml")).unwrap();
    let rollouts: Vec<ShadowRollout> = serde_saphyr::from_multiple(&text).unwrap();
    assert!(rollouts.len() >= 2);
    for r in &rollouts {
        Policy::of(&r.spec).unwrap_or_else(|e| panic!("{:?}: {e}", r.metadata.name));
        for gate in &r.spec.gates.prometheus {
            promql_parser::parser::parse(&gate.query)
                .unwrap_or_else(|e| panic!("{}: {e}", gate.name));
        }
    }
    let rbac = std::fs::read_to_string(root.join("deploy/rollout/rbac-rollout.yaml")).unwrap();
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&rbac).unwrap();
    let rules = docs[0]["rules"].as_array().unwrap();
    for rule in rules {
        let verbs: Vec<&str> = rule["verbs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let resources = rule["resources"][0].as_str().unwrap();
        let writes = verbs
            .iter()
            .any(|v| ["create", "update", "patch", "delete"].contains(v));
        let named = rule.get("resourceNames").is_some();
        match resources {
            "shadowrollouts" | "shadowrollouts/status" | "events" => {}
            "configmaps" => assert!(named, "configmaps written by name only"),
            "leases" => assert!(named || verbs == ["create"], "{rule}"),
            other => assert!(!writes, "the driver writes {other}"),
        }
    }
}
