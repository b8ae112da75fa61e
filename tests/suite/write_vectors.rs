//! The shared test vectors of the write comparison: what a write's path and answer name, which
//! fields of two answers differ (the server's own fields, times and volatile fields ignored,
//! keyed lists matched by key), and the differences of two operations' write logs with the
//! plan's intended ones marked. The Rust engine generates them; the Go package must reproduce
//! every case from the same file (`tests/data/write-vectors.json`). An edited expectation fails
//! here; `SHADOW_RECONCILER_WRITE_VECTORS=1` rewrites the file.

use http::Method;
use serde_json::{Value, json};
use shadow_reconciler::engine::allocated::RequestBody;
use shadow_reconciler::engine::fielddiff::differing_fields;
use shadow_reconciler::engine::writes::{self, Kinds, ObjectRef, WriteLog};
use shadow_reconciler::plan::{FieldPath, ReconcilePlan};
use shadow_reconciler::vocab::{CodePath, WriteVerb};

const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/write-vectors.json");

fn path_cases() -> Vec<Value> {
    let cases: [(&str, Option<&str>); 12] = [
        ("/api/v1/namespaces/a/secrets/s", None),
        ("/api/v1/namespaces/a/secrets", Some("created")),
        ("/api/v1/namespaces/a/secrets", None),
        ("/api/v1/namespaces/hc-1", None),
        ("/api/v1/namespaces", Some("hc-2")),
        ("/api/v1/namespaces/hc-1/status", None),
        ("/api/v1/namespaces/hc-1/finalize", None),
        ("/apis/apps/v1/namespaces/a/deployments/d/scale", None),
        (
            "/apis/example.shadow-reconciler.io/v1alpha1/namespaces/t/hostedclusters/h/status",
            None,
        ),
        ("/apis/rbac.authorization.k8s.io/v1/clusterroles/r", None),
        ("/version", None),
        ("/apis/apps/v1", None),
    ];
    cases
        .iter()
        .map(|(path, created)| {
            let object = ObjectRef::from_path(path, *created).map(|o| {
                json!({
                    "group": o.group, "resource": o.resource, "namespace": o.namespace,
                    "name": o.name, "subresource": o.subresource,
                })
            });
            json!({"path": path, "created": created, "object": object})
        })
        .collect()
}

