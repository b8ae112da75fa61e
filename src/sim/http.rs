//! The HTTP face of the simulator: verbs, faults, audit, and responses (paths are resolved by
//! [`super::route`]).

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::Shared;
use super::audit::AuditRecord;
use super::faults::RequestInfo;
use super::object::{Selector, meta_str};
use super::patch::{Patch, PatchType};
use super::registry::ResourceType;
use super::route::{Route, Target, route};
use super::status::ApiError;
use super::store::{Store, WriteOptions, Written};
use super::watch::{self, WatchRequest};

fn json_response(code: StatusCode, body: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

pub(super) fn error_response(error: &ApiError) -> Response {
    let code = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(code, &error.body());
    if let Some(seconds) = error.retry_after() {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, seconds.into());
    }
    response
}

fn verb(
    method: &Method,
    target: &Target,
    params: &HashMap<String, String>,
) -> Result<&'static str, ApiError> {
    let watch = params.get("watch").is_some_and(|w| w == "true" || w == "1");
    Ok(match (method.as_str(), target.name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("POST", false) => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        (m, _) => return Err(ApiError::method_not_allowed(m, "")),
    })
}

/// Whether a content type is one of the API's binary encodings (protobuf, CBOR).
fn is_binary(content_type: &str) -> bool {
    let media = content_type.split(';').next().unwrap_or("").trim();
    media.eq_ignore_ascii_case("application/vnd.kubernetes.protobuf")
        || media.eq_ignore_ascii_case("application/cbor")
        || media.eq_ignore_ascii_case("application/apply-patch+cbor")
}

/// The JSON type of a value, in Go's decoder's words.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether a write is a dry run. As the real server: a DELETE (or deletecollection) with a body
/// takes its options, `dryRun` included, from the `DeleteOptions` in the body and ignores the
/// query; every other write takes `dryRun` from the query.
fn dry_run(verb: &str, params: &HashMap<String, String>, body: &[u8]) -> Result<bool, ApiError> {
    let (values, options): (Vec<String>, &str) = if matches!(verb, "delete" | "deletecollection")
        && !body.is_empty()
    {
        let options: Value = serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("the DeleteOptions body is not valid JSON: {e}"))
        })?;
        let values = match options.get("dryRun") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(values)) if values.iter().all(Value::is_string) => values
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            Some(other) => {
                // As the real server's decoder: a dryRun that is not a list of strings.
                return Err(ApiError::bad_request(format!(
                    "json: cannot unmarshal {} into Go struct field DeleteOptions.dryRun of type []string",
                    json_type(other)
                )));
            }
        };
        (values, "DeleteOptions")
    } else {
        let options = match verb {
            "create" => "CreateOptions",
            "update" => "UpdateOptions",
            "patch" => "PatchOptions",
            _ => "DeleteOptions",
        };
        let values = params
            .get("dryRun")
            .filter(|v| !v.is_empty())
            .map(|v| vec![v.clone()])
            .unwrap_or_default();
        (values, options)
    };
    if values.iter().all(|v| v == "All") {
        return Ok(!values.is_empty());
    }
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    Err(ApiError::invalid_kind(
        "meta.k8s.io",
        options,
        "",
        &format!(
            "dryRun: Unsupported value: [{}]: supported values: \"All\"",
            quoted.join(", ")
        ),
    ))
}

/// A second writer bumps the target object (no-op when it does not exist): a read before it, or
/// a write after it, holds a stale resourceVersion.
fn second_writer(shared: &Shared, target: &Target) {
    if let Some(name) = &target.name {
        let _ = super::lock(&shared.store).bump(&target.rt, target.namespace.as_deref(), name);
    }
}

/// Audits a request answered with an error, and answers it.
fn reject(shared: &Shared, mut record: AuditRecord, error: &ApiError) -> Response {
    record.code = error.code;
    shared.audit(record);
    error_response(error)
}

fn start_watch(
    shared: &Arc<Shared>,
    record: AuditRecord,
    target: &Target,
    params: &HashMap<String, String>,
    drop_after: Option<usize>,
) -> Response {
    match WatchRequest::from_params(target, params) {
        Ok(mut request) => {
            request.drop_after = drop_after;
            shared.audit(record);
            watch::respond(shared.clone(), request)
        }
        Err(e) => reject(shared, record, &e),
    }
}

