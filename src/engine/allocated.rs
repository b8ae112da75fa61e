//! What the code sent, and what the API server set on its own.
//!
//! Two writes of one object by two codes are compared on what the codes decided. The server adds
//! to every answer what no request sent: its defaults and its allocations (a Service's
//! `spec.clusterIP` and node ports, a name from `generateName`, a UID, a bound claim's volume), and
//! a dry-run create gets other allocations than the real one. So a field counts only where at
//! least one side's request sent it ([`Sent::covers`]); a field neither sent is the server's
//! (its definition in the API: what the object gets that the client did not give). A value the
//! server allocated can travel into a later request of the same code (an owner reference to the
//! UID just created, a URL with the allocated address): [`Allocations`] pairs each side's
//! allocated values, so such a field compares equal when one side's value is the other's
//! allocation (and a string equal to it once every allocated value inside it is replaced).

use serde_json::Value;

use crate::plan::FieldPath;
use crate::plan::fields::Segment;
use crate::vocab::WriteVerb;

/// The body of an accepted write's request, kept (unparsed) to tell what the code sent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestBody {
    /// Its `Content-Type`, when it had one.
    pub content_type: Option<String>,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// A request whose body is kept: the request to send on, and its body.
pub(super) async fn keep_body(
    request: http::Request<kube::client::Body>,
) -> Result<(http::Request<kube::client::Body>, RequestBody), tower::BoxError> {
    let (parts, body) = request.into_parts();
    let bytes = body.collect_bytes().await?.to_vec();
    let kept = RequestBody {
        content_type: parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        bytes: bytes.clone(),
    };
    Ok((
        http::Request::from_parts(parts, kube::client::Body::from(bytes)),
        kept,
    ))
}

/// The fields a request set.
#[derive(Clone, Debug, PartialEq)]
pub enum Sent {
    /// An object-shaped body (a create, an update, a merge, strategic merge or apply patch):
    /// every path it holds.
    Fields(Value),
    /// A JSON patch (RFC 6902): the paths its operations name, as JSON pointer segments.
    Pointers(Vec<Vec<String>>),
    /// Nothing: a delete, or no body.
    Nothing,
    /// A body that could not be read: taken as setting every field (everything is compared).
    Everything,
}

impl Sent {
    /// What `body` sent, for a request of `verb`.
    #[must_use]
    pub fn of(verb: WriteVerb, body: &RequestBody) -> Self {
        if verb == WriteVerb::Delete || body.bytes.is_empty() {
            return Self::Nothing;
        }
        let json_patch = body
            .content_type
            .as_deref()
            .is_some_and(|t| t.starts_with("application/json-patch+json"));
        let Some(value) = parse(&body.bytes) else {
            return Self::Everything;
        };
        if json_patch {
            return value.as_array().map_or(Self::Everything, |ops| {
                Self::Pointers(
                    ops.iter()
                        .flat_map(|op| ["path", "from"].map(|k| op.get(k).and_then(Value::as_str)))
                        .flatten()
                        .map(pointer)
                        .collect(),
                )
            });
        }
        if value.is_object() {
            Self::Fields(value)
        } else {
            Self::Everything
        }
    }

    /// Whether the request set `path`, a part of it, or a field that holds it.
    #[must_use]
    pub fn covers(&self, path: &FieldPath) -> bool {
        match self {
            Self::Fields(value) => holds(value, path.segments()),
            Self::Pointers(pointers) => pointers.iter().any(|p| pointer_covers(p, path)),
            Self::Nothing => false,
            Self::Everything => true,
        }
    }

    /// The `metadata.generateName` of a body that asks the server for a name (no
    /// `metadata.name`).
    #[must_use]
    pub fn generate_name(&self) -> Option<&str> {
        let Self::Fields(value) = self else {
            return None;
        };
        let meta = value.get("metadata")?;
        let named = meta
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        if named {
            return None;
        }
        meta.get("generateName")
            .and_then(Value::as_str)
            .filter(|g| !g.is_empty())
    }
}

/// A body as JSON, else as YAML (an apply patch may be YAML).
fn parse(bytes: &[u8]) -> Option<Value> {
    serde_json::from_slice(bytes).ok().or_else(|| {
        std::str::from_utf8(bytes)
            .ok()
            .and_then(|text| serde_saphyr::from_str::<Value>(text).ok())
    })
}

