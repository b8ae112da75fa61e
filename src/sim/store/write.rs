//! The store's writes: create (POST), replace (PUT), the update path they and patches share, and
//! a second writer's bump; with what the real server checks in a body (and that a namespace
//! exists), fills in (uid, generation, a namespace's and a CRD's defaults) and leaves out (empty
//! fields its typed encoding omits).

use serde_json::{Value, json};

use super::{EventType, Store, WriteOptions, Written, key};
use crate::sim::allocate::{InUse, service_on_create, service_on_update};
use crate::sim::object::{meta_mut, meta_str, normalize_secret, spec_part, uuid, valid_name};
use crate::sim::registry::{Registry, ResourceType};
use crate::sim::status::ApiError;
use crate::util::time::now_rfc3339;

impl Store {
    fn require_namespace(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
    ) -> Result<(), ApiError> {
        match namespace {
            Some(ns) if rt.namespaced => {
                let exists = self.objects.contains_key(&(
                    String::new(),
                    "namespaces".into(),
                    String::new(),
                    ns.to_owned(),
                ));
                if exists {
                    Ok(())
                } else {
                    Err(ApiError::namespace_not_found(ns))
                }
            }
            _ => Ok(()),
        }
    }

    /// Checks the body's kind, apiVersion, name and namespace against the request.
    fn check_body(
        rt: &ResourceType,
        namespace: Option<&str>,
        name: Option<&str>,
        body: &Value,
    ) -> Result<String, ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        }
        if let Some(kind) = body
            .get("kind")
            .and_then(Value::as_str)
            .filter(|k| *k != rt.kind)
        {
            // The real server's words, from its conversion of the decoded object.
            let version = body
                .get("apiVersion")
                .and_then(Value::as_str)
                .map_or(rt.version.as_str(), |v| v.rsplit('/').next().unwrap_or(v));
            let internal = if rt.group.is_empty() {
                "core"
            } else {
                rt.group.split('.').next().unwrap_or(&rt.group)
            };
            return Err(ApiError::bad_request(format!(
                "{kind} in version {version:?} cannot be handled as a {want}: converting ({version}.{kind}) to ({internal}.{want}): unknown conversion",
                want = rt.kind
            )));
        }
        if let Some(v) = body.get("apiVersion").and_then(Value::as_str) {
            let group = v.rsplit_once('/').map_or("", |(g, _)| g);
            if group != rt.group {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({v}) does not match the expected API version ({})",
                    rt.api_version()
                )));
            }
        }
        if let (Some(ns), Some(body_ns)) = (namespace, meta_str(body, "namespace"))
            && rt.namespaced
            && ns != body_ns
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let body_name = meta_str(body, "name").unwrap_or_default();
        if let Some(name) = name
            && body_name != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        Ok(body_name.to_owned())
    }

    /// POST: create.
    pub fn create(
        &mut self,
        rt: &ResourceType,
        namespace: Option<&str>,
        mut body: Value,
        opts: WriteOptions,
    ) -> Result<Written, ApiError> {
        let mut name = Self::check_body(rt, namespace, None, &body)?;
        if name.is_empty()
            && let Some(prefix) = meta_str(&body, "generateName").map(str::to_owned)
        {
            let suffix: String = (0..5)
                .map(|_| char::from(b"bcdfghjklmnpqrstvwxz2456789"[self.rng.below(27)]))
                .collect();
            name = format!("{prefix}{suffix}");
        }
        if name.is_empty() {
            return Err(ApiError::invalid(
                rt,
                "",
                "metadata.name: Required value: name or generateName is required",
            ));
        }
        if !valid_name(&name) {
            return Err(ApiError::invalid(
                rt,
                &name,
                &format!(
                    "metadata.name: Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                ),
            ));
        }
        self.require_namespace(rt, namespace)?;
        let k = key(rt, namespace.filter(|_| rt.namespaced), &name);
        if self.objects.contains_key(&k) {
            return Err(ApiError::already_exists(rt, &name));
        }
        let crd_types =
            if rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions" {
                Some(
                    Registry::types_of_crd(&body)
                        .map_err(|cause| ApiError::invalid(rt, &name, &cause))?,
                )
            } else {
                None
            };
        if rt.status_subresource
            && let Some(map) = body.as_object_mut()
        {
            map.remove("status");
        }
        let uid = uuid(u128::from(self.rng.next_u64()) << 64 | u128::from(self.rng.next_u64()));
        {
            let meta = meta_mut(&mut body);
            meta.insert("name".into(), json!(name));
            if rt.namespaced {
                meta.insert("namespace".into(), json!(namespace.unwrap_or("default")));
            } else {
                meta.remove("namespace");
            }
            meta.insert("uid".into(), json!(uid));
            meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
            if rt.tracks_generation() {
                meta.insert("generation".into(), json!(1));
            } else {
                meta.remove("generation");
            }
            meta.remove("resourceVersion");
            meta.remove("deletionTimestamp");
        }
        let mut body = Self::with_version(rt, body);
        if crd_types.is_some() && body.pointer("/spec/conversion").is_none() {
            body["spec"]["conversion"] = json!({"strategy": "None"});
        }
        if let Some(types) = &crd_types {
            body["status"] = crd_status(&body);
            if !opts.dry_run {
                self.registry.register_crd(types.clone());
            }
        }
        if rt.kind == "Namespace" && rt.group.is_empty() {
            namespace_defaults(&mut body, &name);
        }
        if rt.group.is_empty() && rt.plural == "secrets" {
            normalize_secret(&mut body);
        }
        if rt.group.is_empty() && rt.plural == "services" {
            let in_use = InUse::of(self.objects.values().filter(|o| o["kind"] == "Service"));
            service_on_create(&mut body, &mut self.rng, &in_use);
        }
        drop_empty(rt, &mut body);
        if opts.dry_run {
            return Ok(Written {
                object: body,
                persisted: false,
                created: true,
            });
        }
        let object = self.commit(rt, k, body, EventType::Added);
        Ok(Written {
            object,
            persisted: true,
            created: true,
        })
    }

    /// PUT: replace (the main resource keeps its status; `/status` changes only status).
    pub fn replace(
        &mut self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        body: Value,
        opts: WriteOptions,
    ) -> Result<Written, ApiError> {
        Self::check_body(rt, namespace, Some(name), &body)?;
        let k = key(rt, namespace.filter(|_| rt.namespaced), name);
        if !opts.status && rt.creates_on_update() && !self.objects.contains_key(&k) {
            // Created as a create would (its system fields wiped, a resourceVersion ignored).
            return self.create(rt, namespace, body, opts);
        }
        let precondition = meta_str(&body, "resourceVersion").map(str::to_owned);
        self.update(rt, namespace, name, precondition.as_deref(), opts, |_| {
            Ok(body)
        })
    }

    /// The shared update path: `mutate` computes the new object from the current one.
    pub fn update(
        &mut self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        precondition: Option<&str>,
        opts: WriteOptions,
        mutate: impl FnOnce(&Value) -> Result<Value, ApiError>,
    ) -> Result<Written, ApiError> {
        let k = key(rt, namespace.filter(|_| rt.namespaced), name);
        let old = self
            .objects
            .get(&k)
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, name))?;
        if let Some(rv) = precondition
            && Some(rv) != meta_str(&old, "resourceVersion")
        {
            return Err(ApiError::conflict(rt, name));
        }
        let proposed = mutate(&old)?;
        if !proposed.is_object() {
            return Err(ApiError::bad_request(
                "the result of the update is not a JSON object",
            ));
        }
        let mut new = if opts.status {
            // Only status changes through the status subresource.
            let mut new = old.clone();
            set_status(&mut new, proposed.get("status"));
            new
        } else {
            let mut new = proposed;
            if rt.status_subresource {
                set_status(&mut new, old.get("status"));
            }
            new
        };
        keep_server_fields(rt, &old, &mut new);
        if rt.group.is_empty() && rt.plural == "services" {
            service_on_update(&old, &mut new);
        }
        if rt.group.is_empty() && rt.plural == "secrets" {
            normalize_secret(&mut new);
            if new["type"] != old["type"] {
                return Err(ApiError::invalid(
                    rt,
                    name,
                    &format!("type: Invalid value: {}: field is immutable", new["type"]),
                ));
            }
        }
        drop_empty(rt, &mut new);
        let mut new = Self::with_version(rt, new);
        let is_crd = rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions";
        if is_crd && !opts.status {
            let types = Registry::types_of_crd(&new)
                .map_err(|cause| ApiError::invalid(rt, name, &cause))?;
            new["status"] = crd_status(&new);
            if !opts.dry_run {
                self.registry.register_crd(types);
            }
        }
        let unchanged = Self::with_version(rt, old.clone()) == new;
        let finalized = new["metadata"].get("deletionTimestamp").is_some()
            && new["metadata"]["finalizers"]
                .as_array()
                .is_none_or(Vec::is_empty);
        if opts.dry_run || (unchanged && !finalized) {
            return Ok(Written {
                object: new,
                persisted: false,
                created: false,
            });
        }
        if finalized {
            // The real server answers with the object as it was last stored, not with the
            // resourceVersion of its deletion (which only the watch's DELETED event carries).
            self.remove(rt, &k, new.clone());
            return Ok(Written {
                object: new,
                persisted: true,
                created: false,
            });
        }
        let object = self.commit(rt, k, new, EventType::Modified);
        Ok(Written {
            object,
            persisted: true,
            created: false,
        })
    }

    /// A second writer touches the object (an annotation), bumping its resourceVersion.
    pub fn bump(
        &mut self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), ApiError> {
        let counter = self.rv + 1;
        self.update(rt, namespace, name, None, WriteOptions::default(), |old| {
            let mut new = old.clone();
            let meta = meta_mut(&mut new);
            let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
            annotations["sim.shadow-reconciler.io/second-writer"] = json!(counter.to_string());
            Ok(new)
        })
        .map(|_| ())
    }
}

