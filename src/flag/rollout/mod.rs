//! A rollout of one rollout group, declared as a `ShadowRollout` object: the ramp steps, what
//! each step must see before the next, and the gates; its status is where the rollout stands.
//! [`evolve`] is the whole decision, pure: the status, a person's action and the gates' figures
//! in, the next status and what was decided out. The driver (`crate::rollout`) gathers the
//! figures, applies the decision to the flag ConfigMap's `groups` key and writes the status.
//! See `docs/rollout.md`.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::jiff::SignedDuration;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{GroupRamp, GroupRef, Ramp};
use crate::vocab::Mode;

/// The annotation through which a person acts on a rollout (`kubectl annotate`); the driver
/// applies the action once and removes the annotation.
pub const ACTION_ANNOTATION: &str = "shadow-reconciler.io/action";

/// How many decisions the status keeps (the newest).
pub const HISTORY: usize = 20;

/// The rollout of one rollout group from shadow to enforce.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "shadow-reconciler.io",
    version = "v1alpha1",
    kind = "ShadowRollout",
    namespaced,
    status = "RolloutStatus",
    shortname = "srollout",
    printcolumn = r#"{"name":"Group","type":"string","jsonPath":".spec.group"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Step","type":"string","jsonPath":".status.stepOf"}"#,
    printcolumn = r#"{"name":"Ramp","type":"number","jsonPath":".status.ramp"}"#,
    printcolumn = r#"{"name":"Gate","type":"string","jsonPath":".status.lastGate.result"}"#,
    printcolumn = r#"{"name":"Rollbacks","type":"integer","jsonPath":".status.rollbacks"}"#,
    printcolumn = r#"{"name":"Message","type":"string","priority":1,"jsonPath":".status.message"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ShadowRolloutSpec {
    /// The rollout group: `GROUP` (every plan that has it) or `PLAN/GROUP`.
    pub group: String,
    /// The ramp steps, in order; the last is usually 100.
    pub steps: Vec<RolloutStep>,
    /// What every step must pass.
    #[serde(default)]
    pub gates: Gates,
}

/// One step of the ramp.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStep {
    /// The share of the objects whose control enforces the group, in percent (0 to 100, at
    /// most two decimals).
    pub ramp: f64,
    /// Objects reconciled with the group enforced since the step began, before the next step
    /// (counted in objects, not reconciles). Default 30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_objects: Option<u64>,
    /// The least time the step lasts (`30s`, `10m`, `2h`). Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_duration: Option<String>,
}

/// The gates of every step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Gates {
    /// The analyzer's readiness of the group over the records since the rollout started.
    #[serde(default)]
    pub readiness: ReadinessGate,
    /// The two-sided confidence of the comparison's bound (0.5 to 0.999999). Default 0.95.
    #[serde(default = "default_confidence")]
    pub confidence: f64,
    /// How far, in percentage points, the enforced objects' failure rate may exceed the others'
    /// before the comparison fails (the interval's lower bound is compared). Default 0.
    #[serde(default)]
    pub tolerance_points: f64,
    /// Queries against Prometheus, each a gate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prometheus: Vec<PromGate>,
    /// Prometheus's URL for the `prometheus` gates (`http://prometheus:9090`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus_url: Option<String>,
}

fn default_confidence() -> f64 {
    0.95
}

impl Default for Gates {
    fn default() -> Self {
        Self {
            readiness: ReadinessGate::default(),
            confidence: default_confidence(),
            tolerance_points: 0.0,
            prometheus: Vec::new(),
            prometheus_url: None,
        }
    }
}

/// What the analyzer's readiness must be.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ReadinessGate {
    /// `not ready` fails the step (rolls back); `ready` and `inconclusive` pass.
    #[default]
    BlockNotReady,
    /// Only `ready` passes; `inconclusive` waits, `not ready` fails.
    RequireReady,
    /// Not a gate.
    Off,
}

/// A gate on one `PromQL` query: its value (a single number: the query's only sample, or a
/// scalar) must stay within `max` / `min`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromGate {
    /// The gate's name in the status.
    pub name: String,
    /// The `PromQL` query (an instant query at the evaluation's time).
    pub query: String,
    /// Fails above this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Fails below this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
}

