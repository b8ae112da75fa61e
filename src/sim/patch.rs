//! PATCH bodies: JSON merge patch, JSON patch, strategic merge patch (as merge) and server-side
//! apply (simplified).

use serde_json::Value;

use super::status::ApiError;

/// The patch strategies, by `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/strategic-merge-patch+json`, applied as a merge patch: lists are replaced
    /// whole, never merged by key.
    Strategic,
    /// `application/apply-patch+yaml`: creates the object if missing, else merges the applied
    /// configuration onto it; no field ownership, no managed fields, no apply conflicts.
    Apply,
}

impl PatchType {
    /// The strategy for a `Content-Type` header.
    pub fn from_content_type(content_type: &str) -> Result<Self, ApiError> {
        let media = content_type.split(';').next().unwrap_or_default().trim();
        match media {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/json-patch+json" => Ok(Self::Json),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Ok(Self::Apply),
            other => Err(ApiError::unsupported_media_type(other)),
        }
    }
}

/// A parsed patch body.
#[derive(Clone, Debug)]
pub enum Patch {
    /// A merge-style document (merge, strategic, apply).
    Merge(Value),
    /// An RFC 6902 operation list.
    Json(json_patch::Patch),
}

impl Patch {
    /// Parses a body of the given type.
    pub fn parse(kind: PatchType, body: &[u8]) -> Result<Self, ApiError> {
        match kind {
            PatchType::Json => serde_json::from_slice(body)
                .map(Self::Json)
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}"))),
            PatchType::Apply => {
                let text = std::str::from_utf8(body)
                    .map_err(|_| ApiError::bad_request("apply patch is not UTF-8"))?;
                let value: Value = serde_json::from_str(text)
                    .or_else(|_| serde_saphyr::from_str(text))
                    .map_err(|e| {
                        ApiError::bad_request(format!(
                            "invalid apply patch (YAML or JSON object expected): {e}"
                        ))
                    })?;
                Self::merge_doc(value)
            }
            PatchType::Merge | PatchType::Strategic => {
                let value: Value = serde_json::from_slice(body)
                    .map_err(|e| ApiError::bad_request(format!("invalid merge patch: {e}")))?;
                Self::merge_doc(value)
            }
        }
    }

    fn merge_doc(value: Value) -> Result<Self, ApiError> {
        if value.is_object() {
            Ok(Self::Merge(value))
        } else {
            Err(ApiError::bad_request(
                "a merge or apply patch must be a JSON object",
            ))
        }
    }

    /// The document of a merge-style patch (a JSON patch becomes an empty object).
    #[must_use]
    pub fn into_document(self) -> Value {
        match self {
            Self::Merge(doc) => doc,
            Self::Json(_) => Value::Object(serde_json::Map::new()),
        }
    }

    /// The `metadata.resourceVersion` a merge-style patch carries: a precondition.
    pub fn precondition(&self) -> Option<&str> {
        match self {
            Self::Merge(doc) => doc
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str),
            Self::Json(_) => None,
        }
    }

    /// The patched object.
    pub fn apply_to(&self, current: &Value) -> Result<Value, ApiError> {
        let mut patched = current.clone();
        match self {
            Self::Merge(doc) => {
                let mut doc = doc.clone();
                // The precondition is checked, not written.
                if let Some(meta) = doc.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove("resourceVersion");
                }
                json_patch::merge(&mut patched, &doc);
            }
            // The real server words every failed operation the same, without saying which.
            Self::Json(ops) => json_patch::patch(&mut patched, ops).map_err(|_| {
                ApiError::new(
                    422,
                    "Invalid",
                    "the server rejected our request due to an error in our request",
                )
                .with_details(super::status::Details::default())
            })?,
        }
        Ok(patched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Ok(PatchType::Merge)
        );
        assert_eq!(
            PatchType::from_content_type("application/apply-patch+yaml"),
            Ok(PatchType::Apply)
        );
        assert_eq!(
            PatchType::from_content_type("text/plain").unwrap_err().code,
            415
        );
    }

    #[test]
    fn merge_patch_removes_nulls_and_keeps_the_precondition_out() {
        let current = json!({"metadata": {"name": "a", "resourceVersion": "5"}, "data": {"x": "1", "y": "2"}});
        let patch = Patch::parse(
            PatchType::Merge,
            br#"{"metadata": {"resourceVersion": "4"}, "data": {"y": null, "z": "3"}}"#,
        )
        .unwrap();
        assert_eq!(patch.precondition(), Some("4"));
        let patched = patch.apply_to(&current).unwrap();
        assert_eq!(patched["data"], json!({"x": "1", "z": "3"}));
        assert_eq!(patched["metadata"]["resourceVersion"], "5");
    }

    #[test]
    fn json_patch_errors_are_invalid() {
        let current = json!({"data": {}});
        let patch = Patch::parse(
            PatchType::Json,
            br#"[{"op": "test", "path": "/data/x", "value": 1}]"#,
        )
        .unwrap();
        assert_eq!(patch.apply_to(&current).unwrap_err().code, 422);
        assert_eq!(Patch::parse(PatchType::Json, b"{}").unwrap_err().code, 400);
        assert_eq!(
            Patch::parse(PatchType::Merge, b"[1]").unwrap_err().code,
            400
        );
    }

    #[test]
    fn apply_accepts_yaml() {
        let patch =
            Patch::parse(PatchType::Apply, b"metadata:\n  name: a\ndata:\n  k: v\n").unwrap();
        assert_eq!(patch.apply_to(&json!({})).unwrap()["data"]["k"], "v");
    }
}
