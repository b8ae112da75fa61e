//! The table of API scenarios the simulator is held to. Each runs in its own namespace `{ns}`
//! (created by its first step); captured values (`{rv}`, `{uid}`, ...) feed later steps.

use serde_json::{Value, json};

use super::runner::{
    Scenario, Step, apply, compact, delete, get, json_patch, merge_patch, post, put,
    strategic_patch, wait_for, watch,
};

const CMS: &str = "/api/v1/namespaces/{ns}/configmaps";
const SAS: &str = "/api/v1/namespaces/{ns}/serviceaccounts";

fn namespace() -> Step {
    post(
        "namespace",
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "{ns}"}}),
    )
    .setup()
}

fn cm(name: &str, data: &Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

fn cm_labelled(name: &str, labels: &Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": name}})
}

fn path(name: &str) -> String {
    format!("{CMS}/{name}")
}

/// A namespaced CRD with a status subresource and a schema that keeps every field.
fn crd(plural: &str, kind: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.conformance.shadow-reconciler.io")},
        "spec": {
            "group": "conformance.shadow-reconciler.io",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}}
            }]
        }
    })
}

fn crd_path(plural: &str) -> String {
    format!(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.conformance.shadow-reconciler.io"
    )
}

fn create_crd(plural: &str, kind: &str) -> Vec<Step> {
    vec![
        post(
            "crd",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            crd(plural, kind),
        )
        .setup(),
        wait_for(
            "crd established",
            &crd_path(plural),
            "/status/conditions/1/status",
            json!("True"),
        )
        .setup(),
    ]
}

fn create_get() -> Scenario {
    Scenario::new(
        "create-get",
        vec![
            namespace(),
            post("create", CMS, cm("a", &json!({"k": "v"}))),
            get("get", &path("a")),
            post("create existing", CMS, cm("a", &json!({}))),
            get("get missing", &path("missing")),
            post(
                "create in a missing namespace",
                "/api/v1/namespaces/{ns}-missing/configmaps",
                cm("b", &json!({})),
            ),
            post(
                "create with an invalid name",
                CMS,
                cm("Bad_Name", &json!({})),
            ),
            post(
                "create without a name",
                CMS,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
            ),
            post(
                "create with generateName",
                CMS,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}}),
            ),
            post(
                "create of another kind",
                CMS,
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
            ),
            post(
                "create in another namespace than the path",
                CMS,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}),
            ),
            post(
                "create a Secret with stringData",
                "/api/v1/namespaces/{ns}/secrets",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"password": "hunter2"}, "data": {"user": "YWRtaW4="}}),
            ),
        ],
    )
}

fn list() -> Scenario {
    let mut steps = vec![namespace()];
    steps.push(
        post(
            "create a",
            CMS,
            cm_labelled("a", &json!({"app": "a", "tier": "x", "n": "1"})),
        )
        .setup(),
    );
    steps.push(
        post(
            "create b",
            CMS,
            cm_labelled("b", &json!({"app": "b", "n": "2"})),
        )
        .setup(),
    );
    steps.push(post("create c", CMS, cm_labelled("c", &json!({}))).setup());
    steps.extend([
        get("list", CMS),
        get("list limit 2", &format!("{CMS}?limit=2")).capture("continue", "/metadata/continue"),
        get(
            "list continue",
            &format!("{CMS}?limit=2&continue={{continue}}"),
        ),
        get(
            "list resourceVersion 0",
            &format!("{CMS}?resourceVersion=0"),
        ),
        get("label app=a", &format!("{CMS}?labelSelector=app%3Da")),
        get("label app!=a", &format!("{CMS}?labelSelector=app!%3Da")),
        get("label app", &format!("{CMS}?labelSelector=app")),
        get("label !app", &format!("{CMS}?labelSelector=!app")),
        get(
            "label app,tier=x",
            &format!("{CMS}?labelSelector=app,tier%3Dx"),
        ),
        get(
            "label app in (a,b)",
            &format!("{CMS}?labelSelector=app%20in%20(a,b)"),
        ),
        get(
            "label app notin (a)",
            &format!("{CMS}?labelSelector=app%20notin%20(a)"),
        ),
        get(
            "bad label selector",
            &format!("{CMS}?labelSelector=app%3D%3D%3D"),
        ),
        get("label n>1", &format!("{CMS}?labelSelector=n%3E1")),
        get("label n<2", &format!("{CMS}?labelSelector=n%3C2")),
        get("label n>x", &format!("{CMS}?labelSelector=n%3Ex")),
        get(
            "label with a trailing comma",
            &format!("{CMS}?labelSelector=app%3Da,"),
        ),
        get(
            "label app in (a,)",
            &format!("{CMS}?labelSelector=app%20in%20(a,)"),
        ),
        get(
            "label tier notin ()",
            &format!("{CMS}?labelSelector=tier%20notin%20()"),
        ),
        get(
            "field metadata.name=b",
            &format!("{CMS}?fieldSelector=metadata.name%3Db"),
        ),
        get(
            "field metadata.namespace",
            &format!("{CMS}?fieldSelector=metadata.namespace%3D{{ns}}"),
        ),
        get(
            "field unsupported",
            &format!("{CMS}?fieldSelector=data.k%3Da"),
        ),
    ]);
    Scenario::new("list", steps)
}

