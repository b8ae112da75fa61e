//! The simulator's API semantics, driven only through kube-rs.

use crate::common;

use std::collections::BTreeMap;

use common::{api_error, start_sim};
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::discovery::Discovery;
use serde_json::json;
use shadow_reconciler::sim::SimConfig;

fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..ConfigMap::default()
    }
}

fn rv(meta: &ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .expect("resourceVersion")
        .parse()
        .expect("numeric resourceVersion")
}

#[tokio::test]
async fn create_get_duplicate_and_missing() {
    let (_sim, client) = start_sim(SimConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = api
        .create(&PostParams::default(), &cm("a", &[("k", "v")]))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    assert_eq!(meta.uid.as_ref().map(String::len), Some(36));
    assert!(meta.creation_timestamp.is_some());
    // As on kube-apiserver, a ConfigMap has no generation (custom resources do).
    assert_eq!(meta.generation, None);
    let got = api.get("a").await.unwrap();
    assert_eq!(got.data, created.data);
    assert_eq!(got.metadata.resource_version, meta.resource_version);

    let err = api
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap_err();
    assert_eq!(
        api_error(&err),
        (409, "AlreadyExists", "configmaps \"a\" already exists")
    );
    let err = api.get("missing").await.unwrap_err();
    assert_eq!(
        api_error(&err),
        (404, "NotFound", "configmaps \"missing\" not found")
    );
    let in_missing_ns: Api<ConfigMap> = Api::namespaced(api.clone().into_client(), "nope");
    let err = in_missing_ns
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap_err();
    assert_eq!(
        api_error(&err),
        (404, "NotFound", "namespaces \"nope\" not found")
    );
}

#[tokio::test]
async fn resource_versions_are_global_and_monotonic() {
    let (_sim, client) = start_sim(SimConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let a = api
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let ns: Api<Namespace> = Api::all(client);
    let n = ns
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some("team".into()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            },
        )
        .await
        .unwrap();
    let b = api
        .create(&PostParams::default(), &cm("b", &[]))
        .await
        .unwrap();
    assert!(rv(&a.metadata) < rv(&n.metadata) && rv(&n.metadata) < rv(&b.metadata));
    let list = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        list.metadata.resource_version.as_deref(),
        b.metadata.resource_version.as_deref()
    );
}

#[tokio::test]
async fn stale_update_conflicts_and_noop_update_keeps_the_version() {
    let (_sim, client) = start_sim(SimConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let original = api
        .create(&PostParams::default(), &cm("a", &[("k", "1")]))
        .await
        .unwrap();
    let mut first = original.clone();
    first.data = Some(BTreeMap::from([("k".into(), "2".into())]));
    let updated = api
        .replace("a", &PostParams::default(), &first)
        .await
        .unwrap();
    assert!(rv(&updated.metadata) > rv(&original.metadata));

    let mut stale = original.clone();
    stale.data = Some(BTreeMap::from([("k".into(), "3".into())]));
    let err = api
        .replace("a", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert_eq!(
        api_error(&err),
        (
            409,
            "Conflict",
            "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
        )
    );
    // A merge patch carrying the stale resourceVersion is a precondition too (OCM's PatchStatus).
    let patch = json!({"metadata": {"resourceVersion": original.metadata.resource_version}, "data": {"k": "4"}});
    let err = api
        .patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err).1, "Conflict");

    let again = api
        .replace("a", &PostParams::default(), &updated)
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version, updated.metadata.resource_version,
        "a no-op update does not bump"
    );
}

#[tokio::test]
async fn patch_types() {
    let (_sim, client) = start_sim(SimConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm("a", &[("x", "1"), ("y", "2")]))
        .await
        .unwrap();
    let merged = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"y": null, "z": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        merged.data,
        Some(BTreeMap::from([
            ("x".into(), "1".into()),
            ("z".into(), "3".into())
        ]))
    );
    let ops: json_patch::Patch =
        serde_json::from_value(json!([{"op": "replace", "path": "/data/x", "value": "9"}]))
            .unwrap();
    let patched = api
        .patch("a", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["x"], "9");
    let strategic = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"labels": {"l": "v"}}})),
        )
        .await
        .unwrap();
    assert_eq!(strategic.metadata.labels.unwrap()["l"], "v");
    // Server-side apply creates a missing object, then merges onto it.
    let apply = PatchParams::apply("test-manager");
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "1"}});
    let created = api
        .patch("applied", &apply, &Patch::Apply(&body))
        .await
        .unwrap();
    assert_eq!(created.data.unwrap()["a"], "1");
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"b": "2"}});
    let merged = api
        .patch("applied", &apply, &Patch::Apply(&body))
        .await
        .unwrap();
    assert_eq!(merged.data.unwrap().len(), 2);
    let ops: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/data/x", "value": "0"}])).unwrap();
    let err = api
        .patch("a", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err).0, 422);
    let err = api
        .patch("missing", &PatchParams::default(), &Patch::Merge(json!({})))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err).0, 404);
}

