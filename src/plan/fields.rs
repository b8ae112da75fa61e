//! Field paths of Kubernetes objects (`data["tls.crt"]`, `status.conditions[type=Ready].status`):
//! how write differences name a field, and the patterns a plan lists as volatile or intended.
//!
//! Syntax: segments joined by `.`; a map key that is not a plain word (letters, digits, `_`, `-`,
//! `$`) is written as a JSON string in brackets (`metadata.labels["app.kubernetes.io/name"]`); a
//! list element is `[N]` (by position) or `[field=value]` (a list of objects keyed by their
//! `name` or `type`, as Kubernetes merges them); `*` (`.*` or `[*]`) matches any one key or
//! element. A pattern covers a path when it matches a prefix of it: `metadata.annotations`
//! covers every annotation.

use std::fmt;

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Segment {
    /// A map key.
    Key(String),
    /// A list element by position.
    Index(usize),
    /// A list element by the value of its key field (`[type=Ready]`).
    Keyed {
        /// The key field (`name` or `type`).
        field: String,
        /// Its value.
        value: String,
    },
    /// Any one key or element (patterns only).
    Any,
}

/// A path to a field of an object, or (with [`Segment::Any`]) a pattern over such paths.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldPath(Vec<Segment>);

/// Why a field path does not parse: the message and the byte offset it concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathError {
    /// Byte offset in the text.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

fn plain(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'$'))
}

impl FieldPath {
    /// The empty path (the whole object).
    #[must_use]
    pub const fn root() -> Self {
        Self(Vec::new())
    }

    /// This path with `segment` appended.
    #[must_use]
    pub fn child(&self, segment: Segment) -> Self {
        let mut segments = self.0.clone();
        segments.push(segment);
        Self(segments)
    }

    /// The path of these segments.
    #[must_use]
    pub const fn from_segments(segments: Vec<Segment>) -> Self {
        Self(segments)
    }

    /// This path with every list element (by position or by key) made `*`: the pattern that
    /// covers the same field of every element (`spec.ports[name=https].nodePort` becomes
    /// `spec.ports[*].nodePort`).
    #[must_use]
    pub fn generalized(&self) -> Self {
        Self(
            self.0
                .iter()
                .map(|s| match s {
                    Segment::Index(_) | Segment::Keyed { .. } => Segment::Any,
                    other => other.clone(),
                })
                .collect(),
        )
    }

    /// The segments.
    #[must_use]
    pub fn segments(&self) -> &[Segment] {
        &self.0
    }

    /// Whether this pattern matches a prefix of `path` (equal segments, `*` matching any one).
    #[must_use]
    pub fn covers(&self, path: &Self) -> bool {
        self.0.len() <= path.0.len()
            && self
                .0
                .iter()
                .zip(&path.0)
                .all(|(p, s)| *p == Segment::Any || p == s)
    }

    /// Parses the syntax of the [module docs](self).
    pub fn parse(text: &str) -> Result<Self, PathError> {
        let fail = |offset: usize, message: &str| PathError {
            offset,
            message: message.to_owned(),
        };
        if text.trim().is_empty() {
            return Err(fail(0, "the field path is empty"));
        }
        let bytes = text.as_bytes();
        let mut segments = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'[' => {
                    let (segment, next) = bracket(text, i)?;
                    segments.push(segment);
                    i = next;
                }
                b'.' if segments.is_empty() => {
                    return Err(fail(i, "a field path starts with a key, not with `.`"));
                }
                _ => {
                    let start = if bytes[i] == b'.' { i + 1 } else { i };
                    if i > 0 && bytes[i] != b'.' {
                        return Err(fail(i, "expected `.` or `[` between the segments"));
                    }
                    let end = text[start..]
                        .find(['.', '['])
                        .map_or(text.len(), |n| start + n);
                    let key = &text[start..end];
                    if key == "*" {
                        segments.push(Segment::Any);
                    } else if plain(key) {
                        segments.push(Segment::Key(key.to_owned()));
                    } else if key.is_empty() {
                        return Err(fail(start, "a key is missing here"));
                    } else {
                        return Err(fail(
                            start,
                            "a key with characters other than letters, digits, `_`, `-` and `$` is written as a JSON string in brackets, e.g. data[\"tls.crt\"]",
                        ));
                    }
                    i = end;
                }
            }
        }
        Ok(Self(segments))
    }
}

