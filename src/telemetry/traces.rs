//! OpenTelemetry traces of the records: one span per reconcile, a child span for the control run
//! and one for the candidate run, one span per executed or decided step, links from a reused
//! candidate step to the control step it reused.
//!
//! Spans are built from the record after the reconcile, with its recorded times, by a batch
//! exporter on its own thread: export never blocks a reconcile. The reconcile span's trace id is
//! the record's `trace_id`, so logs, Parquet and traces meet on it.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use opentelemetry::trace::{
    Link, Span, SpanContext, SpanKind, Status, TraceContextExt, TraceId, Tracer, TracerProvider,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SdkTracerProvider};

use crate::engine::{ReconcileRecord, Sink, StepRecord};
use crate::vocab::span::{self, event};

thread_local! {
    /// The trace id the next root span takes (set by the sink just before building it).
    static NEXT_TRACE_ID: Cell<Option<TraceId>> = const { Cell::new(None) };
}

/// Random ids, except a root span's trace id, which the record already chose.
#[derive(Debug, Default)]
struct RecordIds(RandomIdGenerator);

impl IdGenerator for RecordIds {
    fn new_trace_id(&self) -> TraceId {
        NEXT_TRACE_ID
            .with(Cell::take)
            .unwrap_or_else(|| self.0.new_trace_id())
    }
    fn new_span_id(&self) -> opentelemetry::trace::SpanId {
        self.0.new_span_id()
    }
}

/// Errors configuring trace export.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The exporter could not be built.
    #[error("cannot build the OTLP span exporter")]
    Exporter(#[source] opentelemetry_otlp::ExporterBuildError),
    /// `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL` names no supported protocol.
    #[error("unsupported OTLP protocol {0:?}; use grpc or http/protobuf")]
    Protocol(String),
}

/// Sends the records' spans to an OTLP endpoint.
pub struct TraceSink {
    provider: SdkTracerProvider,
    tracer: opentelemetry_sdk::trace::SdkTracer,
}

impl fmt::Debug for TraceSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceSink").finish_non_exhaustive()
    }
}

impl TraceSink {
    /// Configured by the standard variables: `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT` (none set:
    /// traces are off, `None`), `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL` (`grpc` or
    /// `http/protobuf`, the default), `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER(_ARG)`.
    pub fn from_env() -> Result<Option<Self>, TraceError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        if var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"))
            .is_none()
        {
            return Ok(None);
        }
        let protocol = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .unwrap_or_else(|| "http/protobuf".into());
        let exporter = match protocol.as_str() {
            "grpc" => opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .build(),
            "http/protobuf" => opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .build(),
            other => return Err(TraceError::Protocol(other.to_owned())),
        }
        .map_err(TraceError::Exporter)?;
        Ok(Some(Self::with_exporter(exporter)))
    }

    /// HTTP/protobuf export to `endpoint` (the full `/v1/traces` URL).
    pub fn http(endpoint: &str) -> Result<Self, TraceError> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(endpoint)
            .build()
            .map_err(TraceError::Exporter)?;
        Ok(Self::with_exporter(exporter))
    }

    fn with_exporter(exporter: opentelemetry_otlp::SpanExporter) -> Self {
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(
                std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "shadow-reconciler".into()),
            )
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_id_generator(RecordIds::default())
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("shadow-reconciler");
        Self { provider, tracer }
    }

    /// Exports what is buffered (blocks: call it outside async code).
    pub fn flush(&self) {
        let _ = self.provider.force_flush();
    }

    /// Flushes and stops the exporter (blocks).
    pub fn shutdown(&self) {
        let _ = self.provider.shutdown();
    }

    fn step_span(
        &self,
        r: &ReconcileRecord,
        (s, candidate): (&StepRecord, bool),
        parent: &Context,
        link: Option<SpanContext>,
    ) -> SpanContext {
        let start = r.started_at + s.offset;
        let mut attributes = vec![
            KeyValue::new(span::OPERATION, s.operation.clone()),
            KeyValue::new(span::PHASE, i64::from(s.phase)),
            KeyValue::new(span::CATEGORY, s.category.as_str()),
            KeyValue::new(span::EXECUTION, s.execution.as_str()),
            KeyValue::new(span::OUTCOME, s.outcome),
        ];
        if let Some(class) = s.error_class {
            attributes.push(KeyValue::new(span::semconv::ERROR_TYPE, class.as_str()));
        }
        if !s.blocked_by.is_empty() {
            attributes.push(KeyValue::new(span::BLOCKED_BY, s.blocked_by.join(",")));
        }
        let mut builder = self
            .tracer
            .span_builder(s.operation.clone())
            .with_kind(SpanKind::Internal)
            .with_start_time(start)
            .with_attributes(attributes);
        if let Some(context) = link {
            builder = builder.with_links(vec![Link::with_context(context)]);
        }
        let mut span = self.tracer.build_with_context(builder, parent);
        // The write differences of the operation, on the span of the run whose code made them:
        // the candidate's, or the control's for an operation of the legacy path only.
        for d in r.write_differences.iter().filter(|d| {
            d.operation == s.operation
                && candidate != (d.only == Some(crate::vocab::CodePath::Legacy))
        }) {
            span.add_event_with_timestamp(
                event::NAME,
                start + s.duration,
                difference_attributes(d),
            );
        }
        if let (Some(class), Some(message)) = (s.error_class, &s.message) {
            span.set_status(Status::error(format!("{class}: {message}")));
        }
        let context = span.span_context().clone();
        span.end_with_timestamp(start + s.duration);
        context
    }

    fn run_span(
        &self,
        r: &ReconcileRecord,
        name: &'static str,
        steps: &[StepRecord],
        parent: &Context,
        links: &HashMap<String, SpanContext>,
    ) -> HashMap<String, SpanContext> {
        let first = steps
            .iter()
            .filter(|s| s.duration > Duration::ZERO)
            .map(|s| s.offset)
            .min()
            .unwrap_or_default();
        let last = steps
            .iter()
            .map(|s| s.offset + s.duration)
            .max()
            .unwrap_or_default();
        let span = self.tracer.build_with_context(
            self.tracer
                .span_builder(name)
                .with_start_time(r.started_at + first),
            parent,
        );
        let cx = parent.with_span(span);
        let mut contexts = HashMap::new();
        for s in steps {
            let link = (s.execution == crate::vocab::Execution::Reused)
                .then(|| links.get(&s.operation).cloned())
                .flatten();
            let candidate = name == "candidate";
            contexts.insert(
                s.operation.clone(),
                self.step_span(r, (s, candidate), &cx, link),
            );
        }
        cx.span().end_with_timestamp(r.started_at + last.max(first));
        contexts
    }
}

