//! The shipped plans: valid, shaped as upstream, and predicting HyperShift's non-blocking cases.

use crate::common;

use common::{id, phased_all, run_failing, shipped};
use shadow_reconciler::model::{Diff, Policy};
use shadow_reconciler::plan::ReconcilePlan;
use shadow_reconciler::vocab::{Category, Gate, Outcome, ShadowPolicy};

fn names(plan: &ReconcilePlan, ops: &[shadow_reconciler::vocab::OpId]) -> Vec<String> {
    ops.iter().map(|&op| plan.name_of(op).to_owned()).collect()
}

#[test]
fn hostedcluster_plan_classifies_as_upstream() {
    let plan = shipped("hostedcluster");
    let critical = [
        "CPOImageAndNamespace",
        "PlatformCredentials",
        "PullSecretSync",
        "SecretEncryptionSync",
        "CoreHCPChain",
        "ReleaseImageVersion",
        "ManagedHSMVersionCheck",
    ];
    let gated = [
        "KubeconfigAndPasswordSync",
        "PlatformOIDCAndCSI",
        "MonitoringAndCLISecrets",
        "OperatorDeployments",
        "RBACAndPolicies",
        "PublicEndpointExposed",
    ];
    // Upstream's phased report: 21 operations; the legacy loop's inline status update besides.
    assert_eq!(plan.phased_order().len(), 21);
    assert_eq!(plan.len(), 22);
    assert_eq!(
        plan.operation(id(&plan, "ManagedHSMVersionCheck")).only(),
        Some(shadow_reconciler::vocab::CodePath::Phased)
    );
    assert_eq!(
        plan.operation(id(&plan, "ValidConfigurationCondition"))
            .only(),
        Some(shadow_reconciler::vocab::CodePath::Legacy)
    );
    assert!(
        !plan
            .legacy_order()
            .contains(&id(&plan, "ManagedHSMVersionCheck"))
    );
    for op in plan
        .operations()
        .iter()
        .filter(|op| op.in_path(shadow_reconciler::vocab::CodePath::Phased))
    {
        let name = op.name();
        if critical.contains(&name) {
            assert_eq!(
                (op.category(), op.gate()),
                (Category::Critical, Gate::None),
                "{name}"
            );
        } else if gated.contains(&name) {
            assert_eq!(
                (op.category(), op.gate()),
                (Category::NonCritical, Gate::NoCriticalFailure),
                "{name}"
            );
        } else {
            assert_eq!(
                (op.category(), op.gate()),
                (Category::NonCritical, Gate::None),
                "{name}"
            );
        }
    }
    // The OIDC upload has an external side effect: never dry-run.
    assert_eq!(
        plan.operation(id(&plan, "PlatformOIDCAndCSI")).shadow(),
        ShadowPolicy::Skip
    );
    // 8a before ReleaseImageVersion in phased order (load-bearing upstream).
    let pos = |name| {
        plan.phased_order()
            .iter()
            .position(|&op| op == id(&plan, name))
            .unwrap()
    };
    assert!(pos("KubeconfigAndPasswordSync") < pos("ReleaseImageVersion"));
    // Legacy order: CLI secrets early, RBAC between the chain and kubeconfig, operators before OIDC.
    let legacy = |name| {
        plan.legacy_order()
            .iter()
            .position(|&op| op == id(&plan, name))
            .unwrap()
    };
    assert!(legacy("MonitoringAndCLISecrets") < legacy("PlatformCredentials"));
    assert!(legacy("CoreHCPChain") < legacy("RBACAndPolicies"));
    assert!(legacy("RBACAndPolicies") < legacy("KubeconfigAndPasswordSync"));
    assert!(legacy("OperatorDeployments") < legacy("PlatformOIDCAndCSI"));
    assert_eq!(
        legacy("PublicEndpointExposed"),
        plan.legacy_order().len() - 1
    );
    assert_eq!(
        legacy("ValidConfigurationCondition"),
        1,
        "right after the CPO image"
    );
}

