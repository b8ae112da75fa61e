//! The shared vocabulary at the bottom of the crate: operation ids and sets, and the bounded
//! enums of a step (category, gate, shadow policy, error class, outcome, execution) and of the
//! engine (mode).
//!
//! Layer 0: this module imports nothing of the crate; every other layer builds on it. A plan
//! names its operations with these ids, the models decide with them, the flag and the engine
//! speak of modes with them, and the Parquet columns, metric labels and docs print their labels.

mod mode;
mod op;
mod outcome;

pub use mode::Mode;
pub use op::{OpId, OpSet};
pub use outcome::{
    Category, ErrorClass, Execution, Gate, Outcome, ShadowPolicy, UnknownErrorClass,
};

/// The prefix of every metric this crate publishes (`shadow_reconciler_…`).
pub const METRIC_PREFIX: &str = "shadow_reconciler";
