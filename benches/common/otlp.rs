//! Pre-encoded OTLP trace requests of HostedCluster reconciles, as a controller exports them:
//! HyperShift's legacy order, a third of the reconciles failing at `SSHKeySync`, every id
//! unique. `lean` spans carry what `ingest` needs; `go` spans every attribute the Go package
//! puts on its spans (sdk/go/shadow/attributes.go), so that a receiver decodes what it would
//! in production. And what the benches that start a receiver share: the child process, a POST,
//! a metric, the peak memory.
#![allow(dead_code)] // each bench uses part of it

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Child;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status, status};
use prost::Message;
use shadow_reconciler::plan::ReconcilePlan;

/// What the spans carry.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Attributes {
    /// What `ingest` needs: the operation, the object, the failure.
    Lean,
    /// The Go package's spans: plan, hash, mode, flag evaluation, policy, execution, outcome.
    Go,
}

/// The requests' shape.
pub struct Load<'a> {
    pub plan: &'a ReconcilePlan,
    pub reconciles_per_request: u64,
    pub attributes: Attributes,
}

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..KeyValue::default()
    }
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

impl Load<'_> {
    /// One request: `reconciles_per_request` reconciles with ids unique to `seq`; without
    /// `with_root`, their operation spans only (orphans). The encoded body and its span count.
    #[must_use]
    pub fn request(&self, seq: u64, with_root: bool) -> (Vec<u8>, u64) {
        let go = self.attributes == Attributes::Go;
        let order: Vec<&str> = self
            .plan
            .legacy_order()
            .iter()
            .map(|op| self.plan.name_of(*op))
            .collect();
        let hash = self.plan.hash().to_string();
        let mut spans = Vec::new();
        let base = 1_700_000_000_000_000_000u64;
        for r in 0..self.reconciles_per_request {
            let n = seq * self.reconciles_per_request + r + 1;
            let mut trace_id = [0u8; 16];
            trace_id[..8].copy_from_slice(&n.to_be_bytes());
            trace_id[15] = 1;
            let root_id = (n << 8 | 1).to_be_bytes();
            let failing = n.is_multiple_of(3);
            for (i, op) in order.iter().enumerate() {
                let mut attributes = vec![kv("shadow_reconciler.operation", op)];
                if go {
                    attributes.extend([
                        kv("shadow_reconciler.policy", "control"),
                        kv("shadow_reconciler.execution", "real"),
                    ]);
                }
                let mut span = Span {
                    trace_id: trace_id.to_vec(),
                    span_id: (n << 8 | (i as u64 + 2)).to_be_bytes().to_vec(),
                    parent_span_id: root_id.to_vec(),
                    name: (*op).to_owned(),
                    kind: i32::from(go),
                    start_time_unix_nano: base + i as u64 * 1000,
                    end_time_unix_nano: base + i as u64 * 1000 + 800,
                    attributes,
                    ..Span::default()
                };
                let stop = failing && *op == "SSHKeySync";
                if stop {
                    if go {
                        span.attributes.extend([
                            kv("shadow_reconciler.outcome", "failed"),
                            int("k8s.status.code", 404),
                            kv("k8s.status.reason", "NotFound"),
                        ]);
                    }
                    span.attributes.push(kv("error.type", "NotFound"));
                    span.status = Some(Status {
                        code: status::StatusCode::Error as i32,
                        message: "secrets \"ssh-key\" not found".into(),
                    });
                } else if go {
                    span.attributes
                        .push(kv("shadow_reconciler.outcome", "succeeded"));
                }
                spans.push(span);
                if stop {
                    break;
                }
            }
            if with_root {
                spans.push(self.root(n, trace_id, root_id, &hash, base));
            }
        }
        let count = spans.len() as u64;
        let resource = go.then(|| Resource {
            attributes: vec![
                kv("service.name", "hostedcluster-controller"),
                kv("telemetry.sdk.language", "go"),
                kv("telemetry.sdk.name", "opentelemetry"),
                kv("shadow_reconciler.plan", self.plan.name()),
            ],
            ..Resource::default()
        });
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource,
                scope_spans: vec![ScopeSpans {
                    scope: go.then(|| InstrumentationScope {
                        name: "github.com/shadow-reconciler/shadow-reconciler/sdk/go/shadow".into(),
                        ..InstrumentationScope::default()
                    }),
                    spans,
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        };
        (request.encode_to_vec(), count)
    }

    /// The reconcile span of reconcile `n`.
    fn root(&self, n: u64, trace_id: [u8; 16], root_id: [u8; 8], hash: &str, base: u64) -> Span {
        let mut attributes = vec![
            kv("k8s.object.kind", "HostedCluster"),
            kv("k8s.namespace.name", "clusters"),
            kv("k8s.object.name", &format!("hc-{n}")),
            kv("k8s.object.uid", &format!("uid-{n}")),
        ];
        if self.attributes == Attributes::Go {
            attributes.extend([
                kv("shadow_reconciler.plan", self.plan.name()),
                kv("shadow_reconciler.plan.hash", hash),
                kv("shadow_reconciler.mode", "shadow"),
                kv("feature_flag.key", "shadow-reconciler"),
                kv("feature_flag.provider.name", "shadow-reconciler"),
                kv("feature_flag.result.variant", "shadow"),
                kv("feature_flag.result.reason", "static"),
                int("shadow_reconciler.dry_run_requests", 0),
                int("shadow_reconciler.guard_refusals", 0),
            ]);
        }
        Span {
            trace_id: trace_id.to_vec(),
            span_id: root_id.to_vec(),
            name: "reconcile".into(),
            kind: i32::from(self.attributes == Attributes::Go),
            start_time_unix_nano: base,
            end_time_unix_nano: base + 1_000_000,
            attributes,
            ..Span::default()
        }
    }
}

/// A child process, killed when dropped.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The peak resident memory of `pid` (`VmHWM`), in KiB.
pub fn peak_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// The sum of the samples whose line starts with `prefix` on `addr`'s `/metrics`, or `None`
/// while it does not serve.
pub fn metric(addr: &str, prefix: &str) -> Option<f64> {
    let mut stream = TcpStream::connect(addr).ok()?;
    write!(stream, "GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum(),
    )
}

/// POSTs `body` on a keep-alive connection and reads the response, which must be a 200.
pub fn post(reader: &mut BufReader<TcpStream>, body: &[u8]) {
    let stream = reader.get_mut();
    write!(
        stream,
        "POST /v1/traces HTTP/1.1\r\nHost: bench\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.write_all(body).unwrap();
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
}
