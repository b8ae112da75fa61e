//! The live flag: which mode each reconcile runs in, read from a ConfigMap at every reconcile.
//!
//! The flag holds the mode (`off`, `shadow`, `enforce`), the rollout groups the control enforces
//! and the candidate evaluates, a ramp percentage, and whether an object may choose its own mode
//! with the [`ANNOTATION`]. The command line gives the defaults; a ConfigMap, watched by
//! [`watch::run`], overrides them key by key. An invalid ConfigMap keeps the last valid flag.
//! See `docs/flag.md`.
//!
//! Layer 2 of the crate (docs/design.md, "Layers"): builds on [`plan`](crate::plan),
//! [`util`](crate::util), [`vocab`](crate::vocab); nothing here may use a module of its layer or
//! above.

pub mod metrics;
mod parse;
pub mod watch;

use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use k8s_openapi::api::core::v1::ConfigMap;
use sha2::{Digest, Sha256};

pub use metrics::FlagMetrics;
pub use parse::{Field, FieldError};

use crate::plan::ReconcilePlan;
use crate::vocab::Mode;

/// The annotation through which an object chooses its mode, when the flag allows it.
pub const ANNOTATION: &str = "shadow-reconciler.io/mode";

/// The flag's key in the `feature_flag.key` span attribute.
pub const FLAG_KEY: &str = "shadow-reconciler.mode";

/// A rollout group named by the flag: `group` (every plan that has it) or `plan/group`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupRef {
    plan: Option<String>,
    group: String,
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
pub struct Ramp(u16);

impl Ramp {
    /// Every object.
    pub const ALL: Self = Self(10_000);

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

/// The flag's content.
#[derive(Clone, Debug, PartialEq)]
pub struct FlagSpec {
    /// The mode of objects inside the ramp.
    pub mode: Mode,
    /// Rollout groups the control enforces in mode `enforce`.
    pub enforced_groups: Vec<GroupRef>,
    /// Rollout groups the candidate evaluates; `None`: every group. A plan none of them names
    /// evaluates every group too.
    pub candidate_groups: Option<Vec<GroupRef>>,
    /// The share of objects that get `mode`; the others get the mode below it (`enforce` ->
    /// `shadow` -> `off`).
    pub ramp: Ramp,
    /// Whether an object's [`ANNOTATION`] chooses its mode.
    pub allow_object_override: bool,
}

impl Default for FlagSpec {
    fn default() -> Self {
        Self {
            mode: Mode::Shadow,
            enforced_groups: Vec::new(),
            candidate_groups: None,
            ramp: Ramp::ALL,
            allow_object_override: false,
        }
    }
}

impl FlagSpec {
    /// Checks that every named group exists in one of `plans` (a typo is an error, not a no-op).
    pub fn validate(&self, plans: &[Arc<ReconcilePlan>]) -> Result<(), FieldError> {
        let check = |field: Field, groups: &[GroupRef]| {
            for g in groups {
                if !plans.iter().any(|p| g.in_plan(p).is_some()) {
                    return Err(FieldError::new(
                        field,
                        g.to_string(),
                        format!("no plan has this rollout group; known: {}", known(plans)),
                    ));
                }
            }
            Ok(())
        };
        check(Field::EnforcedGroups, &self.enforced_groups)?;
        check(
            Field::CandidateGroups,
            self.candidate_groups.as_deref().unwrap_or_default(),
        )
    }

    /// The flag as one plan sees it: the groups of that plan only.
    #[must_use]
    pub fn for_plan(&self, plan: &ReconcilePlan) -> PlanFlag {
        let names = |groups: &[GroupRef]| -> Vec<String> {
            groups
                .iter()
                .filter_map(|g| g.in_plan(plan))
                .map(str::to_owned)
                .collect()
        };
        PlanFlag {
            enforced_groups: names(&self.enforced_groups),
            // A plan the list does not name evaluates every group.
            candidate_groups: self
                .candidate_groups
                .as_deref()
                .map(names)
                .filter(|named| !named.is_empty()),
        }
    }

