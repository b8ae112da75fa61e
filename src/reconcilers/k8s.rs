//! Small Kubernetes helpers the reference reconcilers share: apply, copy, delete-if-present.

use std::fmt::Debug;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Resource;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams};
use kube::core::NamespaceResourceScope;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::FIELD_MANAGER;
use crate::engine::OpError;

/// Server-side applies `object` (its name and namespace come from its metadata).
pub async fn apply<K>(client: &kube::Client, object: &K) -> Result<K, OpError>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug,
{
    let meta = object.meta();
    let (Some(ns), Some(name)) = (meta.namespace.as_deref(), meta.name.as_deref()) else {
        return Err(OpError::internal("apply needs a namespaced, named object"));
    };
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(name, &params, &Patch::Apply(object))
        .await
        .map_err(|e| OpError::from(e).context(&format!("apply {} {ns}/{name}", K::kind(&()))))
}

/// Server-side applies a cluster-scoped object.
pub async fn apply_cluster<K>(client: &kube::Client, object: &K) -> Result<K, OpError>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
{
    let name = object
        .meta()
        .name
        .clone()
        .ok_or_else(|| OpError::internal("apply needs a named object"))?;
    let api: Api<K> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &params, &Patch::Apply(object))
        .await
        .map_err(|e| OpError::from(e).context(&format!("apply {} {name}", K::kind(&()))))
}

/// Object metadata with a name and namespace.
#[must_use]
pub fn meta(namespace: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        ..ObjectMeta::default()
    }
}

/// Reads `from_ns/name` and applies its data as `to_ns/to_name`. A missing source is an error
/// naming it.
pub async fn copy_secret(
    client: &kube::Client,
    from_ns: &str,
    name: &str,
    to_ns: &str,
    to_name: &str,
) -> Result<(), OpError> {
    let source = Api::<Secret>::namespaced(client.clone(), from_ns)
        .get(name)
        .await
        .map_err(|e| OpError::from(e).context(&format!("read secret {from_ns}/{name}")))?;
    let copy = Secret {
        metadata: meta(to_ns, to_name),
        data: source.data,
        type_: source.type_,
        ..Secret::default()
    };
    apply(client, &copy).await.map(|_| ())
}

/// Reads `from_ns/name` and applies its data as `to_ns/to_name`.
pub async fn copy_config_map(
    client: &kube::Client,
    from_ns: &str,
    name: &str,
    to_ns: &str,
    to_name: &str,
) -> Result<(), OpError> {
    let source = Api::<ConfigMap>::namespaced(client.clone(), from_ns)
        .get(name)
        .await
        .map_err(|e| OpError::from(e).context(&format!("read configmap {from_ns}/{name}")))?;
    let copy = ConfigMap {
        metadata: meta(to_ns, to_name),
        data: source.data,
        ..ConfigMap::default()
    };
    apply(client, &copy).await.map(|_| ())
}

/// Deletes `ns/name` if it exists.
pub async fn delete_if_present<K>(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Result<(), OpError>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug,
{
    match Api::<K>::namespaced(client.clone(), ns)
        .delete(name, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(OpError::from(e).context(&format!("delete {} {ns}/{name}", K::kind(&())))),
    }
}