#[test]
fn addon_plan_retries_its_status_patches() {
    let plan = shipped("addon-install-progression");
    for name in [
        "ManualStrategyStatus",
        "SelfManagedStatus",
        "PlacementStatus",
    ] {
        let op = plan.operation(id(&plan, name));
        assert!(op.retry_on_conflict(), "{name}");
        assert_eq!(
            op.depends_on().as_slice(),
            [id(&plan, "DefaultConfigReferences")]
        );
    }
    assert!(
        !plan
            .operation(id(&plan, "DefaultConfigReferences"))
            .retry_on_conflict()
    );
}

#[test]
fn ssh_key_failure_still_creates_the_hcp_and_the_operators() {
    let plan = shipped("hostedcluster");
    let failing = [("SSHKeySync", "ssh key secret not found")];
    let (control, ran_control) = run_failing(&Policy::sequential(plan.clone()), &failing);
    let (candidate, ran_candidate) = run_failing(&phased_all(&plan), &failing);
    assert_eq!(
        ran_control.last().map(String::as_str),
        Some("SSHKeySync"),
        "legacy stops at the SSH key"
    );
    assert!(!ran_control.iter().any(|n| n == "CoreHCPChain"));
    assert_eq!(
        ran_candidate.len(),
        plan.phased_order().len(),
        "phased runs everything: {ran_candidate:?}"
    );
    assert!(!candidate.has_critical_failure());
    assert_eq!(
        candidate.aggregate().as_deref(),
        Some("ssh key secret not found")
    );
    let diff = Diff::between(&control, &candidate).unwrap();
    let unblocked = names(&plan, diff.unblocked());
    for name in [
        "CoreHCPChain",
        "OperatorDeployments",
        "ReleaseImageVersion",
        "AdditionalTrustBundle",
    ] {
        assert!(
            unblocked.iter().any(|n| n == name),
            "{name} not unblocked: {unblocked:?}"
        );
    }
    assert!(diff.newly_blocked().is_empty());
    assert!(diff.changed().is_empty());
    assert!(
        !diff.reordered().is_empty(),
        "the legacy order runs CLI secrets before the secret syncs"
    );
}

#[test]
fn secret_encryption_failure_creates_the_hcp_and_blocks_phase_8() {
    let plan = shipped("hostedcluster");
    let (report, ran) = run_failing(
        &phased_all(&plan),
        &[("SecretEncryptionSync", "kms key missing")],
    );
    assert!(ran.iter().any(|n| n == "CoreHCPChain"));
    assert!(
        ran.iter().any(|n| n == "ReleaseImageVersion"),
        "critical operations always run"
    );
    assert_eq!(
        report.blocked(),
        [
            "KubeconfigAndPasswordSync",
            "MonitoringAndCLISecrets",
            "OperatorDeployments",
            "PlatformOIDCAndCSI",
            "PublicEndpointExposed",
            "RBACAndPolicies"
        ]
    );
    assert_eq!(
        report.aggregate().as_deref(),
        Some(
            "critical error: kms key missing; blocked operations: [KubeconfigAndPasswordSync, \
             MonitoringAndCLISecrets, OperatorDeployments, PlatformOIDCAndCSI, PublicEndpointExposed, \
             RBACAndPolicies]"
        )
    );
}

#[test]
fn audit_webhook_failure_still_syncs_the_ssh_key() {
    let plan = shipped("hostedcluster");
    let (report, ran) = run_failing(
        &phased_all(&plan),
        &[("AuditWebhookSync", "audit webhook secret missing")],
    );
    assert!(ran.iter().any(|n| n == "SSHKeySync"));
    assert_eq!(report.outcome(id(&plan, "SSHKeySync")), &Outcome::Succeeded);
    let (legacy, _) = run_failing(
        &Policy::sequential(plan.clone()),
        &[("AuditWebhookSync", "x")],
    );
    assert!(matches!(
        legacy.outcome(id(&plan, "SSHKeySync")),
        Outcome::Skipped { .. }
    ));
}

