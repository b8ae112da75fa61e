//! What an operation wrote, and what the candidate's code would have written differently.
//!
//! The engine logs the writes the API server accepted (verb, object, its answer) for the
//! operations whose two code paths differ: the control's real writes, and the candidate's
//! dry-run writes of the same operation made on the same world just before (see
//! `docs/engine.md`, "Candidate code"). [`compare`] turns the two logs into
//! [`WriteDifference`]s: per object (kind, namespace, name, subresource), what each side did to it
//! (`none`, `write`, `delete`) and, where both wrote it, the fields whose values differ.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use http::Method;
use serde_json::Value;

use super::allocated::{Allocations, RequestBody, Sent};
use super::fielddiff::{Context, MAX_FIELDS, differing_fields_in};
use crate::plan::{FieldPath, Operation};
use crate::vocab::{CodePath, WriteAction, WriteVerb};

/// The object a write addressed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// API group (`""` for the core group).
    pub group: String,
    /// Resource, plural (`secrets`).
    pub resource: String,
    /// Namespace, for namespaced resources.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// Subresource (`status`), when the write addressed one.
    pub subresource: Option<String>,
}

impl ObjectRef {
    /// The object a request path addresses; `name` is the created object's name for a POST to
    /// a collection. `None` for paths that are not the API's (`/version`, `/openapi/v2`).
    #[must_use]
    pub fn from_path(path: &str, created: Option<&str>) -> Option<Self> {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, rest) = match segments.as_slice() {
            ["api", _version, rest @ ..] => ("", rest),
            ["apis", group, _version, rest @ ..] => (*group, rest),
            _ => return None,
        };
        let (namespace, rest) = match rest {
            ["namespaces", _, "status" | "finalize"] | ["namespaces"] | ["namespaces", _] => {
                (None, rest)
            }
            ["namespaces", ns, rest @ ..] => (Some((*ns).to_owned()), rest),
            _ => (None, rest),
        };
        let (resource, name, subresource) = match rest {
            [resource] => (*resource, created?, None),
            [resource, name] => (*resource, *name, None),
            [resource, name, sub] => (*resource, *name, Some((*sub).to_owned())),
            _ => return None,
        };
        Some(Self {
            group: group.to_owned(),
            resource: resource.to_owned(),
            namespace,
            name: name.to_owned(),
            subresource,
        })
    }
}

/// One write the API server accepted.
#[derive(Clone, Debug, PartialEq)]
pub struct Write {
    /// Its verb.
    pub verb: WriteVerb,
    /// The object.
    pub object: ObjectRef,
    /// The object's kind as the answer named it (`Secret`), when it did.
    pub kind: Option<String>,
    /// The server's answer: the object as written (`None` for a delete).
    pub answer: Option<Value>,
    /// Its request's body, to tell what the code sent from what the server set (`None`: not
    /// kept, everything counts as sent; a delete sends nothing).
    pub request: Option<RequestBody>,
}

impl Write {
    /// What its request sent (a delete sends nothing; a request not kept, everything).
    #[must_use]
    pub fn sent(&self) -> Sent {
        match &self.request {
            _ if self.verb == WriteVerb::Delete => Sent::Nothing,
            Some(body) => Sent::of(self.verb, body),
            None => Sent::Everything,
        }
    }
}

/// The writes of one client, shared with the service that logs them.
#[derive(Clone, Debug, Default)]
pub struct WriteLog(Arc<Mutex<Vec<Write>>>);

impl WriteLog {
    /// An empty log.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Logs an accepted mutating request: its method, path, its own body (`None`: not kept) and
    /// the body the server answered.
    pub fn accepted(&self, method: &Method, path: &str, request: Option<RequestBody>, body: &[u8]) {
        let verb = match *method {
            Method::POST => WriteVerb::Create,
            Method::PUT => WriteVerb::Update,
            Method::PATCH => WriteVerb::Patch,
            Method::DELETE => WriteVerb::Delete,
            _ => return,
        };
        let answer: Option<Value> = serde_json::from_slice(body).ok();
        let created = answer
            .as_ref()
            .and_then(|a| a.pointer("/metadata/name"))
            .and_then(Value::as_str);
        let Some(object) = ObjectRef::from_path(path, created) else {
            return;
        };
        let kind = answer
            .as_ref()
            .and_then(|a| a.get("kind"))
            .and_then(Value::as_str)
            .filter(|k| *k != "Status")
            .map(str::to_owned);
        let answer = (verb != WriteVerb::Delete).then_some(answer).flatten();
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Write {
                verb,
                object,
                kind,
                answer,
                request,
            });
    }

    /// Everything logged so far; the log is empty afterwards.
    #[must_use]
    pub fn take(&self) -> Vec<Write> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The span event that carries a write difference and its attributes: the same in the Rust
