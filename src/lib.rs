//! shadow-reconciler: run a phased, error-collecting Kubernetes reconcile in shadow next to the
//! legacy sequential one, record what the new model would have changed, and judge when it is safe
//! to enforce.
//!
//! The crate is organised around the vocabulary of `docs/design.md`:
//! - [`plan`]: the `ReconcilePlan`, the hypothesis under test;
//! - [`model`]: the pure schedulers (`sequential`, `phased`), their reports and diffs;
//! - [`outcome`]: the bounded vocabularies of a step (category, gate, error class, outcome).
//! - [`simulate`]: model-only simulation over randomly drawn results.
//! - [`sim`]: the embedded Kubernetes API simulator.
//!
//! The model decides, the caller executes. Here the legacy loop (the control) and the phased
//! reconcile (the candidate) meet a missing SSH key secret:
//!
//! ```
//! use std::sync::Arc;
//! use shadow_reconciler::model::{Diff, Policy, StepResult, drive};
//! use shadow_reconciler::vocab::ErrorClass;
//! use shadow_reconciler::plan::embedded;
//!
//! let plan = Arc::new(embedded::load("hostedcluster").unwrap());
//! let execute = |op: &shadow_reconciler::plan::Operation| match op.name() {
//!     "SSHKeySync" => StepResult::failed(ErrorClass::NotFound, "secret ssh-key not found"),
//!     _ => StepResult::succeeded(),
//! };
//! let control = drive(&Policy::sequential(plan.clone()), execute);
//! let candidate = drive(&Policy::phased_all_groups(plan.clone()), execute);
//!
//! // The legacy loop stops at the SSH key; the phased reconcile collects the error and goes on.
//! assert_eq!(control.aggregate().as_deref(), Some("secret ssh-key not found"));
//! assert!(!candidate.has_critical_failure());
//! let diff = Diff::between(&control, &candidate).unwrap();
//! let core = plan.lookup("CoreHCPChain").unwrap();
//! assert!(diff.unblocked().contains(&core));
//! ```

pub mod analyze;
pub mod dataset;
pub mod engine;
pub mod flag;
pub mod ingest;
pub mod manifests;
pub mod model;
pub mod plan;
pub mod reconcilers;
pub mod scenario;
pub mod sim;
pub mod telemetry;
pub mod util;
pub mod vocab;
