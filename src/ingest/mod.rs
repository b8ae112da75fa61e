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

pub use convention::Convention;
pub use metrics::IngestMetrics;
pub use receiver::Ingest;
pub use reconstruct::{Assembler, Limits};
