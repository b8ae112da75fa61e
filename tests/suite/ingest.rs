//! The ingest's reconstruction and receivers, in process: what a reconcile's spans become, the
//! bounds on what is buffered, and the answers to malformed, oversized and partly usable
//! requests over HTTP and gRPC.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status, status};
use prost::Message;
use shadow_reconciler::engine::{MemorySink, Sink};
use shadow_reconciler::ingest::{Assembler, Convention, Ingest, Limits, receiver};
use shadow_reconciler::vocab::{ErrorClass, Execution};

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..KeyValue::default()
    }
}

fn span(trace: u8, id: u8, parent: Option<u8>, name: &str, start: u64) -> Span {
    Span {
        trace_id: vec![trace; 16],
        span_id: vec![id; 8],
        parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
        name: name.into(),
        start_time_unix_nano: 1_700_000_000_000_000_000 + start * 1000,
        end_time_unix_nano: 1_700_000_000_000_000_000 + start * 1000 + 500,
        ..Span::default()
    }
}

fn operation(trace: u8, id: u8, parent: u8, name: &str, start: u64) -> Span {
    let mut s = span(trace, id, Some(parent), name, start);
    s.attributes.push(kv("shadow_reconciler.operation", name));
    s
}

fn failed(mut s: Span, error_type: &str) -> Span {
    s.attributes.push(kv("error.type", error_type));
    s.status = Some(Status {
        code: status::StatusCode::Error as i32,
        message: "secrets \"ssh-key\" not found".into(),
    });
    s
}

fn reconcile(trace: u8, id: u8, name: &str) -> Span {
    let mut s = span(trace, id, None, "reconcile", 0);
    s.end_time_unix_nano += 1_000_000;
    s.attributes.extend([
        kv("k8s.object.kind", "HostedCluster"),
        kv("k8s.namespace.name", "clusters"),
        kv("k8s.object.name", name),
        kv("k8s.object.uid", &format!("uid-{name}")),
    ]);
    s
}

fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", "hypershift-operator")],
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
}

/// HyperShift's legacy order up to and including `SSHKeySync`, which fails.
fn legacy_failing_at_ssh(trace: u8) -> Vec<Span> {
    let plan = common::shipped("hostedcluster");
    let mut spans = Vec::new();
    for (i, op) in plan.legacy_order().iter().enumerate() {
        let name = plan.name_of(*op);
        let n = u8::try_from(i).unwrap() + 2;
        let s = operation(trace, n, 1, name, u64::from(n));
        if name == "SSHKeySync" {
            spans.push(failed(s, "NotFound"));
            break;
        }
        spans.push(s);
    }
    spans
}

fn assembler(limits: Limits) -> Assembler {
    Assembler::new(
        &[common::shipped("hostedcluster")],
        &[],
        Convention::default(),
        limits,
    )
    .unwrap()
}

#[test]
fn a_legacy_loop_failing_at_ssh_key_becomes_the_control_and_the_candidates_prediction() {
    let mut a = assembler(Limits::default());
    let mut spans = legacy_failing_at_ssh(7);
    spans.push(reconcile(7, 1, "hc-0"));
    let batch = a.ingest(&request(spans), Instant::now());
    assert_eq!(batch.counts.rejected, 0, "{:?}", batch.reasons);
    assert_eq!(batch.records.len(), 1);
    let r = &batch.records[0];
    assert_eq!(r.object.name, "hc-0");
    assert_eq!(r.object.uid.as_deref(), Some("uid-hc-0"));
    assert_eq!(
        r.trace_id.as_deref(),
        Some("07070707070707070707070707070707")
    );
    assert_eq!(r.control_first_failure.as_deref(), Some("SSHKeySync"));
    let ssh = r
        .control
        .iter()
        .find(|s| s.operation == "SSHKeySync")
        .unwrap();
    assert_eq!(
        (ssh.execution, ssh.error_class),
        (Execution::Real, Some(ErrorClass::NotFound))
    );
    let after: Vec<_> = r
        .control
        .iter()
        .filter(|s| s.outcome == "skipped")
        .collect();
    assert!(!after.is_empty(), "the legacy loop skips what follows");
    // The candidate runs on: what the control ran is reused, the rest is unknown.
    assert!(
        r.unblocked.contains(&"CoreHCPChain".to_owned()),
        "{:?}",
        r.unblocked
    );
    let core = r.candidate_step("CoreHCPChain").unwrap();
    assert_eq!(
        (core.execution, core.outcome),
        (Execution::NotSimulated, "unknown")
    );
    let pull = r.candidate_step("PullSecretSync").unwrap();
    assert_eq!(
        (pull.execution, pull.outcome),
        (Execution::Reused, "succeeded")
    );
    assert_eq!(
        r.duration,
        Duration::from_nanos(1_000_500),
        "the reconcile span's length"
    );
}

