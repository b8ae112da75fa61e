//! The simulator's storage and verbs: objects, the global resourceVersion, and watch history.
//!
//! Everything here runs under one lock and does no I/O; `http` maps requests onto it.
//!
//! Over 600 lines: one type, the store, whose verbs keep its invariants together (one
//! resourceVersion sequence, the watch history, finalizers and deletion, status subresources);
//! split by verb, each part would need the store's private state.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::allocate::{InUse, service_on_create, service_on_update};
use super::object::{meta_mut, meta_str, normalize_secret, spec_part, uuid, valid_name};
use super::registry::{Registry, ResourceType};
use super::status::ApiError;
use crate::util::Rng;
use crate::util::time::now_rfc3339;

/// `ADDED`, `MODIFIED` or `DELETED`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// The object was created.
    Added,
    /// The object changed.
    Modified,
    /// The object was deleted.
    Deleted,
}

impl EventType {
    /// The watch event's `type`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change, as watchers receive it.
#[derive(Clone, Debug)]
pub struct Change {
    /// The resourceVersion the change produced.
    pub rv: u64,
    /// What happened.
    pub kind: EventType,
    /// The resource's group.
    pub group: String,
    /// The resource's plural.
    pub plural: String,
    /// The object after the change (before it, for a deletion, with the deletion's rv).
    pub object: Value,
}

/// Receives every change after a watch starts.
pub type ChangeReceiver = broadcast::Receiver<Arc<Change>>;

/// Storage key: group, plural, namespace (empty when cluster-scoped), name.
type Key = (String, String, String, String);

fn key(rt: &ResourceType, namespace: Option<&str>, name: &str) -> Key {
    (
        rt.group.clone(),
        rt.plural.clone(),
        namespace.unwrap_or_default().to_owned(),
        name.to_owned(),
    )
}

/// How a write is done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and answer, persist nothing.
    pub dry_run: bool,
    /// The request addressed the `status` subresource.
    pub status: bool,
}

/// What a write did.
#[derive(Clone, Debug)]
pub struct Written {
    /// The object as stored (or as it would be, for a dry run).
    pub object: Value,
    /// Whether a change was persisted (false for dry runs and no-op writes).
    pub persisted: bool,
    /// Whether the object was created (201) rather than updated (200).
    pub created: bool,
}

/// The store.
#[derive(Debug)]
pub struct Store {
    registry: Registry,
    rv: u64,
    objects: BTreeMap<Key, Value>,
    history: VecDeque<Arc<Change>>,
    history_limit: usize,
    changes: broadcast::Sender<Arc<Change>>,
    rng: Rng,
}

impl Store {
    /// An empty store with the `default`, `kube-system` and `kube-public` namespaces, keeping the
    /// last `history_limit` changes for watches that resume.
    ///
    /// # Panics
    /// Never: the built-in registry serves namespaces and the built-in namespaces are valid.
    pub fn new(history_limit: usize, seed: u64) -> Self {
        let (changes, _) = broadcast::channel(history_limit.max(16));
        let mut store = Self {
            registry: Registry::default(),
            rv: 0,
            objects: BTreeMap::new(),
            history: VecDeque::with_capacity(history_limit),
            history_limit: history_limit.max(1),
            changes,
            rng: Rng::new(seed),
        };
        let ns = store
            .registry
            .get("", "v1", "namespaces")
            .cloned()
            .expect("built-in");
        for name in ["default", "kube-system", "kube-public"] {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            store
                .create(&ns, None, body, WriteOptions::default())
                .expect("built-in namespaces are valid");
        }
        store
    }

