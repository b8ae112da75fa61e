//! HyperShift's `reconcileReport` tests, reproduced on the phased model: aggregate, log summary,
//! condition, requeue, and `executeOrBlock` never calling a blocked operation.

use crate::common;

use std::cell::Cell;

use common::{id, phased_all, plan, run_failing, secs};
use shadow_reconciler::model::{
    ConditionStatus, Decision, ModelError, ModelKind, Policy, StepResult, drive,
};
use shadow_reconciler::vocab::{ErrorClass, OpSet, Outcome};

/// Two critical operations, two non-critical ones, and three gated ones listed out of
/// alphabetical order (so that sorting the blocked list is visible).
const REPORT_PLAN: &str = r"
apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata: {name: report}
spec:
  operations:
    - {name: PullSecretSync, phase: 1, category: critical, shadow: dry-run}
    - {name: SecretEncryptionSync, phase: 1, category: critical, shadow: dry-run}
    - {name: SSHKeySync, phase: 2, category: non-critical, shadow: dry-run}
    - {name: AuditWebhookSync, phase: 2, category: non-critical, shadow: dry-run}
    - {name: RBACAndPolicies, phase: 3, category: non-critical, gate: no-critical-failure, shadow: dry-run}
    - {name: OperatorDeployments, phase: 3, category: non-critical, gate: no-critical-failure, shadow: dry-run}
    - {name: KubeconfigSync, phase: 3, category: non-critical, gate: no-critical-failure, shadow: dry-run}
  legacy:
    order: [PullSecretSync, SecretEncryptionSync, SSHKeySync, AuditWebhookSync, RBACAndPolicies, OperatorDeployments, KubeconfigSync]
";

#[test]
fn success_aggregates_nothing_and_sets_the_upstream_condition() {
    let plan = plan(REPORT_PLAN);
    let (report, executed) = run_failing(&phased_all(&plan), &[]);
    assert_eq!(executed.len(), 7);
    assert!(report.succeeded());
    assert!(!report.has_critical_failure());
    assert_eq!(report.aggregate(), None);
    assert_eq!(report.log_summary(), "");
    let condition = report.condition();
    assert_eq!(condition.type_, "ReconciliationSucceeded");
    assert_eq!(condition.status, ConditionStatus::True);
    assert_eq!(condition.reason, "ReconciliatonSucceeded");
    assert_eq!(condition.message, "Reconciliation completed successfully");
}

#[test]
fn only_non_critical_errors_aggregate_every_error_and_block_nothing() {
    let plan = plan(REPORT_PLAN);
    let (report, executed) = run_failing(
        &phased_all(&plan),
        &[
            ("SSHKeySync", "ssh key secret not found"),
            ("AuditWebhookSync", "audit webhook secret not found"),
        ],
    );
    assert_eq!(
        executed.len(),
        7,
        "non-critical failures block nothing: {executed:?}"
    );
    assert!(!report.has_critical_failure());
    assert_eq!(
        report.aggregate().as_deref(),
        Some("[ssh key secret not found, audit webhook secret not found]")
    );
    assert_eq!(report.log_summary(), "");
    assert!(report.blocked().is_empty());
    let condition = report.condition();
    assert_eq!(condition.status, ConditionStatus::False);
    assert_eq!(condition.reason, "ReconciliationError");
    assert_eq!(
        condition.message,
        "[ssh key secret not found, audit webhook secret not found]"
    );
}

#[test]
fn a_single_error_is_its_own_message() {
    let plan = plan(REPORT_PLAN);
    let (report, _) = run_failing(
        &phased_all(&plan),
        &[("SSHKeySync", "ssh key secret not found")],
    );
    assert_eq!(
        report.aggregate().as_deref(),
        Some("ssh key secret not found")
    );
}

#[test]
fn critical_error_reports_only_critical_errors_and_sorted_blocked_operations() {
    let plan = plan(REPORT_PLAN);
    let (report, executed) = run_failing(
        &phased_all(&plan),
        &[
            ("PullSecretSync", "pull secret not found"),
            ("SSHKeySync", "ssh key secret not found"),
        ],
    );
    assert!(report.has_critical_failure());
    assert_eq!(
        report.aggregate().as_deref(),
        Some(
            "critical error: pull secret not found; blocked operations: \
             [KubeconfigSync, OperatorDeployments, RBACAndPolicies]"
        ),
        "non-critical errors are dropped when a critical one exists"
    );
    assert_eq!(
        report.log_summary(),
        "critical failures: [PullSecretSync]; blocked operations: \
         [KubeconfigSync, OperatorDeployments, RBACAndPolicies]"
    );
    // Critical and non-gated operations still ran.
    assert_eq!(
        executed,
        [
            "PullSecretSync",
            "SecretEncryptionSync",
            "SSHKeySync",
            "AuditWebhookSync"
        ]
    );
    assert_eq!(report.condition().message, report.aggregate().unwrap());
}

