//! Every validation error names the file, line, column and operation.

use crate::common;

use shadow_reconciler::plan::{Diagnostic, PlanError, ReconcilePlan};

/// A valid plan; tests replace one line to break it (its line numbers are noted in
/// `tests/common`).
const VALID: &str = common::CHECKS_PLAN;

/// `VALID` with line `n` (1-based) replaced by `with`.
fn edit(n: usize, with: &str) -> String {
    let mut lines: Vec<&str> = VALID.lines().collect();
    lines[n - 1] = with;
    lines.join("\n") + "\n"
}

fn diagnostics(yaml: &str) -> Vec<Diagnostic> {
    match ReconcilePlan::from_yaml("plans/checks.yaml", yaml) {
        Ok(_) => panic!("plan should be invalid:\n{yaml}"),
        Err(PlanError::Invalid { diagnostics }) => diagnostics,
        Err(other) => panic!("unexpected error {other}"),
    }
}

/// Exactly one diagnostic, at `line:column`, about `operation`, containing `text`.
fn assert_one(yaml: &str, line: u64, column: u64, operation: Option<&str>, text: &str) {
    let found = diagnostics(yaml);
    assert_eq!(found.len(), 1, "expected one diagnostic, got {found:#?}");
    let d = &found[0];
    assert_eq!((d.line, d.column), (line, column), "wrong location: {d}");
    assert_eq!(d.operation.as_deref(), operation, "wrong operation: {d}");
    assert!(d.message.contains(text), "{d:?} does not say {text:?}");
    let rendered = d.to_string();
    let prefix = format!("plans/checks.yaml:{line}:{column}: ");
    assert!(rendered.starts_with(&prefix), "{rendered}");
    if let Some(op) = operation {
        assert!(
            rendered.contains(&format!("operation {op}: ")),
            "{rendered}"
        );
    }
}

#[test]
fn the_base_plan_is_valid() {
    let plan = ReconcilePlan::from_yaml("plans/checks.yaml", VALID).unwrap();
    assert_eq!(plan.len(), 3);
    assert_eq!(plan.groups().len(), 2);
}

#[test]
fn unknown_field_in_an_operation() {
    assert_one(
        &edit(13, "      categroy: critical"),
        13,
        7,
        Some("PullSecret"),
        "unknown field `categroy`",
    );
}

#[test]
fn unknown_field_at_the_top_level_names_no_operation() {
    let yaml = VALID.replace("kind: ReconcilePlan\n", "kind: ReconcilePlan\nkinds: x\n");
    assert_one(&yaml, 3, 1, None, "unknown field `kinds`");
}

#[test]
fn unknown_field_in_legacy_is_not_blamed_on_the_last_operation() {
    let yaml = VALID.replace("    order: [", "    ordr: [");
    let found = diagnostics(&yaml);
    assert_eq!(found[0].operation, None, "{found:?}");
    assert_eq!(found[0].line, 22);
}

#[test]
fn bad_enum_value_names_the_operation() {
    assert_one(
        &edit(18, "      category: non-critcal"),
        18,
        17,
        Some("Deploy"),
        "unknown value `non-critcal`",
    );
}

#[test]
fn missing_shadow_policy_is_rejected() {
    // shadow has no default: the plan must say whether a step may be dry-run. The missing field
    // is reported at the operation's name.
    let yaml = VALID.replacen(
        "      shadow: dry-run\n    - name: PullSecret",
        "    - name: PullSecret",
        1,
    );
    assert_one(
        &yaml,
        7,
        13,
        Some("Namespace"),
        "the required field `shadow` is missing",
    );
    let d = &diagnostics(&yaml)[0];
    assert!(
        d.message.starts_with(
            "the required field `shadow` is missing (every operation of the phased path"
        ) && !d.message.contains("line"),
        "the location is not repeated in the message: {}",
        d.message
    );
}

