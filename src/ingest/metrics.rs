//! The ingest's metric families: requests by transport and result, spans by what became of them,
//! and the buffer.

use prometheus::{IntCounterVec, IntGauge, Opts, Registry};

use super::reconstruct::Counts;
use crate::vocab::METRIC_PREFIX as PREFIX;

/// The ingest's families.
#[derive(Clone, Debug)]
pub struct IngestMetrics {
    requests: IntCounterVec,
    spans: IntCounterVec,
    buffered: IntGauge,
}

/// What became of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestResult {
    /// Decoded and processed (possibly with a partial success).
    Ok,
    /// Not decodable, or over the size limit: HTTP 400 / gRPC `InvalidArgument`.
    Invalid,
    /// A content type or encoding the receiver does not speak: HTTP 415.
    Unsupported,
}

impl RequestResult {
    const ALL: [Self; 3] = [Self::Ok, Self::Invalid, Self::Unsupported];

    /// The label value.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Invalid => "invalid",
            Self::Unsupported => "unsupported",
        }
    }
}

const SPAN_RESULTS: [&str; 6] = [
    "accepted",
    "ignored",
    "rejected",
    "unknown_operation",
    "late",
    "evicted",
];

impl IngestMetrics {
    /// Registers the families in `registry`.
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let this = Self {
            requests: IntCounterVec::new(
                Opts::new(
                    format!("{PREFIX}_ingest_requests_total"),
                    "OTLP export requests received, by transport (grpc, http) and result (ok, invalid, unsupported).",
                ),
                &["transport", "result"],
            )?,
            spans: IntCounterVec::new(
                Opts::new(
                    format!("{PREFIX}_ingest_spans_total"),
                    "Spans received, by what became of them: accepted, ignored (outside the convention), rejected (malformed, unknown plan), unknown_operation (also rejected), late (after their reconcile), evicted (buffer full or timed out).",
                ),
                &["result"],
            )?,
            buffered: IntGauge::with_opts(Opts::new(
                format!("{PREFIX}_ingest_buffered_spans"),
                "Operation spans waiting for their reconcile span.",
            ))?,
        };
        registry.register(Box::new(this.requests.clone()))?;
        registry.register(Box::new(this.spans.clone()))?;
        registry.register(Box::new(this.buffered.clone()))?;
        for transport in ["grpc", "http"] {
            for result in RequestResult::ALL {
                this.requests
                    .with_label_values(&[transport, result.as_str()]);
            }
        }
        for result in SPAN_RESULTS {
            this.spans.with_label_values(&[result]);
        }
        Ok(this)
    }

    /// Counts a request.
    pub fn request(&self, transport: &str, result: RequestResult) {
        self.requests
            .with_label_values(&[transport, result.as_str()])
            .inc();
    }

    /// Counts what a request's spans became, and the buffer after it.
    pub fn spans(&self, counts: &Counts, buffered: usize) {
        let values = [
            counts.accepted,
            counts.ignored,
            counts.rejected,
            counts.unknown_operations,
            counts.late,
            counts.evicted,
        ];
        for (result, n) in SPAN_RESULTS.iter().zip(values) {
            if n > 0 {
                self.spans.with_label_values(&[result]).inc_by(n);
            }
        }
        self.buffered
            .set(i64::try_from(buffered).unwrap_or(i64::MAX));
    }

    /// The families' collectors, for the metrics reference test.
    #[must_use]
    pub fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.requests.clone()),
            Box::new(self.spans.clone()),
            Box::new(self.buffered.clone()),
        ]
    }
}