/// A reconcile span marked cancelled (the controller's shutdown cut it): a cancelled record,
/// whatever its operation spans say (a "context canceled" there is the cut, not a failure).
#[test]
fn a_reconcile_span_marked_cancelled_is_a_cancelled_record() {
    let mut a = assembler(Limits::default());
    let mut spans = legacy_failing_at_ssh(8);
    let mut root = reconcile(8, 1, "hc-1");
    root.attributes.push(KeyValue {
        key: "shadow_reconciler.cancelled".into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::BoolValue(true)),
        }),
        ..KeyValue::default()
    });
    spans.push(root);
    let batch = a.ingest(&request(spans), Instant::now());
    assert_eq!(batch.counts.rejected, 0, "{:?}", batch.reasons);
    assert_eq!(batch.records.len(), 1);
    let r = &batch.records[0];
    assert!(r.cancelled, "{r:#?}");
    assert_eq!(r.object.name, "hc-1");
    assert!(
        r.control.is_empty()
            && r.candidate.is_empty()
            && r.control_first_failure.is_none()
            && r.unblocked.is_empty()
            && r.write_differences.is_empty(),
        "{r:#?}"
    );
}

fn candidate(mut s: Span, execution: &str) -> Span {
    s.attributes.extend([
        kv("shadow_reconciler.policy", "candidate"),
        kv("shadow_reconciler.execution", execution),
    ]);
    s
}

fn int(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::IntValue(value)),
        }),
        ..KeyValue::default()
    }
}