fn update() -> Scenario {
    Scenario::new("update", vec![
        namespace(),
        post("create", CMS, cm("a", &json!({"k": "1"}))).capture("rv", "/metadata/resourceVersion"),
        put("update", &path("a"), json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "{rv}"}, "data": {"k": "2"}})),
        put("update with a stale resourceVersion", &path("a"), json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "{rv}"}, "data": {"k": "3"}})),
        put("update without a resourceVersion", &path("a"), json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "4"}})).capture("rv2", "/metadata/resourceVersion"),
        put("update that changes nothing", &path("a"), json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "{rv2}"}, "data": {"k": "4"}})),
        put("update with another name than the path", &path("a"), cm("b", &json!({}))),
        put("update of a missing object", &path("missing"), cm("missing", &json!({}))),
        get("get", &path("a")),
    ])
}

fn patch() -> Scenario {
    let sa = SAS;
    Scenario::new("patch", vec![
        namespace(),
        post("create", CMS, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k1": "a", "k2": "b"}})).capture("rv", "/metadata/resourceVersion"),
        merge_patch("merge patch", &path("a"), json!({"metadata": {"labels": {"y": "2"}}, "data": {"k1": "c", "k2": null}})),
        merge_patch("merge patch with a stale resourceVersion", &path("a"), json!({"metadata": {"resourceVersion": "{rv}"}, "data": {"k1": "d"}})),
        json_patch("json patch", &path("a"), json!([{"op": "add", "path": "/data/k3", "value": "e"}, {"op": "replace", "path": "/data/k1", "value": "f"}])),
        json_patch("json patch with a failing test", &path("a"), json!([{"op": "test", "path": "/data/k1", "value": "nope"}, {"op": "add", "path": "/data/k4", "value": "g"}])),
        json_patch("json patch removing a missing path", &path("a"), json!([{"op": "remove", "path": "/data/missing"}])),
        merge_patch("merge patch of a missing object", &path("missing"), json!({"data": {"k": "v"}})),
        strategic_patch("strategic merge patch of a map", &path("a"), json!({"data": {"k5": "h"}})),
        post("create a service account", sa, json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}, "secrets": [{"name": "one"}]})),
        strategic_patch("strategic merge patch of a list with a merge key", &format!("{sa}/sa"), json!({"secrets": [{"name": "two"}]})),
        merge_patch("merge patch of the same list", &format!("{sa}/sa"), json!({"secrets": [{"name": "three"}]})),
        get("get", &path("a")),
    ])
}

fn server_side_apply() -> Scenario {
    let applied = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": data});
    Scenario::new(
        "apply",
        vec![
            namespace(),
            apply(
                "apply creates",
                &format!("{}?fieldManager=alice", path("a")),
                applied(json!({"a": "1"})),
            ),
            apply(
                "apply by another manager, conflicting",
                &format!("{}?fieldManager=bob", path("a")),
                applied(json!({"a": "2"})),
            ),
            apply(
                "apply forced",
                &format!("{}?fieldManager=bob&force=true", path("a")),
                applied(json!({"a": "2"})),
            ),
            apply(
                "apply without the field lost",
                &format!("{}?fieldManager=alice", path("a")),
                applied(json!({"b": "1"})),
            ),
            apply(
                "apply dropping an owned field",
                &format!("{}?fieldManager=alice", path("a")),
                applied(json!({})),
            ),
            apply(
                "apply without a field manager",
                &path("a"),
                applied(json!({"c": "1"})),
            ),
            get("get", &path("a")),
        ],
    )
}