/// engine's traces, the Go package's spans and what `ingest` reads.
pub use crate::vocab::span::event;

/// The kinds of resources, learned from the answers that named them (a DELETE is answered with
/// a `Status`, which does not), over a table of the built-in ones.
#[derive(Debug, Default)]
pub struct Kinds(Mutex<HashMap<(String, String), String>>);

/// Built-in resources (group, plural) and their kinds.
const BUILT_IN: [(&str, &str, &str); 22] = [
    ("", "configmaps", "ConfigMap"),
    ("", "secrets", "Secret"),
    ("", "namespaces", "Namespace"),
    ("", "services", "Service"),
    ("", "serviceaccounts", "ServiceAccount"),
    ("", "pods", "Pod"),
    ("", "endpoints", "Endpoints"),
    ("", "persistentvolumeclaims", "PersistentVolumeClaim"),
    ("", "events", "Event"),
    ("apps", "deployments", "Deployment"),
    ("apps", "statefulsets", "StatefulSet"),
    ("apps", "daemonsets", "DaemonSet"),
    ("apps", "replicasets", "ReplicaSet"),
    ("batch", "jobs", "Job"),
    ("batch", "cronjobs", "CronJob"),
    ("rbac.authorization.k8s.io", "roles", "Role"),
    ("rbac.authorization.k8s.io", "rolebindings", "RoleBinding"),
    ("rbac.authorization.k8s.io", "clusterroles", "ClusterRole"),
    (
        "rbac.authorization.k8s.io",
        "clusterrolebindings",
        "ClusterRoleBinding",
    ),
    ("networking.k8s.io", "networkpolicies", "NetworkPolicy"),
    ("networking.k8s.io", "ingresses", "Ingress"),
    ("coordination.k8s.io", "leases", "Lease"),
];

impl Kinds {
    /// Learns the kinds the writes' answers name.
    pub fn learn(&self, writes: &[Write]) {
        let mut known = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // An answer of a subresource other than status is another kind (`scale`: Scale).
        let own = |w: &&Write| {
            w.object
                .subresource
                .as_deref()
                .is_none_or(|s| s == "status")
        };
        for write in writes.iter().filter(own) {
            if let Some(kind) = &write.kind {
                let key = (write.object.group.clone(), write.object.resource.clone());
                known.entry(key).or_insert_with(|| kind.clone());
            }
        }
    }

    /// The kind of `object`'s resource: learned, built in, else the resource's name.
    #[must_use]
    pub fn of(&self, object: &ObjectRef) -> String {
        let known = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(kind) = known.get(&(object.group.clone(), object.resource.clone())) {
            return kind.clone();
        }
        BUILT_IN
            .iter()
            .find(|(g, r, _)| *g == object.group && *r == object.resource)
            .map_or_else(|| object.resource.clone(), |(_, _, k)| (*k).to_owned())
    }
}

/// One object an operation wrote differently in the control's code and the candidate's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteDifference {
    /// The operation.
    pub operation: String,
    /// The operation's code path when it exists in one path only (its every write differs).
    pub only: Option<CodePath>,
    /// API group of the object (`""`: core).
    pub group: String,
    /// The object's kind (`Secret`; the resource, `secrets`, when no answer named the kind).
    pub kind: String,
    /// Namespace, for namespaced objects.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// Subresource written (`status`), `None` for the object itself.
    pub subresource: Option<String>,
    /// The control's last accepted verb on the object, `None` when it wrote nothing.
    pub control: Option<WriteVerb>,
    /// The candidate's last accepted (dry-run) verb on it, `None` when it wrote nothing.
    pub candidate: Option<WriteVerb>,
    /// Where both wrote it: the fields whose values differ (at most
    /// [`MAX_FIELDS`]).
    pub fields: Vec<String>,
    /// How many fields differ in all (more than `fields` lists when it was cut).
    pub fields_total: u32,
    /// Whether the plan declares this difference (`intendedDifferences`, or an operation in one
    /// code path only).
    pub intended: bool,
}