/// An in-process engine (the Go package) also sends its candidate's dry runs: the sidecar
/// records their real outcomes instead of `unknown`, and the run's mode, groups and counters.
#[test]
fn candidate_dry_run_spans_give_the_unblocked_operations_real_outcomes() {
    let mut a = assembler(Limits::default());
    let plan = common::shipped("hostedcluster");
    let mut spans = legacy_failing_at_ssh(9);
    // The candidate reports what it reused (ignored: the model derives it) and its dry runs.
    spans.push(candidate(
        operation(9, 60, 1, "PullSecretSync", 60),
        "reused",
    ));
    spans.push(candidate(
        operation(9, 61, 1, "CoreHCPChain", 61),
        "dry-run",
    ));
    spans.push(candidate(
        failed(
            operation(9, 62, 1, "KubeconfigAndPasswordSync", 62),
            "Forbidden",
        ),
        "dry-run",
    ));
    // A control step that met conflicts and ran under retry-on-conflict says so.
    let mut retried = operation(9, 63, 1, "PullSecretSync", 63);
    retried.attributes.extend([
        int("shadow_reconciler.conflicts", 2),
        KeyValue {
            key: "shadow_reconciler.retried".into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::BoolValue(true)),
            }),
            ..KeyValue::default()
        },
    ]);
    spans.push(retried);
    let mut r = reconcile(9, 1, "hc-9");
    r.attributes.extend([
        kv("shadow_reconciler.mode", "shadow"),
        kv("shadow_reconciler.plan.hash", &plan.hash().to_hex()),
        int("shadow_reconciler.dry_run_requests", 7),
        int("shadow_reconciler.guard_refusals", 0),
        kv("feature_flag.result.reason", "split"),
        kv("feature_flag.version", "42"),
    ]);
    spans.push(r);
    let batch = a.ingest(&request(spans), Instant::now());
    assert_eq!(batch.counts.rejected, 0, "{:?}", batch.reasons);
    let r = &batch.records[0];
    assert_eq!(r.dry_run_requests, 7);
    let flag = r.flag.as_ref().expect("the span's flag evaluation");
    assert_eq!(
        (flag.reason.as_str(), flag.version.as_deref()),
        ("split", Some("42"))
    );
    let pull = r
        .control
        .iter()
        .find(|s| s.operation == "PullSecretSync")
        .unwrap();
    assert_eq!(pull.conflicts, 2, "the span's conflicts");
    let core = r.candidate_step("CoreHCPChain").unwrap();
    assert_eq!(
        (core.execution, core.outcome),
        (Execution::DryRun, "succeeded")
    );
    let kubeconfig = r.candidate_step("KubeconfigAndPasswordSync").unwrap();
    assert_eq!(
        (
            kubeconfig.execution,
            kubeconfig.outcome,
            kubeconfig.error_class
        ),
        (Execution::DryRun, "failed", Some(ErrorClass::Forbidden))
    );
    let pull = r.candidate_step("PullSecretSync").unwrap();
    assert_eq!(pull.execution, Execution::Reused);
    // An unblocked operation without a dry-run span stays unknown, never a success.
    let rbac = r.candidate_step("RBACAndPolicies").unwrap();
    assert_eq!(rbac.outcome, "unknown");
    assert_ne!(rbac.execution, Execution::DryRun);
    // The control is unchanged by the candidate's spans.
    assert_eq!(r.control_first_failure.as_deref(), Some("SSHKeySync"));
    assert!(r.control.iter().all(|s| s.execution != Execution::DryRun));
    assert_eq!(
        r.control
            .iter()
            .find(|s| s.operation == "CoreHCPChain")
            .unwrap()
            .outcome,
        "skipped"
    );
}

/// Mode `off` records no candidate; `enforce` replays the phased control with the span's
/// groups; a hash that differs from the loaded plan, an unknown mode or group, and an unknown
/// policy or execution are rejected with the reason.
#[test]
fn the_reconcile_spans_mode_groups_and_hash() {
    let mut a = assembler(Limits::default());
    let mut spans = legacy_failing_at_ssh(10);
    let mut r = reconcile(10, 1, "hc-10");
    r.attributes.push(kv("shadow_reconciler.mode", "off"));
    spans.push(r);
    let batch = a.ingest(&request(spans), Instant::now());
    assert_eq!(batch.counts.rejected, 0, "{:?}", batch.reasons);
    let r = &batch.records[0];
    assert_eq!(r.mode.as_str(), "off");
    assert!(r.candidate.is_empty() && r.unblocked.is_empty());

    // Enforce with the plan's first group: its operations go on after the SSH key failure
    // when they are non-critical.
    let plan = common::shipped("hostedcluster");
    let group = plan.groups()[0].name().to_owned();
    let mut spans = legacy_failing_at_ssh(11);
    let mut r = reconcile(11, 1, "hc-11");
    r.attributes.extend([
        kv("shadow_reconciler.mode", "enforce"),
        kv("shadow_reconciler.enforced_groups", &group),
    ]);
    spans.push(r);
    let batch = a.ingest(&request(spans), Instant::now());
    assert_eq!(batch.counts.rejected, 0, "{:?}", batch.reasons);
    assert_eq!(batch.records[0].mode.as_str(), "enforce");

    for (attribute, value, reason) in [
        (
            "shadow_reconciler.plan.hash",
            "00ff",
            "different versions of the plan",
        ),
        ("shadow_reconciler.mode", "sideways", "unknown mode"),
        (
            "shadow_reconciler.candidate_groups",
            "no-such-group",
            "no-such-group",
        ),
    ] {
        let mut spans = legacy_failing_at_ssh(12);
        let mut r = reconcile(12, 1, "hc-12");
        r.attributes.push(kv(attribute, value));
        spans.push(r);
        let mut a = assembler(Limits::default());
        let batch = a.ingest(&request(spans.clone()), Instant::now());
        assert!(batch.records.is_empty(), "{attribute}={value}");
        assert_eq!(batch.counts.rejected, spans.len() as u64, "{attribute}");
        assert!(
            batch.reasons.iter().any(|r| r.contains(reason)),
            "{attribute}: {:?}",
            batch.reasons
        );
    }
    let mut a = assembler(Limits::default());
    let mut s = operation(13, 2, 1, "SSHKeySync", 2);
    s.attributes
        .push(kv("shadow_reconciler.policy", "bystander"));
    let t = candidate(operation(13, 3, 1, "SSHKeySync", 3), "imagined");
    let batch = a.ingest(
        &request(vec![s, t, reconcile(13, 1, "hc-13")]),
        Instant::now(),
    );
    assert_eq!(batch.counts.rejected, 2, "{:?}", batch.reasons);
    assert!(batch.reasons[0].contains("expected control or candidate"));
    assert!(batch.reasons[1].contains("expected dry-run, reused or not-simulated"));
}

