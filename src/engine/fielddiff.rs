//! Field-by-field comparison of two answers of the API server for one object: the fields whose
//! values differ, ignoring what the server itself changes from one write to the next.
//!
//! Ignored everywhere: `metadata.resourceVersion`, `uid`, `generation`, `creationTimestamp`,
//! `managedFields` and `selfLink`; any field whose key ends in `Time` or `Timestamp`
//! (`lastTransitionTime`, `lastHeartbeatTime`...); and the plan's volatile fields. With the
//! requests at hand ([`Context`]), a field neither side's request sent is the server's (a
//! default, an allocated address or port) and a value that is the server's allocation to each
//! side is one value ([`super::allocated`]). A list of objects that all carry a distinct `name`
//! (else `type`) is compared by that key, as Kubernetes merges it, so the same conditions in
//! another order are no difference. A `null` equals a missing field.

use serde_json::{Map, Value};

use super::allocated::{Allocations, Sent};
use crate::plan::FieldPath;
use crate::plan::fields::Segment;

/// At most this many differing fields are listed per object in a record; the rest are counted.
pub const MAX_FIELDS: usize = 32;

/// The metadata fields the server sets on every write.
const SERVER_METADATA: [&str; 6] = [
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
];

/// What decides whether a differing field counts: the plan's volatile fields, what each side's
/// requests for the object sent (the control's, the candidate's), and the values the server
/// allocated to each side.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The plan's volatile fields.
    pub volatile: &'a [FieldPath],
    /// What the control's and the candidate's requests for the object sent.
    pub sent: (&'a [&'a Sent], &'a [&'a Sent]),
    /// The server's allocations to each side, paired.
    pub allocations: &'a Allocations,
}

impl Context<'_> {
    /// Whether a field that differs (`a` the control's value, `b` the candidate's; `None` where
    /// a side has none) is a difference of the codes.
    fn counts(&self, path: &FieldPath, a: Option<&Value>, b: Option<&Value>) -> bool {
        let sent = |side: &[&Sent]| side.iter().any(|s| s.covers(path));
        if !sent(self.sent.0) && !sent(self.sent.1) {
            return false;
        }
        !matches!((a, b), (Some(a), Some(b)) if self.allocations.corresponds(a, b))
    }
}

/// Everything sent by both sides and nothing allocated: every differing field counts.
const EVERYTHING: [&Sent; 1] = [&Sent::Everything];

/// The fields of `control` and `candidate` (two versions of one object) whose values differ, in
/// path order, without the ignored ones (a record lists the first [`MAX_FIELDS`] of them).
#[must_use]
pub fn differing_fields(
    control: &Value,
    candidate: &Value,
    volatile: &[FieldPath],
) -> Vec<FieldPath> {
    let allocations = Allocations::default();
    differing_fields_in(
        control,
        candidate,
        &Context {
            volatile,
            sent: (&EVERYTHING, &EVERYTHING),
            allocations: &allocations,
        },
    )
}

/// [`differing_fields`], counting only what the [`Context`] says is the codes' own.
#[must_use]
pub fn differing_fields_in(
    control: &Value,
    candidate: &Value,
    ctx: &Context<'_>,
) -> Vec<FieldPath> {
    let mut out = Vec::new();
    walk(control, candidate, &FieldPath::root(), ctx, &mut out);
    out.sort();
    out
}

fn ignored(path: &FieldPath, volatile: &[FieldPath]) -> bool {
    let segments = path.segments();
    if let [Segment::Key(first), Segment::Key(second)] = segments
        && first == "metadata"
        && SERVER_METADATA.contains(&second.as_str())
    {
        return true;
    }
    if let Some(Segment::Key(last)) = segments.last()
        && (last.ends_with("Time") || last.ends_with("Timestamp"))
    {
        return true;
    }
    volatile.iter().any(|pattern| pattern.covers(path))
}

fn is_absent(value: Option<&Value>) -> bool {
    value.is_none_or(Value::is_null)
}

fn walk(a: &Value, b: &Value, path: &FieldPath, ctx: &Context<'_>, out: &mut Vec<FieldPath>) {
    if ignored(path, ctx.volatile) {
        return;
    }
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => objects(a, b, path, ctx, out),
        (Value::Array(a), Value::Array(b)) => arrays(a, b, path, ctx, out),
        _ if a == b => {}
        _ => {
            if ctx.counts(path, Some(a), Some(b)) {
                out.push(path.clone());
            }
        }
    }
}

/// A field one side has and the other has not.
fn one_side(
    path: FieldPath,
    (a, b): (Option<&Value>, Option<&Value>),
    ctx: &Context<'_>,
    out: &mut Vec<FieldPath>,
) {
    if !ignored(&path, ctx.volatile) && ctx.counts(&path, a, b) {
        out.push(path);
    }
}