#[test]
fn several_critical_errors_are_aggregated_and_blocked_names_appear_once() {
    let plan = plan(REPORT_PLAN);
    let (report, _) = run_failing(
        &phased_all(&plan),
        &[
            ("PullSecretSync", "pull secret not found"),
            ("SecretEncryptionSync", "kms key missing"),
        ],
    );
    assert_eq!(
        report.aggregate().as_deref(),
        Some(
            "critical error: [pull secret not found, kms key missing]; blocked operations: \
             [KubeconfigSync, OperatorDeployments, RBACAndPolicies]"
        )
    );
    assert_eq!(
        report.log_summary(),
        "critical failures: [PullSecretSync, SecretEncryptionSync]; blocked operations: \
         [KubeconfigSync, OperatorDeployments, RBACAndPolicies]"
    );
    // Each blocked operation names both critical failures as the cause.
    let by: OpSet = [
        id(&plan, "PullSecretSync"),
        id(&plan, "SecretEncryptionSync"),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        report.outcome(id(&plan, "OperatorDeployments")),
        &Outcome::Blocked { by }
    );
}

#[test]
fn identical_error_messages_are_aggregated_once() {
    let plan = plan(REPORT_PLAN);
    let (report, _) = run_failing(
        &phased_all(&plan),
        &[
            ("SSHKeySync", "secret not found"),
            ("AuditWebhookSync", "secret not found"),
        ],
    );
    assert_eq!(report.aggregate().as_deref(), Some("secret not found"));
}

#[test]
fn critical_error_without_blocked_operations() {
    let plan = plan(
        r"
apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata: {name: late-critical}
spec:
  operations:
    - {name: KubeconfigSync, phase: 1, category: non-critical, gate: no-critical-failure, shadow: dry-run}
    - {name: ReleaseImageVersion, phase: 2, category: critical, shadow: dry-run}
  legacy: {order: [KubeconfigSync, ReleaseImageVersion]}
",
    );
    let (report, _) = run_failing(
        &phased_all(&plan),
        &[("ReleaseImageVersion", "bad release image")],
    );
    assert_eq!(
        report.aggregate().as_deref(),
        Some("critical error: bad release image")
    );
    assert_eq!(
        report.log_summary(),
        "critical failures: [ReleaseImageVersion]"
    );
}

#[test]
fn blocked_operations_never_call_their_closure() {
    let plan = plan(REPORT_PLAN);
    let policy = phased_all(&plan);
    let calls: Vec<Cell<u32>> = (0..plan.len()).map(|_| Cell::new(0)).collect();
    let report = drive(&policy, |op| {
        calls[op.id().index()].set(calls[op.id().index()].get() + 1);
        if op.name() == "SecretEncryptionSync" {
            StepResult::failed(ErrorClass::NotFound, "kms key missing")
        } else {
            StepResult::succeeded()
        }
    });
    for step in report.steps() {
        let n = calls[step.op.index()].get();
        if matches!(step.outcome, Outcome::Blocked { .. }) {
            assert_eq!(n, 0, "{} is blocked but was called", plan.name_of(step.op));
        } else {
            assert_eq!(n, 1, "{} ran {n} times", plan.name_of(step.op));
        }
    }
    assert_eq!(report.blocked().len(), 3);
}

#[test]
fn the_smallest_requested_requeue_wins() {
    let plan = plan(REPORT_PLAN);
    let report = drive(&phased_all(&plan), |op| match op.name() {
        "SSHKeySync" => StepResult::succeeded().with_requeue(secs(30)),
        "OperatorDeployments" => StepResult::succeeded().with_requeue(secs(5)),
        "KubeconfigSync" => StepResult::failed(ErrorClass::Server, "boom").with_requeue(secs(60)),
        _ => StepResult::succeeded(),
    });
    assert_eq!(report.requeue_after(), Some(secs(5)));
    let quiet = drive(&phased_all(&plan), |_| StepResult::succeeded());
    assert_eq!(quiet.requeue_after(), None);
}

