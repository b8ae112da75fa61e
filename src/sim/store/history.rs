//! The store's resourceVersion sequence and its watch history: every change stored under the
//! next resourceVersion, kept for watches that resume (the last `history_limit`) and sent to the
//! watches open now.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::{Key, Store};
use crate::sim::object::meta_mut;
use crate::sim::registry::ResourceType;
use crate::sim::status::ApiError;

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

impl Store {
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

    /// Stores `obj` under a new resourceVersion and records the change.
    pub(super) fn commit(
        &mut self,
        rt: &ResourceType,
        k: Key,
        mut obj: Value,
        kind: EventType,
    ) -> Value {
        self.rv += 1;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.objects.insert(k, obj.clone());
        self.record(rt, kind, obj.clone());
        obj
    }

    pub(super) fn record(&mut self, rt: &ResourceType, kind: EventType, object: Value) {
        self.push(Change {
            rv: self.rv,
            kind,
            group: rt.group.clone(),
            plural: rt.plural.clone(),
            object,
        });
    }

    pub(super) fn push(&mut self, change: Change) {
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
}
