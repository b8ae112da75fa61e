//! Small helpers with no knowledge of the domain: time formatting, base64, the seedable random number
//! generator, YAML error locations, serving an HTTP router until stopped, leader election by a
//! Lease.
//!
//! Layer 0: this module imports nothing of the crate.

pub mod base64;
pub mod election;
pub mod rng;
pub mod serve;
pub mod time;
pub mod yaml;

pub use rng::Rng;

/// At most `max` bytes of `s`, cut at a character boundary and ending in `...` when cut (the
/// Events API limits a note to 1 kB).
#[must_use]
pub fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max.saturating_sub(3);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("...");
    }
    s
}