/// The largest request body: kube-apiserver's default limit, 3 MiB.
const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// A request's audit record before anything is known of it but its path and client.
const fn first_record(path: String, user_agent: String) -> AuditRecord {
    AuditRecord {
        seq: 0,
        verb: "discovery",
        path,
        resource: None,
        namespace: None,
        name: None,
        user_agent,
        dry_run: false,
        code: 200,
        persisted: false,
        faults: Vec::new(),
    }
}

/// The single handler behind every path.
pub(super) async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let path = uri.path().to_owned();
    // As kube-apiserver: a body over the limit gets a Status 413, not a bare error page.
    let body: Bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(body) => body,
        Err(_) => return error_response(&ApiError::too_large(MAX_BODY_BYTES)),
    };
    let mut record = first_record(path.clone(), user_agent);
    let target = match route(&shared, &path) {
        Ok(Route::Discovery(doc)) => {
            shared.audit(record);
            return json_response(StatusCode::OK, &doc);
        }
        Ok(Route::Resource(target)) => target,
        Err(e) => return reject(&shared, record, &e),
    };
    record.resource = Some(target.rt.qualified());
    record.namespace.clone_from(&target.namespace);
    record.name.clone_from(&target.name);
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    if !body.is_empty() && is_binary(&content_type) {
        // Before anything reads the body: a DELETE's options in protobuf must not pass for
        // options without dryRun.
        let e = ApiError::binary_body(&content_type);
        return reject(&shared, record, &e);
    }
    // dryRun is a parameter of the mutating verbs only; reads ignore it, as the real server does.
    let prepared = verb(&method, &target, &params).and_then(|v| {
        let mutating = !matches!(v, "get" | "list" | "watch");
        Ok((v, mutating && dry_run(v, &params, &body)?))
    });
    let (verb, dry_run) = match prepared {
        Ok(p) => p,
        Err(e) => return reject(&shared, record, &e),
    };
    record.verb = verb;
    record.dry_run = dry_run;
    if target.rt.namespaced && target.namespace.is_none() && !matches!(verb, "list" | "watch") {
        // Across namespaces, a namespaced resource can only be listed and watched.
        let e = ApiError::method_not_allowed(method.as_str(), &path);
        return reject(&shared, record, &e);
    }

    let decision = super::lock(&shared.faults).decide(&RequestInfo {
        verb,
        resource: (&target.rt.plural, &target.rt.qualified()),
        subresource: target.subresource.as_deref(),
        namespace: target.namespace.as_deref(),
        name: target.name.as_deref(),
        user_agent: &record.user_agent,
        dry_run,
    });
    record.faults.clone_from(&decision.fired);
    if !decision.delay.is_zero() {
        tokio::time::sleep(decision.delay).await;
    }
    if let Some(e) = decision.error {
        return reject(&shared, record, &e);
    }

    if verb == "watch" {
        return start_watch(&shared, record, &target, &params, decision.drop_watch_after);
    }

    if decision.second_writer && matches!(verb, "update" | "patch") {
        second_writer(&shared, &target);
    }
    let result = serve(
        &shared,
        verb,
        &target,
        &params,
        &content_type,
        &body,
        dry_run,
    );
    if decision.second_writer && verb == "get" && result.is_ok() {
        second_writer(&shared, &target);
    }
    match result {
        Ok((code, written, doc)) => {
            record.code = code.as_u16();
            record.persisted = written;
            shared.audit(record);
            json_response(code, &doc)
        }
        Err(e) => reject(&shared, record, &e),
    }
}

/// A served request's answer: status code, whether stored state changed, and the body.
type Served = Result<(StatusCode, bool, Value), ApiError>;

fn answer(w: Written) -> (StatusCode, bool, Value) {
    let code = if w.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    (code, w.persisted, w.object)
}

fn selectors(params: &HashMap<String, String>) -> Result<(Selector, Selector), ApiError> {
    let labels = Selector::labels(params.get("labelSelector").map_or("", String::as_str))?;
    let fields = Selector::fields(params.get("fieldSelector").map_or("", String::as_str))?;
    Ok((labels, fields))
}