#[tokio::test]
async fn dry_run_returns_the_object_and_leaves_no_trace() {
    let (sim, client) = start_sim(SimConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &cm("real", &[("k", "1")]))
        .await
        .unwrap();
    let before = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version;
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };

    let would = api.create(&dry, &cm("ghost", &[("k", "v")])).await.unwrap();
    assert_eq!(would.metadata.name.as_deref(), Some("ghost"));
    assert!(would.metadata.uid.is_some());
    assert_eq!(api_error(&api.get("ghost").await.unwrap_err()).0, 404);

    let patched = api
        .patch(
            "real",
            &PatchParams::default().dry_run(),
            &Patch::Merge(json!({"data": {"k": "2"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["k"], "2");
    assert_eq!(api.get("real").await.unwrap().data.unwrap()["k"], "1");

    let deleted = api
        .delete("real", &DeleteParams::default().dry_run())
        .await
        .unwrap();
    assert!(
        deleted
            .right()
            .is_some_and(|s| s.status == Some(kube::core::response::StatusSummary::Success)),
        "a dry-run delete of an object without finalizers answers a Status, as kube-apiserver does"
    );
    api.get("real").await.expect("still there");
    // Validation and conflicts run in dry-run too.
    assert_eq!(
        api_error(&api.create(&dry, &cm("real", &[])).await.unwrap_err()).1,
        "AlreadyExists"
    );

    let after = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        after.metadata.resource_version, before,
        "resourceVersion unchanged"
    );
    assert_eq!(after.items.len(), 1);
    // A watch from before the dry runs sees no event from them.
    let wp = kube::api::WatchParams::default().timeout(1);
    let events: Vec<_> = api
        .watch(&wp, before.as_deref().unwrap())
        .await
        .unwrap()
        .collect()
        .await;
    let changes: Vec<_> = events
        .iter()
        .filter(|e| !matches!(e, Ok(kube::api::WatchEvent::Bookmark(_))))
        .collect();
    assert!(
        changes.is_empty(),
        "dry runs emitted watch events: {changes:?}"
    );
    let dry_runs = sim.audit(|a| {
        a.records()
            .filter(|r| r.dry_run && r.is_mutation())
            .map(|r| (r.persisted, r.code))
            .collect::<Vec<_>>()
    });
    assert_eq!(
        dry_runs,
        [(false, 201), (false, 200), (false, 200), (false, 409)]
    );
}

#[tokio::test]
async fn status_subresource_isolation_and_generation() {
    let (_sim, client) = start_sim(SimConfig::default()).await;
    let api: Api<Deployment> = Api::namespaced(client, "default");
    let body: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "op"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "op"}}, "template": {"metadata": {"labels": {"app": "op"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
        "status": {"replicas": 7},
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &body).await.unwrap();
    assert_eq!(created.status, None, "status is not written on create");
    assert_eq!(created.metadata.generation, Some(1));

    let mut with_status = created.clone();
    with_status.status = Some(DeploymentStatus {
        replicas: Some(3),
        ..DeploymentStatus::default()
    });
    with_status.spec.replicas = Some(5);
    let after_status = api
        .replace_status("op", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert_eq!(after_status.status.as_ref().unwrap().replicas, Some(3));
    assert_eq!(
        after_status.spec.replicas,
        Some(1),
        "a status write leaves spec alone"
    );
    assert_eq!(
        after_status.metadata.generation,
        Some(1),
        "status changes do not bump generation"
    );

    let main = api
        .patch(
            "op",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}, "status": {"replicas": 99}})),
        )
        .await
        .unwrap();
    assert_eq!(
        main.status.as_ref().unwrap().replicas,
        Some(3),
        "a main-resource write leaves status alone"
    );
    assert_eq!(
        main.metadata.generation,
        Some(2),
        "spec changes bump generation"
    );

    let labels = api
        .patch(
            "op",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        labels.metadata.generation,
        Some(2),
        "metadata changes do not bump generation"
    );
    let status_patch = api
        .patch_status(
            "op",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(status_patch.status.unwrap().replicas, Some(4));
}