/// Where a rollout stands.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// `Progressing`, `Paused`, `RolledBack`, `Completed` or `Aborted`.
    pub phase: Phase,
    /// The step's index (0 first).
    pub step: u32,
    /// The step as people count it, of how many: `2/4` is the second of four steps (what
    /// `kubectl get shadowrollouts` shows).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub step_of: String,
    /// The step's ramp, in percent (the group's entry in the flag; `shadow` unless the phase
    /// is `Progressing`, `Paused` or `Completed`).
    pub ramp: f64,
    /// When the step began (RFC 3339): the gates of the step read the records since then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_started_at: Option<String>,
    /// When the rollout started, or was last restarted or promoted back after a rollback
    /// (RFC 3339): the readiness gate reads the records since then, every step's together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// The spec's generation the status was written for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The last evaluation of the gates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_gate: Option<GateReport>,
    /// Automatic rollbacks so far.
    #[serde(default)]
    pub rollbacks: u32,
    /// What the rollout waits for or why it stopped.
    #[serde(default)]
    pub message: String,
    /// The last decisions, newest last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Decision>,
}

/// A rollout's phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Phase {
    /// The group is enforced at the step's ramp; the next step comes when the gates pass.
    #[default]
    Progressing,
    /// Held at the step by a person; the gates still roll back.
    Paused,
    /// A gate failed: the group is in shadow until a person promotes or restarts.
    RolledBack,
    /// The last step passed: the group stays enforced at its ramp.
    Completed,
    /// Stopped by a person: the group is in shadow until a restart.
    Aborted,
}

impl Phase {
    /// The phase's name, as in the status.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Progressing => "Progressing",
            Self::Paused => "Paused",
            Self::RolledBack => "RolledBack",
            Self::Completed => "Completed",
            Self::Aborted => "Aborted",
        }
    }

    /// Whether the group is enforced in this phase.
    #[must_use]
    pub const fn enforces(self) -> bool {
        matches!(self, Self::Progressing | Self::Paused | Self::Completed)
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome of one gate, or of all of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Verdict {
    /// The figures are within the gate's bound.
    Passed,
    /// Not enough data yet, or a requirement of the step not met.
    #[default]
    Waiting,
    /// The figures say enforcing hurt: the group goes back to shadow.
    Failed,
}

impl Verdict {
    /// The verdict's name, as in the status.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "Passed",
            Self::Waiting => "Waiting",
            Self::Failed => "Failed",
        }
    }
}

/// One gate's evaluation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GateResult {
    /// `readiness`, `failure-rate`, `newly-blocked`, `guard-refusals`, `write-differences`, or
    /// a Prometheus gate's name.
    pub name: String,
    /// Its verdict.
    pub result: Verdict,
    /// What it saw, in words.
    pub message: String,
    /// Its figures by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub figures: BTreeMap<String, f64>,
}

/// One evaluation of every gate of a step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GateReport {
    /// When (RFC 3339).
    pub time: String,
    /// `Failed` if a gate failed, else `Waiting` if one waits or a requirement of the step is
    /// not met, else `Passed`.
    pub result: Verdict,
    /// Objects reconciled with the group enforced since the step began.
    pub enforced_objects: u64,
    /// Each gate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<GateResult>,
}

/// A decision of the rollout, kept in its status and announced by an Event.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// When (RFC 3339).
    pub time: String,
    /// `Started`, `Advanced`, `Completed`, `RolledBack`, `Paused`, `Resumed`, `Promoted`,
    /// `Aborted`, `Restarted` (also the Event's reason).
    pub kind: String,
    /// The step after the decision.
    pub step: u32,
    /// Its ramp (0 when the group is in shadow).
    pub ramp: f64,
    /// Why, with the figures.
    pub message: String,
}

/// A person's action on a rollout (the [`ACTION_ANNOTATION`]'s value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// To the next step now (from `RolledBack`: back into the step that failed, its clock
    /// restarted).
    Promote,
    /// Hold at the step.
    Pause,
    /// Go on from a pause.
    Resume,
    /// The group to shadow, for good (until `restart`).
    Abort,
    /// From the first step again.
    Restart,
}

impl Action {
    /// Every action, as written in the annotation.
    pub const ALL: [(&'static str, Self); 5] = [
        ("promote", Self::Promote),
        ("pause", Self::Pause),
        ("resume", Self::Resume),
        ("abort", Self::Abort),
        ("restart", Self::Restart),
    ];

    /// The action an annotation names.
    ///
    /// # Errors
    /// An unknown action, with the known ones.
    pub fn parse(value: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .find(|(name, _)| *name == value.trim())
            .map(|(_, a)| *a)
            .ok_or_else(|| {
                format!(
                    "{ACTION_ANNOTATION}: {value:?} is not an action; known: {}",
                    Self::ALL.map(|(n, _)| n).join(", ")
                )
            })
    }
}

/// The confidence of the comparisons' bound at a step's interim looks (every evaluation before
/// the decisive one), or the gate's `confidence` if higher: Haybittle and Peto's rule, a bound
/// strict enough that looking at every evaluation adds little to the chance of a false alarm,
/// while a group that plainly hurts is still rolled back before the step's end.
pub const INTERIM_CONFIDENCE: f64 = 0.999;

/// What the driver observed for a step: objects enforced since it began and each gate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observation {
    /// Objects reconciled with the group enforced since the step began.
    pub enforced_objects: u64,
    /// Each gate's evaluation, as at an interim look.
    pub gates: Vec<GateResult>,
    /// Gates judged again for the step's decisive look, each replacing the gate of its name:
    /// the comparisons at the gate's `confidence`. The decisive look is the evaluation at which
    /// the step would otherwise advance (every other gate passed, its objects and time met), so
    /// each step's comparisons are judged at the stated confidence once.
    pub decisive: Vec<GateResult>,
}