/// One bracketed segment starting at `open` (the `[`); returns it and the offset after the `]`.
fn bracket(text: &str, open: usize) -> Result<(Segment, usize), PathError> {
    let fail = |offset: usize, message: &str| PathError {
        offset,
        message: message.to_owned(),
    };
    let inner_start = open + 1;
    let rest = &text[inner_start..];
    if rest.starts_with('"') {
        // A JSON string: find its end honouring escapes.
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<String>();
        let Some(Ok(key)) = stream.next() else {
            return Err(fail(
                inner_start,
                "a bracketed key is an unterminated JSON string",
            ));
        };
        let after = inner_start + stream.byte_offset();
        return if text[after..].starts_with(']') {
            Ok((Segment::Key(key), after + 1))
        } else {
            Err(fail(after, "expected `]` after the bracketed key"))
        };
    }
    let close = rest
        .find(']')
        .ok_or_else(|| fail(open, "a `[` is not closed by `]`"))?;
    let inner = &rest[..close];
    let next = inner_start + close + 1;
    if inner == "*" {
        return Ok((Segment::Any, next));
    }
    if !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()) {
        let index = inner
            .parse()
            .map_err(|_| fail(inner_start, "the list index is too large"))?;
        return Ok((Segment::Index(index), next));
    }
    match inner.split_once('=') {
        Some((field, value)) if plain(field) && !value.is_empty() => Ok((
            Segment::Keyed {
                field: field.to_owned(),
                value: value.to_owned(),
            },
            next,
        )),
        _ => Err(fail(
            inner_start,
            "inside brackets write a list index ([0]), a keyed element ([type=Ready]), a JSON string key ([\"tls.crt\"]) or [*]",
        )),
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(key) if plain(key) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(key)?;
                }
                Segment::Key(key) => {
                    let quoted = serde_json::to_string(key).map_err(|_| fmt::Error)?;
                    write!(f, "[{quoted}]")?;
                }
                Segment::Index(index) => write!(f, "[{index}]")?,
                Segment::Keyed { field, value } => write!(f, "[{field}={value}]")?,
                Segment::Any => f.write_str("[*]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) {
        let path = FieldPath::parse(text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        assert_eq!(path.to_string(), text);
    }

    #[test]
    fn paths_round_trip() {
        round_trip("data");
        round_trip("metadata.labels[\"app.kubernetes.io/name\"]");
        round_trip("status.conditions[type=Ready].status");
        round_trip("spec.template.spec.containers[name=manager].args[2]");
        round_trip("data[\"tls.crt\"]");
        round_trip("[\"a.b\"].c");
    }

    #[test]
    fn wildcards_cover() {
        let pattern = FieldPath::parse("status.conditions.*.lastProbeTime").unwrap();
        let same = FieldPath::parse("status.conditions[*].lastProbeTime").unwrap();
        assert_eq!(pattern, same);
        let path = FieldPath::parse("status.conditions[type=Ready].lastProbeTime").unwrap();
        assert!(pattern.covers(&path));
        assert!(
            !pattern.covers(&FieldPath::parse("status.conditions[type=Ready].status").unwrap())
        );
        let prefix = FieldPath::parse("metadata.annotations").unwrap();
        assert!(prefix.covers(&FieldPath::parse("metadata.annotations[\"a/b\"]").unwrap()));
        assert!(!prefix.covers(&FieldPath::parse("metadata").unwrap()));
    }

    #[test]
    fn bad_paths_say_where() {
        for (text, offset) in [
            ("", 0),
            (".data", 0),
            ("data.tls.crt[", 12),
            ("data.a/b", 5),
            ("data[\"x", 5),
            ("data[x y]", 5),
            ("data..x", 5),
        ] {
            let error = FieldPath::parse(text).expect_err(text);
            assert_eq!(error.offset, offset, "{text}: {error:?}");
        }
    }
}