#[test]
fn negative_phase_is_rejected() {
    assert_one(
        &edit(12, "      phase: -2"),
        12,
        14,
        Some("PullSecret"),
        "expected a whole number from 0 to 4294967295",
    );
}

#[test]
fn duplicate_operation_names() {
    let found = diagnostics(&edit(16, "    - name: PullSecret"));
    let dup = found
        .iter()
        .find(|d| d.message.contains("duplicate operation name"))
        .expect("duplicate reported");
    assert_eq!(
        (dup.line, dup.column, dup.operation.as_deref()),
        (16, 13, Some("PullSecret"))
    );
    assert!(dup.message.contains("first defined at line 11"), "{dup}");
}

#[test]
fn unknown_depends_on_target() {
    assert_one(
        &edit(14, "      dependsOn: [Namespac]"),
        14,
        19,
        Some("PullSecret"),
        "\"Namespac\", which is not an operation",
    );
}

#[test]
fn dependency_cycle() {
    let yaml = edit(10, "      shadow: dry-run\n      dependsOn: [PullSecret]");
    let found = diagnostics(&yaml);
    let cycle: Vec<_> = found
        .iter()
        .filter(|d| d.message.starts_with("dependency cycle"))
        .collect();
    assert_eq!(cycle.len(), 1, "one cycle, reported once: {found:#?}");
    let d = cycle[0];
    assert!(
        d.message.contains("Namespace -> PullSecret -> Namespace"),
        "{d}"
    );
    assert_eq!(d.line, 15, "{d}");
    assert_eq!(d.operation.as_deref(), Some("PullSecret"));
    assert_eq!(
        found.len(),
        1,
        "a cycle is not also reported as an ordering error: {found:#?}"
    );
}

#[test]
fn self_dependency_is_a_cycle() {
    assert_one(
        &edit(14, "      dependsOn: [PullSecret]"),
        14,
        19,
        Some("PullSecret"),
        "dependency cycle: PullSecret -> PullSecret",
    );
}

#[test]
fn dependency_that_does_not_come_earlier() {
    // Deploy (phase 3) after PullSecret (phase 2): PullSecret may not depend on it.
    assert_one(
        &edit(14, "      dependsOn: [Namespace, Deploy]"),
        14,
        30,
        Some("PullSecret"),
        "does not come earlier in phased order",
    );
}

#[test]
fn dependency_in_the_same_phase_must_be_listed_first() {
    let yaml = edit(12, "      phase: 1").replace("      dependsOn: [Namespace]\n", "");
    let ok = ReconcilePlan::from_yaml("x", &edit(12, "      phase: 1"))
        .expect("Namespace is listed first");
    assert_eq!(ok.phased_order().len(), 3);
    // Now list PullSecret first and make Namespace depend on it... in the same phase, after it: fine.
    // The reverse (an earlier-listed operation depending on a later one) is rejected:
    let reversed = yaml.replace(
        "      category: critical\n      shadow: dry-run\n    - name: PullSecret",
        "      category: critical\n      dependsOn: [PullSecret]\n      shadow: dry-run\n    - name: PullSecret",
    );
    assert_one(
        &reversed,
        10,
        19,
        Some("Namespace"),
        "does not come earlier in phased order",
    );
}

#[test]
fn legacy_order_with_an_unknown_operation() {
    assert_one(
        &edit(22, "    order: [Namespace, PullSecret, Deploy, Extra]"),
        22,
        44,
        Some("Extra"),
        "not an operation of this plan",
    );
}

#[test]
fn legacy_order_with_a_duplicate() {
    let found = diagnostics(&edit(22, "    order: [Namespace, PullSecret, PullSecret]"));
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_eq!(
        (
            found[0].line,
            found[0].column,
            found[0].operation.as_deref()
        ),
        (22, 36, Some("PullSecret"))
    );
    assert!(found[0].message.contains("twice"));
    assert_eq!(
        (
            found[1].line,
            found[1].column,
            found[1].operation.as_deref()
        ),
        (22, 12, Some("Deploy"))
    );
    assert!(found[1].message.contains("missing from legacy.order"));
}