/// A checked spec: the group and each step's ramp, objects and duration.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// The group.
    pub group: GroupRef,
    /// Each step: ramp, objects, least duration.
    pub steps: Vec<(Ramp, u64, SignedDuration)>,
}

/// The default of a step's `minObjects`: the analyzer's default `min_samples`.
pub const DEFAULT_MIN_OBJECTS: u64 = 30;

impl Policy {
    /// Checks a spec: the group's form, at least one step, each ramp a percentage and the
    /// ramps rising, each duration readable, the gates' numbers in range.
    ///
    /// # Errors
    /// The first problem, naming its field (`spec.steps[1].ramp: ...`).
    pub fn of(spec: &ShadowRolloutSpec) -> Result<Self, String> {
        let group = GroupRef::parse(&spec.group)
            .ok_or_else(|| format!("spec.group: {:?} is not GROUP or PLAN/GROUP", spec.group))?;
        if spec.steps.is_empty() {
            return Err("spec.steps: at least one step is needed".to_owned());
        }
        let mut steps = Vec::new();
        let mut last: Option<Ramp> = None;
        for (i, s) in spec.steps.iter().enumerate() {
            let ramp = Ramp::from_percent(s.ramp).ok_or_else(|| {
                format!(
                    "spec.steps[{i}].ramp: {} is not a percentage from 0 to 100 with at most two decimals",
                    s.ramp
                )
            })?;
            if last.is_some_and(|l| ramp <= l) {
                return Err(format!(
                    "spec.steps[{i}].ramp: {} does not rise above the step before it",
                    s.ramp
                ));
            }
            last = Some(ramp);
            let duration = match &s.min_duration {
                None => SignedDuration::ZERO,
                Some(d) => d
                    .parse::<SignedDuration>()
                    .ok()
                    .filter(|d| !d.is_negative())
                    .ok_or_else(|| {
                        format!("spec.steps[{i}].minDuration: {d:?} is not a duration such as 30s, 10m or 2h")
                    })?,
            };
            steps.push((ramp, s.min_objects.unwrap_or(DEFAULT_MIN_OBJECTS), duration));
        }
        let g = &spec.gates;
        if !(0.5..=0.999_999).contains(&g.confidence) {
            return Err(format!(
                "spec.gates.confidence: {} is not from 0.5 to 0.999999",
                g.confidence
            ));
        }
        if !(0.0..=100.0).contains(&g.tolerance_points) {
            return Err(format!(
                "spec.gates.tolerancePoints: {} is not from 0 to 100",
                g.tolerance_points
            ));
        }
        for (i, p) in g.prometheus.iter().enumerate() {
            if p.name.trim().is_empty() || p.query.trim().is_empty() {
                return Err(format!(
                    "spec.gates.prometheus[{i}]: a name and a query are needed"
                ));
            }
            if p.max.is_none() && p.min.is_none() {
                return Err(format!(
                    "spec.gates.prometheus[{i}] ({}): max or min is needed",
                    p.name
                ));
            }
        }
        if !g.prometheus.is_empty() && g.prometheus_url.is_none() {
            return Err("spec.gates.prometheusUrl: needed by the prometheus gates".to_owned());
        }
        Ok(Self { group, steps })
    }

    /// The flag entry the rollout asks for in `status`: enforce at the step's ramp, or shadow.
    #[must_use]
    pub fn entry(&self, status: &RolloutStatus) -> GroupRamp {
        let step = (status.step as usize).min(self.steps.len() - 1);
        if status.phase.enforces() {
            GroupRamp {
                group: self.group.clone(),
                mode: Mode::Enforce,
                ramp: self.steps[step].0,
            }
        } else {
            GroupRamp {
                group: self.group.clone(),
                mode: Mode::Shadow,
                ramp: Ramp::ALL,
            }
        }
    }
}

mod evolve;
#[cfg(test)]
mod tests;

pub use evolve::{evolve, start};