#[tokio::test]
async fn list_selectors_and_pages() {
    let (_sim, client) = start_sim(SimConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..7 {
        let mut c = cm(&format!("c{i}"), &[]);
        c.metadata.labels = Some(BTreeMap::from([(
            "parity".into(),
            if i % 2 == 0 { "even" } else { "odd" }.into(),
        )]));
        api.create(&PostParams::default(), &c).await.unwrap();
    }
    let even = api
        .list(&ListParams::default().labels("parity=even"))
        .await
        .unwrap();
    assert_eq!(even.items.len(), 4);
    let not_even = api
        .list(&ListParams::default().labels("parity!=even"))
        .await
        .unwrap();
    assert_eq!(not_even.items.len(), 3);
    let one = api
        .list(&ListParams::default().fields("metadata.name=c3"))
        .await
        .unwrap();
    assert_eq!(one.items.len(), 1);
    // Pages of 3 cover every object once.
    let mut names = Vec::new();
    let mut params = ListParams::default().limit(3);
    loop {
        let page = api.list(&params).await.unwrap();
        assert!(page.items.len() <= 3);
        names.extend(page.items.into_iter().map(|c| c.metadata.name.unwrap()));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    assert_eq!(names, ["c0", "c1", "c2", "c3", "c4", "c5", "c6"]);
    let all: Api<ConfigMap> = Api::all(client);
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        7
    );
    let set = api
        .list(&ListParams::default().labels("parity in (even,none)"))
        .await
        .unwrap();
    assert_eq!(set.items.len(), 4);
    let err = api
        .list(&ListParams::default().labels("parity in even"))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err).0, 400);
}

#[tokio::test]
async fn finalizers_delay_deletion_until_removed() {
    let (_sim, client) = start_sim(SimConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut c = cm("held", &[]);
    c.metadata.finalizers = Some(vec!["example.com/cleanup".into()]);
    api.create(&PostParams::default(), &c).await.unwrap();
    api.delete("held", &DeleteParams::default()).await.unwrap();
    let terminating = api.get("held").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(api_error(&api.get("held").await.unwrap_err()).0, 404);
}

#[tokio::test]
async fn discovery_finds_builtins_and_crds() {
    let (_sim, client) = start_sim(SimConfig::default()).await;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(client.clone());
    let crd = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.shadow-reconciler.io"},
        "spec": {"group": "example.shadow-reconciler.io", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}, "subresources": {"status": {}}}]},
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let mut found = Vec::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            found.push((
                ar.group.clone(),
                ar.plural.clone(),
                caps.scope == kube::discovery::Scope::Namespaced,
            ));
        }
    }
    assert!(
        found.contains(&(String::new(), "configmaps".into(), true)),
        "{found:?}"
    );
    assert!(
        found.contains(&("apps".into(), "deployments".into(), true)),
        "{found:?}"
    );
    assert!(
        found.contains(&(
            "example.shadow-reconciler.io".into(),
            "widgets".into(),
            true
        )),
        "{found:?}"
    );
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "37")
    );
}

/// A difference from kube-apiserver, pinned (docs/simulator.md): the simulator reads no protobuf
/// or CBOR body, and says so with a 415 rather than misreading it; a DELETE whose
/// `DeleteOptions` are protobuf is refused before its `dryRun` could be missed.
#[tokio::test]
async fn binary_bodies_are_refused_with_415() {
    let (_sim, client) = start_sim(SimConfig::default()).await;
    for (method, path, body) in [
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "k8s\u{0}\n",
        ),
        (
            "DELETE",
            "/api/v1/namespaces/default/configmaps/a",
            "k8s\u{0}\n\u{13}\n\u{2}v1\u{12}\rDeleteOptions*\u{3}All",
        ),
    ] {
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(
                http::header::CONTENT_TYPE,
                "application/vnd.kubernetes.protobuf",
            )
            .body(body.as_bytes().to_vec())
            .unwrap();
        let error = client.request_text(request).await.unwrap_err();
        let (code, reason, message) = api_error(&error);
        assert_eq!((code, reason), (415, "UnsupportedMediaType"), "{method}");
        assert!(message.contains("application/json"), "{message}");
    }
}