#[allow(clippy::too_many_lines)] // a table of cases
fn field_cases() -> Vec<Value> {
    let cases: Vec<(&str, Value, Value, Vec<&str>)> = vec![
        (
            "equal",
            json!({"data": {"a": "1"}}),
            json!({"data": {"a": "1"}}),
            vec![],
        ),
        (
            "server-fields",
            json!({"metadata": {"name": "x", "resourceVersion": "1", "uid": "a", "generation": 1,
                "creationTimestamp": "t1", "managedFields": [{"manager": "a"}], "selfLink": "/a"}}),
            json!({"metadata": {"name": "x", "resourceVersion": "2", "uid": "b", "generation": 2,
                "creationTimestamp": "t2", "managedFields": [{"manager": "b"}], "selfLink": "/b"}}),
            vec![],
        ),
        (
            "times",
            json!({"status": {"startTime": "a", "conditions": [{"type": "A", "lastTransitionTime": "1", "lastProbeTime": "1"}]}, "spec": {"uptime": 1}}),
            json!({"status": {"startTime": "b", "conditions": [{"type": "A", "lastTransitionTime": "2", "lastProbeTime": "2"}]}, "spec": {"uptime": 2}}),
            vec![],
        ),
        (
            "keyed-by-type",
            json!({"status": {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "False"}]}}),
            json!({"status": {"conditions": [{"type": "B", "status": "True"}, {"type": "A", "status": "True"}, {"type": "C", "status": "True"}]}}),
            vec![],
        ),
        (
            "keyed-by-name",
            json!({"spec": {"containers": [{"name": "a", "image": "x:1", "args": ["--v=1", "--x"]}, {"name": "b", "image": "y"}]}}),
            json!({"spec": {"containers": [{"name": "b", "image": "y"}, {"name": "a", "image": "x:2", "args": ["--v=1"]}]}}),
            vec![],
        ),
        (
            "names-not-unique",
            json!({"items": [{"name": "a", "v": 1}, {"name": "a", "v": 2}]}),
            json!({"items": [{"name": "a", "v": 2}, {"name": "a", "v": 1}]}),
            vec![],
        ),
        (
            "scalar-lists",
            json!({"finalizers": ["a", "b"], "args": [1, 2, 3]}),
            json!({"finalizers": ["b", "a"], "args": [1, 2]}),
            vec![],
        ),
        (
            "added-removed-null",
            json!({"data": {"a": "1", "b": null, "c": "3"}, "x": {}}),
            json!({"data": {"a": "1", "d": "4"}, "x": null}),
            vec![],
        ),
        (
            "type-changes",
            json!({"a": 1, "b": "1", "c": [1], "d": {"e": 1}, "f": true}),
            json!({"a": "1", "b": 1, "c": {"0": 1}, "d": [1], "f": 1}),
            vec![],
        ),
        (
            "numbers",
            json!({"replicas": 1, "ratio": 1.5}),
            json!({"replicas": 1, "ratio": 1.5}),
            vec![],
        ),
        (
            "special-keys",
            json!({"data": {"tls.crt": "a", "ca bundle": "b", "plain-key_1$": "c"}, "metadata": {"labels": {"app.kubernetes.io/name": "x"}}}),
            json!({"data": {"tls.crt": "z", "ca bundle": "y", "plain-key_1$": "x"}, "metadata": {"labels": {"app.kubernetes.io/name": "y"}}}),
            vec![],
        ),
        (
            "volatile",
            json!({"metadata": {"annotations": {"example.com/synced-at": "1", "keep": "1"}}, "status": {"observedGeneration": 1, "conditions": [{"type": "A", "reason": "x", "status": "True"}]}}),
            json!({"metadata": {"annotations": {"example.com/synced-at": "2", "keep": "2"}}, "status": {"observedGeneration": 2, "conditions": [{"type": "A", "reason": "y", "status": "False"}]}}),
            vec![
                "status.observedGeneration",
                "metadata.annotations[\"example.com/synced-at\"]",
                "status.conditions[*].reason",
            ],
        ),
        (
            "volatile-subtree",
            json!({"status": {"a": 1, "b": {"c": 1}}, "spec": {"a": 1}}),
            json!({"status": {"a": 2, "b": {"c": 2}, "d": 1}, "spec": {"a": 2}}),
            vec!["status"],
        ),
        (
            "bounded",
            json!({"data": (0..40).map(|i| (format!("k{i:02}"), json!(i))).collect::<serde_json::Map<_, _>>()}),
            json!({"data": {}}),
            vec![],
        ),
    ];
    cases
        .into_iter()
        .map(|(name, control, candidate, volatile)| {
            let patterns: Vec<FieldPath> = volatile
                .iter()
                .map(|v| FieldPath::parse(v).expect("volatile path"))
                .collect();
            let fields = differing_fields(&control, &candidate, &patterns);
            json!({
                "name": name, "control": control, "candidate": candidate, "volatile": volatile,
                "fields": fields.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "total": fields.len(),
            })
        })
        .collect()
}

/// The plan of the comparison cases: `Sync` in both paths with intended differences,
/// `Inline` in the legacy path only, `Check` in the phased path only.
const PLAN: &str = "\
apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata:
  name: writes
spec:
  operations:
    - name: Sync
      phase: 1
      category: non-critical
      shadow: dry-run
      intendedDifferences:
        - kind: Secret
          name: ssh-key
          control: none
          candidate: delete
        - kind: ConfigMap
          fields: [data.retention]
        - kind: ConfigMap
          name: many
          fields: [data]
        - kind: ConfigMap
          name: \"kas-*-endpoint\"
          control: none
          candidate: write
    - name: Inline
      only: legacy
    - name: Check
      phase: 2
      category: critical
      shadow: dry-run
      only: phased
  legacy:
    order: [Inline, Sync]
  compare:
    volatile: [metadata.annotations]
