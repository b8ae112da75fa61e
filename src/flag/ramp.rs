//! The flag's units: a rollout group as the flag names it, a ramp, an object's bucket, and one
//! group's own mode and ramp.

use std::fmt;

use sha2::{Digest, Sha256};

use crate::plan::ReconcilePlan;
use crate::vocab::Mode;

/// A rollout group named by the flag: `group` (every plan that has it) or `plan/group`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupRef {
    pub(super) plan: Option<String>,
    pub(super) group: String,
}

impl GroupRef {
    /// `group` or `plan/group`; `None` for an empty name or part.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        match s.split_once('/') {
            Some((plan, group))
                if !plan.is_empty() && !group.is_empty() && !group.contains('/') =>
            {
                Some(Self {
                    plan: Some(plan.to_owned()),
                    group: group.to_owned(),
                })
            }
            Some(_) => None,
            None if s.is_empty() => None,
            None => Some(Self {
                plan: None,
                group: s.to_owned(),
            }),
        }
    }

    /// A group of one plan.
    #[must_use]
    pub fn qualified(plan: &str, group: &str) -> Self {
        Self {
            plan: Some(plan.to_owned()),
            group: group.to_owned(),
        }
    }

    /// A group of every plan that has one of this name.
    #[must_use]
    pub fn any_plan(group: &str) -> Self {
        Self {
            plan: None,
            group: group.to_owned(),
        }
    }

    /// Whether the two references can name the same group: the same name, and the same plan or
    /// one of them of any plan.
    #[must_use]
    pub fn overlaps(&self, other: &Self) -> bool {
        self.group == other.group
            && (self.plan.is_none() || other.plan.is_none() || self.plan == other.plan)
    }

    /// The group's name in `plan`, if this reference names a group of it.
    #[must_use]
    pub fn in_plan<'a>(&'a self, plan: &ReconcilePlan) -> Option<&'a str> {
        let ours = self.plan.as_deref().is_none_or(|p| p == plan.name());
        (ours && plan.group(&self.group).is_ok()).then_some(self.group.as_str())
    }
}

impl fmt::Display for GroupRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.plan {
            Some(plan) => write!(f, "{plan}/{}", self.group),
            None => f.write_str(&self.group),
        }
    }
}

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
