//! `kind: Status` error responses, as the real API server sends them.

use serde_json::{Value, json};

use super::registry::ResourceType;

/// An API error: HTTP code, reason and message, rendered as a `Status` body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `Conflict`, ...).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// `details`, when the error has any.
    pub details: Option<Box<Details>>,
}

/// The `details` of a `Status`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Details {
    /// `details.name`.
    pub name: Option<String>,
    /// `details.group` and `details.kind` (the resource plural, as the real server fills them).
    pub resource: Option<(String, String)>,
    /// `details.retryAfterSeconds` (and the `Retry-After` header).
    pub retry_after: Option<u64>,
    /// `details.causes`: (reason, message, field).
    pub causes: Vec<(String, String, String)>,
}

impl ApiError {
    pub(super) fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    pub(super) fn with_details(mut self, details: Details) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    fn about(self, group: &str, plural: &str, name: &str) -> Self {
        self.with_details(Details {
            name: Some(name.to_owned()),
            resource: Some((group.to_owned(), plural.to_owned())),
            retry_after: None,
            causes: Vec::new(),
        })
    }

    /// `details.retryAfterSeconds`, if any.
    #[must_use]
    pub fn retry_after(&self) -> Option<u64> {
        self.details.as_ref().and_then(|d| d.retry_after)
    }

