//! The HostedCluster reference reconciler: the operations of `deploy/plans/hostedcluster.yaml`
//! doing real API work, modelled on HyperShift's HostedCluster controller.
//!
//! As upstream, the legacy loop and the phased reconcile are not the same code: most operations
//! are one function that both paths run (the engine runs it with the real client in the control
//! and, where the control did not run it, with the dry-run client in the candidate), but
//! - `SSHKeySync` has legacy code of its own, without the clean-up fix (deleting the copied key
//!   once the HostedCluster references none) that landed in the phased path only;
//! - `ValidConfigurationCondition` is the legacy loop's inline status update, which the phased
//!   reconcile does not have (`only: legacy`);
//! - `ManagedHSMVersionCheck` exists in the phased reconcile only (`only: phased`).
//!
//! Several operations write HostedCluster status mid-loop with an update carrying the last
//! known resourceVersion, as upstream does, so concurrent writers produce 409 Conflicts.

mod common;
mod divergent;
mod endpoint;
mod ops;
pub mod types;

use std::sync::{Arc, LazyLock};

use kube::ResourceExt;

pub use types::{
    HostedCluster, HostedClusterSpec, HostedClusterStatus, HostedControlPlane,
    HostedControlPlaneSpec, LocalRef, Release,
};

use crate::engine::{OpContext, OpResult, Reconciler};
use crate::plan::ReconcilePlan;

/// Every operation of the hostedcluster plan, as implemented here.
pub const OPERATIONS: &[&str] = &[
    "CPOImageAndNamespace",
    "PlatformCredentials",
    "PullSecretSync",
    "SecretEncryptionSync",
    "RestoredFromBackup",
    "AuditWebhookSync",
    "SSHKeySync",
    "AdditionalTrustBundle",
    "ServiceAccountSigningKey",
    "UnmanagedEtcdMTLS",
    "ETCDMemberRecovery",
    "GlobalConfigSync",
    "CoreHCPChain",
    "KubeconfigAndPasswordSync",
    "PlatformOIDCAndCSI",
    "MonitoringAndCLISecrets",
    "ReleaseImageVersion",
    "ManagedHSMVersionCheck",
    "OperatorDeployments",
    "RBACAndPolicies",
    "PublicEndpointExposed",
    "ValidConfigurationCondition",
];

/// The operation the phased reconcile has and the legacy loop lacks (`only: phased`).
pub const PHASED_ONLY: &[&str] = &["ManagedHSMVersionCheck"];

/// The operation the legacy loop has and the phased reconcile lacks (`only: legacy`).
pub const LEGACY_ONLY: &[&str] = &["ValidConfigurationCondition"];

/// The operations whose legacy code differs from the phased code (or exists alone).
pub const LEGACY_CODE: &[&str] = &["SSHKeySync", LEGACY_ONLY[0]];

/// Every operation of the legacy path ([`OPERATIONS`] but [`PHASED_ONLY`]): with
/// [`SameCodeReconciler`](type@SameCodeReconciler) each is compared.
#[must_use]
pub fn legacy_path() -> &'static [&'static str] {
    static PATH: LazyLock<Vec<&str>> = LazyLock::new(|| without(PHASED_ONLY));
    &PATH
}

/// The operations both code paths have ([`OPERATIONS`] but the one-sided ones).
#[must_use]
pub fn both_paths() -> &'static [&'static str] {
    static PATH: LazyLock<Vec<&str>> =
        LazyLock::new(|| without(&[PHASED_ONLY, LEGACY_ONLY].concat()));
    &PATH
}

fn without(excluded: &[&str]) -> Vec<&'static str> {
    OPERATIONS
        .iter()
        .copied()
        .filter(|op| !excluded.contains(op))
        .collect()
}

/// The annotation that says a HostedCluster keeps its encryption keys in a managed HSM.
pub const MANAGED_HSM_ANNOTATION: &str = "hypershift.openshift.io/kms-managed-hsm";