fn objects(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    path: &FieldPath,
    ctx: &Context<'_>,
    out: &mut Vec<FieldPath>,
) {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort_unstable();
    keys.dedup();
    for key in keys {
        let (x, y) = (a.get(key), b.get(key));
        let child = path.child(Segment::Key(key.clone()));
        match (is_absent(x), is_absent(y)) {
            (true, true) => {}
            (false, false) => walk(
                x.unwrap_or(&Value::Null),
                y.unwrap_or(&Value::Null),
                &child,
                ctx,
                out,
            ),
            _ => one_side(child, (x, y), ctx, out),
        }
    }
}

/// The key field of a list whose elements are all objects with a distinct string value of it.
fn list_key(a: &[Value], b: &[Value]) -> Option<&'static str> {
    ["name", "type"].into_iter().find(|field| {
        [a, b].iter().all(|list| {
            let mut seen = std::collections::HashSet::new();
            !list.is_empty()
                && list.iter().all(|item| {
                    item.get(field)
                        .and_then(Value::as_str)
                        .is_some_and(|v| seen.insert(v))
                })
        })
    })
}

fn arrays(a: &[Value], b: &[Value], path: &FieldPath, ctx: &Context<'_>, out: &mut Vec<FieldPath>) {
    if let Some(field) = list_key(a, b) {
        let by_key = |list: &[Value]| -> Vec<(String, Value)> {
            list.iter()
                .map(|item| {
                    let key = item.get(field).and_then(Value::as_str).unwrap_or_default();
                    (key.to_owned(), item.clone())
                })
                .collect()
        };
        let (a, b) = (by_key(a), by_key(b));
        let mut keys: Vec<&String> = a.iter().chain(&b).map(|(k, _)| k).collect();
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            let child = path.child(Segment::Keyed {
                field: field.to_owned(),
                value: key.clone(),
            });
            let find = |list: &[(String, Value)]| {
                list.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
            };
            match (find(&a), find(&b)) {
                (Some(x), Some(y)) => walk(&x, &y, &child, ctx, out),
                (x, y) => one_side(child, (x.as_ref(), y.as_ref()), ctx, out),
            }
        }
        return;
    }
    for i in 0..a.len().max(b.len()) {
        let child = path.child(Segment::Index(i));
        match (a.get(i), b.get(i)) {
            (Some(x), Some(y)) => walk(x, y, &child, ctx, out),
            (x, y) => one_side(child, (x, y), ctx, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn paths(a: &Value, b: &Value, volatile: &[&str]) -> Vec<String> {
        let volatile: Vec<FieldPath> = volatile
            .iter()
            .map(|v| FieldPath::parse(v).unwrap())
            .collect();
        differing_fields(a, b, &volatile)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn server_fields_and_times_are_ignored() {
        let a = json!({"metadata": {"name": "x", "resourceVersion": "1", "uid": "a",
            "creationTimestamp": "t1", "managedFields": [{"manager": "a"}], "generation": 1},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "t1"}]}});
        let b = json!({"metadata": {"name": "x", "resourceVersion": "2", "uid": "b",
            "creationTimestamp": "t2", "managedFields": [{"manager": "b"}], "generation": 2},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "t2"}]}});
        assert_eq!(paths(&a, &b, &[]), Vec::<String>::new());
    }

    #[test]
    fn keyed_lists_ignore_order_and_name_the_element() {
        let a = json!({"status": {"conditions": [
            {"type": "A", "status": "True"}, {"type": "B", "status": "False"}]}});
        let b = json!({"status": {"conditions": [
            {"type": "B", "status": "True"}, {"type": "A", "status": "True"}]}});
        assert_eq!(paths(&a, &b, &[]), ["status.conditions[type=B].status"]);
    }

    #[test]
    fn added_removed_and_changed_fields() {
        let a = json!({"data": {"a": "1", "b": "2"}, "spec": {"args": ["x", "y"]}, "n": null});
        let b = json!({"data": {"a": "1", "c": "3", "tls.crt": "z"}, "spec": {"args": ["x"]}});
        assert_eq!(
            paths(&a, &b, &[]),
            ["data.b", "data.c", "data[\"tls.crt\"]", "spec.args[1]"]
        );
        assert_eq!(paths(&a, &b, &["data"]), ["spec.args[1]"]);
        assert_eq!(
            paths(&a, &b, &["data.*", "spec.args[*]"]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn many_differences_are_all_found() {
        let a =
            json!({"data": (0..50).map(|i| (format!("k{i:02}"), json!(i))).collect::<Map<_, _>>()});
        assert_eq!(differing_fields(&a, &json!({"data": {}}), &[]).len(), 50);
    }
}