impl WriteDifference {
    /// What the control did to the object.
    #[must_use]
    pub fn control_action(&self) -> WriteAction {
        WriteAction::of(self.control)
    }
    /// What the candidate did to the object.
    #[must_use]
    pub fn candidate_action(&self) -> WriteAction {
        WriteAction::of(self.candidate)
    }
    /// `candidate deletes Secret ns/ssh-key where the legacy code writes nothing`, for logs.
    #[must_use]
    pub fn describe(&self) -> String {
        let object = match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        };
        let object = match &self.subresource {
            Some(sub) => format!("{object} ({sub})"),
            None => object,
        };
        let verb = |v: Option<WriteVerb>| v.map_or("writes nothing", verb_phrase);
        if self.control.is_some() && self.candidate.is_some() && !self.fields.is_empty() {
            format!(
                "{}: {object} differs in {}",
                self.operation,
                self.fields.join(", ")
            )
        } else {
            format!(
                "{}: the candidate {} {object} where the control {}",
                self.operation,
                verb(self.candidate),
                verb(self.control)
            )
        }
    }
}

const fn verb_phrase(verb: WriteVerb) -> &'static str {
    match verb {
        WriteVerb::Create => "creates",
        WriteVerb::Update => "updates",
        WriteVerb::Patch => "patches",
        WriteVerb::Delete => "deletes",
    }
}

/// What one side did to one object: its last accepted write, and what all its requests for it
/// sent.
struct Side<'w> {
    last: &'w Write,
    sent: Vec<Sent>,
}

fn sent<'s>(side: &'s Side<'_>) -> Vec<&'s Sent> {
    side.sent.iter().collect()
}

/// Per object, what a log did to it. An object created with `generateName` is named by the
/// pattern `PREFIX*` (`PREFIX*#2` for the second of one prefix), here and in its later writes, so
/// the two sides' creations of it pair up whatever names the server gave them.
fn sides(writes: &[Write]) -> BTreeMap<ObjectRef, Side<'_>> {
    let mut generated: HashMap<ObjectRef, String> = HashMap::new();
    let mut prefixes: HashMap<String, usize> = HashMap::new();
    let mut out: BTreeMap<ObjectRef, Side<'_>> = BTreeMap::new();
    for write in writes {
        let sent = write.sent();
        let itself = ObjectRef {
            subresource: None,
            ..write.object.clone()
        };
        if write.verb == WriteVerb::Create
            && let Some(prefix) = sent.generate_name()
        {
            let n = prefixes.entry(prefix.to_owned()).or_insert(0);
            *n += 1;
            let pattern = if *n == 1 {
                format!("{prefix}*")
            } else {
                format!("{prefix}*#{n}")
            };
            generated.insert(itself.clone(), pattern);
        }
        let mut object = write.object.clone();
        if let Some(pattern) = generated.get(&itself) {
            object.name.clone_from(pattern);
        }
        match out.entry(object) {
            std::collections::btree_map::Entry::Vacant(entry) => {
                entry.insert(Side {
                    last: write,
                    sent: vec![sent],
                });
            }
            std::collections::btree_map::Entry::Occupied(mut entry) => {
                let side = entry.get_mut();
                side.last = write;
                side.sent.push(sent);
            }
        }
    }
    out
}

/// The differences between the control's and the candidate's writes of `op`, per object: one
/// side wrote or deleted an object the other did not touch or treated otherwise, or both wrote
/// it with different field values (`volatile`, the server's own fields, what neither side's
/// requests sent and the server's allocations to each side ignored: [`super::allocated`]).
/// Ordered by object.
#[must_use]
pub fn compare(
    op: &Operation,
    (control, candidate): (&[Write], &[Write]),
    volatile: &[FieldPath],
    kinds: &Kinds,
) -> Vec<WriteDifference> {
    kinds.learn(control);
    kinds.learn(candidate);
    let (ours, theirs) = (sides(control), sides(candidate));
    // What the server allocated to each side, from every object both wrote.
    let mut allocations = Allocations::default();
    for (object, c) in &ours {
        if let Some(k) = theirs.get(object)
            && let (Some(a), Some(b)) = (&c.last.answer, &k.last.answer)
        {
            allocations.learn(a, b, (&sent(c), &sent(k)));
        }
    }
    let mut objects: Vec<&ObjectRef> = ours.keys().chain(theirs.keys()).collect();
    objects.sort();
    objects.dedup();
    let mut out = Vec::new();
    for object in objects {
        let (c, k) = (ours.get(object), theirs.get(object));
        let verbs = (c.map(|s| s.last.verb), k.map(|s| s.last.verb));
        let (mut fields, mut total) = (Vec::new(), 0);
        if WriteAction::of(verbs.0) == WriteAction::of(verbs.1) {
            let (Some(cs), Some(ks)) = (c, k) else {
                continue;
            };
            if let (Some(a), Some(b)) = (&cs.last.answer, &ks.last.answer) {
                let (sent_c, sent_k) = (sent(cs), sent(ks));
                fields = differing_fields_in(
                    a,
                    b,
                    &Context {
                        volatile,
                        sent: (&sent_c, &sent_k),
                        allocations: &allocations,
                    },
                );
                total = fields.len();
            }
            if total == 0 {
                continue;
            }
        }
        out.push(difference(
            op,
            object,
            kinds.of(object),
            verbs,
            &fields,
            total,
        ));
    }
    out
}