    /// 404: `secrets "x" not found`.
    #[must_use]
    pub fn not_found(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} {name:?} not found", rt.qualified()),
        )
        .about(&rt.group, &rt.plural, name)
    }

    /// 404 for a namespace that does not exist.
    #[must_use]
    pub fn namespace_not_found(namespace: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("namespaces {namespace:?} not found"),
        )
        .about("", "namespaces", namespace)
    }

    /// 404 for a path that names no served resource.
    #[must_use]
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// 409 `AlreadyExists`.
    #[must_use]
    pub fn already_exists(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} {name:?} already exists", rt.qualified()),
        )
        .about(&rt.group, &rt.plural, name)
    }

    /// 409 `Conflict` of a delete whose precondition failed: as the real server, named by kind
    /// (`Operation cannot be fulfilled on ConfigMap "a": the UID in the precondition ...`).
    #[must_use]
    pub fn precondition_failed(rt: &ResourceType, name: &str, why: &str) -> Self {
        let resource = if rt.group.is_empty() {
            rt.kind.clone()
        } else {
            format!("{}.{}", rt.kind, rt.group)
        };
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {resource} {name:?}: {why}"),
        )
        .about(&rt.group, &rt.kind, name)
    }

    /// 409 `Conflict`: the precondition on resourceVersion failed.
    #[must_use]
    pub fn conflict(rt: &ResourceType, name: &str) -> Self {
        let message = format!(
            "Operation cannot be fulfilled on {} {name:?}: the object has been modified; please \
             apply your changes to the latest version and try again",
            rt.qualified()
        );
        Self::new(409, "Conflict", message).about(&rt.group, &rt.plural, name)
    }

    /// 422 `Invalid`: the object is not acceptable. `cause` is `field: message`, as the real
    /// server words it (`metadata.name: Required value: ...`); it becomes `details.causes` too.
    #[must_use]
    pub fn invalid(rt: &ResourceType, name: &str, cause: &str) -> Self {
        Self::invalid_kind(&rt.group, &rt.kind, name, cause)
    }

    /// 422 `Invalid` about a kind that is not a served resource (`PatchOptions.meta.k8s.io`).
    #[must_use]
    pub fn invalid_kind(group: &str, kind: &str, name: &str, cause: &str) -> Self {
        let qualified = if group.is_empty() {
            kind.to_owned()
        } else {
            format!("{kind}.{group}")
        };
        let (field, message) = cause.split_once(": ").unwrap_or(("", cause));
        let reason = if message.starts_with("Required value") {
            "FieldValueRequired"
        } else if message.starts_with("Invalid value") {
            "FieldValueInvalid"
        } else if message.starts_with("Unsupported value") {
            "FieldValueNotSupported"
        } else {
            "FieldValueForbidden"
        };
        let mut error = Self::new(
            422,
            "Invalid",
            format!("{qualified} {name:?} is invalid: {cause}"),
        )
        .about(group, kind, name);
        if let Some(details) = &mut error.details {
            details
                .causes
                .push((reason.to_owned(), message.to_owned(), field.to_owned()));
        }
        error
    }

    /// 400 `BadRequest`: the request cannot be understood.
    #[must_use]
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 405 `MethodNotAllowed`.
    #[must_use]
    pub fn method_not_allowed(method: &str, path: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!(
                "the server does not allow this method on the requested resource ({method} {path})"
            ),
        )
    }

    /// 410 `Expired`: a resourceVersion older than the retained history.
    #[must_use]
    pub fn gone(requested: u64, oldest: u64) -> Self {
        Self::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    /// 413 for a body over the server's limit, as kube-apiserver answers (its default limit is
    /// 3 MiB).
    #[must_use]
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 415 for a body in an encoding the simulator does not read (protobuf, CBOR): it reads
    /// JSON (and YAML for apply patches) only, where a real server reads all three.
    #[must_use]
    pub fn binary_body(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the simulator reads JSON request bodies only (got {content_type:?}); a real \
                 kube-apiserver reads this encoding. Set the client's content type to \
                 application/json (client-go: rest.Config.ContentType)"
            ),
        )
    }

    /// 415 for a PATCH with an unsupported content type.
    #[must_use]
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, \
                 application/apply-patch+yaml, application/strategic-merge-patch+json (got \
                 {content_type:?})"
            ),
        )
    }

    /// An injected fault with a chosen code (429, 500, 503, 504, or a 409 Conflict).
    #[must_use]
    pub fn injected(code: u16, retry_after: Option<u64>) -> Self {
        let (reason, message) = match code {
            409 => (
                "Conflict",
                "Operation cannot be fulfilled: the object has been modified; please apply your \
                 changes to the latest version and try again (injected)",
            ),
            429 => (
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later \
                 (injected)",
            ),
            500 => (
                "InternalError",
                "an error on the server (\"injected fault\") has prevented the request from \
                 succeeding",
            ),
            503 => (
                "ServiceUnavailable",
                "the server is currently unable to handle the request (injected)",
            ),
            504 => (
                "Timeout",
                "the server was unable to return a response in the time allotted, but may still \
                 be processing the request (injected)",
            ),
            _ => ("InternalError", "injected fault"),
        };
        let error = Self::new(code, reason, message);
        match retry_after {
            Some(seconds) => error.with_details(Details {
                retry_after: Some(seconds),
                ..Details::default()
            }),
            None => error,
        }
    }

    /// The `Status` object.
    #[must_use]
    pub fn body(&self) -> Value {
        let mut details = serde_json::Map::new();
        if let Some(d) = &self.details {
            // As the real server: empty fields are left out.
            if let Some(name) = d.name.as_ref().filter(|n| !n.is_empty()) {
                details.insert("name".into(), json!(name));
            }
            if let Some((group, kind)) = &d.resource {
                if !group.is_empty() {
                    details.insert("group".into(), json!(group));
                }
                details.insert("kind".into(), json!(kind));
            }
            if !d.causes.is_empty() {
                let causes: Vec<Value> = d
                    .causes
                    .iter()
                    .map(|(reason, message, field)| {
                        json!({"reason": reason, "message": message, "field": field})
                    })
                    .collect();
                details.insert("causes".into(), Value::Array(causes));
            }
            if let Some(seconds) = d.retry_after {
                details.insert("retryAfterSeconds".into(), json!(seconds));
            }
        }
        let mut status = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        });
        if self.details.is_some() {
            status["details"] = Value::Object(details);
        }
        status
    }
}
