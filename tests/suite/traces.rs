//! The OTLP export of one reconcile, received by an in-process OTLP/HTTP receiver decoding the
//! official protobuf types: span tree, attributes, error status, links, trace id.

use crate::common;

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use common::start_sim;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use shadow_reconciler::engine::{Engine, MemorySink};
use shadow_reconciler::flag::{FlagSpec, LiveFlag};
use shadow_reconciler::reconcilers::hostedcluster::{
    HostedCluster, HostedClusterReconciler, HostedClusterSpec, HostedControlPlane, LocalRef,
    Release,
};
use shadow_reconciler::sim::SimConfig;
use shadow_reconciler::telemetry::traces::TraceSink;
use shadow_reconciler::vocab::Mode;

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// An OTLP/HTTP receiver on loopback: its `/v1/traces` URL and what it received.
async fn receiver() -> (String, Arc<Mutex<Vec<ExportTraceServiceRequest>>>) {
    let received: Arc<Mutex<Vec<ExportTraceServiceRequest>>> = Arc::default();
    let store = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: Bytes| {
            let store = store.clone();
            async move {
                let request =
                    ExportTraceServiceRequest::decode(body).expect("a valid OTLP protobuf body");
                store.lock().unwrap().push(request);
                (
                    [(axum::http::header::CONTENT_TYPE, "application/x-protobuf")],
                    ExportTraceServiceRequest::default().encode_to_vec(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (endpoint, received)
}

/// The CRDs, a pull secret, and a HostedCluster whose SSH key secret is missing.
async fn hosted_cluster_missing_its_ssh_key(client: &kube::Client) -> HostedCluster {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [HostedCluster::crd(), HostedControlPlane::crd()] {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("pull".into()),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    };
    Api::<Secret>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let spec = HostedClusterSpec {
        release: Release {
            image: "quay.io/ocp-release:4.17.3-x86_64".into(),
        },
        platform: "AWS".into(),
        pull_secret: LocalRef {
            name: "pull".into(),
        },
        ssh_key: Some(LocalRef {
            name: "missing".into(),
        }),
        ..HostedClusterSpec::default()
    };
    Api::<HostedCluster>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &HostedCluster::new("gamma", spec))
        .await
        .unwrap()
}

fn attribute<'s>(span: &'s Span, key: &str) -> Option<&'s Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn text(span: &Span, key: &str) -> String {
    match attribute(span, key) {
        Some(Value::StringValue(s)) => s.clone(),
        other => panic!("{key} of {}: {other:?}", span.name),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_reconcile_exports_its_span_tree_with_links_and_error_status() {
    let (endpoint, received) = receiver().await;
    let (_sim, client) = start_sim(SimConfig::default()).await;
    let hc = hosted_cluster_missing_its_ssh_key(&client).await;

    let traces = Arc::new(TraceSink::http(&endpoint).unwrap());
    let sink = MemorySink::new();
    let plan = HostedClusterReconciler::plan();
    let flag = FlagSpec {
        mode: Mode::Shadow,
        ..FlagSpec::default()
    };
    let engine = Engine::new(
        Arc::new(HostedClusterReconciler),
        plan.clone(),
        client,
        Arc::new(LiveFlag::new(flag, vec![plan]).unwrap()),
    )
    .unwrap()
    .with_sink(Arc::new(sink.clone()))
    .with_sink(traces.clone());
    engine.reconcile(Arc::new(hc)).await;
    let flushing = traces.clone();
    tokio::task::spawn_blocking(move || flushing.flush())
        .await
        .unwrap();

    let record = sink.records().pop().unwrap();
    // The SDK's flush stops waiting after 5 s, and its export goes on: the spans are read once
    // the root has arrived. It ends after its steps, so no span of the tree comes after it.
    let spans = common::wait::wait_until_async(
        "the reconcile's root span received",
        std::time::Duration::from_mins(1),
        std::time::Duration::from_millis(20),
        async || {
            let spans: Vec<Span> = received
                .lock()
                .unwrap()
                .iter()
                .flat_map(|r| r.resource_spans.iter())
                .flat_map(|rs| rs.scope_spans.iter())
                .flat_map(|ss| ss.spans.clone())
                .collect();
            if spans.iter().any(|s| s.name == "reconcile") {
                Ok(spans)
            } else {
                Err(format!("{} spans", spans.len()))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    check_tree(&spans, record.trace_id.as_deref());
    let closing = traces.clone();
    tokio::task::spawn_blocking(move || closing.shutdown())
        .await
        .unwrap();
}

/// The span tree of the SSH-key-missing reconcile.
fn check_tree(spans: &[Span], trace_id: Option<&str>) {
    let root = spans
        .iter()
        .find(|s| s.name == "reconcile")
        .expect("a reconcile span");
    assert_eq!(
        Some(hex(&root.trace_id).as_str()),
        trace_id,
        "the record carries the exported trace id"
    );
    assert!(
        root.parent_span_id.is_empty(),
        "the reconcile span is a root"
    );
    for (key, value) in [
        ("k8s.namespace.name", "default"),
        ("k8s.object.name", "gamma"),
        ("shadow_reconciler.plan", "hostedcluster"),
        ("shadow_reconciler.mode", "shadow"),
        ("feature_flag.key", "shadow-reconciler.mode"),
        ("feature_flag.result.variant", "shadow"),
        // No ConfigMap: the command line's flag.
        ("feature_flag.result.reason", "default"),
    ] {
        assert_eq!(text(root, key), value, "{key}");
    }
    assert_eq!(
        root.status.as_ref().map(|s| s.code),
        Some(2),
        "error status on a failed reconcile"
    );

    let run = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name && s.parent_span_id == root.span_id)
            .unwrap_or_else(|| panic!("no {name} span under the root"))
    };
    let (control, candidate) = (run("control"), run("candidate"));
    let steps = |parent: &Span| {
        spans
            .iter()
            .filter(|s| s.parent_span_id == parent.span_id)
            .collect::<Vec<_>>()
    };
    // Each run lists its code path's operations: the legacy loop's own step in the control, the
    // phased reconcile's own check in the candidate.
    assert_eq!(steps(control).len(), 21);
    assert_eq!(steps(candidate).len(), 21);
    assert!(
        steps(control)
            .iter()
            .any(|s| s.name == "ValidConfigurationCondition")
    );
    assert!(
        steps(candidate)
            .iter()
            .any(|s| s.name == "ManagedHSMVersionCheck")
    );
    assert!(
        spans.iter().all(|s| s.trace_id == root.trace_id),
        "one trace"
    );

    let ssh = steps(control)
        .into_iter()
        .find(|s| s.name == "SSHKeySync")
        .unwrap();
    assert_eq!(text(ssh, "shadow_reconciler.outcome"), "failed");
    assert_eq!(text(ssh, "error.type"), "not-found");
    assert_eq!(ssh.status.as_ref().map(|s| s.code), Some(2));
    check_reuse(spans, control, candidate);
    let hcp = steps(candidate)
        .into_iter()
        .find(|s| s.name == "CoreHCPChain")
        .unwrap();
    assert_eq!(
        (
            text(hcp, "shadow_reconciler.execution"),
            text(hcp, "shadow_reconciler.outcome")
        ),
        ("dry-run".into(), "succeeded".into())
    );
    assert!(hcp.end_time_unix_nano >= hcp.start_time_unix_nano);
    let skipped = steps(control)
        .into_iter()
        .find(|s| s.name == "CoreHCPChain")
        .unwrap();
    assert_eq!(text(skipped, "shadow_reconciler.outcome"), "skipped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_exports_spans_where_the_standard_variables_say() {
    let (endpoint, received) = receiver().await;
    let base = endpoint.trim_end_matches("/v1/traces").to_owned();
    // In a directory of its own: simulate writes ./shadow-data and its report beside it.
    let cwd = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .current_dir(cwd.path())
        .args([
            "simulate",
            "--hosted-clusters",
            "3",
            "--addons",
            "2",
            "--seed",
            "2",
        ])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &base)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        .env("OTEL_SERVICE_NAME", "shadow-under-test")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = received.lock().unwrap().clone();
    let service = requests
        .iter()
        .flat_map(|r| &r.resource_spans)
        .filter_map(|rs| rs.resource.as_ref())
        .flat_map(|r| &r.attributes)
        .find(|kv| kv.key == "service.name")
        .and_then(|kv| kv.value.clone())
        .and_then(|v| v.value);
    assert_eq!(
        service,
        Some(Value::StringValue("shadow-under-test".into()))
    );
    let roots = requests
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|rs| &rs.scope_spans)
        .flat_map(|ss| &ss.spans)
        .filter(|s| s.name == "reconcile")
        .count();
    assert!(
        roots >= 5,
        "one reconcile span per reconcile of the 5 objects at least, got {roots}"
    );
}

#[test]
fn an_unknown_otlp_protocol_is_a_clear_error() {
    let cwd = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .current_dir(cwd.path())
        .args(["simulate", "--hosted-clusters", "1", "--addons", "1"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unsupported OTLP protocol \"carrier-pigeon\"; use grpc or http/protobuf"),
        "{stderr}"
    );
}

#[test]
fn grpc_export_is_built_inside_the_runtime_and_never_blocks_the_run() {
    // Nobody listens on the endpoint: spans fail to export in the background, the run succeeds.
    let cwd = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .current_dir(cwd.path())
        .args(["simulate", "--hosted-clusters", "2", "--addons", "1"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("simulated cluster: 2 HostedClusters")
    );
}

/// A step whose code differs is the candidate's own dry run; a step of shared code the control
/// ran is reused, linked to the control's span.
fn check_reuse(spans: &[Span], control: &Span, candidate: &Span) {
    let steps = |parent: &Span| {
        spans
            .iter()
            .filter(|s| s.parent_span_id == parent.span_id)
            .collect::<Vec<_>>()
    };
    // SSHKeySync's phased code differs from its legacy code: the candidate ran its own, paired.
    let paired = steps(candidate)
        .into_iter()
        .find(|s| s.name == "SSHKeySync")
        .unwrap();
    assert_eq!(text(paired, "shadow_reconciler.execution"), "dry-run");
    assert!(paired.links.is_empty(), "a paired step reuses nothing");
    let pull = |parent: &Span| {
        steps(parent)
            .into_iter()
            .find(|s| s.name == "PullSecretSync")
            .unwrap()
    };
    let reused = pull(candidate);
    assert_eq!(text(reused, "shadow_reconciler.execution"), "reused");
    assert_eq!(
        reused.links.len(),
        1,
        "a reused step links to the control step"
    );
    assert_eq!(reused.links[0].span_id, pull(control).span_id);
}