fn status() -> Scenario {
    let widgets = "/apis/conformance.shadow-reconciler.io/v1/namespaces/{ns}/widgets";
    let mut steps = vec![namespace()];
    steps.extend(create_crd("widgets", "Widget"));
    steps.extend([
        post("create with a status", widgets, json!({"apiVersion": "conformance.shadow-reconciler.io/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}, "status": {"phase": "Made"}})).capture("rv", "/metadata/resourceVersion"),
        put("update of status changing spec", &format!("{widgets}/w/status"), json!({"apiVersion": "conformance.shadow-reconciler.io/v1", "kind": "Widget", "metadata": {"name": "w", "resourceVersion": "{rv}"}, "spec": {"size": 2}, "status": {"phase": "Ready"}})),
        merge_patch("patch of the main resource's status", &format!("{widgets}/w"), json!({"status": {"phase": "Other"}})),
        merge_patch("patch of the spec", &format!("{widgets}/w"), json!({"spec": {"size": 3}})),
        merge_patch("patch of the metadata", &format!("{widgets}/w"), json!({"metadata": {"labels": {"l": "1"}}})),
        merge_patch("patch of status", &format!("{widgets}/w/status"), json!({"status": {"phase": "Done"}})),
        get("get status", &format!("{widgets}/w/status")),
        get("get", &format!("{widgets}/w")),
    ]);
    Scenario::new("status", steps)
}

fn deletion() -> Scenario {
    let finalized = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "f", "finalizers": ["conformance.shadow-reconciler.io/hold"]}});
    Scenario::new(
        "delete",
        vec![
            namespace(),
            post("create", CMS, cm("a", &json!({})))
                .setup()
                .capture("rv", "/metadata/resourceVersion"),
            merge_patch("touch", &path("a"), json!({"data": {"k": "v"}})).setup(),
            delete(
                "delete with a uid precondition that fails",
                &path("a"),
                Some(
                    json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}),
                ),
            ),
            delete(
                "delete with a stale resourceVersion precondition",
                &path("a"),
                Some(
                    json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": "{rv}"}}),
                ),
            ),
            delete("delete", &path("a"), None),
            get("get deleted", &path("a")),
            delete("delete missing", &path("a"), None),
            post("create with a finalizer", CMS, finalized),
            delete("delete with a finalizer", &path("f"), None),
            get("get while finalizing", &path("f")),
            merge_patch(
                "remove the finalizer",
                &path("f"),
                json!({"metadata": {"finalizers": null}}),
            ),
            get("get finalized", &path("f")),
            post("create g with a finalizer", CMS, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "g", "finalizers": ["conformance.shadow-reconciler.io/hold"]}})).setup(),
            delete("dry-run delete with a finalizer", &format!("{}?dryRun=All", path("g")), None),
            get("get after a dry-run delete with a finalizer", &path("g")),
            delete("delete with dryRun of the wrong type", &path("g"), Some(json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": "All"}))),
            post("create a service account", SAS, json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}})).setup(),
            delete("delete a service account", &format!("{SAS}/sa"), None),
            post("create b", CMS, cm("b", &json!({}))).setup(),
            delete(
                "delete in the foreground",
                &path("b"),
                Some(
                    json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"}),
                ),
            ),
            get("get after foreground", &path("b")),
            post("create c", CMS, cm("c", &json!({}))).setup(),
            delete(
                "delete orphaning",
                &path("c"),
                Some(
                    json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan"}),
                ),
            ),
            get("get after orphan", &path("c")),
            post("create d", CMS, cm_labelled("d", &json!({"gone": "yes"}))).setup(),
            post("create e", CMS, cm_labelled("e", &json!({"gone": "yes"}))).setup(),
            delete(
                "delete in the background",
                &path("d"),
                Some(
                    json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}),
                ),
            ),
            delete(
                "delete a collection",
                &format!("{CMS}?labelSelector=gone%3Dyes"),
                None,
            ),
            get("list after", CMS),
        ],
    )
}