";

/// A write as the vectors give it: method, path, the server's answer.
type Entry = (&'static str, &'static str, Value);

fn log(entries: &[Entry]) -> Vec<writes::Write> {
    let with: Vec<WithRequest> = entries
        .iter()
        .map(|(m, p, a)| ((*m, *p, a.clone()), None))
        .collect();
    log_sent(&with)
}

/// A write with the body of its request (its content type, the body), when the vectors give one.
type WithRequest = (Entry, Option<(&'static str, Value)>);

fn log_sent(entries: &[WithRequest]) -> Vec<writes::Write> {
    let log = WriteLog::new();
    for ((method, path, answer), request) in entries {
        let method: Method = method.parse().expect("method");
        let request = request.as_ref().map(|(content_type, body)| RequestBody {
            content_type: Some((*content_type).to_owned()),
            bytes: body.to_string().into_bytes(),
        });
        log.accepted(&method, path, request, answer.to_string().as_bytes());
    }
    log.take()
}

fn entries_json(entries: &[Entry]) -> Value {
    entries
        .iter()
        .map(|(m, p, a)| json!({"method": m, "path": p, "answer": a}))
        .collect()
}

fn sent_json(entries: &[WithRequest]) -> Value {
    entries
        .iter()
        .map(|((m, p, a), request)| match request {
            Some((content_type, body)) => json!({"method": m, "path": p, "answer": a,
                "request": body, "content_type": content_type}),
            None => json!({"method": m, "path": p, "answer": a}),
        })
        .collect()
}

fn configmap(name: &str, data: &Value) -> Value {
    json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": name, "namespace": "cp", "resourceVersion": "7"}, "data": data})
}

#[allow(clippy::too_many_lines)] // a table of cases
fn compare_cases() -> Vec<Value> {
    let plan = ReconcilePlan::from_yaml("writes.yaml", PLAN).expect("the cases' plan");
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {"name": "ssh-key", "kind": "secrets"}});
    let cm = "/api/v1/namespaces/cp/configmaps";
    let cases: Vec<(&str, &str, Vec<Entry>, Vec<Entry>)> = vec![
        (
            "same",
            "Sync",
            vec![(
                "PATCH",
                "/api/v1/namespaces/cp/configmaps/a",
                configmap("a", &json!({"x": "1"})),
            )],
            vec![(
                "PATCH",
                "/api/v1/namespaces/cp/configmaps/a",
                configmap("a", &json!({"x": "1"})),
            )],
        ),
        (
            "intended-delete",
            "Sync",
            vec![],
            vec![(
                "DELETE",
                "/api/v1/namespaces/cp/secrets/ssh-key",
                status.clone(),
            )],
        ),
        (
            "unexpected-delete",
            "Sync",
            vec![],
            vec![(
                "DELETE",
                "/api/v1/namespaces/cp/secrets/other",
                status.clone(),
            )],
        ),
        (
            "fields-intended-and-not",
            "Sync",
            vec![
                (
                    "PATCH",
                    "/api/v1/namespaces/cp/configmaps/a",
                    configmap("a", &json!({"x": "1"})),
                ),
                (
                    "PATCH",
                    "/api/v1/namespaces/cp/configmaps/b",
                    configmap("b", &json!({"x": "1"})),
                ),
            ],
            vec![
                (
                    "PATCH",
                    "/api/v1/namespaces/cp/configmaps/a",
                    configmap("a", &json!({"x": "1", "retention": "15d"})),
                ),
                (
                    "PATCH",
                    "/api/v1/namespaces/cp/configmaps/b",
                    configmap("b", &json!({"x": "2", "retention": "15d"})),
                ),
            ],
        ),
        (
            "create-against-patch",
            "Sync",
            vec![("POST", cm, configmap("c", &json!({"x": "1"})))],
            vec![(
                "PATCH",
                "/api/v1/namespaces/cp/configmaps/c",
                configmap("c", &json!({"x": "1"})),
            )],
        ),
        (
            "last-write-wins",
            "Sync",
            vec![
                (
                    "PATCH",
                    "/api/v1/namespaces/cp/configmaps/a",
                    configmap("a", &json!({"x": "1"})),
                ),
                (
                    "DELETE",
                    "/api/v1/namespaces/cp/configmaps/a",
                    status.clone(),
                ),
            ],
            vec![(
                "PATCH",
                "/api/v1/namespaces/cp/configmaps/a",
                configmap("a", &json!({"x": "2"})),
            )],
        ),
        (
            "write-against-delete",
            "Sync",
            vec![(
                "DELETE",
                "/api/v1/namespaces/cp/configmaps/a",
                status.clone(),
            )],
            vec![(
                "DELETE",
                "/api/v1/namespaces/cp/configmaps/a",
                status.clone(),
            )],
        ),
        (
            "volatile",
            "Sync",
            vec![(
                "PUT",
                "/api/v1/namespaces/cp/configmaps/a",
                json!({"kind": "ConfigMap", "metadata": {"name": "a", "annotations": {"t": "1"}}}),
            )],
            vec![(
                "PUT",
                "/api/v1/namespaces/cp/configmaps/a",
                json!({"kind": "ConfigMap", "metadata": {"name": "a", "annotations": {"t": "2"}}}),
            )],
        ),
        (
            "scale-is-another-kind",
            "Sync",
            vec![
                (
                    "PUT",
                    "/apis/apps/v1/namespaces/cp/deployments/d/scale",
                    json!({"kind": "Scale", "spec": {"replicas": 1}}),
                ),
                (
                    "DELETE",
                    "/apis/apps/v1/namespaces/cp/deployments/e",
                    status.clone(),
                ),
            ],
            vec![(
                "PUT",
                "/apis/apps/v1/namespaces/cp/deployments/d/scale",
                json!({"kind": "Scale", "spec": {"replicas": 2}}),
            )],
        ),
        (
            "many-fields-past-the-listed-ones",
            "Sync",
            vec![(
                "PATCH",
                "/api/v1/namespaces/cp/configmaps/many",
                configmap("many", &json!({})),
            )],
            vec![(
                "PATCH",
                "/api/v1/namespaces/cp/configmaps/many",
                json!({"kind": "ConfigMap", "metadata": {"name": "many", "namespace": "cp", "labels": {"app": "x"}},
                    "data": (0..40).map(|i| (format!("k{i:02}"), json!("x"))).collect::<serde_json::Map<_, _>>()}),
            )],
        ),
        (
            "many-fields-all-declared",
            "Sync",
            vec![(
                "PATCH",
                "/api/v1/namespaces/cp/configmaps/many",
                configmap("many", &json!({})),
            )],
            vec![(
                "PATCH",
                "/api/v1/namespaces/cp/configmaps/many",
                configmap(
                    "many",
                    &(0..40)
                        .map(|i| (format!("k{i:02}"), json!("x")))
                        .collect::<serde_json::Map<_, _>>()
                        .into(),
                ),
            )],
        ),
        (
            "subresource",
            "Sync",
            vec![(
                "PUT",
                "/apis/example.com/v1/namespaces/t/widgets/w/status",
                json!({"kind": "Widget", "status": {"ready": true}}),
            )],
            vec![(
                "PUT",
                "/apis/example.com/v1/namespaces/t/widgets/w",
                json!({"kind": "Widget", "status": {"ready": true}}),
            )],
        ),
        (
            "legacy-only",
            "Inline",
            vec![
                (
                    "PUT",
                    "/apis/example.com/v1/namespaces/t/widgets/w/status",
                    json!({"kind": "Widget", "status": {"ready": true}}),
                ),
                ("DELETE", "/api/v1/namespaces/cp/secrets/s", status.clone()),
            ],
            vec![],
        ),
        (
            "phased-only",
            "Check",
            vec![],
            vec![(
                "POST",
                "/apis/apps/v1/namespaces/cp/deployments",
                json!({"kind": "Deployment", "metadata": {"name": "d"}}),
            )],
        ),
    ];
    cases
        .into_iter()
        .map(|(name, op, control, candidate)| {
            let operation = plan.operation(plan.lookup(op).expect("op"));
            let kinds = Kinds::default();
            let found = match operation.only() {
                Some(path @ CodePath::Legacy) => {
                    writes::one_sided(operation, path, &log(&control), &kinds)
                }
                Some(path @ CodePath::Phased) => {
                    writes::one_sided(operation, path, &log(&candidate), &kinds)
                }
                None => writes::compare(
                    operation,
                    (&log(&control), &log(&candidate)),
                    plan.volatile(),
                    &kinds,
                ),
            };
            let differences = differences_json(&found);
            json!({
                "name": name, "operation": op,
                "control": entries_json(&control), "candidate": entries_json(&candidate),
                "differences": differences,
            })
        })
        .collect()
}