/// Serves every verb but watch.
fn serve(
    shared: &Shared,
    verb: &str,
    target: &Target,
    params: &HashMap<String, String>,
    content_type: &str,
    body: &[u8],
    dry_run: bool,
) -> Served {
    let rt = &target.rt;
    let ns = target.namespace.as_deref();
    let name = target.name.as_deref().unwrap_or_default();
    let opts = WriteOptions {
        dry_run,
        status: target.subresource.as_deref() == Some("status"),
    };
    let parse_body = || -> Result<Value, ApiError> {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
    };
    let mut store = super::lock(&shared.store);
    match verb {
        "get" => Ok((StatusCode::OK, false, store.get(rt, ns, name)?)),
        "list" => list(&store, target, params),
        "create" if opts.status => Err(ApiError::method_not_allowed("POST", "status")),
        "create" => Ok(answer(store.create(rt, ns, parse_body()?, opts)?)),
        "update" => Ok(answer(store.replace(rt, ns, name, parse_body()?, opts)?)),
        "patch" => patch(
            &mut store,
            target,
            content_type,
            body,
            opts,
            params.get("fieldManager").map(String::as_str),
        ),
        "delete" => {
            let options: Value = if body.is_empty() {
                json!({})
            } else {
                parse_body()?
            };
            let rv = options
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str);
            let uid = options
                .pointer("/preconditions/uid")
                .and_then(Value::as_str);
            let written = store.delete(rt, ns, name, rv, uid, dry_run)?;
            if written.object["metadata"]
                .get("deletionTimestamp")
                .is_some()
            {
                // Held by finalizers: the object, with its deletionTimestamp.
                return Ok(answer(written));
            }
            if rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions" {
                // The real server holds a CRD with its cleanup finalizer while it deletes the
                // custom resources, and answers that; the simulator deletes them at once.
                let mut object = written.object;
                object["metadata"]["deletionTimestamp"] = json!(crate::util::time::now_rfc3339());
                object["metadata"]["finalizers"] =
                    json!(["customresourcecleanup.apiextensions.k8s.io"]);
                if let Some(conditions) = object
                    .pointer_mut("/status/conditions")
                    .and_then(Value::as_array_mut)
                {
                    conditions.push(json!({
                        "type": "Terminating", "status": "True",
                        "reason": "InstanceDeletionPending",
                        "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
                        "lastTransitionTime": crate::util::time::now_rfc3339(),
                    }));
                }
                return Ok((StatusCode::OK, written.persisted, object));
            }
            if rt.returns_deleted_object() {
                return Ok(answer(written));
            }
            // Gone (or, in a dry run, would be): a `Status`, as the real server answers for the
            // other kinds the simulator serves.
            let mut details = json!({
                "name": name,
                "kind": rt.plural,
                "uid": written.object["metadata"]["uid"],
            });
            if !rt.group.is_empty() {
                details["group"] = json!(rt.group);
            }
            let status = json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": details,
            });
            Ok((StatusCode::OK, written.persisted, status))
        }
        "deletecollection" => delete_collection(&mut store, target, params, dry_run),
        other => Err(ApiError::bad_request(format!("unsupported verb {other}"))),
    }
}

fn list(store: &Store, target: &Target, params: &HashMap<String, String>) -> Served {
    let rt = &target.rt;
    let (labels, fields) = selectors(params)?;
    let limit = params
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0);
    let after = match params.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => Some(decode_continue(token)?),
        None => None,
    };
    let mut items: Vec<Value> = store
        .list(rt, target.namespace.as_deref())
        .filter(|o| labels.matches_labels(o) && fields.matches_fields(o))
        .filter(|o| after.as_ref().is_none_or(|a| list_key(o) > *a))
        .map(|o| list_item(rt, o))
        .collect();
    let mut metadata = json!({"resourceVersion": store.resource_version().to_string()});
    if let Some(limit) = limit
        && items.len() > limit
    {
        let remaining = items.len() - limit;
        items.truncate(limit);
        if let Some(last) = items.last() {
            metadata["continue"] = json!(encode_continue(&list_key(last)));
        }
        // The real server counts what is left only when no selector filters it.
        if labels.is_empty() && fields.is_empty() {
            metadata["remainingItemCount"] = json!(remaining);
        }
    }
    if rt.custom && metadata.get("continue").is_none() {
        // Custom resources' lists are unstructured: the real server writes the empty token.
        metadata["continue"] = json!("");
    }
    let kind = format!("{}List", rt.kind);
    let list =
        json!({"kind": kind, "apiVersion": rt.api_version(), "metadata": metadata, "items": items});
    Ok((StatusCode::OK, false, list))
}