fn namespaces() -> Scenario {
    Scenario::new(
        "namespaces",
        vec![
            namespace(),
            post(
                "create",
                "/api/v1/namespaces",
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "{ns}-x"}}),
            ),
            get("get", "/api/v1/namespaces/{ns}-x"),
            post(
                "create inside",
                "/api/v1/namespaces/{ns}-x/configmaps",
                cm("a", &json!({})),
            ),
            delete("delete", "/api/v1/namespaces/{ns}-x", None),
            get("get after delete", "/api/v1/namespaces/{ns}-x"),
            post(
                "create in a terminating namespace",
                "/api/v1/namespaces/{ns}-x/configmaps",
                cm("b", &json!({})),
            ),
            get(
                "get inside after delete",
                "/api/v1/namespaces/{ns}-x/configmaps/a",
            ),
        ],
    )
}

fn crds() -> Scenario {
    let gadgets = "/apis/conformance.shadow-reconciler.io/v1/namespaces/{ns}/gadgets";
    Scenario::new(
        "crd",
        vec![
            namespace(),
            post(
                "create",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                crd("gadgets", "Gadget"),
            ),
            wait_for(
                "established",
                &crd_path("gadgets"),
                "/status/conditions/1/status",
                json!("True"),
            ),
            // The real server's discovery follows the CRD's Established condition a moment
            // later (its discovery controller works from a queue).
            wait_for(
                "discovered",
                "/apis/conformance.shadow-reconciler.io/v1",
                "/resources/*/name",
                json!("gadgets"),
            ),
            post(
                "create a resource",
                gadgets,
                json!({"apiVersion": "conformance.shadow-reconciler.io/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"anything": ["goes", 1]}}),
            ),
            get("list resources", gadgets),
            get("discovery", "/apis/conformance.shadow-reconciler.io/v1"),
            post(
                "create a resource of a missing kind",
                "/apis/conformance.shadow-reconciler.io/v1/namespaces/{ns}/gizmos",
                json!({"apiVersion": "conformance.shadow-reconciler.io/v1", "kind": "Gizmo", "metadata": {"name": "g"}}),
            ),
            delete("delete the CRD", &crd_path("gadgets"), None),
        ],
    )
}

fn watches() -> Scenario {
    Scenario::new(
        "watch",
        vec![
            namespace(),
            post("create a", CMS, cm("a", &json!({})))
                .setup()
                .capture("rv", "/metadata/resourceVersion"),
            merge_patch("patch a", &path("a"), json!({"data": {"k": "v"}})).setup(),
            post("create b", CMS, cm("b", &json!({}))).setup(),
            delete("delete b", &path("b"), None).setup(),
            watch(
                "watch from a resourceVersion",
                &format!("{CMS}?resourceVersion={{rv}}"),
                1,
            ),
            watch(
                "watch with a field selector",
                &format!("{CMS}?resourceVersion={{rv}}&fieldSelector=metadata.name%3Da"),
                1,
            ),
            watch(
                "watch with a label selector",
                &format!("{CMS}?resourceVersion={{rv}}&labelSelector=app%3Dnone"),
                1,
            ),
            watch(
                "watch with initial events",
                &format!(
                    "{CMS}?sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
                ),
                1,
            ),
            post(
                "create a service account",
                SAS,
                json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}}),
            )
            .setup()
            .capture("sa_rv", "/metadata/resourceVersion"),
            merge_patch(
                "patch the service account",
                &format!("{SAS}/sa"),
                json!({"metadata": {"labels": {"x": "1"}}}),
            )
            .setup(),
            // A later write, so that the compaction revision is past the watch's first event (a
            // watch starting exactly at it finds its previous value compacted: a 500 from etcd).
            post("create z", CMS, cm("z", &json!({}))).setup(),
            compact(),
            watch(
                "watch from a compacted resourceVersion",
                &format!("{SAS}?resourceVersion={{sa_rv}}"),
                1,
            ),
        ],
    )
}

