//! Which resources the simulator serves: the built-in kinds and those of CRDs created through it.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sha2::Digest as _;

/// One served resource (a group, version and plural), as discovery describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceType {
    /// API group; empty for the core group.
    pub group: String,
    /// API version within the group.
    pub version: String,
    /// Plural resource name, as in URLs (`secrets`).
    pub plural: String,
    /// Singular resource name (`secret`).
    pub singular: String,
    /// Kind (`Secret`).
    pub kind: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Whether `status` is a subresource: writes to the main resource keep status, writes to
    /// `/status` change only status.
    pub status_subresource: bool,
    /// Whether a CRD registered it (deleted with the CRD).
    pub custom: bool,
    /// The version objects are stored in (a CRD's storage version; a built-in kind's own).
    pub storage_version: String,
}

impl ResourceType {
    /// Whether a replace (PUT) of an object that does not exist creates it (`201 Created`), as
    /// kube-apiserver's strategies of these kinds allow (`AllowCreateOnUpdate`): Service, Event,
    /// Lease and the RBAC kinds; not custom resources.
    #[must_use]
    pub fn creates_on_update(&self) -> bool {
        !self.custom
            && matches!(
                (self.group.as_str(), self.plural.as_str()),
                ("", "services" | "events")
                    | ("events.k8s.io", "events")
                    | ("coordination.k8s.io", "leases")
                    | (
                        "rbac.authorization.k8s.io",
                        "roles" | "rolebindings" | "clusterroles" | "clusterrolebindings"
                    )
            )
    }

    /// Whether the real server keeps `metadata.generation` for this kind: custom resources and
    /// the built-in kinds with a spec it versions; not ConfigMap, Secret, Namespace and the like.
    #[must_use]
    pub fn tracks_generation(&self) -> bool {
        self.custom
            || matches!(
                (self.group.as_str(), self.plural.as_str()),
                ("apiextensions.k8s.io", "customresourcedefinitions")
                    | ("apps", "deployments")
                    | ("batch", "jobs")
                    | ("networking.k8s.io", "networkpolicies")
            )
    }

    /// Whether the real server answers a delete with the deleted object (its storage sets
    /// `ReturnDeletedObject`) rather than a `Status`: services and service accounts here.
    #[must_use]
    pub fn returns_deleted_object(&self) -> bool {
        self.group.is_empty() && matches!(self.plural.as_str(), "services" | "serviceaccounts")
    }