#[test]
fn spans_arriving_before_or_after_their_reconcile_span() {
    let mut a = assembler(Limits::default());
    let now = Instant::now();
    // Operations first, in one request; their reconcile span in the next.
    let spans = legacy_failing_at_ssh(1);
    let batch = a.ingest(&request(spans.clone()), now);
    assert!(batch.records.is_empty());
    assert_eq!(a.buffered(), spans.len());
    let batch = a.ingest(&request(vec![reconcile(1, 1, "hc-1")]), now);
    assert_eq!(batch.records.len(), 1);
    assert_eq!(a.buffered(), 0);
    // A child after its reconcile was reconstructed is late, not buffered.
    let late = a.ingest(&request(vec![operation(1, 40, 1, "CoreHCPChain", 50)]), now);
    assert_eq!((late.counts.late, a.buffered()), (1, 0));
    // The same reconcile span again (an exporter retrying a request it thinks failed): late,
    // not a second record.
    let again = a.ingest(&request(vec![reconcile(1, 1, "hc-1")]), now);
    assert_eq!((again.counts.late, again.records.len()), (1, 0));
    // Spans outside the convention (an HTTP client span) are ignored, not buffered.
    let other = a.ingest(
        &request(vec![span(1, 41, Some(2), "GET /api/v1/secrets", 3)]),
        now,
    );
    assert_eq!((other.counts.ignored, a.buffered()), (1, 0));
}

#[test]
fn the_buffer_is_bounded_and_orphans_time_out() {
    let mut a = assembler(Limits {
        max_buffered_spans: 10,
        timeout: Duration::from_secs(5),
    });
    let now = Instant::now();
    let mut total_evicted = 0;
    for parent in 1..=5u8 {
        let spans = (0..4u8)
            .map(|i| operation(parent, 100 + i, parent, "PullSecretSync", u64::from(i)))
            .collect();
        let batch = a.ingest(&request(spans), now);
        total_evicted += batch.counts.evicted;
        assert!(a.buffered() <= 10, "{}", a.buffered());
    }
    assert_eq!(total_evicted, 20 - a.buffered() as u64);
    let later = a.ingest(&request(Vec::new()), now + Duration::from_secs(6));
    assert_eq!(a.buffered(), 0, "orphans time out");
    assert!(later.counts.evicted > 0);
}