#[test]
fn hcp_creation_failure_blocks_phase_8() {
    let plan = shipped("hostedcluster");
    let (report, _) = run_failing(
        &phased_all(&plan),
        &[("CoreHCPChain", "failed to create HostedControlPlane")],
    );
    let chain = id(&plan, "CoreHCPChain");
    for name in [
        "KubeconfigAndPasswordSync",
        "OperatorDeployments",
        "RBACAndPolicies",
        "PublicEndpointExposed",
    ] {
        match report.outcome(id(&plan, name)) {
            Outcome::Blocked { by } => assert_eq!(by.as_slice(), [chain], "{name}"),
            other => panic!("{name} is {other:?}, expected blocked"),
        }
    }
    assert_eq!(
        report.outcome(id(&plan, "ReleaseImageVersion")),
        &Outcome::Succeeded
    );
}

#[test]
fn enforcing_only_the_non_critical_syncs_is_the_gentle_first_step() {
    let plan = shipped("hostedcluster");
    let policy = Policy::phased(plan.clone(), &["non-critical-syncs"]).unwrap();
    let (report, ran) = run_failing(&policy, &[("SSHKeySync", "ssh key secret not found")]);
    assert_eq!(ran.len(), 21, "every operation of the phased path ran");
    assert!(!report.succeeded() && !report.has_critical_failure());
    // A failure outside the enforced groups still stops everything fail-fast after it.
    let (report, _) = run_failing(&policy, &[("PullSecretSync", "pull secret not found")]);
    assert!(report.has_critical_failure());
    assert!(report.blocked().contains(&"CoreHCPChain"));
}

#[test]
fn the_newly_blocked_cli_secrets_show_the_reordering_risk() {
    // Legacy runs MonitoringAndCLISecrets second; phased gates it in phase 8a. A critical failure
    // between the two positions means the control ran it and the candidate blocks it.
    let plan = shipped("hostedcluster");
    let failing = [("PullSecretSync", "pull secret not found")];
    let (control, _) = run_failing(&Policy::sequential(plan.clone()), &failing);
    let (candidate, _) = run_failing(&phased_all(&plan), &failing);
    let diff = Diff::between(&control, &candidate).unwrap();
    assert_eq!(
        names(&plan, diff.newly_blocked()),
        ["MonitoringAndCLISecrets"]
    );
    let unblocked = names(&plan, diff.unblocked());
    assert!(
        unblocked.iter().any(|n| n == "CoreHCPChain"),
        "{unblocked:?}"
    );
}

#[test]
fn diff_refuses_reports_of_different_plans() {
    let hc = shipped("hostedcluster");
    let addon = shipped("addon-install-progression");
    let (a, _) = run_failing(&phased_all(&hc), &[]);
    let (b, _) = run_failing(&phased_all(&addon), &[]);
    let err = Diff::between(&a, &b).unwrap_err().to_string();
    assert!(
        err.starts_with("cannot compare runs of different plans: hostedcluster@"),
        "{err}"
    );
}

#[test]
fn diff_reports_changed_outcomes() {
    let plan = shipped("addon-install-progression");
    let (control, _) = run_failing(
        &Policy::sequential(plan.clone()),
        &[("PlacementStatus", "conflict")],
    );
    let (candidate, _) = run_failing(&phased_all(&plan), &[]);
    let diff = Diff::between(&control, &candidate).unwrap();
    assert_eq!(names(&plan, diff.changed()), ["PlacementStatus"]);
    assert!(
        diff.unblocked().is_empty()
            && diff.newly_blocked().is_empty()
            && diff.reordered().is_empty()
    );
    let same = Diff::between(&candidate, &candidate).unwrap();
    assert!(same.is_empty());
}
