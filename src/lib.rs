//! shadow-reconciler: run a phased, error-collecting Kubernetes reconcile in shadow next to the
//! legacy sequential one, record what the new model would have changed, and judge when it is safe
//! to enforce.
//!
//! The crate is organised around the vocabulary of `docs/design.md`:
//! - [`plan`]: the `ReconcilePlan`, the hypothesis under test;
//! - [`model`]: the pure schedulers (`sequential`, `phased`), their reports and diffs;
//! - [`outcome`]: the bounded vocabularies of a step (category, gate, error class, outcome).
//! - [`simulate`]: model-only simulation over randomly drawn results.

pub mod model;
pub mod outcome;
pub mod plan;
pub mod simulate;