/// The segments of a JSON pointer (`/spec/ports/0` is `spec`, `ports`, `0`).
fn pointer(text: &str) -> Vec<String> {
    text.split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// Whether a JSON patch's pointer and a field path name the same field or one holds the other.
fn pointer_covers(pointer: &[String], path: &FieldPath) -> bool {
    pointer
        .iter()
        .zip(path.segments())
        .all(|(p, segment)| match segment {
            Segment::Key(key) => p == key,
            Segment::Index(i) => p == "-" || *p == i.to_string(),
            // A keyed element: the pointer names elements by position; any position may be it.
            Segment::Keyed { .. } => p == "-" || p.parse::<usize>().is_ok(),
            Segment::Any => true,
        })
}

/// Whether `body` holds the field at `segments`, a part of it, or a value where it would be.
fn holds(mut body: &Value, segments: &[Segment]) -> bool {
    for segment in segments {
        body = match (body, segment) {
            (Value::Object(map), Segment::Key(key)) => match map.get(key) {
                Some(next) => next,
                None => return false,
            },
            (Value::Array(list), Segment::Index(i)) => match list.get(*i) {
                Some(next) => next,
                None => return false,
            },
            (Value::Array(list), Segment::Keyed { field, value }) => {
                match list
                    .iter()
                    .find(|item| item.get(field).and_then(Value::as_str) == Some(value.as_str()))
                {
                    Some(next) => next,
                    None => return false,
                }
            }
            // A value (a null too: a merge patch's removal) where the path goes deeper: the
            // request decided what is there.
            (Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_), _) => {
                return true;
            }
            // A body shaped otherwise than the answer: not what the server added.
            _ => return true,
        };
    }
    true
}

/// The shortest string taken for an allocation (an IPv4 address has at least 7 characters, a
/// UID 36, a generated name its prefix and 5): a shorter value (a defaulted `"1"`) would match
/// an unrelated one by accident.
const MIN_STRING: usize = 7;
/// The smallest number taken for an allocation (node ports start at 30000 by default; a
/// defaulted count or flag is small).
const MIN_NUMBER: u64 = 1024;

/// Whether a value can be told apart from ordinary ones: a long string or a large integer.
fn distinctive(value: &Value) -> bool {
    match value {
        Value::String(s) => s.len() >= MIN_STRING,
        Value::Number(n) => n.as_u64().is_some_and(|n| n >= MIN_NUMBER),
        _ => false,
    }
}

/// The values the server allocated to each side, paired: control's value, candidate's value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Allocations(Vec<(Value, Value)>);

impl Allocations {
    /// Learns from two answers of one object (the control's, the candidate's) the values that
    /// differ where neither request sent them, if they are distinctive (strings of at least 7
    /// characters, integers of at least 1024).
    pub fn learn(&mut self, control: &Value, candidate: &Value, sent: (&[&Sent], &[&Sent])) {
        let mut path = Vec::new();
        self.walk(control, candidate, &mut path, sent);
    }

