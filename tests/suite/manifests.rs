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