fn differences_json(found: &[writes::WriteDifference]) -> Vec<Value> {
    found
        .iter()
        .map(|d| json!({
            "operation": d.operation, "only": d.only.map(CodePath::as_str),
            "group": d.group, "kind": d.kind, "namespace": d.namespace, "name": d.name,
            "subresource": d.subresource,
            "control": d.control.map(WriteVerb::as_str), "candidate": d.candidate.map(WriteVerb::as_str),
            "fields": d.fields, "fields_total": d.fields_total, "intended": d.intended,
        }))
        .collect()
}

const JSON: &str = "application/json";

fn service(name: &str, ip: &str, node_port: u16) -> Value {
    json!({"kind": "Service", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": "cp", "uid": format!("uid-{ip}"), "resourceVersion": "9"},
        "spec": {"type": "NodePort", "clusterIP": ip, "clusterIPs": [ip], "sessionAffinity": "None",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443, "nodePort": node_port}],
            "selector": {"app": "kube-apiserver"}}})
}

/// Writes with their requests: what the server set that no request sent (defaults,
/// allocations, generated names) is no difference; a value it allocated, sent on by the same
/// code, is one value.
#[allow(clippy::too_many_lines)] // a table of cases
fn allocated_cases() -> Vec<Value> {
    let plan = ReconcilePlan::from_yaml("writes.yaml", PLAN).expect("the cases' plan");
    let svc = "/api/v1/namespaces/cp/services";
    let cm = "/api/v1/namespaces/cp/configmaps";
    let service_request = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kas"},
        "spec": {"type": "NodePort", "ports": [{"name": "https", "port": 443, "targetPort": 6443}],
            "selector": {"app": "kube-apiserver"}}});
    let with_affinity = {
        let mut request = service_request.clone();
        request["spec"]["sessionAffinity"] = json!("ClientIP");
        request
    };
    let affinity_answer = {
        let mut answer = service("kas", "10.0.0.99", 30002);
        answer["spec"]["sessionAffinity"] = json!("ClientIP");
        answer
    };
    let generated = |name: &str| {
        json!({"kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {"name": name, "generateName": "root-ca-", "namespace": "cp"}, "data": {"ca": "x"}})
    };
    let generate_request = json!({"metadata": {"generateName": "root-ca-"}, "data": {"ca": "x"}});
    let owned = |uid: &str, url: &str| {
        json!({"kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {"name": "endpoint", "namespace": "cp",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "kas", "uid": uid}]},
        "data": {"url": url}})
    };
    let owned_request = |uid: &str, url: &str| {
        json!({"metadata": {"name": "endpoint",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "kas", "uid": uid}]},
        "data": {"url": url}})
    };
    let cases: Vec<(&str, Vec<WithRequest>, Vec<WithRequest>)> = vec![
        (
            "service-allocations",
            vec![(
                ("POST", svc, service("kas", "10.0.0.17", 30001)),
                Some((JSON, service_request.clone())),
            )],
            vec![(
                ("POST", svc, service("kas", "10.0.0.99", 30002)),
                Some((JSON, service_request.clone())),
            )],
        ),
        (
            "sent-field-differs",
            vec![(
                ("POST", svc, service("kas", "10.0.0.17", 30001)),
                Some((JSON, service_request.clone())),
            )],
            vec![(("POST", svc, affinity_answer), Some((JSON, with_affinity)))],
        ),
        (
            "generated-names",
            vec![
                (
                    ("POST", cm, generated("root-ca-abcde")),
                    Some((JSON, generate_request.clone())),
                ),
                (
                    (
                        "PATCH",
                        "/api/v1/namespaces/cp/configmaps/root-ca-abcde",
                        generated("root-ca-abcde"),
                    ),
                    Some(("application/merge-patch+json", json!({"data": {"ca": "x"}}))),
                ),
            ],
            vec![
                (
                    ("POST", cm, generated("root-ca-zyxwv")),
                    Some((JSON, generate_request.clone())),
                ),
                (
                    (
                        "PATCH",
                        "/api/v1/namespaces/cp/configmaps/root-ca-zyxwv",
                        generated("root-ca-zyxwv"),
                    ),
                    Some(("application/merge-patch+json", json!({"data": {"ca": "x"}}))),
                ),
            ],
        ),
        (
            "generated-name-against-a-name",
            vec![(
                ("POST", cm, generated("root-ca-abcde")),
                Some((JSON, generate_request)),
            )],
            vec![(
                ("POST", cm, configmap("root-ca", &json!({"ca": "x"}))),
                Some((
                    JSON,
                    json!({"metadata": {"name": "root-ca"}, "data": {"ca": "x"}}),
                )),
            )],
        ),
        (
            "allocated-values-sent-on",
            vec![
                (
                    ("POST", svc, service("kas", "10.0.0.17", 30001)),
                    Some((JSON, service_request.clone())),
                ),
                (
                    ("POST", cm, owned("uid-10.0.0.17", "https://10.0.0.17:443")),
                    Some((
                        JSON,
                        owned_request("uid-10.0.0.17", "https://10.0.0.17:443"),
                    )),
                ),
            ],
            vec![
                (
                    ("POST", svc, service("kas", "10.0.0.99", 30002)),
                    Some((JSON, service_request.clone())),
                ),
                (
                    ("POST", cm, owned("uid-10.0.0.99", "https://10.0.0.99:443")),
                    Some((
                        JSON,
                        owned_request("uid-10.0.0.99", "https://10.0.0.99:443"),
                    )),
                ),
            ],
        ),
        (
            "a-value-not-allocated",
            vec![
                (
                    ("POST", svc, service("kas", "10.0.0.17", 30001)),
                    Some((JSON, service_request.clone())),
                ),
                (
                    ("POST", cm, owned("uid-10.0.0.17", "https://10.0.0.17:443")),
                    Some((
                        JSON,
                        owned_request("uid-10.0.0.17", "https://10.0.0.17:443"),
                    )),
                ),
            ],
            vec![
                (
                    ("POST", svc, service("kas", "10.0.0.99", 30002)),
                    Some((JSON, service_request)),
                ),
                (
                    ("POST", cm, owned("uid-other", "https://10.0.0.99:6443")),
                    Some((JSON, owned_request("uid-other", "https://10.0.0.99:6443"))),
                ),
            ],
        ),
        (
            "a-declared-name-pattern",
            vec![],
            vec![
                (
                    (
                        "POST",
                        cm,
                        configmap("kas-eu-endpoint", &json!({"url": "x"})),
                    ),
                    Some((
                        JSON,
                        json!({"metadata": {"name": "kas-eu-endpoint"}, "data": {"url": "x"}}),
                    )),
                ),
                (
                    (
                        "POST",
                        cm,
                        configmap("kas-endpoint-x", &json!({"url": "x"})),
                    ),
                    Some((
                        JSON,
                        json!({"metadata": {"name": "kas-endpoint-x"}, "data": {"url": "x"}}),
                    )),
                ),
            ],
        ),
        (
            "json-patch",
            vec![(
                (
                    "PATCH",
                    "/api/v1/namespaces/cp/configmaps/a",
                    configmap("a", &json!({"x": "1", "y": "1"})),
                ),
                Some((
                    "application/json-patch+json",
                    json!([{"op": "replace", "path": "/data/x", "value": "1"}]),
                )),
            )],
            vec![(
                (
                    "PATCH",
                    "/api/v1/namespaces/cp/configmaps/a",
                    configmap("a", &json!({"x": "2", "y": "2"})),
                ),
                Some((
                    "application/json-patch+json",
                    json!([{"op": "replace", "path": "/data/x", "value": "2"}]),
                )),
            )],
        ),
    ];
    cases
        .into_iter()
        .map(|(name, control, candidate)| {
            let operation = plan.operation(plan.lookup("Sync").expect("op"));
            let found = writes::compare(
                operation,
                (&log_sent(&control), &log_sent(&candidate)),
                plan.volatile(),
                &Kinds::default(),
            );
            json!({
                "name": name, "operation": "Sync",
                "control": sent_json(&control), "candidate": sent_json(&candidate),
                "differences": differences_json(&found),
            })
        })
        .collect()
}

