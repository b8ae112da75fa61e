//! Telemetry: Prometheus metrics, the HTTP endpoints that serve them, and logs.

pub mod http;
pub mod logging;
pub mod metrics;
pub mod traces;