    /// A one-line summary for logs and Events.
    #[must_use]
    pub fn summary(&self) -> String {
        let list = |groups: &[GroupRef]| {
            groups
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            "mode={} enforcedGroups=[{}] candidateGroups={} rampPercent={} allowObjectOverride={}",
            self.mode,
            list(&self.enforced_groups),
            self.candidate_groups
                .as_deref()
                .map_or_else(|| "every group".to_owned(), |g| format!("[{}]", list(g))),
            self.ramp.percent(),
            self.allow_object_override
        )
    }
}

fn known(plans: &[Arc<ReconcilePlan>]) -> String {
    plans
        .iter()
        .flat_map(|p| {
            p.groups()
                .iter()
                .map(move |g| format!("{}/{}", p.name(), g.name()))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The flag's rollout groups as one plan sees them: its own groups' names (the mode, ramp and
/// override are the [`FlagSpec`]'s, read from it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanFlag {
    /// Groups of this plan the control enforces in mode `enforce`.
    pub enforced_groups: Vec<String>,
    /// Groups of this plan the candidate evaluates; `None`: every group.
    pub candidate_groups: Option<Vec<String>>,
}

/// Where the flag in force came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The command line's defaults (no ConfigMap, or it was deleted).
    CommandLine,
    /// A ConfigMap, at a resourceVersion.
    ConfigMap {
        /// `namespace/name`.
        name: String,
        /// Its `metadata.resourceVersion`.
        resource_version: String,
    },
}

impl Source {
    /// The label used in metrics.
    #[must_use]
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::CommandLine => "command-line",
            Self::ConfigMap { .. } => "configmap",
        }
    }
}

fn source_of(cm: &ConfigMap) -> Source {
    Source::ConfigMap {
        name: format!(
            "{}/{}",
            cm.metadata.namespace.as_deref().unwrap_or_default(),
            cm.metadata.name.as_deref().unwrap_or_default()
        ),
        resource_version: cm.metadata.resource_version.clone().unwrap_or_default(),
    }
}

/// Why a reconcile got its mode: the OpenTelemetry `feature_flag.result.reason` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The ConfigMap's mode, every object.
    Static,
    /// The command line's mode (no ConfigMap).
    Default,
    /// The ramp placed the object (inside: the mode; outside: the mode below it).
    Split,
    /// The object's annotation chose.
    TargetingMatch,
    /// The ConfigMap is invalid: the last valid flag decided.
    Stale,
    /// The object's annotation is not a mode: ignored, the flag decided.
    Error,
}

impl Reason {
    /// The reason of an attribute or label value.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Static,
            Self::Default,
            Self::Split,
            Self::TargetingMatch,
            Self::Stale,
            Self::Error,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }

    /// The attribute and label value.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Static => "static",
            Self::Default => "default",
            Self::Split => "split",
            Self::TargetingMatch => "targeting_match",
            Self::Stale => "stale",
            Self::Error => "error",
        }
    }
}

/// The flag in force: its content, where it came from, whether a newer ConfigMap was refused.
#[derive(Clone, Debug)]
pub struct FlagState {
    /// The content.
    pub spec: Arc<FlagSpec>,
    /// Where it came from.
    pub source: Source,
    /// The ConfigMap now in the cluster is invalid: this is the last valid flag.
    pub stale: bool,
    /// Increases at every change of the state; engines rebuild their policies when it moves.
    pub generation: u64,
}

/// One reconcile's flag evaluation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evaluation {
    /// The mode the reconcile runs in.
    pub mode: Mode,
    /// Why.
    pub reason: Reason,
    /// The ConfigMap's resourceVersion, or `None` for the command line's flag.
    pub version: Option<String>,
}

impl FlagState {
    /// The mode of an object: its annotation when allowed, else the ramp.
    #[must_use]
    pub fn evaluate(&self, uid: &str, annotation: Option<&str>) -> Evaluation {
        let flag = &self.spec;
        let version = match &self.source {
            Source::ConfigMap {
                resource_version, ..
            } => Some(resource_version.clone()),
            Source::CommandLine => None,
        };
        let chosen = annotation.filter(|_| flag.allow_object_override);
        if let Some(Ok(mode)) = chosen.map(str::parse::<Mode>) {
            return Evaluation {
                mode,
                reason: Reason::TargetingMatch,
                version,
            };
        }
        let inside = flag.ramp == Ramp::ALL || flag.ramp.includes(bucket(uid));
        let mode = if inside { flag.mode } else { below(flag.mode) };
        let reason = if chosen.is_some() {
            Reason::Error
        } else if self.stale {
            Reason::Stale
        } else if flag.ramp != Ramp::ALL {
            Reason::Split
        } else if self.source == Source::CommandLine {
            Reason::Default
        } else {
            Reason::Static
        };
        Evaluation {
            mode,
            reason,
            version,
        }
    }
}

