//! The plan hash: same plan, same hash, whatever the YAML formatting; any semantic change, a new hash.

use shadow_reconciler::plan::{PlanHash, ReconcilePlan};

const BLOCK: &str = "\
apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata:
  name: hashing
spec:
  operations:
    - name: A
      phase: 1
      category: critical
      shadow: dry-run
    - name: B
      phase: 1
      category: critical
      shadow: dry-run
    - name: C
      phase: 2
      category: non-critical
      gate: no-critical-failure
      dependsOn: [A, B]
      shadow: skip
      retryOnConflict: true
  legacy:
    order: [B, A, C]
  rollout:
    groups:
      - name: one
        operations: [A, B]
      - name: two
        operations: [C]
";

/// The same plan: flow style, other key order, comments, quoting, descriptions, defaults spelled
/// out, dependsOn and group members and groups in another order.
const FLOW: &str = r#"
# a comment
kind: ReconcilePlan
apiVersion: "shadow-reconciler.io/v1alpha1"
metadata: {name: hashing, description: prose is not hashed}
spec:
  rollout:
    groups:
      - {name: two, operations: [C], description: also prose}
      - {name: one, operations: [B, A]}
  legacy: {order: [B, A, C]}
  operations:
    - {shadow: dry-run, name: A, phase: 1, category: critical, gate: none, retryOnConflict: false}
    - {name: B, phase: 1, category: critical, shadow: dry-run, dependsOn: []}
    - {name: C, phase: 2, category: non-critical, gate: no-critical-failure, dependsOn: [B, A], shadow: skip, retryOnConflict: true, description: x}
"#;

fn hash(yaml: &str) -> String {
    ReconcilePlan::from_yaml("hash.yaml", yaml)
        .unwrap_or_else(|e| panic!("{e}"))
        .hash()
        .to_hex()
}

#[test]
fn formatting_does_not_change_the_hash() {
    assert_eq!(hash(BLOCK), hash(FLOW));
    assert_eq!(hash(BLOCK).len(), 64);
}

#[test]
fn every_semantic_change_changes_the_hash() {
    let base = hash(BLOCK);
    let edits = [
        ("name: hashing", "name: hashing2"),
        ("phase: 2", "phase: 3"),
        (
            "    - name: C\n      phase: 2\n      category: non-critical",
            "    - name: C\n      phase: 2\n      category: critical",
        ),
        ("gate: no-critical-failure", "gate: none"),
        ("dependsOn: [A, B]", "dependsOn: [A]"),
        ("shadow: skip", "shadow: dry-run"),
        ("retryOnConflict: true", "retryOnConflict: false"),
        ("order: [B, A, C]", "order: [A, B, C]"),
        (
            "operations: [A, B]\n      - name: two\n        operations: [C]",
            "operations: [A]\n      - name: two\n        operations: [B, C]",
        ),
        ("- name: one", "- name: uno"),
    ];
    for (from, to) in edits {
        assert!(BLOCK.contains(from), "test edit {from:?} does not apply");
        let changed = BLOCK.replacen(from, to, 1);
        assert_ne!(
            hash(&changed),
            base,
            "changing {from:?} to {to:?} kept the hash"
        );
    }
    // Listing order within a phase is semantic (it breaks ties in phased order).
    let swapped = BLOCK.replace(
        "    - name: A\n      phase: 1\n      category: critical\n      shadow: dry-run\n    - name: B\n",
        "    - name: B\n      phase: 1\n      category: critical\n      shadow: dry-run\n    - name: A\n",
    );
    assert_ne!(hash(&swapped), base);
}

#[test]
fn the_shipped_plans_have_distinct_stable_hashes() {
    let hc = ReconcilePlan::load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/plans/hostedcluster.yaml"
    ))
    .unwrap();
    let again = ReconcilePlan::load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/plans/hostedcluster.yaml"
    ))
    .unwrap();
    assert_eq!(hc.hash(), again.hash());
    assert_eq!(hc.hash().short(), hc.hash().to_hex()[..12]);
    let addon = ReconcilePlan::load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/plans/addon-install-progression.yaml"
    ))
    .unwrap();
    assert_ne!(hc.hash(), addon.hash());
}

#[test]
fn the_hash_is_written_as_hex_and_read_back() {
    let plan = ReconcilePlan::from_yaml("hash.yaml", BLOCK).unwrap();
    let hash = *plan.hash();
    let hex = hash.to_hex();
    assert_eq!(hex.len(), 64);
    assert!(
        hex.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    );
    assert_eq!(hash.to_string(), hex);
    assert_eq!(
        serde_json::to_value(hash).unwrap(),
        serde_json::Value::String(hex.clone())
    );
    assert_eq!(PlanHash::from_hex(&hex), Some(hash));
    assert_eq!(PlanHash::from_hex(&hex.to_uppercase()), Some(hash));
    assert_eq!(hash.short(), hex[..12]);
    for bad in [
        &hex[..63],
        &format!("{hex}0"),
        &format!("g{}", &hex[1..]),
        "",
    ] {
        assert_eq!(PlanHash::from_hex(bad), None, "{bad:?}");
    }
}
