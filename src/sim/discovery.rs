//! Discovery documents: `/version`, `/api`, `/apis`, `/apis/{group}` and resource lists.

use serde_json::{Value, json};

use super::registry::Registry;

/// The Kubernetes version the simulator speaks.
pub const KUBERNETES_VERSION: (&str, &str) = ("1", "37");

/// `/version`.
pub fn version() -> Value {
    let (major, minor) = KUBERNETES_VERSION;
    json!({
        "major": major, "minor": minor, "gitVersion": format!("v{major}.{minor}.0-shadow-reconciler-sim"),
        "gitCommit": "", "gitTreeState": "clean", "buildDate": "", "goVersion": "", "compiler": "rust",
        "platform": "linux/amd64",
    })
}

/// `/api`.
pub fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
}

fn group_doc(name: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({"name": name, "versions": versions, "preferredVersion": versions[0]})
}

/// `/apis`.
pub fn groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .map(|(name, versions)| group_doc(name, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`.
pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    let groups = registry.groups();
    let versions = groups.get(name)?;
    let mut doc = group_doc(name, versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// `/api/v1` or `/apis/{group}/{version}`.
pub fn resources(registry: &Registry, group: &str, version: &str) -> Value {
    let resources: Vec<Value> = registry
        .iter()
        .filter(|rt| rt.group == group && rt.version == version)
        .flat_map(super::registry::ResourceType::discovery)
        .collect();
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
}
