//! shadow-reconciler: run a phased, error-collecting Kubernetes reconcile in shadow next to the
//! legacy sequential one, record what the new model would have changed, and judge when it is safe
//! to enforce.
//!
//! The crate is built in layers (`docs/design.md`, "Layers"; `tests/suite/layers.rs` holds them): a
//! module uses only the layers below its own.
//!
//! | layer | modules |
//! |---|---|
//! | 7 | [`scenario`]: what `simulate` runs (population, faults, both controllers, settling) |
//! | 6 | [`wiring`]: engines assembled with the process's flag and sinks (`run`, `simulate`, embedding controllers); [`rollout`]: the driver moving rollout groups through their ramps on the gates' figures |
//! | 5 | [`telemetry`]: metrics, traces, logs, endpoints; [`analyze`]: verdicts and readiness from the Parquet data; [`manifests`]: the generated parts of `deploy/` |
//! | 4 | [`reconcilers`]: the reference reconcilers; [`dataset`]: the Parquet dataset; [`ingest`]: records rebuilt from a Go controller's spans |
//! | 3 | [`engine`]: the control for real, the candidate in shadow, the record and its sinks, the controller |
//! | 2 | [`model`]: the pure schedulers, reports, diffs and their Monte Carlo; [`flag`]: the live flag |
//! | 1 | [`plan`]: the `ReconcilePlan`, the hypothesis under test; [`sim`]: the embedded Kubernetes API simulator |
//! | 0 | [`vocab`]: operation ids and the bounded vocabularies (category, gate, outcome, mode...); [`util`]: time, base64, random numbers, YAML locations, serving |
//!
//! The command line (`src/main.rs`, `src/cli/`) sits on top, in the binary.
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
pub mod rollout;
pub mod scenario;
pub mod sim;
pub mod telemetry;
pub mod util;
pub mod vocab;
pub mod wiring;
