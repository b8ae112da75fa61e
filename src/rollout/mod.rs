//! The rollout driver: moves each rollout group of a `ShadowRollout` through its ramp steps when
//! the gates pass, and back to shadow on its own when one fails. The gates read the dataset the
//! process writes ([`gates`]); the decision itself is pure ([`crate::flag::rollout::evolve`]);
//! the driver writes the flag ConfigMap's `groups` key and the rollouts' status. See
//! `docs/rollout.md`.
//!
//! Layer 6 of the crate (docs/design.md, "Layers"): builds on [`analyze`](crate::analyze),
//! [`dataset`](crate::dataset), [`flag`](crate::flag), [`plan`](crate::plan),
//! [`telemetry`](crate::telemetry), [`util`](crate::util), [`vocab`](crate::vocab); nothing here
//! may use a module of its layer or above.

pub mod driver;
pub mod gates;
pub mod groups;
pub mod prom;

pub use driver::{Driver, Round, Settings};
