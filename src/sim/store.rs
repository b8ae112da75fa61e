//! The simulator's storage and verbs: objects, the global resourceVersion, and watch history.
//!
//! Everything here runs under one lock and does no I/O; `http` maps requests onto it.
//!
//! This file holds the store itself (its state, its keys, its reads); its verbs are in its
//! parts, each an `impl Store` on the same private state:
//!
//! - `history.rs`: the resourceVersion sequence, the watch history and the fan-out of changes;
//! - `write.rs`: create, replace, update and a second writer's bump (and what the server checks,
//!   fills in or leaves out);
//! - `delete.rs`: deletion, finalizers, and what is deleted with a namespace or a CRD.

mod delete;
mod history;
mod write;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::registry::{Registry, ResourceType};
use super::status::ApiError;
use crate::util::Rng;

pub use history::{Change, EventType};

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
}