    /// The served resources.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.rv
    }
    /// The oldest resourceVersion a watch can resume from.
    pub fn oldest_resumable(&self) -> u64 {
        self.history.front().map_or(self.rv, |c| c.rv - 1)
    }
    /// Changes since `rv` (exclusive), if still retained; and a receiver for what follows.
    pub fn watch_from(&self, rv: u64) -> Result<(Vec<Arc<Change>>, ChangeReceiver), ApiError> {
        if rv < self.oldest_resumable() {
            return Err(ApiError::gone(rv, self.oldest_resumable()));
        }
        let backlog = self.history.iter().filter(|c| c.rv > rv).cloned().collect();
        Ok((backlog, self.changes.subscribe()))
    }

    fn with_version(rt: &ResourceType, mut obj: Value) -> Value {
        obj["apiVersion"] = json!(rt.api_version());
        obj["kind"] = json!(rt.kind);
        obj
    }

    /// One object.
    pub fn get(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.objects
            .get(&key(rt, namespace, name))
            .map(|o| Self::with_version(rt, o.clone()))
            .ok_or_else(|| ApiError::not_found(rt, name))
    }

    /// Every object of a resource (in one namespace, or all), in key order.
    pub fn list<'a>(
        &'a self,
        rt: &'a ResourceType,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = Value> + 'a {
        let from = (
            rt.group.clone(),
            rt.plural.clone(),
            namespace.unwrap_or_default().to_owned(),
            String::new(),
        );
        self.objects
            .range(from..)
            .take_while(move |((g, p, ns, _), _)| {
                *g == rt.group && *p == rt.plural && namespace.is_none_or(|want| want == ns)
            })
            .map(|(_, o)| Self::with_version(rt, o.clone()))
    }

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

    /// DELETE. An object with finalizers only gets a `deletionTimestamp`.
    pub fn delete(
        &mut self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        precondition_rv: Option<&str>,
        precondition_uid: Option<&str>,
        dry_run: bool,
    ) -> Result<Written, ApiError> {
        let k = key(rt, namespace.filter(|_| rt.namespaced), name);
        let old = self
            .objects
            .get(&k)
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, name))?;
        let (uid, rv) = (
            meta_str(&old, "uid").unwrap_or_default(),
            meta_str(&old, "resourceVersion").unwrap_or_default(),
        );
        if let Some(expected) = precondition_uid.filter(|u| *u != uid) {
            return Err(ApiError::precondition_failed(
                rt,
                name,
                &format!(
                    "the UID in the precondition ({expected}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
                ),
            ));
        }
        if let Some(expected) = precondition_rv.filter(|r| *r != rv) {
            return Err(ApiError::precondition_failed(
                rt,
                name,
                &format!(
                    "the ResourceVersion in the precondition ({expected}) does not match the ResourceVersion in record ({rv}). The object might have been modified"
                ),
            ));
        }
        let old = Self::with_version(rt, old);
        let has_finalizers = old["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if has_finalizers {
            if old["metadata"].get("deletionTimestamp").is_some() {
                return Ok(Written {
                    object: old,
                    persisted: false,
                    created: false,
                });
            }
            let new = marked_deleting(rt, old);
            if dry_run {
                // The would-be object: marked, not stored.
                return Ok(Written {
                    object: new,
                    persisted: false,
                    created: false,
                });
            }
            let object = self.commit(rt, k, new, EventType::Modified);
            return Ok(Written {
                object,
                persisted: true,
                created: false,
            });
        }
        if dry_run {
            return Ok(Written {
                object: old,
                persisted: false,
                created: false,
            });
        }
        let object = self.remove(rt, &k, old);
        Ok(Written {
            object,
            persisted: true,
            created: false,
        })
    }

    /// Stores `obj` under a new resourceVersion and records the change.
    fn commit(&mut self, rt: &ResourceType, k: Key, mut obj: Value, kind: EventType) -> Value {
        self.rv += 1;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.objects.insert(k, obj.clone());
        self.record(rt, kind, obj.clone());
        obj
    }

    /// Deletes the object (and what depends on it: a namespace's objects, a CRD's resources).
    fn remove(&mut self, rt: &ResourceType, k: &Key, mut last: Value) -> Value {
        self.objects.remove(k);
        self.rv += 1;
        meta_mut(&mut last).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.record(rt, EventType::Deleted, last.clone());
        if rt.group.is_empty() && rt.plural == "namespaces" {
            let ns = k.3.clone();
            let doomed: Vec<Key> = self
                .objects
                .keys()
                .filter(|(_, _, n, _)| *n == ns)
                .cloned()
                .collect();
            self.remove_all(doomed);
        } else if rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions" {
            let group = last
                .pointer("/spec/group")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let plural = last
                .pointer("/spec/names/plural")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let doomed: Vec<Key> = self
                .objects
                .keys()
                .filter(|(g, p, _, _)| *g == group && *p == plural)
                .cloned()
                .collect();
            self.remove_all(doomed);
            self.registry.unregister_crd(&group, &plural);
        }
        last
    }

    fn remove_all(&mut self, keys: Vec<Key>) {
        for k in keys {
            if let Some(mut obj) = self.objects.remove(&k) {
                self.rv += 1;
                meta_mut(&mut obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
                self.push(Change {
                    rv: self.rv,
                    kind: EventType::Deleted,
                    group: k.0,
                    plural: k.1,
                    object: obj,
                });
            }
        }
    }

    fn record(&mut self, rt: &ResourceType, kind: EventType, object: Value) {
        self.push(Change {
            rv: self.rv,
            kind,
            group: rt.group.clone(),
            plural: rt.plural.clone(),
            object,
        });
    }

    fn push(&mut self, change: Change) {
        let change = Arc::new(change);
        if self.history.len() == self.history_limit {
            self.history.pop_front();
        }
        self.history.push_back(change.clone());
        // No receiver is fine: nobody is watching.
        let _ = self.changes.send(change);
    }

    /// Forgets retained history up to now, so that watches from older versions answer 410 Gone
    /// (as after an etcd compaction).
    pub fn compact(&mut self) {
        self.history.clear();
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

/// An object being deleted, as the real server marks it (`markAsDeleting`): `deletionTimestamp`,
/// `deletionGracePeriodSeconds: 0`, and one more `generation` for kinds that track it.
#[must_use]
pub fn marked_deleting(rt: &ResourceType, mut obj: Value) -> Value {
    let generation = obj["metadata"]["generation"].as_i64();
    let meta = meta_mut(&mut obj);
    if rt.tracks_generation()
        && let Some(generation) = generation.filter(|g| *g > 0)
    {
        meta.insert("generation".into(), json!(generation + 1));
    }
    meta.insert("deletionTimestamp".into(), json!(now_rfc3339()));
    meta.insert("deletionGracePeriodSeconds".into(), json!(0));
    obj
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
