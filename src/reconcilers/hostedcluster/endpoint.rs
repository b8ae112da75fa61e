//! The control plane's private API endpoint, which `CoreHCPChain` makes once the
//! HostedControlPlane exists: a `NodePort` Service owned by the HostedControlPlane (the server
//! allocates its cluster IP and node port) and a ConfigMap, named by the server from
//! `generateName`, that gives the Service's address. Every value the server allocates travels
//! into a later request (the owner's UID, the address), as in real controllers: what the write
//! comparison must not mistake for a difference of the codes.

use k8s_openapi::api::core::v1::{ConfigMap, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::{Resource, ResourceExt};

use super::common::labels;
use super::types::HostedControlPlane;
use crate::engine::OpError;
use crate::reconcilers::k8s::apply;

/// The Service's name.
pub(super) const SERVICE: &str = "kube-apiserver-private";
/// The label that finds the endpoint ConfigMap (its name is the server's).
const ENDPOINT_LABEL: &str = "hypershift.openshift.io/endpoint";
/// The API server's port.
const PORT: i32 = 6443;

/// The Service and the endpoint ConfigMap of `hcp`, in its namespace `ns`.
pub(super) async fn private_endpoint(
    client: &kube::Client,
    ns: &str,
    hcp: &HostedControlPlane,
) -> Result<(), OpError> {
    let owner = OwnerReference {
        api_version: HostedControlPlane::api_version(&()).into_owned(),
        kind: HostedControlPlane::kind(&()).into_owned(),
        name: hcp.name_any(),
        uid: hcp.uid().unwrap_or_default(),
        ..OwnerReference::default()
    };
    let service = Service {
        metadata: ObjectMeta {
            name: Some(SERVICE.to_owned()),
            namespace: Some(ns.to_owned()),
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("NodePort".to_owned()),
            selector: Some(labels(&[("app", "kube-apiserver")])),
            ports: Some(vec![ServicePort {
                name: Some("https".to_owned()),
                port: PORT,
                target_port: Some(IntOrString::Int(PORT)),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    let service = apply(client, &service).await?;
    let address = service
        .spec
        .and_then(|s| s.cluster_ip)
        .ok_or_else(|| OpError::internal("the API server gave the Service no cluster IP"))?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let selector = format!("{ENDPOINT_LABEL}={SERVICE}");
    let existing = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| OpError::from(e).context("list the endpoint ConfigMap"))?;
    if !existing.items.is_empty() {
        return Ok(());
    }
    let endpoint = ConfigMap {
        metadata: ObjectMeta {
            generate_name: Some("kas-endpoint-".to_owned()),
            namespace: Some(ns.to_owned()),
            labels: Some(labels(&[(ENDPOINT_LABEL, SERVICE)])),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        data: Some([("url".to_owned(), format!("https://{address}:{PORT}"))].into()),
        ..ConfigMap::default()
    };
    api.create(&PostParams::default(), &endpoint)
        .await
        .map_err(|e| OpError::from(e).context("create the endpoint ConfigMap"))?;
    Ok(())
}
