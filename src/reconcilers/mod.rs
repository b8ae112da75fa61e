//! The reference reconcilers, each with its CRDs and its plan from `deploy/plans/`.
//!
//! Layer 4 of the crate (docs/design.md, "Layers"): builds on [`engine`](crate::engine),
//! [`plan`](crate::plan), [`util`](crate::util), [`vocab`](crate::vocab); nothing here may use a
//! module of its layer or above.

pub mod addon;
pub mod hostedcluster;
pub mod k8s;

/// The API group of the reference reconcilers' custom resources.
pub const GROUP: &str = "example.shadow-reconciler.io";
/// The field manager of every server-side apply the reference reconcilers make.
pub const FIELD_MANAGER: &str = "shadow-reconciler";

/// The JSON schema of a list of free-form objects (conditions and other lists the model keeps as
/// JSON).
pub(crate) fn any_list(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}})
}

/// A shipped plan by name.
///
/// # Panics
/// If the plan does not ship or is invalid, which the test suite rules out for the names the
/// reconcilers use.
pub(crate) fn shipped_plan(name: &str) -> std::sync::Arc<crate::plan::ReconcilePlan> {
    crate::plan::embedded::shared(name).unwrap_or_else(|| panic!("plan {name} ships"))
}
