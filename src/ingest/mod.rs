//! `ingest`: shadow analysis for controllers in other languages. A controller emits one span per
//! reconcile and one child span per operation over OTLP; the receivers decode them, the
//! [`reconstruct::Assembler`] rebuilds each reconcile's control run from the spans and evaluates
//! the plan's candidate on it, and the same `ReconcileRecord` goes to the same sinks (metrics,
//! Parquet) as in the embedded engine. See `docs/ingest.md`.
//!
//! Layer 4 of the crate (docs/design.md, "Layers"): builds on [`engine`](crate::engine),
//! [`flag`](crate::flag), [`model`](crate::model), [`plan`](crate::plan), [`vocab`](crate::vocab);
//! nothing here may use a module of its layer or above.

pub mod convention;
pub mod metrics;
mod rebuild;
pub mod receiver;
pub mod reconstruct;

/// How long a record received over OTLP waits for room in the Parquet writer's full queue
/// before it is dropped, by default: 5 s. The exporter's request waits with it, which slows the
/// exporter down instead of losing its data (the embedded engine never waits: a reconcile must
/// not).
pub const WAIT_WHEN_FULL: std::time::Duration = std::time::Duration::from_secs(5);

pub use convention::Convention;
pub use metrics::IngestMetrics;
pub use receiver::Ingest;
pub use reconstruct::{Assembler, Limits};