    fn walk(&mut self, a: &Value, b: &Value, path: &mut Vec<Segment>, sent: (&[&Sent], &[&Sent])) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                for (key, value) in x {
                    if let Some(other) = y.get(key)
                        && !(path.len() == 1
                            && matches!(
                                key.as_str(),
                                "resourceVersion" | "generation" | "managedFields"
                            ))
                    {
                        path.push(Segment::Key(key.clone()));
                        self.walk(value, other, path, sent);
                        path.pop();
                    }
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (value, other)) in x.iter().zip(y).enumerate() {
                    path.push(Segment::Index(i));
                    self.walk(value, other, path, sent);
                    path.pop();
                }
            }
            (Value::String(_) | Value::Number(_), Value::String(_) | Value::Number(_))
                if a != b && distinctive(a) && distinctive(b) =>
            {
                let field = FieldPath::from_segments(path.clone());
                let sent_by = |side: &[&Sent]| side.iter().any(|s| s.covers(&field));
                if !sent_by(sent.0) && !sent_by(sent.1) && !self.0.iter().any(|(x, _)| x == a) {
                    self.0.push((a.clone(), b.clone()));
                }
            }
            _ => {}
        }
    }

    /// Whether the control's value `a` and the candidate's `b` are one value allocated twice: a
    /// learnt pair, or a string that becomes `b` once every allocated string in it is replaced by
    /// the candidate's.
    #[must_use]
    pub fn corresponds(&self, a: &Value, b: &Value) -> bool {
        if self.0.iter().any(|(x, y)| x == a && y == b) {
            return true;
        }
        let (Value::String(a), Value::String(b)) = (a, b) else {
            return false;
        };
        let mut replaced = a.clone();
        for (x, y) in &self.0 {
            if let (Value::String(x), Value::String(y)) = (x, y) {
                replaced = replaced.replace(x.as_str(), y);
            }
        }
        replaced != *a && replaced == *b
    }

    /// Whether nothing was learnt.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn body(content_type: &str, value: &Value) -> RequestBody {
        RequestBody {
            content_type: Some(content_type.to_owned()),
            bytes: value.to_string().into_bytes(),
        }
    }

    fn path(text: &str) -> FieldPath {
        FieldPath::parse(text).unwrap()
    }

    #[test]
    fn an_object_body_covers_what_it_holds() {
        let sent = Sent::of(
            WriteVerb::Create,
            &body(
                "application/json",
                &json!({"metadata": {"name": "s", "labels": null},
                    "spec": {"ports": [{"name": "https", "port": 443}], "selector": {"app": "a"}}}),
            ),
        );
        assert!(sent.covers(&path("spec.ports[name=https].port")));
        assert!(sent.covers(&path("spec.selector")));
        assert!(sent.covers(&path("spec")));
        assert!(
            sent.covers(&path("metadata.labels.app")),
            "a null sent removes"
        );
        assert!(!sent.covers(&path("spec.ports[name=https].nodePort")));
        assert!(!sent.covers(&path("spec.clusterIP")));
        assert!(!sent.covers(&path("spec.ports[name=http].port")));
        assert_eq!(sent.generate_name(), None);
    }

    #[test]
    fn a_json_patch_covers_its_pointers() {
        let sent = Sent::of(
            WriteVerb::Patch,
            &body(
                "application/json-patch+json",
                &json!([{"op": "replace", "path": "/spec/ports/0/port", "value": 1},
                        {"op": "add", "path": "/metadata/labels/a~1b", "value": "x"}]),
            ),
        );
        assert!(sent.covers(&path("spec.ports[0].port")));
        assert!(sent.covers(&path("spec.ports[name=https].port")));
        assert!(sent.covers(&path("metadata.labels[\"a/b\"]")));
        assert!(!sent.covers(&path("spec.ports[0].nodePort")));
        assert!(!sent.covers(&path("spec.clusterIP")));
    }

    #[test]
    fn unreadable_bodies_cover_everything_and_deletes_nothing() {
        let junk = RequestBody {
            content_type: None,
            bytes: b"\xff\x00".to_vec(),
        };
        assert!(Sent::of(WriteVerb::Update, &junk).covers(&path("spec.x")));
        assert!(!Sent::of(WriteVerb::Delete, &junk).covers(&path("spec.x")));
        let yaml = RequestBody {
            content_type: Some("application/apply-patch+yaml".into()),
            bytes: b"metadata:\n  generateName: web-\nspec:\n  replicas: 2\n".to_vec(),
        };
        let sent = Sent::of(WriteVerb::Patch, &yaml);
        assert!(sent.covers(&path("spec.replicas")));
        assert_eq!(sent.generate_name(), Some("web-"));
    }

    #[test]
    fn allocations_pair_what_neither_sent() {
        let sent = Sent::of(
            WriteVerb::Create,
            &body(
                "application/json",
                &json!({"metadata": {"generateName": "kas-"}, "spec": {"ports": [{"port": 443}]}}),
            ),
        );
        let control = json!({"metadata": {"name": "kas-abcde", "uid": "0b6e3c1e-8a9f-4c55-9d1a-5d2f3e0c7a11", "resourceVersion": "5"},
            "spec": {"clusterIP": "10.0.0.17", "ports": [{"port": 443, "nodePort": 30001}]}});
        let candidate = json!({"metadata": {"name": "kas-xyzwv", "uid": "7c1d2a3b-1e2f-4a5b-8c9d-0e1f2a3b4c5d", "resourceVersion": "6"},
            "spec": {"clusterIP": "10.0.0.99", "ports": [{"port": 443, "nodePort": 30002}]}});
        let mut allocations = Allocations::default();
        allocations.learn(&control, &candidate, (&[&sent], &[&sent]));
        assert!(allocations.corresponds(
            &json!("0b6e3c1e-8a9f-4c55-9d1a-5d2f3e0c7a11"),
            &json!("7c1d2a3b-1e2f-4a5b-8c9d-0e1f2a3b4c5d")
        ));
        assert!(allocations.corresponds(&json!(30001), &json!(30002)));
        assert!(allocations.corresponds(&json!("kas-abcde"), &json!("kas-xyzwv")));
        assert!(allocations.corresponds(
            &json!("https://10.0.0.17:443"),
            &json!("https://10.0.0.99:443")
        ));
        assert!(
            !allocations.corresponds(&json!("5"), &json!("6")),
            "resourceVersion is not learnt"
        );
        let mut small = Allocations::default();
        small.learn(
            &json!({"data": {"n": "1", "m": 2}}),
            &json!({"data": {"n": "2", "m": 3}}),
            (&[], &[]),
        );
        assert!(
            small.is_empty(),
            "ordinary values are not taken for allocations: {small:?}"
        );
        assert!(!allocations.corresponds(
            &json!("0b6e3c1e-8a9f-4c55-9d1a-5d2f3e0c7a11"),
            &json!("00000000-1e2f-4a5b-8c9d-0e1f2a3b4c5d")
        ));
    }
}
