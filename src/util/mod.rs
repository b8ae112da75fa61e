//! Small helpers with no knowledge of the domain: time formatting, base64, the seedable random number
//! generator, YAML error locations, serving an HTTP router until stopped.
//!
//! Layer 0: this module imports nothing of the crate.

pub mod base64;
pub mod rng;
pub mod serve;
pub mod time;
pub mod yaml;

pub use rng::Rng;