/// State the operations of one run share.
#[derive(Clone, Debug, Default)]
pub struct State {
    /// The HostedCluster as last written or read (its resourceVersion is the precondition of the
    /// next status update).
    pub hosted_cluster: Option<HostedCluster>,
    /// The HostedControlPlane `CoreHCPChain` produced.
    pub hosted_control_plane: Option<HostedControlPlane>,
    /// The release version `ReleaseImageVersion` parsed.
    pub release_version: Option<String>,
}

/// The reference reconciler, in two variants of one code: [`HostedClusterReconciler`](type@HostedClusterReconciler), the
/// shipped one, whose legacy code differs where upstream's does ([`LEGACY_CODE`]), and
/// [`SameCodeReconciler`](type@SameCodeReconciler), with the phased code in both paths (the legacy-only step aside) while
/// every operation of the legacy path is declared to have legacy code of its own: the engine
/// pairs and compares all of them. Identical code must show no write difference, so a run of it
/// measures the noise of the write comparison on a cluster (`simulate --same-code`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Reference<const SAME_CODE: bool>;

/// The shipped reference reconciler (a type and, as a unit struct's name is, its value).
pub type HostedClusterReconciler = Reference<false>;
/// The value of [`HostedClusterReconciler`](type@HostedClusterReconciler).
#[allow(non_upper_case_globals)]
pub const HostedClusterReconciler: HostedClusterReconciler = Reference;

/// The reference reconciler with the same code in both paths (a type and its value).
pub type SameCodeReconciler = Reference<true>;
/// The value of [`SameCodeReconciler`](type@SameCodeReconciler).
#[allow(non_upper_case_globals)]
pub const SameCodeReconciler: SameCodeReconciler = Reference;

impl HostedClusterReconciler {
    /// The shipped plan this reconciler implements.
    ///
    /// # Panics
    /// Never: the shipped plan is valid (the test suite loads it).
    #[must_use]
    pub fn plan() -> Arc<ReconcilePlan> {
        crate::reconcilers::shipped_plan("hostedcluster")
    }
}

/// The control-plane namespace of a HostedCluster (`{namespace}-{name}`, as HyperShift names it).
#[must_use]
pub fn control_plane_namespace(hc: &HostedCluster) -> String {
    format!("{}-{}", hc.namespace().unwrap_or_default(), hc.name_any())
}

impl<const SAME_CODE: bool> Reconciler for Reference<SAME_CODE> {
    type Object = HostedCluster;
    type State = State;

    fn operations(&self) -> &'static [&'static str] {
        OPERATIONS
    }

    fn run<'a>(
        &'a self,
        op: &'a str,
        ctx: &'a mut OpContext<HostedCluster, State>,
    ) -> impl Future<Output = OpResult> + Send + 'a {
        ops::run(op, ctx)
    }

    fn legacy_code(&self) -> &'static [&'static str] {
        if SAME_CODE {
            legacy_path()
        } else {
            LEGACY_CODE
        }
    }

    async fn run_legacy(&self, op: &str, ctx: &mut OpContext<HostedCluster, State>) -> OpResult {
        if SAME_CODE && !LEGACY_ONLY.contains(&op) {
            ops::run(op, ctx).await
        } else {
            divergent::run_legacy(op, ctx).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{LEGACY_ONLY, OPERATIONS, PHASED_ONLY};
    use crate::vocab::CodePath;

    /// The one-sided lists are the shipped plan's `only:` declarations, and every operation the
    /// plan has is implemented here.
    #[test]
    fn the_lists_are_the_plans() {
        let plan = crate::reconcilers::shipped_plan("hostedcluster");
        let only = |path: CodePath| -> Vec<String> {
            plan.operations()
                .iter()
                .filter(|op| op.only() == Some(path))
                .map(|op| op.name().to_owned())
                .collect()
        };
        assert_eq!(only(CodePath::Phased), PHASED_ONLY);
        assert_eq!(only(CodePath::Legacy), LEGACY_ONLY);
        let names: Vec<&str> = plan
            .operations()
            .iter()
            .map(crate::plan::Operation::name)
            .collect();
        assert_eq!(names, OPERATIONS);
    }
}