#[test]
fn unusable_spans_are_rejected_and_explained() {
    let mut a = assembler(Limits::default());
    let mut bad_ids = span(3, 1, None, "reconcile", 0);
    bad_ids.trace_id = vec![0; 16];
    let mut short = span(3, 2, None, "x", 0);
    short.span_id = vec![1, 2, 3];
    let mut backwards = span(3, 3, Some(9), "PullSecretSync", 10);
    backwards.end_time_unix_nano = 1;
    let mut other_plan = reconcile(3, 4, "hc");
    other_plan
        .attributes
        .push(kv("shadow_reconciler.plan", "not-loaded"));
    let unknown = operation(3, 5, 6, "NotAnOperation", 1);
    let spans = vec![
        bad_ids,
        short,
        backwards,
        other_plan,
        unknown,
        reconcile(3, 6, "hc-3"),
    ];
    let batch = a.ingest(&request(spans), Instant::now());
    assert_eq!(batch.counts.rejected, 5, "{:?}", batch.reasons);
    assert_eq!(batch.counts.unknown_operations, 1);
    assert_eq!(batch.records.len(), 1, "the valid reconcile still counts");
    let reasons = batch.reasons.join("; ");
    for text in [
        "trace_id is not 16 bytes",
        "span_id is not 8 bytes",
        "end_time_unix_nano is before",
        "plan \"not-loaded\", which is not loaded (loaded: hostedcluster)",
    ] {
        assert!(reasons.contains(text), "{reasons}");
    }
}

async fn running(max_request_bytes: usize) -> (prometheus::Registry, MemorySink, String, String) {
    let sink = MemorySink::new();
    let registry = prometheus::Registry::new();
    let ingest = Arc::new(Ingest::new(
        assembler(Limits::default()),
        vec![Arc::new(sink.clone()) as Arc<dyn Sink>],
        Some(shadow_reconciler::ingest::IngestMetrics::register(&registry).unwrap()),
        max_request_bytes,
    ));
    let never = std::future::pending::<()>();
    let (http, _) = receiver::serve_http("127.0.0.1:0".parse().unwrap(), ingest.clone(), never)
        .await
        .unwrap();
    let never = std::future::pending::<()>();
    let (grpc, _) = receiver::serve_grpc("127.0.0.1:0".parse().unwrap(), ingest.clone(), never)
        .await
        .unwrap();
    (registry, sink, http.to_string(), format!("http://{grpc}"))
}

/// `ingest_requests_total` of one transport and result.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // counters are whole numbers
fn requests(registry: &prometheus::Registry, transport: &str, result: &str) -> u64 {
    registry
        .gather()
        .iter()
        .filter(|f| f.name().ends_with("_ingest_requests_total"))
        .flat_map(|f| f.get_metric().iter())
        .filter(|m| {
            let labels: Vec<(&str, &str)> = m
                .get_label()
                .iter()
                .map(|l| (l.name(), l.value()))
                .collect();
            labels.contains(&("transport", transport)) && labels.contains(&("result", result))
        })
        .map(|m| m.get_counter().get_value())
        .sum::<f64>()
        .round() as u64
}

/// POST over HTTP/1.0; the status code and the body.
async fn post(addr: &str, content_type: &str, extra: &str, body: &[u8]) -> (u16, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/traces HTTP/1.0\r\nHost: {addr}\r\nContent-Type: {content_type}\r\n{extra}Content-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let status = std::str::from_utf8(&response[9..12])
        .unwrap()
        .parse()
        .unwrap();
    (status, response[split + 4..].to_vec())
}