#[test]
fn a_failed_dependency_blocks_its_dependents_and_names_the_root_cause() {
    let plan = plan(
        r"
apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata: {name: chain}
spec:
  operations:
    - {name: A, phase: 1, category: non-critical, shadow: dry-run}
    - {name: B, phase: 2, category: non-critical, dependsOn: [A], shadow: dry-run}
    - {name: C, phase: 3, category: non-critical, dependsOn: [B], shadow: dry-run}
    - {name: D, phase: 3, category: non-critical, shadow: dry-run}
  legacy: {order: [A, B, C, D]}
",
    );
    let (report, executed) = run_failing(&phased_all(&plan), &[("A", "a failed")]);
    assert_eq!(executed, ["A", "D"]);
    let a: OpSet = [id(&plan, "A")].into_iter().collect();
    assert_eq!(
        report.outcome(id(&plan, "B")),
        &Outcome::Blocked { by: a.clone() }
    );
    assert_eq!(
        report.outcome(id(&plan, "C")),
        &Outcome::Blocked { by: a },
        "blocked-by is transitive to the failure"
    );
    assert!(!report.has_critical_failure());
    // No critical failure: every error, blocked names are not part of the text.
    assert_eq!(report.aggregate().as_deref(), Some("a failed"));
    assert_eq!(report.blocked(), ["B", "C"]);
}

#[test]
fn not_simulated_operations_make_their_dependents_unknown() {
    let plan = plan(
        r"
apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata: {name: unknowns}
spec:
  operations:
    - {name: Upload, phase: 1, category: non-critical, shadow: skip}
    - {name: UsesUpload, phase: 2, category: non-critical, dependsOn: [Upload], shadow: dry-run}
    - {name: Core, phase: 2, category: critical, shadow: skip}
    - {name: Gated, phase: 3, category: non-critical, gate: no-critical-failure, shadow: dry-run}
    - {name: Free, phase: 3, category: non-critical, shadow: dry-run}
  legacy: {order: [Upload, UsesUpload, Core, Gated, Free]}
",
    );
    let mut executed = Vec::new();
    let report = drive(&phased_all(&plan), |op| {
        executed.push(op.name().to_owned());
        if op.name() == "Upload" || op.name() == "Core" {
            StepResult::not_simulated()
        } else {
            StepResult::succeeded()
        }
    });
    assert_eq!(executed, ["Upload", "Core", "Free"]);
    let on = |names: &[&str]| Outcome::Unknown {
        on: names.iter().map(|n| id(&plan, n)).collect(),
    };
    assert_eq!(report.outcome(id(&plan, "Upload")), &on(&["Upload"]));
    assert_eq!(report.outcome(id(&plan, "UsesUpload")), &on(&["Upload"]));
    assert_eq!(
        report.outcome(id(&plan, "Gated")),
        &on(&["Core"]),
        "a gated op after an unknown critical op is unknown"
    );
    assert_eq!(report.outcome(id(&plan, "Free")), &Outcome::Succeeded);
    assert!(report.succeeded(), "unknown is not an error");
}

#[test]
fn a_definite_critical_failure_outweighs_an_unknown_one() {
    let plan = plan(
        r"
apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata: {name: unknown-and-failed}
spec:
  operations:
    - {name: Skipped, phase: 1, category: critical, shadow: skip}
    - {name: Fails, phase: 1, category: critical, shadow: dry-run}
    - {name: Gated, phase: 2, category: non-critical, gate: no-critical-failure, shadow: dry-run}
  legacy: {order: [Skipped, Fails, Gated]}
",
    );
    let report = drive(&phased_all(&plan), |op| match op.name() {
        "Skipped" => StepResult::not_simulated(),
        _ => StepResult::failed(ErrorClass::Invalid, "bad"),
    });
    let by: OpSet = [id(&plan, "Fails")].into_iter().collect();
    assert_eq!(report.outcome(id(&plan, "Gated")), &Outcome::Blocked { by });
}

#[test]
fn sequential_stops_at_the_first_error_and_reports_it_as_the_legacy_loop_did() {
    let plan = plan(REPORT_PLAN);
    let policy = Policy::sequential(plan.clone());
    let (report, executed) = run_failing(&policy, &[("SSHKeySync", "ssh key secret not found")]);
    assert_eq!(report.kind(), ModelKind::Sequential);
    assert_eq!(
        executed,
        ["PullSecretSync", "SecretEncryptionSync", "SSHKeySync"]
    );
    let ssh = id(&plan, "SSHKeySync");
    assert_eq!(
        report.outcome(id(&plan, "KubeconfigSync")),
        &Outcome::Skipped { after: ssh }
    );
    assert_eq!(report.first_failure(), Some(ssh));
    assert_eq!(
        report.aggregate().as_deref(),
        Some("ssh key secret not found")
    );
    assert_eq!(
        report.log_summary(),
        "failed: [SSHKeySync]; skipped operations: \
         [AuditWebhookSync, KubeconfigSync, OperatorDeployments, RBACAndPolicies]"
    );
    assert!(report.blocked().is_empty());
}