#[tokio::test]
async fn malformed_requests_get_status_errors() {
    let (_sim, client) = start_sim(SimConfig::default()).await;
    let raw = |method: &str, path: &str, content_type: &str, body: &str| {
        http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::CONTENT_TYPE, content_type)
            .body(body.as_bytes().to_vec())
            .unwrap()
    };
    let cases = [
        (
            raw(
                "POST",
                "/api/v1/namespaces/default/configmaps",
                "application/json",
                "{not json",
            ),
            400,
            "BadRequest",
        ),
        (
            raw(
                "POST",
                "/api/v1/namespaces/default/configmaps",
                "application/json",
                r#"{"kind": "Secret", "metadata": {"name": "x"}}"#,
            ),
            400,
            "BadRequest",
        ),
        (
            raw(
                "POST",
                "/api/v1/namespaces/default/configmaps",
                "application/json",
                r#"{"metadata": {"name": "x", "namespace": "other"}}"#,
            ),
            400,
            "BadRequest",
        ),
        (
            raw(
                "POST",
                "/api/v1/namespaces/default/configmaps",
                "application/json",
                r#"{"metadata": {"name": "Not_Valid"}}"#,
            ),
            422,
            "Invalid",
        ),
        (
            raw(
                "POST",
                "/api/v1/namespaces/default/configmaps",
                "application/json",
                r#"{"metadata": {}}"#,
            ),
            422,
            "Invalid",
        ),
        (
            raw(
                "PATCH",
                "/api/v1/namespaces/default/configmaps/x",
                "text/plain",
                "{}",
            ),
            415,
            "UnsupportedMediaType",
        ),
        (
            raw(
                "GET",
                "/apis/nope.example.com/v1/things",
                "application/json",
                "",
            ),
            404,
            "NotFound",
        ),
        (
            raw(
                "POST",
                "/api/v1/namespaces/default/configmaps?dryRun=Some",
                "application/json",
                r#"{"metadata": {"name": "x"}}"#,
            ),
            422,
            "Invalid",
        ),
    ];
    for (request, code, reason) in cases {
        let what = format!("{} {}", request.method(), request.uri());
        let err = client.request_text(request).await.expect_err(&what);
        let (got_code, got_reason, message) = api_error(&err);
        assert_eq!((got_code, got_reason), (code, reason), "{what}: {message}");
        assert!(!message.is_empty(), "{what}");
    }
}

#[tokio::test]
async fn secrets_string_data_is_stored_as_data() {
    let (_sim, client) = start_sim(SimConfig::default()).await;
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client, "default");
    let secret = k8s_openapi::api::core::v1::Secret {
        metadata: ObjectMeta {
            name: Some("s".into()),
            ..ObjectMeta::default()
        },
        string_data: Some([("password".to_owned(), "hunter2".to_owned())].into()),
        ..k8s_openapi::api::core::v1::Secret::default()
    };
    let created = api.create(&PostParams::default(), &secret).await.unwrap();
    assert_eq!(created.string_data, None);
    let stored = api.get("s").await.unwrap();
    assert_eq!(stored.data.unwrap()["password"].0, b"hunter2");
}

/// A body over kube-apiserver's 3 MiB limit gets the same `Status` 413 as there (checked on
/// v1.37.2: `Request entity too large: limit is 3145728`), not a bare error page.
#[tokio::test]
async fn a_body_over_the_limit_gets_a_status_413() {
    let (_sim, client) = start_sim(SimConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let big = cm("big", &[("a", &"x".repeat(4_000_000))]);
    let error = api.create(&PostParams::default(), &big).await.unwrap_err();
    let (code, reason, message) = api_error(&error);
    assert_eq!((code, reason), (413, "RequestEntityTooLarge"));
    assert_eq!(message, "Request entity too large: limit is 3145728");
    // Just under the limit is fine.
    let fits = cm("fits", &[("a", &"x".repeat(3_000_000))]);
    api.create(&PostParams::default(), &fits).await.unwrap();
}

/// A replace of an object that does not exist creates it where the kind's strategy allows it
/// (a Service, a Lease, the RBAC kinds, as kube-apiserver's do; the conformance test holds the
/// Service's against the real server), and is a 404 elsewhere (a ConfigMap).
#[tokio::test]
async fn a_replace_creates_a_missing_service_but_not_a_missing_config_map() {
    let (_sim, client) = start_sim(SimConfig::default()).await;
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(client.clone(), "default");
    let service: k8s_openapi::api::core::v1::Service = serde_json::from_value(json!({
        "metadata": {"name": "kas", "resourceVersion": "12345"},
        "spec": {"type": "NodePort", "ports": [{"port": 443}]}
    }))
    .unwrap();
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let created = services.replace("kas", &dry, &service).await.unwrap();
    let spec = created.spec.clone().unwrap();
    assert!(spec.cluster_ip.is_some() && spec.ports.unwrap()[0].node_port.is_some());
    assert!(
        services.get_opt("kas").await.unwrap().is_none(),
        "a dry run stores nothing"
    );
    let created = services
        .replace("kas", &PostParams::default(), &service)
        .await
        .unwrap();
    assert_ne!(created.metadata.resource_version.as_deref(), Some("12345"));
    assert!(created.metadata.uid.is_some());
    assert!(services.get_opt("kas").await.unwrap().is_some());
    let maps: Api<ConfigMap> = Api::namespaced(client, "default");
    let err = maps
        .replace("none", &PostParams::default(), &cm("none", &[]))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err).0, 404);
}
