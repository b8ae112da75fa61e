//! The shared conflict vectors (`tests/data/conflict-vectors.json`): the spans the Go package
//! emits for a 409 (checked by `sdk/go/shadow/conflict_vectors_test.go`) become, in the sidecar,
//! the conflict resolutions the file says: a candidate run that re-evaluates a control 409
//! counts as would-have-succeeded or would-have-failed whatever its own attempts met, and a
//! sampled re-execution counts nowhere. A span without `shadow_reconciler.reevaluated` (an SDK
//! before it) gives the same answers, inferred from the control's step.

use crate::common;

use std::time::Instant;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status, status};
use serde_json::Value;
use shadow_reconciler::ingest::{Assembler, Convention, Limits};

const FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/conflict-vectors.json"
);
const PLAN: &str = "addon-install-progression";

fn kv(key: &str, v: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(v) }),
        ..KeyValue::default()
    }
}

fn text(key: &str, v: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(v.into()))
}

fn span(id: u8, parent: Option<u8>, name: &str) -> Span {
    let start = 1_700_000_000_000_000_000 + u64::from(id) * 1000;
    Span {
        trace_id: vec![7; 16],
        span_id: vec![id; 8],
        parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
        name: name.into(),
        start_time_unix_nano: start,
        end_time_unix_nano: start + 500,
        ..Span::default()
    }
}

/// An operation span with the facts of the vector's `spans.control` or `spans.candidate`, as
/// the Go engine emits them.
fn operation(id: u8, name: &str, facts: &Value, candidate: bool, reevaluated: bool) -> Span {
    let mut s = span(id, Some(1), name);
    s.attributes.push(text("shadow_reconciler.operation", name));
    if candidate {
        s.attributes.extend([
            text("shadow_reconciler.policy", "candidate"),
            text(
                "shadow_reconciler.execution",
                facts["execution"].as_str().unwrap(),
            ),
        ]);
    } else {
        s.attributes.extend([
            text("shadow_reconciler.policy", "control"),
            text("shadow_reconciler.execution", "real"),
        ]);
    }
    let outcome = facts["outcome"].as_str().unwrap_or("succeeded");
    s.attributes
        .push(text("shadow_reconciler.outcome", outcome));
    if outcome == "failed" {
        s.attributes.push(text(
            "error.type",
            facts["error_type"]
                .as_str()
                .expect("a failure's error type"),
        ));
        s.status = Some(Status {
            code: status::StatusCode::Error as i32,
            message: "Operation cannot be fulfilled: the object has been modified".into(),
        });
    }
    let conflicts = facts["conflicts"].as_i64().unwrap_or(0);
    if conflicts > 0 {
        s.attributes.push(kv(
            "shadow_reconciler.conflicts",
            any_value::Value::IntValue(conflicts),
        ));
    }
    if facts["retried"].as_bool() == Some(true) {
        s.attributes.push(kv(
            "shadow_reconciler.retried",
            any_value::Value::BoolValue(true),
        ));
    }
    if reevaluated && let Some(r) = facts["reevaluated"].as_bool() {
        s.attributes.push(kv(
            "shadow_reconciler.reevaluated",
            any_value::Value::BoolValue(r),
        ));
    }
    s
}

/// The spans of one case's reconcile: the control's legacy loop (every other operation
/// succeeds; it stops at a failure), the candidate's span of the operation (none when reused),
/// and the reconcile span.
fn spans(case: &Value, with_attribute: bool) -> Vec<Span> {
    let plan = common::shipped(PLAN);
    let op = case["operation"].as_str().unwrap();
    let mut out = Vec::new();
    for (i, id) in plan.legacy_order().iter().enumerate() {
        let name = plan.name_of(*id);
        let n = u8::try_from(i).unwrap() + 2;
        if name == op {
            let facts = &case["spans"]["control"];
            out.push(operation(n, name, facts, false, with_attribute));
            if facts["outcome"] == "failed" {
                break;
            }
        } else {
            out.push(operation(n, name, &Value::Null, false, with_attribute));
        }
    }
    let candidate = &case["spans"]["candidate"];
    if candidate["execution"] != "reused" {
        out.push(operation(40, op, candidate, true, with_attribute));
    }
    let mut r = span(1, None, "reconcile");
    r.end_time_unix_nano += 1_000_000;
    r.attributes.extend([
        text("k8s.object.kind", "ClusterManagementAddOn"),
        text("k8s.object.name", "observability"),
        text("k8s.object.uid", "uid-observability"),
        text("shadow_reconciler.plan", PLAN),
        text("shadow_reconciler.plan.hash", &plan.hash().to_hex()),
        text("shadow_reconciler.mode", "shadow"),
    ]);
    out.push(r);
    out
}

fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![text("service.name", "addon-manager")],
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

#[test]
fn the_sidecar_counts_each_cases_spans_as_the_vectors_say() {
    let text = std::fs::read_to_string(FILE).unwrap();
    let vectors: Value = serde_json::from_str(&text).unwrap();
    let cases = vectors["cases"].as_array().unwrap();
    assert!(cases.len() >= 6, "{} cases", cases.len());
    for with_attribute in [true, false] {
        for case in cases {
            let name = case["name"].as_str().unwrap();
            let mut a = Assembler::new(
                &[common::shipped(PLAN)],
                &[],
                Convention::default(),
                Limits::default(),
            )
            .unwrap();
            let batch = a.ingest(&request(spans(case, with_attribute)), Instant::now());
            assert_eq!(batch.counts.rejected, 0, "{name}: {:?}", batch.reasons);
            assert_eq!(batch.records.len(), 1, "{name}");
            let record = &batch.records[0];
            let op = case["operation"].as_str().unwrap();
            let resolution = |step: Option<&shadow_reconciler::engine::StepRecord>| {
                step.and_then(|s| s.conflict).map(|c| c.as_str().to_owned())
            };
            let got = (
                resolution(record.control_step(op)),
                resolution(record.candidate_step(op)),
            );
            let want = (
                case["record"]["control"].as_str().map(str::to_owned),
                case["record"]["candidate"].as_str().map(str::to_owned),
            );
            assert_eq!(
                got,
                want,
                "{name} (attribute {}): {:?}",
                if with_attribute { "sent" } else { "absent" },
                record.candidate_step(op)
            );
        }
    }
}