    fn builtin(
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
        status: bool,
    ) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
            singular: kind.to_ascii_lowercase(),
            kind: kind.to_owned(),
            namespaced,
            status_subresource: status,
            custom: false,
            storage_version: version.to_owned(),
        }
    }

    /// `apiVersion` of its objects (`v1`, `apps/v1`).
    #[must_use]
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural` or `plural.group`, as error messages name a resource.
    #[must_use]
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The discovery entries (`APIResource`) for the resource and its status subresource.
    pub(super) fn discovery(&self) -> Vec<Value> {
        // In the real server's order: sorted for built-in kinds; as apiextensions lists them for
        // custom resources.
        let verbs: &[&str] = if self.custom {
            &[
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "create",
                "update",
                "watch",
            ]
        } else {
            &[
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ]
        };
        // As the real server: the first 8 bytes of SHA-256 of the storage `group/version/Kind`,
        // base64.
        let digest = sha2::Sha256::digest(format!(
            "{}/{}/{}",
            self.group, self.storage_version, self.kind
        ));
        let mut entries = vec![json!({
            "name": self.plural, "singularName": self.singular, "namespaced": self.namespaced,
            "kind": self.kind, "verbs": verbs,
            "storageVersionHash": crate::util::base64::encode(&digest[..8]),
        })];
        if self.status_subresource {
            entries.push(json!({
                "name": format!("{}/status", self.plural), "singularName": "", "namespaced": self.namespaced,
                "kind": self.kind, "verbs": ["get", "patch", "update"],
            }));
        }
        entries
    }
}

/// The served resources, keyed by (group, version, plural).
#[derive(Clone, Debug)]
pub struct Registry {
    types: BTreeMap<(String, String, String), ResourceType>,
}

impl Default for Registry {
    fn default() -> Self {
        let mut registry = Self {
            types: BTreeMap::new(),
        };
        let builtins = [
            ("", "v1", "namespaces", "Namespace", false, true),
            ("", "v1", "secrets", "Secret", true, false),
            ("", "v1", "configmaps", "ConfigMap", true, false),
            ("", "v1", "services", "Service", true, true),
            ("", "v1", "serviceaccounts", "ServiceAccount", true, false),
            ("", "v1", "events", "Event", true, false),
            ("apps", "v1", "deployments", "Deployment", true, true),
            ("batch", "v1", "jobs", "Job", true, true),
            (
                "rbac.authorization.k8s.io",
                "v1",
                "roles",
                "Role",
                true,
                false,
            ),
            (
                "rbac.authorization.k8s.io",
                "v1",
                "rolebindings",
                "RoleBinding",
                true,
                false,
            ),
            (
                "rbac.authorization.k8s.io",
                "v1",
                "clusterroles",
                "ClusterRole",
                false,
                false,
            ),
            (
                "rbac.authorization.k8s.io",
                "v1",
                "clusterrolebindings",
                "ClusterRoleBinding",
                false,
                false,
            ),
            (
                "networking.k8s.io",
                "v1",
                "networkpolicies",
                "NetworkPolicy",
                true,
                false,
            ),
            ("coordination.k8s.io", "v1", "leases", "Lease", true, false),
            ("events.k8s.io", "v1", "events", "Event", true, false),
            (
                "apiextensions.k8s.io",
                "v1",
                "customresourcedefinitions",
                "CustomResourceDefinition",
                false,
                true,
            ),
        ];
        for (group, version, plural, kind, namespaced, status) in builtins {
            registry.insert(ResourceType::builtin(
                group, version, plural, kind, namespaced, status,
            ));
        }
        registry
    }
}

impl Registry {
    fn insert(&mut self, rt: ResourceType) {
        self.types.insert(
            (rt.group.clone(), rt.version.clone(), rt.plural.clone()),
            rt,
        );
    }

    /// The resource served at `group/version/plural`.
    #[must_use]
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types
            .get(&(group.to_owned(), version.to_owned(), plural.to_owned()))
    }

    /// Every served resource.
    pub fn iter(&self) -> impl Iterator<Item = &ResourceType> {
        self.types.values()
    }

    /// Whether any resource is served under `group/version`.
    #[must_use]
    pub fn serves(&self, group: &str, version: &str) -> bool {
        self.types
            .keys()
            .any(|(g, v, _)| g == group && v == version)
    }

    /// The resource types a CRD object defines (one per served version), or why it defines none.
    pub fn types_of_crd(crd: &Value) -> Result<Vec<ResourceType>, String> {
        let spec = crd.get("spec").ok_or("spec: Required value")?;
        let text = |path: &str| -> Result<String, String> {
            spec.pointer(path)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .ok_or_else(|| format!("spec{}: Required value", path.replace('/', ".")))
        };
        let group = text("/group")?;
        let plural = text("/names/plural")?;
        let kind = text("/names/kind")?;
        let singular = text("/names/singular").unwrap_or_else(|_| kind.to_ascii_lowercase());
        let namespaced = match text("/scope")?.as_str() {
            "Namespaced" => true,
            "Cluster" => false,
            other => {
                return Err(format!(
                    "spec.scope: Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
                ));
            }
        };
        let versions = spec
            .get("versions")
            .and_then(Value::as_array)
            .filter(|v| !v.is_empty());
        let versions = versions.ok_or(
            "spec.versions: Invalid value: must have exactly one version marked as storage version",
        )?;
        let storage_version = versions
            .iter()
            .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
            .and_then(|v| v.get("name").and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned();
        let mut types = Vec::new();
        for version in versions {
            let name = version
                .get("name")
                .and_then(Value::as_str)
                .ok_or("spec.versions[].name: Required value")?;
            if version.get("served").and_then(Value::as_bool) == Some(false) {
                continue;
            }
            types.push(ResourceType {
                group: group.clone(),
                version: name.to_owned(),
                plural: plural.clone(),
                singular: singular.clone(),
                kind: kind.clone(),
                namespaced,
                status_subresource: version.pointer("/subresources/status").is_some(),
                storage_version: storage_version.clone(),
                custom: true,
            });
        }
        Ok(types)
    }

    /// Serves the resources of a CRD (replacing what an earlier version of it served).
    pub fn register_crd(&mut self, types: Vec<ResourceType>) {
        if let Some(first) = types.first() {
            let (group, plural) = (first.group.clone(), first.plural.clone());
            self.types
                .retain(|(g, _, p), rt| !(rt.custom && *g == group && *p == plural));
        }
        for rt in types {
            self.insert(rt);
        }
    }

    /// Stops serving the resources of a CRD.
    pub fn unregister_crd(&mut self, group: &str, plural: &str) {
        self.types
            .retain(|(g, _, p), rt| !(rt.custom && g == group && p == plural));
    }

    /// The groups other than core, each with its versions, for `/apis`.
    pub(super) fn groups(&self) -> BTreeMap<&str, Vec<&str>> {
        let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (group, version, _) in self.types.keys() {
            if group.is_empty() {
                continue;
            }
            let versions = groups.entry(group).or_default();
            if !versions.contains(&version.as_str()) {
                versions.push(version);
            }
        }
        groups
    }
}