fn patch(
    store: &mut Store,
    target: &Target,
    content_type: &str,
    body: &[u8],
    opts: WriteOptions,
    field_manager: Option<&str>,
) -> Served {
    let (rt, ns) = (&target.rt, target.namespace.as_deref());
    let name = target.name.as_deref().unwrap_or_default();
    let kind = PatchType::from_content_type(content_type)?;
    if kind == PatchType::Apply && field_manager.is_none_or(str::is_empty) {
        return Err(ApiError::invalid_kind(
            "meta.k8s.io",
            "PatchOptions",
            "",
            "fieldManager: Required value: is required for apply patch",
        ));
    }
    let patch = Patch::parse(kind, body)?;
    if kind == PatchType::Apply && !opts.status && store.get(rt, ns, name).is_err() {
        // Server-side apply of a missing object creates it.
        let mut doc = patch.into_document();
        if let Some(meta) = doc.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        if meta_str(&doc, "name").is_none_or(|n| n != name) {
            return Err(ApiError::bad_request(format!(
                "the name of the applied object does not match the name on the URL ({name})"
            )));
        }
        return Ok(answer(store.create(rt, ns, doc, opts)?));
    }
    let precondition = patch.precondition().map(str::to_owned);
    Ok(answer(store.update(
        rt,
        ns,
        name,
        precondition.as_deref(),
        opts,
        |current| patch.apply_to(current),
    )?))
}

fn delete_collection(
    store: &mut Store,
    target: &Target,
    params: &HashMap<String, String>,
    dry_run: bool,
) -> Served {
    let rt = &target.rt;
    let (labels, fields) = selectors(params)?;
    let doomed: Vec<(Option<String>, String)> = store
        .list(rt, target.namespace.as_deref())
        .filter(|o| labels.matches_labels(o) && fields.matches_fields(o))
        .map(|o| {
            (
                meta_str(&o, "namespace").map(str::to_owned),
                meta_str(&o, "name").unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let mut items = Vec::new();
    let mut persisted = false;
    for (ns, name) in doomed {
        let w = store.delete(rt, ns.as_deref(), &name, None, None, dry_run)?;
        persisted |= w.persisted;
        items.push(list_item(rt, w.object));
    }
    let metadata = json!({"resourceVersion": store.resource_version().to_string()});
    let kind = format!("{}List", rt.kind);
    let list =
        json!({"kind": kind, "apiVersion": rt.api_version(), "metadata": metadata, "items": items});
    Ok((StatusCode::OK, persisted, list))
}

/// An object as a list carries it: the real server leaves `apiVersion` and `kind` out of the items
/// of built-in kinds (the list says them), and keeps them for custom resources.
fn list_item(rt: &ResourceType, mut obj: Value) -> Value {
    if !rt.custom
        && let Some(map) = obj.as_object_mut()
    {
        map.remove("apiVersion");
        map.remove("kind");
    }
    obj
}

fn list_key(obj: &Value) -> String {
    let meta = |f| meta_str(obj, f).unwrap_or_default();
    format!("{}/{}", meta("namespace"), meta("name"))
}

fn encode_continue(key: &str) -> String {
    use std::fmt::Write;
    key.bytes()
        .fold(String::with_capacity(key.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn decode_continue(token: &str) -> Result<String, ApiError> {
    let bad = || ApiError::bad_request(format!("continue token {token:?} is not valid"));
    // Hex digits only: a token with any other character (multi-byte ones among them) is refused
    // before it is cut into pairs.
    if !token.len().is_multiple_of(2) || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let bytes: Result<Vec<u8>, _> = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&token[i..i + 2], 16))
        .collect();
    String::from_utf8(bytes.map_err(|_| bad())?).map_err(|_| bad())
}