fn dry_run() -> Scenario {
    Scenario::new("dry-run", vec![
        namespace(),
        post("namespace created in dry run", "/api/v1/namespaces?dryRun=All", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "{ns}-dry"}})),
        post("create in a namespace only created in dry run", "/api/v1/namespaces/{ns}-dry/configmaps?dryRun=All", cm("a", &json!({}))),
        post("create", &format!("{CMS}?dryRun=All"), cm("a", &json!({"k": "v"}))),
        get("get after dry-run create", &path("a")),
        post("create with generateName", &format!("{CMS}?dryRun=All"), json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}})),
        post("create a Secret with stringData", "/api/v1/namespaces/{ns}/secrets?dryRun=All", json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"password": "hunter2"}, "data": {"user": "YWRtaW4="}})),
        post("create for real", CMS, cm("b", &json!({"k": "1"}))).setup().capture("rv", "/metadata/resourceVersion"),
        post("create a Secret for real", "/api/v1/namespaces/{ns}/secrets", json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kept"}, "data": {"k": "dg=="}})).setup(),
        put("update changing a Secret's type", "/api/v1/namespaces/{ns}/secrets/kept?dryRun=All", json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kept"}, "type": "kubernetes.io/basic-auth", "data": {"username": "YQ=="}})),
        put("update", &format!("{}?dryRun=All", path("b")), json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "resourceVersion": "{rv}"}, "data": {"k": "2"}})),
        merge_patch("patch", &format!("{}?dryRun=All", path("b")), json!({"data": {"k": "3"}})),
        delete("delete with the query", &format!("{}?dryRun=All", path("b")), None),
        delete("delete with DeleteOptions", &path("b"), Some(json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]}))),
        get("get after the dry runs", &path("b")),
        // Nothing of the dry runs reaches a watcher.
        watch("watch over the dry runs", &format!("{CMS}?resourceVersion={{rv}}&fieldSelector=metadata.name%3Db"), 1),
        // The server reads a DELETE's options from its body when it has one: the query's dryRun
        // is ignored and this delete persists.
        delete("delete with dryRun in the query and DeleteOptions in the body", &format!("{}?dryRun=All", path("b")), Some(json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}))),
        get("get after a delete whose body has no dryRun", &path("b")),
        post("create b again", CMS, cm("b", &json!({"k": "1"}))).setup().capture("rv", "/metadata/resourceVersion"),
        merge_patch("touch for real", &path("b"), json!({"data": {"k": "4"}})).setup(),
        put("update with a stale resourceVersion", &format!("{}?dryRun=All", path("b")), json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "resourceVersion": "{rv}"}, "data": {"k": "5"}})),
        post("create existing", &format!("{CMS}?dryRun=All"), cm("b", &json!({}))),
        post("create in a missing namespace", "/api/v1/namespaces/{ns}-missing/configmaps?dryRun=All", cm("c", &json!({}))),
        post("bad dryRun value", &format!("{CMS}?dryRun=Some"), cm("d", &json!({}))),
    ])
    .without_dry_run_variant()
}

/// Every scenario of the table.
/// What the server allocates and defaults on a Service: a cluster IP, node ports, the type's
/// defaults; a dry-run create gets allocations too, and an update that leaves them out keeps
/// them (the allocated values themselves are normalised: they differ by server).
fn services() -> Scenario {
    const SVC: &str = "/api/v1/namespaces/{ns}/services";
    let service = |name: &str, spec: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec});
    let node_port = json!({"type": "NodePort", "selector": {"app": "a"},
        "ports": [{"name": "https", "port": 443, "targetPort": 6443}]});
    Scenario::new(
        "services",
        vec![
            namespace(),
            post(
                "create a NodePort service",
                SVC,
                service("kas", node_port.clone()),
            )
            .capture("rv", "/metadata/resourceVersion"),
            post(
                "dry-run create",
                &format!("{SVC}?dryRun=All"),
                service("kas-dry", node_port.clone()),
            ),
            get("the dry run persisted nothing", &format!("{SVC}/kas-dry")),
            get("get", &format!("{SVC}/kas")),
            put(
                "update without the allocated values",
                &format!("{SVC}/kas"),
                json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "kas", "resourceVersion": "{rv}"},
                "spec": {"type": "NodePort", "selector": {"app": "b"},
                    "ports": [{"name": "https", "port": 443, "targetPort": 6443, "protocol": "TCP"}]}}),
            ),
            post(
                "create with the defaults",
                SVC,
                service("plain", json!({"ports": [{"port": 80}]})),
            ),
            post(
                "create a LoadBalancer service",
                SVC,
                service(
                    "lb",
                    json!({"type": "LoadBalancer", "ports": [{"name": "http", "port": 80}]}),
                ),
            ),
            apply(
                "apply a NodePort service",
                &format!("{SVC}/applied"),
                service("applied", node_port),
            ),
        ],
    )
}

pub fn all() -> Vec<Scenario> {
    vec![
        services(),
        create_get(),
        list(),
        update(),
        patch(),
        server_side_apply(),
        status(),
        deletion(),
        namespaces(),
        crds(),
        watches(),
        dry_run(),
    ]
}
