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

mod groups;
pub mod metrics;
mod parse;
mod ramp;
pub mod rollout;
mod rollout_metrics;
pub mod watch;

use std::sync::{Arc, PoisonError, RwLock};

use k8s_openapi::api::core::v1::ConfigMap;

pub use groups::{GroupRef, GroupSyntax, UnknownGroup, resolve};
pub use metrics::FlagMetrics;
pub use parse::{Field, FieldError};
pub use ramp::{GroupRamp, Ramp, bucket, sample_bucket};
pub use rollout_metrics::RolloutMetrics;

use crate::plan::ReconcilePlan;
use crate::vocab::Mode;

/// The annotation through which an object chooses its mode, when the flag allows it.
pub const ANNOTATION: &str = "shadow-reconciler.io/mode";

/// The flag's key in the `feature_flag.key` span attribute.
pub const FLAG_KEY: &str = "shadow-reconciler.mode";

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
    /// Per rollout group, its own mode and ramp: in mode `enforce`, a group named here is
    /// enforced for the objects inside its ramp (or not at all, `shadow`), whatever
    /// `enforced_groups` says of it.
    pub groups: Vec<GroupRamp>,
}

impl Default for FlagSpec {
    fn default() -> Self {
        Self {
            mode: Mode::Shadow,
            enforced_groups: Vec::new(),
            candidate_groups: None,
            ramp: Ramp::ALL,
            allow_object_override: false,
            groups: Vec::new(),
        }
    }
}

impl FlagSpec {
    /// Checks that every named group exists in one of `plans` (a typo is an error, not a no-op).
    pub fn validate(&self, plans: &[Arc<ReconcilePlan>]) -> Result<(), FieldError> {
        let check = |field: Field, groups: &[GroupRef]| {
            resolve(groups, plans).map(drop).map_err(|unknown| {
                FieldError::new(
                    field,
                    unknown.group().to_string(),
                    format!("no plan has this rollout group; known: {}", unknown.known()),
                )
            })
        };
        check(Field::EnforcedGroups, &self.enforced_groups)?;
        check(
            Field::CandidateGroups,
            self.candidate_groups.as_deref().unwrap_or_default(),
        )?;
        let named: Vec<GroupRef> = self.groups.iter().map(|g| g.group.clone()).collect();
        check(Field::Groups, &named)
    }

    /// The flag as one plan sees it: the groups of that plan only. A group's entry in
    /// [`groups`](Self::groups) decides it (`PLAN/GROUP` before `GROUP`); else `enforced_groups`
    /// enforces it at every object of the flag's ramp.
    #[must_use]
    pub fn for_plan(&self, plan: &ReconcilePlan) -> PlanFlag {
        let names = |groups: &[GroupRef]| -> Vec<String> {
            groups
                .iter()
                .filter_map(|g| g.in_plan(plan))
                .map(str::to_owned)
                .collect()
        };
        let mut enforced = Vec::new();
        let mut plan_named = false;
        for group in plan.groups() {
            let name = group.name();
            let entry = self
                .groups
                .iter()
                .filter(|e| e.group.in_plan(plan) == Some(name))
                .max_by_key(|e| e.group.plan.is_some());
            let ramp = match entry {
                Some(e) => (e.mode == Mode::Enforce).then_some(e.ramp),
                None => self
                    .enforced_groups
                    .iter()
                    .any(|g| g.in_plan(plan) == Some(name))
                    .then_some(Ramp::ALL),
            };
            plan_named |= entry.is_some() || ramp.is_some();
            if let Some(ramp) = ramp {
                enforced.push((name.to_owned(), ramp));
            }
        }
        PlanFlag {
            enforced,
            named: plan_named,
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
        let mut line = format!(
            "mode={} enforcedGroups=[{}] candidateGroups={} rampPercent={} allowObjectOverride={}",
            self.mode,
            list(&self.enforced_groups),
            self.candidate_groups
                .as_deref()
                .map_or_else(|| "every group".to_owned(), |g| format!("[{}]", list(g))),
            self.ramp.percent(),
            self.allow_object_override
        );
        if !self.groups.is_empty() {
            let groups: Vec<String> = self.groups.iter().map(ToString::to_string).collect();
            line = line + " groups=[" + &groups.join(", ") + "]";
        }
        line
    }
}

/// The flag's rollout groups as one plan sees them: its own groups' names (the mode, ramp and
/// override are the [`FlagSpec`]'s, read from it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanFlag {
    /// Groups of this plan the control enforces in mode `enforce`, each with the share of the
    /// objects it is enforced for, in the plan's order.
    pub enforced: Vec<(String, Ramp)>,
    /// The flag names a group of this plan (in `enforcedGroups` or `groups`): an object in mode
    /// `enforce` outside every enforced group's ramp runs in `shadow`. A plan the flag names no
    /// group of runs its phased control with nothing enforced.
    pub named: bool,
    /// Groups of this plan the candidate evaluates; `None`: every group.
    pub candidate_groups: Option<Vec<String>>,
}