/// Every write of an operation that exists in one code path only, as differences with nothing
/// on the other side (intended by the plan's declaration).
#[must_use]
pub fn one_sided(
    op: &Operation,
    path: CodePath,
    writes: &[Write],
    kinds: &Kinds,
) -> Vec<WriteDifference> {
    kinds.learn(writes);
    sides(writes)
        .iter()
        .map(|(object, side)| {
            let verbs = match path {
                CodePath::Legacy => (Some(side.last.verb), None),
                CodePath::Phased => (None, Some(side.last.verb)),
            };
            difference(op, object, kinds.of(object), verbs, &[], 0)
        })
        .collect()
}

fn difference(
    op: &Operation,
    object: &ObjectRef,
    kind: String,
    (control, candidate): (Option<WriteVerb>, Option<WriteVerb>),
    fields: &[FieldPath],
    total: usize,
) -> WriteDifference {
    // Intended only when every differing field is declared, those past the listed ones too.
    let subresource = object.subresource.as_deref().unwrap_or_default();
    let intended = op.only().is_some()
        || op.intended_differences().iter().any(|i| {
            i.matches(
                &kind,
                &object.name,
                subresource,
                (WriteAction::of(control), WriteAction::of(candidate)),
                fields,
            )
        });
    WriteDifference {
        operation: op.name().to_owned(),
        only: op.only(),
        group: object.group.clone(),
        kind,
        namespace: object.namespace.clone(),
        name: object.name.clone(),
        subresource: object.subresource.clone(),
        control,
        candidate,
        fields: fields
            .iter()
            .take(MAX_FIELDS)
            .map(ToString::to_string)
            .collect(),
        fields_total: u32::try_from(total).unwrap_or(u32::MAX),
        intended,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_their_objects() {
        let at = |path: &str, created: Option<&str>| ObjectRef::from_path(path, created);
        let secret = at("/api/v1/namespaces/a/secrets/s", None).unwrap();
        assert_eq!(
            (
                secret.group.as_str(),
                secret.resource.as_str(),
                secret.namespace.as_deref(),
                secret.name.as_str(),
                secret.subresource
            ),
            ("", "secrets", Some("a"), "s", None)
        );
        let created = at("/api/v1/namespaces/a/configmaps", Some("c")).unwrap();
        assert_eq!(created.name, "c");
        assert_eq!(at("/api/v1/namespaces/a/configmaps", None), None);
        let ns = at("/api/v1/namespaces/hc-1", None).unwrap();
        assert_eq!(
            (ns.resource.as_str(), ns.namespace, ns.name.as_str()),
            ("namespaces", None, "hc-1")
        );
        let ns_status = at("/api/v1/namespaces/hc-1/status", None).unwrap();
        assert_eq!(ns_status.subresource.as_deref(), Some("status"));
        let status = at(
            "/apis/example.shadow-reconciler.io/v1/namespaces/t/hostedclusters/h/status",
            None,
        )
        .unwrap();
        assert_eq!(
            (
                status.group.as_str(),
                status.name.as_str(),
                status.subresource.as_deref()
            ),
            ("example.shadow-reconciler.io", "h", Some("status"))
        );
        let role = at("/apis/rbac.authorization.k8s.io/v1/clusterroles/r", None).unwrap();
        assert_eq!((role.namespace, role.name.as_str()), (None, "r"));
        assert_eq!(at("/version", None), None);
    }
}