/// The mode outside a ramp: one step more cautious.
#[must_use]
pub const fn below(mode: Mode) -> Mode {
    match mode {
        Mode::Enforce => Mode::Shadow,
        Mode::Shadow | Mode::Calibrate | Mode::Off => Mode::Off,
    }
}

/// What applying a ConfigMap changed.
#[derive(Clone, Debug, PartialEq)]
pub enum Applied {
    /// A different flag is now in force.
    Changed {
        /// The flag before.
        from: Arc<FlagSpec>,
        /// The flag now.
        to: Arc<FlagSpec>,
    },
    /// Same content (a new resourceVersion, or a re-list).
    Unchanged,
}

/// The flag shared by the engines and updated by the watcher.
#[derive(Debug)]
pub struct LiveFlag {
    state: RwLock<Arc<FlagState>>,
    defaults: Arc<FlagSpec>,
    plans: Vec<Arc<ReconcilePlan>>,
}

impl LiveFlag {
    /// A flag starting at the command line's `defaults`, whose groups must exist in `plans`.
    pub fn new(defaults: FlagSpec, plans: Vec<Arc<ReconcilePlan>>) -> Result<Self, FieldError> {
        defaults.validate(&plans)?;
        let defaults = Arc::new(defaults);
        Ok(Self {
            state: RwLock::new(Arc::new(FlagState {
                spec: defaults.clone(),
                source: Source::CommandLine,
                stale: false,
                generation: 0,
            })),
            defaults,
            plans,
        })
    }

    /// The flag in force now.
    #[must_use]
    pub fn current(&self) -> Arc<FlagState> {
        self.state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The command line's flag.
    #[must_use]
    pub fn defaults(&self) -> &Arc<FlagSpec> {
        &self.defaults
    }

    /// The plans the flag's groups are checked against.
    #[must_use]
    pub fn plans(&self) -> &[Arc<ReconcilePlan>] {
        &self.plans
    }

    /// Applies a ConfigMap (`None`: it is gone, back to the command line's defaults). An invalid
    /// ConfigMap leaves the flag in force and marks it stale.
    pub fn apply(&self, config_map: Option<&ConfigMap>) -> Result<Applied, FieldError> {
        let (source, spec) = match config_map {
            None => (Source::CommandLine, self.defaults.clone()),
            Some(cm) => match self.parse(cm) {
                Ok(spec) => (source_of(cm), Arc::new(spec)),
                Err(error) => {
                    self.replace(|old| FlagState {
                        stale: true,
                        ..old.clone()
                    });
                    return Err(error);
                }
            },
        };
        let mut applied = Applied::Unchanged;
        self.replace(|old| {
            if *old.spec != *spec {
                applied = Applied::Changed {
                    from: old.spec.clone(),
                    to: spec.clone(),
                };
            }
            FlagState {
                spec: spec.clone(),
                source: source.clone(),
                stale: false,
                generation: old.generation,
            }
        });
        Ok(applied)
    }

    /// The flag a ConfigMap holds, checked against the plans.
    pub fn parse(&self, cm: &ConfigMap) -> Result<FlagSpec, FieldError> {
        if let Some(binary) = cm.binary_data.as_ref().filter(|b| !b.is_empty()) {
            return Err(FieldError::binary_data(&binary.keys().collect::<Vec<_>>()));
        }
        let empty = std::collections::BTreeMap::new();
        let spec = parse::spec(cm.data.as_ref().unwrap_or(&empty), &self.defaults)?;
        spec.validate(&self.plans)?;
        Ok(spec)
    }

    /// Replaces the state with `f(old)`, bumping the generation when anything differs.
    fn replace(&self, f: impl FnOnce(&FlagState) -> FlagState) {
        let mut guard = self.state.write().unwrap_or_else(PoisonError::into_inner);
        let mut next = f(&guard);
        let same =
            next.spec == guard.spec && next.source == guard.source && next.stale == guard.stale;
        if !same {
            next.generation = guard.generation + 1;
            *guard = Arc::new(next);
        }
    }
}

#[cfg(test)]
mod tests;