#[derive(Clone, PartialEq, Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_answers_by_the_otlp_rules() {
    let (_registry, sink, http, _) = running(64 * 1024).await;
    let mut spans = legacy_failing_at_ssh(9);
    spans.push(reconcile(9, 1, "hc-9"));
    spans.push(operation(9, 60, 1, "NotAnOperation", 2));
    let body = request(spans).encode_to_vec();
    let (code, answer) = post(&http, "application/x-protobuf", "", &body).await;
    assert_eq!(code, 200);
    let answer = ExportTraceServiceResponse::decode(answer.as_slice()).unwrap();
    let partial = answer.partial_success.expect("a partial success");
    assert_eq!(partial.rejected_spans, 1);
    assert!(
        partial
            .error_message
            .contains("\"NotAnOperation\" is not in plan"),
        "{}",
        partial.error_message
    );
    assert_eq!(sink.len(), 1);

    // gzip, as the Collector's otlphttp exporter sends it.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(
        &mut gz,
        &request(vec![reconcile(10, 1, "hc-10")]).encode_to_vec(),
    )
    .unwrap();
    let (code, _) = post(
        &http,
        "application/x-protobuf",
        "Content-Encoding: gzip\r\n",
        &gz.finish().unwrap(),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(sink.len(), 2);

    let (code, answer) = post(
        &http,
        "application/x-protobuf",
        "",
        b"\xff\xff\xff not protobuf",
    )
    .await;
    assert_eq!(code, 400);
    let status = RpcStatus::decode(answer.as_slice()).unwrap();
    assert_eq!(status.code, 3, "INVALID_ARGUMENT");
    assert!(
        status.message.contains("not an ExportTraceServiceRequest"),
        "{}",
        status.message
    );

    let (code, answer) = post(&http, "application/x-protobuf", "", &vec![0u8; 100 * 1024]).await;
    assert_eq!(code, 400, "oversized");
    assert!(
        RpcStatus::decode(answer.as_slice())
            .unwrap()
            .message
            .contains("over the limit")
    );

    let (code, _) = post(&http, "application/json", "", b"{}").await;
    assert_eq!(code, 415);
    let (code, _) = post(
        &http,
        "application/x-protobuf",
        "Content-Encoding: br\r\n",
        b"x",
    )
    .await;
    assert_eq!(code, 415);
    assert_eq!(sink.len(), 2, "nothing recorded from refused requests");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_answers_by_the_otlp_rules() {
    let (registry, sink, _, grpc) = running(64 * 1024).await;
    let mut client = TraceServiceClient::connect(grpc.clone()).await.unwrap();
    let mut spans = legacy_failing_at_ssh(11);
    spans.push(reconcile(11, 1, "hc-11"));
    let mut bad = span(11, 70, Some(1), "PullSecretSync", 1);
    bad.trace_id = vec![1, 2];
    spans.push(bad);
    let answer = client.export(request(spans)).await.unwrap().into_inner();
    assert_eq!(answer.partial_success.unwrap().rejected_spans, 1);
    assert_eq!(sink.len(), 1);
    let records = sink.records();
    assert_eq!(
        records[0].control_first_failure.as_deref(),
        Some("SSHKeySync")
    );

    // Over the size limit: refused by the server before the service, the process serves on.
    let mut huge = reconcile(12, 1, "hc-12");
    huge.attributes.push(kv("padding", &"x".repeat(100 * 1024)));
    let error = client.export(request(vec![huge])).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::InvalidArgument, "{error:?}");
    assert!(error.message().contains("too large"), "{error:?}");
    // Not protobuf at all: a raw gRPC frame of junk.
    let junk = raw_grpc(&grpc, b"\xff\xff\xff junk".to_vec()).await;
    assert_eq!(junk.code(), tonic::Code::InvalidArgument, "{junk:?}");
    // A gzip message inflating past the limit: INVALID_ARGUMENT too (never retried).
    let mut client_gzip = TraceServiceClient::connect(grpc.clone())
        .await
        .unwrap()
        .send_compressed(tonic::codec::CompressionEncoding::Gzip);
    let mut bomb = reconcile(14, 1, "hc-14");
    bomb.attributes
        .push(kv("padding", &"x".repeat(1024 * 1024)));
    let error = client_gzip.export(request(vec![bomb])).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::InvalidArgument, "{error:?}");
    // The three refusals are counted invalid, the good requests ok.
    assert_eq!(requests(&registry, "grpc", "invalid"), 3);
    assert_eq!(requests(&registry, "grpc", "ok"), 1);
    let answer = client
        .export(request(vec![reconcile(13, 1, "hc-13")]))
        .await
        .unwrap();
    assert!(answer.into_inner().partial_success.is_none());
    assert_eq!(sink.len(), 2);
}