fn generate() -> Value {
    json!({
        "schema": "shadow-reconciler.io/write-vectors/v1",
        "about": "Generated by tests/suite/write_vectors.rs from src/engine/writes.rs and fielddiff.rs. paths: the object a request path addresses (created: the name a POST's answer gives). fields: every differing field of two answers of one object, in path order (total: how many; a record lists the first 32, and a difference is intended only when its every field is declared). compare: two write logs of one operation of `plan` (method, path, answer of each accepted write; request and content_type: the body its request sent, when given: a field no request of either side sent is the server's, and a value the server allocated to each side is one value) and the differences they make, ordered by object (group, resource, namespace, name, subresource); a DELETE's answer is a Status, its kind comes from the built-in table. Do not edit: rerun with SHADOW_RECONCILER_WRITE_VECTORS=1.",
        "plan": PLAN,
        "paths": path_cases(),
        "fields": field_cases(),
        "compare": compare_cases().into_iter().chain(allocated_cases()).collect::<Vec<_>>(),
    })
}

#[test]
fn the_committed_write_vectors_are_what_the_engine_compares() {
    let text = serde_json::to_string_pretty(&generate()).expect("JSON") + "\n";
    if std::env::var_os("SHADOW_RECONCILER_WRITE_VECTORS").is_some() {
        std::fs::write(FILE, &text).expect("write the vectors");
        return;
    }
    let committed = std::fs::read_to_string(FILE).unwrap_or_else(|e| {
        panic!("{FILE}: {e}; generate it with SHADOW_RECONCILER_WRITE_VECTORS=1")
    });
    assert!(
        committed == text,
        "{FILE} differs from what the engine compares; if intended, regenerate it with SHADOW_RECONCILER_WRITE_VECTORS=1 and review the diff"
    );
}

#[test]
fn the_vectors_cover_every_kind_of_difference() {
    let doc = generate();
    let all: Vec<&Value> = doc["compare"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["differences"].as_array().unwrap())
        .collect();
    for (control, candidate) in [
        (Value::Null, json!("delete")),
        (json!("patch"), json!("patch")),
        (json!("delete"), json!("patch")),
        (json!("update"), Value::Null),
        (Value::Null, json!("create")),
    ] {
        assert!(
            all.iter()
                .any(|d| d["control"] == control && d["candidate"] == candidate),
            "no case with control {control}, candidate {candidate}"
        );
    }
    assert!(
        all.iter()
            .any(|d| d["intended"] == json!(true) && d["only"].is_null())
    );
    assert!(all.iter().any(|d| d["intended"] == json!(false)));
    let fields = doc["fields"].as_array().unwrap();
    assert!(fields.iter().filter(|c| c["total"] != json!(0)).count() >= 10);
}
