//! Fuzzing the ingest with proptest: random bytes through the OTLP decoders (protobuf, gzip) and
//! the reconstruction, and random but well-formed requests (ids, parents, names, statuses,
//! attributes drawn from a small alphabet so spans collide) through the reconstruction. No input
//! may panic, the buffer stays within its bound, and every span is accounted for once.

use crate::common;

use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use proptest::prelude::*;
use prost::Message;
use shadow_reconciler::ingest::{Assembler, Convention, Limits, receiver};

fn assembler(cap: usize) -> Assembler {
    Assembler::new(
        &[
            common::shipped("hostedcluster"),
            common::shipped("addon-install-progression"),
        ],
        &[],
        Convention::default(),
        Limits {
            max_buffered_spans: cap,
            timeout: Duration::from_secs(30),
        },
    )
    .unwrap()
}

const NAMES: [&str; 6] = [
    "reconcile",
    "SSHKeySync",
    "CoreHCPChain",
    "PlacementStatus",
    "GET /api",
    "NotInAnyPlan",
];
const KEYS: [&str; 6] = [
    "shadow_reconciler.operation",
    "shadow_reconciler.plan",
    "error.type",
    "k8s.object.name",
    "http.response.status_code",
    "shadow_reconciler.reconcile",
];
const VALUES: [&str; 7] = [
    "SSHKeySync",
    "hostedcluster",
    "addon-install-progression",
    "NotFound",
    "409",
    "",
    "conflict",
];

fn value() -> impl Strategy<Value = Option<AnyValue>> {
    prop_oneof![
        Just(None),
        (0..VALUES.len()).prop_map(|i| Some(AnyValue {
            value: Some(any_value::Value::StringValue(VALUES[i].into()))
        })),
        any::<i64>().prop_map(|i| Some(AnyValue {
            value: Some(any_value::Value::IntValue(i))
        })),
        any::<bool>().prop_map(|b| Some(AnyValue {
            value: Some(any_value::Value::BoolValue(b))
        })),
    ]
}

fn span() -> impl Strategy<Value = Span> {
    (
        (0u8..3, 0u8..6, proptest::option::of(0u8..6)),
        (0..NAMES.len(), any::<u32>(), any::<u32>()),
        proptest::collection::vec((0..KEYS.len(), value()), 0..4),
        proptest::option::of((0i32..4, "[a-z ]{0,8}")),
        0usize..3,
    )
        .prop_map(
            |((trace, id, parent), (name, start, len), attributes, status, width)| {
                // Mostly well-formed ids, sometimes a wrong length (width 0: empty, 2: too long).
                let ids = |n: usize, b: u8| vec![b; if width == 1 { n } else { n * width }];
                Span {
                    trace_id: ids(16, trace),
                    span_id: ids(8, id),
                    parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
                    name: NAMES[name].into(),
                    start_time_unix_nano: u64::from(start),
                    end_time_unix_nano: u64::from(start).wrapping_add(u64::from(len)),
                    attributes: attributes
                        .into_iter()
                        .map(|(k, v)| KeyValue {
                            key: KEYS[k].into(),
                            value: v,
                            ..KeyValue::default()
                        })
                        .collect(),
                    status: status.map(|(code, message)| Status { code, message }),
                    ..Span::default()
                }
            },
        )
}

fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans,
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let mut a = assembler(64);
        for encoding in [None, Some("gzip")] {
            if let Ok(request) = receiver::decode(encoding, &bytes, 4096) {
                let _ = a.ingest(&request, Instant::now());
            }
        }
        // Random bytes inside a valid gzip member reach the protobuf decoder.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &bytes).unwrap();
        let gz = gz.finish().unwrap();
        let plain = receiver::decode(None, &bytes, 4096).map_err(|_| ());
        let inflated = receiver::decode(Some("gzip"), &gz, 4096).map_err(|_| ());
        prop_assert_eq!(plain, inflated, "gzip changes nothing but the encoding");
        // Over the limit once inflated: refused, whatever the content.
        prop_assert!(bytes.len() <= 16 || receiver::decode(Some("gzip"), &gz, 16).is_err());
    }

    #[test]
    fn random_requests_are_accounted_for_within_the_bound(
        batches in proptest::collection::vec(proptest::collection::vec(span(), 0..40), 1..6),
        cap in 1usize..32,
    ) {
        let mut a = assembler(cap);
        let now = Instant::now();
        let mut spans = 0u64;
        for (i, batch) in batches.into_iter().enumerate() {
            spans += batch.len() as u64;
            let request = request(batch);
            // Round-trip through the wire format, as a receiver sees it.
            let decoded = ExportTraceServiceRequest::decode(request.encode_to_vec().as_slice()).unwrap();
            let result = a.ingest(&decoded, now + Duration::from_secs(i as u64 * 10));
            prop_assert!(a.buffered() <= cap);
            for record in &result.records {
                prop_assert!(record.control.len() == record.candidate.len());
            }
        }
        let t = a.total();
        // Each span ends up accepted, ignored, rejected, late, evicted or still buffered.
        let accounted = t.accepted + t.ignored + t.rejected + t.late + t.evicted + a.buffered() as u64;
        prop_assert_eq!(accounted, spans, "{:?}", t);
    }
}