/// A codec passing bytes through, to send what no OTLP client would.
#[derive(Clone, Copy, Default)]
struct Raw;

impl tonic::codec::Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Self;
    type Decoder = Self;
    fn encoder(&mut self) -> Self {
        Self
    }
    fn decoder(&mut self) -> Self {
        Self
    }
}

impl tonic::codec::Encoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Vec<u8>,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        bytes::BufMut::put_slice(dst, &item);
        Ok(())
    }
}

impl tonic::codec::Decoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Vec<u8>>, tonic::Status> {
        let bytes = bytes::Buf::chunk(src).to_vec();
        bytes::Buf::advance(src, bytes.len());
        Ok(Some(bytes))
    }
}

/// Sends `body` as the Export method's message; the error the server answers.
async fn raw_grpc(url: &str, body: Vec<u8>) -> tonic::Status {
    let channel = tonic::transport::Channel::from_shared(url.to_owned())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static(
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    );
    grpc.unary(tonic::Request::new(body), path, Raw)
        .await
        .map(|_: tonic::Response<Vec<u8>>| ())
        .unwrap_err()
}

/// A reconcile span in error whose operation spans show no failure (a legacy loop that failed
/// outside any step it marked): its error is the control's, so the record says the reconcile
/// failed as the controller did. Write difference events on a candidate span become the
/// record's write differences, named after their operation.
#[test]
fn the_reconcile_spans_error_and_the_write_difference_events_reach_the_record() {
    use opentelemetry_proto::tonic::trace::v1::span::Event;
    let mut a = assembler(Limits::default());
    let mut r = reconcile(21, 1, "hc-21");
    r.status = Some(Status {
        code: status::StatusCode::Error as i32,
        message: "the legacy loop broke".into(),
    });
    let batch = a.ingest(&request(vec![r]), Instant::now());
    assert_eq!(batch.counts.rejected, 0, "{:?}", batch.reasons);
    assert_eq!(
        batch.records[0].control_error.as_deref(),
        Some("the legacy loop broke")
    );

    let mut ssh = candidate(operation(22, 2, 1, "SSHKeySync", 2), "dry-run");
    let event = |attributes: Vec<KeyValue>| Event {
        name: "shadow_reconciler.write_difference".into(),
        attributes,
        ..Event::default()
    };
    ssh.events.push(event(vec![
        kv("shadow_reconciler.write.group", ""),
        kv("shadow_reconciler.write.kind", "Secret"),
        kv("shadow_reconciler.write.namespace", "clusters-hc-22"),
        kv("shadow_reconciler.write.name", "ssh-key"),
        kv("shadow_reconciler.write.candidate", "delete"),
        KeyValue {
            key: "shadow_reconciler.write.intended".into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::BoolValue(true)),
            }),
            ..KeyValue::default()
        },
    ]));
    // Left out: an unknown verb, a missing name.
    ssh.events.push(event(vec![
        kv("shadow_reconciler.write.kind", "Secret"),
        kv("shadow_reconciler.write.name", "x"),
        kv("shadow_reconciler.write.control", "shred"),
    ]));
    ssh.events
        .push(event(vec![kv("shadow_reconciler.write.kind", "Secret")]));
    let batch = a.ingest(
        &request(vec![ssh, reconcile(22, 1, "hc-22")]),
        Instant::now(),
    );
    let differences = &batch.records[0].write_differences;
    assert_eq!(differences.len(), 1, "{differences:#?}");
    let d = &differences[0];
    assert_eq!(
        (
            d.operation.as_str(),
            d.kind.as_str(),
            d.namespace.as_deref(),
            d.name.as_str(),
            d.control,
            d.candidate,
            d.intended
        ),
        (
            "SSHKeySync",
            "Secret",
            Some("clusters-hc-22"),
            "ssh-key",
            None,
            Some(shadow_reconciler::vocab::WriteVerb::Delete),
            true
        )
    );
}
