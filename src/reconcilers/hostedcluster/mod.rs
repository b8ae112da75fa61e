//! The HostedCluster reference reconciler: the operations of `deploy/plans/hostedcluster.yaml`
//! doing real API work, modelled on HyperShift's HostedCluster controller.
//!
//! Each operation is implemented once; the engine runs it with the real client in the control
//! and with the dry-run client in the candidate. Several operations write HostedCluster status
//! mid-loop with an update carrying the last known resourceVersion, as upstream does, so
//! concurrent writers produce 409 Conflicts.

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
    "OperatorDeployments",
    "RBACAndPolicies",
    "PublicEndpointExposed",
];

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
}
