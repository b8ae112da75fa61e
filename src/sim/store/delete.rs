//! The store's deletions: DELETE with its preconditions, an object with finalizers marked as
//! deleting rather than removed, and what goes with a removed object (a namespace's objects, a
//! CRD's resources and their registration).

use serde_json::{Value, json};

use super::{Change, EventType, Key, Store, Written, key};
use crate::sim::object::{meta_mut, meta_str};
use crate::sim::registry::ResourceType;
use crate::sim::status::ApiError;
use crate::util::time::now_rfc3339;

impl Store {
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

    /// Deletes the object (and what depends on it: a namespace's objects, a CRD's resources).
    pub(super) fn remove(&mut self, rt: &ResourceType, k: &Key, mut last: Value) -> Value {
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
