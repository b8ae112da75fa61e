//! Telemetry: Prometheus metrics, the HTTP endpoints that serve them, and logs.
//!
//! Layer 5 of the crate (docs/design.md, "Layers"): builds on [`ingest`](crate::ingest),
//! [`engine`](crate::engine), [`flag`](crate::flag), [`plan`](crate::plan), [`util`](crate::util),
//! [`vocab`](crate::vocab); nothing here may use a module of its layer or above.

pub mod http;
pub mod logging;
pub mod metrics;
pub mod traces;
