//! The flag's units: a ramp, an object's bucket, and one rollout group's own mode and ramp.

use std::fmt;

use sha2::{Digest, Sha256};

use super::GroupRef;
use crate::vocab::Mode;

/// A share of the objects, in basis points (0 to 10,000).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ramp(pub(super) u16);

impl Ramp {
    /// Every object.
    pub const ALL: Self = Self(10_000);

    /// `points` basis points (hundredths of a percent), at most 10,000.
    #[must_use]
    pub const fn from_basis_points(points: u16) -> Self {
        Self(if points > 10_000 { 10_000 } else { points })
    }

    /// `percent` (0 to 100, at most two decimals).
    #[must_use]
    pub fn from_percent(percent: f64) -> Option<Self> {
        if !(0.0..=100.0).contains(&percent) {
            return None;
        }
        let basis = (percent * 100.0).round();
        // In range: 0 to 10,000 after the check above.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        ((basis - percent * 100.0).abs() < 1e-6).then_some(Self(basis as u16))
    }

    /// The share as a percentage.
    #[must_use]
    pub fn percent(self) -> f64 {
        f64::from(self.0) / 100.0
    }

    /// Whether an object in `bucket` (see [`bucket`]) is inside the ramp.
    #[must_use]
    pub const fn includes(self, bucket: u16) -> bool {
        bucket < self.0
    }
}

impl fmt::Display for Ramp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.percent())
    }
}

/// The object's bucket, 0 to 9,999: the first 8 bytes of SHA-256 of its UID, modulo 10,000.
/// Stable across restarts and replicas, so an object stays on one side of a ramp; and an object
/// inside a ramp of p% stays inside every larger ramp.
#[must_use]
pub fn bucket(uid: &str) -> u16 {
    let digest = Sha256::digest(uid.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    // The remainder is below 10,000.
    #[allow(clippy::cast_possible_truncation)]
    let b = (u64::from_be_bytes(first) % 10_000) as u16;
    b
}

/// The object's bucket in the paired sample (`ShadowBudget::paired_sample`): the bucket of
/// `paired-sample/` followed by its UID, so the objects whose paired code is sampled are drawn
/// apart from the ramp's (a sample of p% is not the ramp's first p%), stable and nested alike.
#[must_use]
pub fn sample_bucket(uid: &str) -> u16 {
    bucket(&format!("paired-sample/{uid}"))
}

/// One rollout group's own mode and ramp (the ConfigMap's `groups` key): `enforce` at a share
/// of the objects, or `shadow` (not enforced, whatever `enforcedGroups` says).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRamp {
    /// The group.
    pub group: GroupRef,
    /// `Mode::Enforce` or `Mode::Shadow`.
    pub mode: Mode,
    /// The share of the objects whose control enforces the group (`Ramp::ALL` for `shadow`).
    pub ramp: Ramp,
}

impl fmt::Display for GroupRamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mode {
            Mode::Enforce => write!(f, "{}: enforce {}", self.group, self.ramp),
            _ => write!(f, "{}: {}", self.group, self.mode),
        }
    }
}