/// A write difference as the attributes of its span event.
fn difference_attributes(d: &crate::engine::WriteDifference) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new(event::GROUP, d.group.clone()),
        KeyValue::new(event::KIND, d.kind.clone()),
        KeyValue::new(event::NAME_ATTRIBUTE, d.name.clone()),
        KeyValue::new(
            event::FIELDS,
            opentelemetry::Value::Array(opentelemetry::Array::String(
                d.fields.iter().map(|f| f.clone().into()).collect(),
            )),
        ),
        KeyValue::new(event::FIELDS_TOTAL, i64::from(d.fields_total)),
        KeyValue::new(event::INTENDED, d.intended),
    ];
    let optional = [
        (event::NAMESPACE, d.namespace.clone()),
        (event::SUBRESOURCE, d.subresource.clone()),
        (event::CONTROL, d.control.map(|v| v.as_str().to_owned())),
        (event::CANDIDATE, d.candidate.map(|v| v.as_str().to_owned())),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            attributes.push(KeyValue::new(key, value));
        }
    }
    attributes
}

/// The OpenTelemetry feature-flag attributes of the flag's evaluation for this reconcile.
fn flag_attributes(r: &ReconcileRecord, flag: &crate::flag::FlagDecision) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new(span::feature_flag::KEY, crate::flag::FLAG_KEY),
        KeyValue::new(span::feature_flag::PROVIDER_NAME, "shadow-reconciler"),
        KeyValue::new(span::feature_flag::RESULT_VARIANT, r.mode.as_str()),
        KeyValue::new(span::feature_flag::RESULT_REASON, flag.reason.as_str()),
    ];
    if let Some(uid) = &r.object.uid {
        attributes.push(KeyValue::new(span::feature_flag::CONTEXT_ID, uid.clone()));
    }
    if let Some(version) = &flag.version {
        attributes.push(KeyValue::new(span::feature_flag::VERSION, version.clone()));
    }
    if r.mode == crate::vocab::Mode::Enforce {
        attributes.push(KeyValue::new(
            span::ENFORCED_GROUPS,
            opentelemetry::Value::Array(opentelemetry::Array::String(
                flag.enforced_groups
                    .iter()
                    .map(|g| g.clone().into())
                    .collect(),
            )),
        ));
    }
    attributes
}

impl Sink for TraceSink {
    fn record(&self, r: &ReconcileRecord) {
        if let Some(id) = r
            .trace_id
            .as_deref()
            .and_then(|h| TraceId::from_hex(h).ok())
        {
            NEXT_TRACE_ID.with(|next| next.set(Some(id)));
        }
        let mut attributes = vec![
            KeyValue::new(span::semconv::K8S_OBJECT_KIND, r.object.kind.clone()),
            KeyValue::new(span::semconv::K8S_OBJECT_NAME, r.object.name.clone()),
            KeyValue::new(span::PLAN, r.plan.clone()),
            KeyValue::new(span::PLAN_HASH, r.plan_hash.to_hex()),
            KeyValue::new(span::MODE, r.mode.as_str()),
            KeyValue::new(
                span::UNBLOCKED,
                i64::try_from(r.unblocked.len()).unwrap_or(i64::MAX),
            ),
        ];
        if let Some(ns) = &r.object.namespace {
            attributes.push(KeyValue::new(span::semconv::K8S_NAMESPACE_NAME, ns.clone()));
        }
        if let Some(flag) = &r.flag {
            attributes.extend(flag_attributes(r, flag));
        }
        if r.cancelled {
            attributes.push(KeyValue::new(span::CANCELLED, true));
        }
        if let Some(reason) = r.comparison_skipped {
            attributes.push(KeyValue::new(span::COMPARISON_SKIPPED, reason.as_str()));
        }
        let mut root = self.tracer.build_with_context(
            self.tracer
                .span_builder("reconcile")
                .with_start_time(r.started_at)
                .with_attributes(attributes),
            &Context::new(),
        );
        NEXT_TRACE_ID.with(Cell::take);
        if let Some(error) = &r.control_error {
            root.set_status(Status::error(error.clone()));
        }
        let cx = Context::new().with_span(root);
        if r.cancelled {
            // Cut short: its steps are no evidence, and none are recorded.
            cx.span().end_with_timestamp(r.started_at + r.duration);
            return;
        }
        let control = self.run_span(r, "control", &r.control, &cx, &HashMap::new());
        if !r.candidate.is_empty() {
            self.run_span(r, "candidate", &r.candidate, &cx, &control);
        }
        cx.span().end_with_timestamp(r.started_at + r.duration);
    }
}