impl PlanFlag {
    /// Every group enforced at some share of the objects.
    #[must_use]
    pub fn enforced_groups(&self) -> Vec<String> {
        self.enforced.iter().map(|(g, _)| g.clone()).collect()
    }

    /// The groups enforced for an object in `bucket` (see [`bucket`]).
    #[must_use]
    pub fn enforced_for(&self, bucket: u16) -> Vec<String> {
        self.enforced
            .iter()
            .filter(|(_, ramp)| ramp.includes(bucket))
            .map(|(g, _)| g.clone())
            .collect()
    }

    /// Every set of groups an object's control can enforce under this flag: the groups of each
    /// ramp and above, all of them (the annotation's), and none.
    #[must_use]
    pub fn enforced_sets(&self) -> Vec<Vec<String>> {
        let mut sets = vec![Vec::new(), self.enforced_groups()];
        for (_, ramp) in &self.enforced {
            let set: Vec<String> = self
                .enforced
                .iter()
                .filter(|(_, r)| r >= ramp)
                .map(|(g, _)| g.clone())
                .collect();
            if !sets.contains(&set) {
                sets.push(set);
            }
        }
        sets
    }
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

/// One reconcile's flag evaluation: the mode, and how the flag decided it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evaluation {
    /// The mode the reconcile runs in.
    pub mode: Mode,
    /// How the flag decided it (what a record keeps beside its mode).
    pub decision: FlagDecision,
}

/// How the flag decided a reconcile's mode; the mode itself is the [`Evaluation`]'s (and the
/// record's), said once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlagDecision {
    /// Why.
    pub reason: Reason,
    /// The ConfigMap's resourceVersion, or `None` for the command line's flag.
    pub version: Option<String>,
    /// In mode `enforce`, the rollout groups the control enforces for this object (each
    /// group's ramp put the object inside it); empty in every other mode.
    pub enforced_groups: Vec<String>,
}

impl FlagState {
    /// The mode of an object of the plan `plan` (the flag as that plan sees it, from
    /// [`FlagSpec::for_plan`]): its annotation when allowed, else the flag's ramp, then in mode
    /// `enforce` each group's own ramp.
    #[must_use]
    pub fn evaluate(&self, plan: &PlanFlag, uid: &str, annotation: Option<&str>) -> Evaluation {
        let flag = &self.spec;
        let version = match &self.source {
            Source::ConfigMap {
                resource_version, ..
            } => Some(resource_version.clone()),
            Source::CommandLine => None,
        };
        let chosen = annotation.filter(|_| flag.allow_object_override);
        if let Some(Ok(mode)) = chosen.map(str::parse::<Mode>) {
            // A canary: every group the flag enforces, whatever its ramp.
            let enforced_groups = if mode == Mode::Enforce {
                plan.enforced_groups()
            } else {
                Vec::new()
            };
            return Evaluation {
                mode,
                decision: FlagDecision {
                    reason: Reason::TargetingMatch,
                    version,
                    enforced_groups,
                },
            };
        }
        let bucket = bucket(uid);
        let inside = flag.ramp.includes(bucket);
        let mut mode = if inside { flag.mode } else { below(flag.mode) };
        let mut split = flag.ramp != Ramp::ALL;
        let mut enforced_groups = Vec::new();
        if mode == Mode::Enforce && plan.named {
            enforced_groups = plan.enforced_for(bucket);
            split |= plan.enforced.iter().any(|(_, ramp)| *ramp != Ramp::ALL);
            if enforced_groups.is_empty() {
                // Outside every enforced group's ramp (or every group named is in shadow).
                mode = Mode::Shadow;
            }
        }
        let reason = if chosen.is_some() {
            Reason::Error
        } else if self.stale {
            Reason::Stale
        } else if split {
            Reason::Split
        } else if self.source == Source::CommandLine {
            Reason::Default
        } else {
            Reason::Static
        };
        Evaluation {
            mode,
            decision: FlagDecision {
                reason,
                version,
                enforced_groups,
            },
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