/// Sets `status` to a copy of `status`, or removes it.
fn set_status(object: &mut Value, status: Option<&Value>) {
    match (status, object.as_object_mut()) {
        (Some(status), Some(map)) => {
            map.insert("status".into(), status.clone());
        }
        (None, Some(map)) => {
            map.remove("status");
        }
        (_, None) => {}
    }
}

/// Copies the fields the server owns from the stored object to its replacement, and bumps
/// `generation` when anything outside metadata and status changed.
fn keep_server_fields(rt: &ResourceType, old: &Value, new: &mut Value) {
    let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
    let bump = spec_part(old) != spec_part(new);
    let old_meta = &old["metadata"];
    let meta = meta_mut(new);
    let owned = [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "resourceVersion",
    ];
    for field in owned {
        match old_meta.get(field) {
            Some(v) => meta.insert(field.into(), v.clone()),
            None => meta.remove(field),
        };
    }
    if rt.tracks_generation() {
        meta.insert(
            "generation".into(),
            json!(if bump { generation + 1 } else { generation }),
        );
    } else {
        meta.remove("generation");
    }
}

/// What the real server gives a new namespace: phase `Active`, the immutable
/// `kubernetes.io/metadata.name` label and the `kubernetes` finalizer.
fn namespace_defaults(body: &mut Value, name: &str) {
    body["status"] = json!({"phase": "Active"});
    let meta = meta_mut(body);
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if let Some(labels) = labels.as_object_mut() {
        labels.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    // The `kubernetes` finalizer is added to whatever finalizers the namespace asks for.
    if !body["spec"].is_object() {
        body["spec"] = json!({});
    }
    if !body["spec"]["finalizers"].is_array() {
        body["spec"]["finalizers"] = json!([]);
    }
    if let Some(finalizers) = body["spec"]["finalizers"].as_array_mut()
        && !finalizers.iter().any(|f| f == "kubernetes")
    {
        finalizers.push(json!("kubernetes"));
    }
}

/// What the real server's typed encoding leaves out (fields declared `omitempty`): empty
/// `labels`, `annotations`, `finalizers` and `ownerReferences`, a ConfigMap's or Secret's empty
/// `data`/`binaryData`, a service account's empty `secrets`/`imagePullSecrets`. Other fields, and
/// every field of a custom resource, stay as written.
fn drop_empty(rt: &ResourceType, obj: &mut Value) {
    let empty = |v: &Value| {
        v.as_object().is_some_and(serde_json::Map::is_empty)
            || v.as_array().is_some_and(Vec::is_empty)
            || v.is_null()
    };
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|k, v| {
            !(matches!(
                k.as_str(),
                "labels" | "annotations" | "finalizers" | "ownerReferences"
            ) && empty(v))
        });
    }
    let omitted: &[&str] = match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "configmaps" | "secrets") => &["data", "binaryData"],
        ("", "serviceaccounts") => &["secrets", "imagePullSecrets"],
        _ => &[],
    };
    if let Some(map) = obj.as_object_mut() {
        map.retain(|k, v| !(omitted.contains(&k.as_str()) && empty(v)));
    }
}

/// The status a real API server gives an accepted CRD.
fn crd_status(crd: &Value) -> Value {
    let names = crd
        .pointer("/spec/names")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let now = now_rfc3339();
    json!({
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
        "storedVersions": crd.pointer("/spec/versions").and_then(Value::as_array).map(|vs| {
            vs.iter().filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true)).filter_map(|v| v.get("name").cloned()).collect::<Vec<_>>()
        }).unwrap_or_default(),
    })
}
