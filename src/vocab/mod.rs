//! The shared vocabulary at the bottom of the crate: operation ids and sets, the bounded enums of
//! a step (category, gate, shadow policy, error class, outcome, execution), of the engine (mode)
//! of a reconciler's code (code path) and of its writes (verb, action).
//!
//! Layer 0: this module imports nothing of the crate; every other layer builds on it. A plan
//! names its operations with these ids, the models decide with them, the flag and the engine
//! speak of modes with them, and the Parquet columns, metric labels and docs print their labels.

mod mode;
mod op;
mod outcome;
mod path;
pub mod span;
mod write;

pub use mode::{ComparisonSkip, Mode};
pub use op::{OpId, OpSet};
pub use outcome::{
    Category, ErrorClass, Execution, Gate, Outcome, ShadowPolicy, UnknownErrorClass,
};
pub use path::CodePath;
pub use write::{WriteAction, WriteVerb};

/// The prefix of every metric this crate publishes (`shadow_reconciler_…`).
pub const METRIC_PREFIX: &str = "shadow_reconciler";