#[test]
fn operations_outside_the_enforced_groups_behave_fail_fast() {
    let plan = plan(
        r"
apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata: {name: groups}
spec:
  operations:
    - {name: SSHKeySync, phase: 1, category: non-critical, shadow: dry-run}
    - {name: AuditWebhookSync, phase: 1, category: non-critical, shadow: dry-run}
    - {name: CoreHCPChain, phase: 2, category: critical, shadow: dry-run}
  legacy: {order: [SSHKeySync, AuditWebhookSync, CoreHCPChain]}
  rollout:
    groups:
      - {name: ssh, operations: [SSHKeySync]}
      - {name: audit, operations: [AuditWebhookSync]}
      - {name: core, operations: [CoreHCPChain]}
",
    );
    // Only `audit` enforced: SSHKeySync is fail-fast, so its failure blocks every fail-fast
    // operation after it; the enforced AuditWebhookSync (gate none) still runs.
    let audit_only = Policy::phased(plan.clone(), &["audit"]).unwrap();
    let (report, executed) = run_failing(&audit_only, &[("SSHKeySync", "ssh key missing")]);
    assert_eq!(executed, ["SSHKeySync", "AuditWebhookSync"]);
    assert!(report.has_critical_failure());
    assert_eq!(report.blocked(), ["CoreHCPChain"]);
    // Nothing enforced: the legacy loop.
    let none = Policy::phased(plan.clone(), &[] as &[&str]).unwrap();
    let (_, executed) = run_failing(&none, &[("SSHKeySync", "ssh key missing")]);
    assert_eq!(executed, ["SSHKeySync"]);
    // `ssh` enforced: its failure is collected and the rest runs.
    let ssh = Policy::phased(plan.clone(), &["ssh"]).unwrap();
    let (report, executed) = run_failing(&ssh, &[("SSHKeySync", "ssh key missing")]);
    assert_eq!(executed, ["SSHKeySync", "AuditWebhookSync", "CoreHCPChain"]);
    assert!(!report.has_critical_failure());
    // An unknown group is a clear error.
    let err = Policy::phased(plan, &["nope"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "plan \"groups\" has no rollout group \"nope\"; its groups are: ssh, audit, core"
    );
}

#[test]
fn a_plan_without_groups_has_one_implicit_group() {
    let plan = plan(
        r"
apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata: {name: implicit}
spec:
  operations:
    - {name: A, phase: 1, category: non-critical, shadow: dry-run}
    - {name: B, phase: 1, category: non-critical, shadow: dry-run}
  legacy: {order: [A, B]}
",
    );
    assert!(!plan.groups_declared());
    assert_eq!(plan.groups().len(), 1);
    assert_eq!(plan.groups()[0].name(), "all");
    assert_eq!(plan.groups()[0].operations().len(), 2);
    let (_, executed) = run_failing(&Policy::phased(plan, &["all"]).unwrap(), &[("A", "a")]);
    assert_eq!(executed, ["A", "B"]);
}

#[test]
fn misusing_a_run_is_an_error_not_a_panic() {
    let plan = plan(REPORT_PLAN);
    let policy = phased_all(&plan);
    let mut run = policy.start();
    let Some(Decision::Run(first)) = run.next() else {
        panic!("first decision runs")
    };
    assert_eq!(
        run.next(),
        Some(Decision::Run(first)),
        "asking again repeats the pending op"
    );
    let other = id(&plan, "SSHKeySync");
    let err = run.complete(other, StepResult::succeeded()).unwrap_err();
    assert_eq!(
        err,
        ModelError::NotPending {
            op: "SSHKeySync".into(),
            pending: Some("PullSecretSync".into())
        }
    );
    run.complete(first, StepResult::succeeded()).unwrap();
    assert!(matches!(
        run.complete(first, StepResult::succeeded()),
        Err(ModelError::NotPending { .. })
    ));
    let err = run.into_report().unwrap_err();
    assert_eq!(
        err.to_string(),
        "run of plan report is unfinished: 6 operations not yet decided"
    );
}
