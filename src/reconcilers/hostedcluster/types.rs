//! The HostedCluster and HostedControlPlane custom resources (a small model of HyperShift's).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A reference to a Secret or ConfigMap in the HostedCluster's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LocalRef {
    /// The object's name.
    pub name: String,
}

/// The release to run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Release {
    /// The release image, e.g. `quay.io/openshift-release-dev/ocp-release:4.17.3-x86_64`.
    pub image: String,
}

/// Objects referenced by `spec.configuration`, copied into the control-plane namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Configuration {
    /// ConfigMaps to copy.
    #[serde(default)]
    pub config_maps: Vec<LocalRef>,
    /// Secrets to copy.
    #[serde(default)]
    pub secrets: Vec<LocalRef>,
}

/// The desired hosted cluster.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "example.shadow-reconciler.io",
    version = "v1",
    kind = "HostedCluster",
    namespaced,
    status = "HostedClusterStatus",
    shortname = "hc"
)]
#[serde(rename_all = "camelCase")]
pub struct HostedClusterSpec {
    /// The release.
    pub release: Release,
    /// The platform (`AWS`, `Azure`, `KubeVirt`, `None`).
    pub platform: String,
    /// The pull secret (required).
    pub pull_secret: LocalRef,
    /// The SSH key secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_key: Option<LocalRef>,
    /// The audit webhook kubeconfig secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_webhook: Option<LocalRef>,
    /// An additional trust bundle ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_trust_bundle: Option<LocalRef>,
    /// The secret-encryption key secret (AESCBC or KMS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_encryption: Option<LocalRef>,
    /// The service-account signing key secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_signing_key: Option<LocalRef>,
    /// The client certificate secret of an unmanaged etcd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unmanaged_etcd_tls: Option<LocalRef>,
    /// Global configuration references.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<Configuration>,
}

/// The observed state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostedClusterStatus {
    /// Conditions, including `ReconciliationSucceeded`.
    #[serde(default)]
    #[schemars(schema_with = "crate::reconcilers::any_list")]
    pub conditions: Vec<Value>,
    /// The release version in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The kubeconfig secret in the HostedCluster's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<LocalRef>,
}

/// The control plane of a hosted cluster, in its control-plane namespace.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "example.shadow-reconciler.io",
    version = "v1",
    kind = "HostedControlPlane",
    namespaced,
    status = "HostedControlPlaneStatus",
    shortname = "hcp"
)]
#[serde(rename_all = "camelCase")]
pub struct HostedControlPlaneSpec {
    /// The release image.
    pub release_image: String,
    /// The platform.
    pub platform: String,
}

/// What the control-plane operator reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostedControlPlaneStatus {
    /// The admin kubeconfig secret in the control-plane namespace, once the API server is up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<LocalRef>,
    /// Whether the control plane is ready.
    #[serde(default)]
    pub ready: bool,
}
