//! The reference reconcilers, each with its CRDs and its plan from `deploy/plans/`.

pub mod addon;
pub mod hostedcluster;
pub mod k8s;

/// The API group of the reference reconcilers' custom resources.
pub const GROUP: &str = "example.shadow-reconciler.io";
/// The field manager of every server-side apply the reference reconcilers make.
pub const FIELD_MANAGER: &str = "shadow-reconciler";