#[test]
fn legacy_order_missing_an_operation() {
    assert_one(
        &edit(22, "    order: [Namespace, Deploy]"),
        22,
        12,
        Some("PullSecret"),
        "missing from legacy.order",
    );
}

#[test]
fn overlapping_rollout_groups() {
    assert_one(
        &edit(28, "        operations: [Deploy, PullSecret]"),
        28,
        30,
        Some("PullSecret"),
        "overlap: this operation is in \"core\" and \"rest\"",
    );
}

#[test]
fn rollout_group_naming_an_unknown_operation() {
    assert_one(
        &edit(28, "        operations: [Deploy, Nothing]"),
        28,
        30,
        Some("Nothing"),
        "rollout group \"rest\" names \"Nothing\"",
    );
}

#[test]
fn empty_and_duplicate_rollout_groups() {
    let found = diagnostics(
        &edit(27, "      - name: core").replace("operations: [Deploy]", "operations: []"),
    );
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0]
            .message
            .contains("duplicate rollout group \"core\"")
            && found[0].line == 27
    );
    assert!(found[1].message.contains("has no operations") && found[1].line == 28);
}

#[test]
fn empty_plan() {
    let yaml = "\
apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata: {name: empty}
spec:
  operations: []
  legacy: {order: []}
";
    assert_one(yaml, 5, 15, None, "the plan has no operations");
}

#[test]
fn wrong_api_version_and_kind() {
    let yaml = edit(1, "apiVersion: v1").replace("kind: ReconcilePlan", "kind: ConfigMap");
    let found = diagnostics(&yaml);
    assert_eq!(found.len(), 2);
    assert_eq!((found[0].line, found[0].column), (1, 13));
    assert!(
        found[0]
            .message
            .contains("expected \"shadow-reconciler.io/v1alpha1\"")
    );
    assert_eq!((found[1].line, found[1].column), (2, 7));
}

#[test]
fn invalid_names() {
    assert_one(
        &edit(4, "  name: Checks_Plan"),
        4,
        9,
        None,
        "not a valid plan name",
    );
    let found = diagnostics(&edit(7, "    - name: \"Name space\""));
    assert_eq!((found[0].line, found[0].column), (7, 13), "{found:#?}");
    assert_eq!(found[0].operation.as_deref(), Some("Name space"));
    assert!(found[0].message.contains("not a valid operation name"));
}

#[test]
fn yaml_syntax_error_has_a_location() {
    let found = diagnostics(&edit(14, "      dependsOn: [Namespace"));
    assert_eq!(found.len(), 1);
    assert!(found[0].line >= 14, "{found:?}");
    assert!(!found[0].message.is_empty());
}

#[test]
fn every_problem_is_reported_at_once() {
    let yaml = edit(14, "      dependsOn: [Nope]").replace(
        "order: [Namespace, PullSecret, Deploy]",
        "order: [Namespace, Deploy]",
    );
    let found = diagnostics(&yaml);
    assert_eq!(found.len(), 2, "{found:#?}");
    let err = ReconcilePlan::from_yaml("plans/checks.yaml", &yaml)
        .unwrap_err()
        .to_string();
    assert_eq!(err.lines().count(), 2, "one line per problem:\n{err}");
}

#[test]
fn unreadable_file_names_the_path() {
    let err = ReconcilePlan::load("no/such/plan.yaml").unwrap_err();
    assert!(matches!(err, PlanError::Read { .. }));
    assert_eq!(err.to_string(), "cannot read plan file no/such/plan.yaml");
}

#[test]
fn schema_error_in_rollout_is_not_blamed_on_the_last_operation() {
    // A group written as a bare name: deeper-indented than the operations, after all of them.
    let yaml = edit(27, "      - rest");
    let found = diagnostics(&yaml);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].line, 27, "{}", found[0]);
    assert_eq!(found[0].operation, None, "{}", found[0]);
}
