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

use std::sync::Arc;

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

/// The operations whose legacy code differs from the phased code (or exists alone).
pub const LEGACY_CODE: &[&str] = &["SSHKeySync", "ValidConfigurationCondition"];

/// Every operation of the legacy path: with [`SameCodeReconciler`] each is compared.
const LEGACY_PATH: &[&str] = &[
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
    "OperatorDeployments",
    "RBACAndPolicies",
    "PublicEndpointExposed",
    "ValidConfigurationCondition",
];

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

/// The reconciler.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostedClusterReconciler;

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

/// The reference reconciler with the phased code in both paths (the legacy-only step aside),
/// while every operation of the legacy path is declared to have legacy code of its own: the
/// engine pairs and compares all of them. Identical code must show no write difference, so a
/// run of it measures the noise of the write comparison on a cluster (`simulate --same-code`).
#[derive(Clone, Copy, Debug, Default)]
pub struct SameCodeReconciler;

impl Reconciler for SameCodeReconciler {
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
        LEGACY_PATH
    }

    async fn run_legacy(&self, op: &str, ctx: &mut OpContext<HostedCluster, State>) -> OpResult {
        if op == "ValidConfigurationCondition" {
            divergent::run_legacy(op, ctx).await
        } else {
            ops::run(op, ctx).await
        }
    }
}

/// The control-plane namespace of a HostedCluster (`{namespace}-{name}`, as HyperShift names it).
#[must_use]
pub fn control_plane_namespace(hc: &HostedCluster) -> String {
    format!("{}-{}", hc.namespace().unwrap_or_default(), hc.name_any())
}

impl Reconciler for HostedClusterReconciler {
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
        LEGACY_CODE
    }

    fn run_legacy<'a>(
        &'a self,
        op: &'a str,
        ctx: &'a mut OpContext<HostedCluster, State>,
    ) -> impl Future<Output = OpResult> + Send + 'a {
        divergent::run_legacy(op, ctx)
    }
}
