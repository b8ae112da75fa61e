//! The decisions of a rollout: where it starts, what a person's action does, and what the gates'
//! figures make of a step.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::{
    Action, Decision, GateReport, GateResult, HISTORY, Observation, Phase, Policy, RolloutStatus,
    Verdict,
};

/// The status a rollout starts with: its first step, from `now`.
#[must_use]
pub fn start(policy: &Policy, now: Timestamp) -> (RolloutStatus, Decision) {
    let mut status = RolloutStatus {
        phase: Phase::Progressing,
        step: 0,
        ramp: policy.steps[0].0.percent(),
        step_started_at: Some(now.to_string()),
        started_at: Some(now.to_string()),
        ..RolloutStatus::default()
    };
    let decision = decide(
        &mut status,
        now,
        "Started",
        format!(
            "{} enforced on {}% of the objects (step 1 of {})",
            policy.group,
            policy.steps[0].0.percent(),
            policy.steps.len()
        ),
    );
    (status, decision)
}

/// The next status of a rollout: a person's `action` first, then the gates' `observation`
/// (none when the figures could not be gathered: nothing moves). Returns the decisions taken,
/// each also appended to the status's history.
#[must_use]
pub fn evolve(
    policy: &Policy,
    status: &RolloutStatus,
    action: Option<Action>,
    observation: Option<&Observation>,
    now: Timestamp,
) -> (RolloutStatus, Vec<Decision>) {
    let mut next = status.clone();
    let mut decisions = Vec::new();
    let last = u32::try_from(policy.steps.len() - 1).unwrap_or(u32::MAX);
    next.step = next.step.min(last);
    if let Some(d) = action.and_then(|a| act(policy, &mut next, a, now)) {
        decisions.push(d);
    }
    if let Some(obs) = observation
        && matches!(next.phase, Phase::Progressing | Phase::Paused)
    {
        let missing = requirements(policy, &next, obs, now);
        let gates = judged(obs, next.phase, missing.is_empty());
        let failed: Vec<&GateResult> = gates
            .iter()
            .filter(|g| g.result == Verdict::Failed)
            .collect();
        let waiting: Vec<&GateResult> = gates
            .iter()
            .filter(|g| g.result == Verdict::Waiting)
            .collect();
        let result = if !failed.is_empty() {
            Verdict::Failed
        } else if !waiting.is_empty() || !missing.is_empty() {
            Verdict::Waiting
        } else {
            Verdict::Passed
        };
        next.last_gate = Some(GateReport {
            time: now.to_string(),
            result,
            enforced_objects: obs.enforced_objects,
            gates: gates.clone(),
        });
        match result {
            Verdict::Failed => {
                let why: Vec<String> = failed
                    .iter()
                    .map(|g| format!("{}: {}", g.name, g.message))
                    .collect();
                let from = next.step;
                next.phase = Phase::RolledBack;
                next.rollbacks += 1;
                decisions.push(decide(
                    &mut next,
                    now,
                    "RolledBack",
                    format!(
                        "{} back to shadow at step {} ({}%): {}",
                        policy.group,
                        from + 1,
                        policy.steps[from as usize].0.percent(),
                        why.join("; ")
                    ),
                ));
            }
            Verdict::Passed if next.phase == Phase::Progressing => {
                decisions.push(advance(policy, &mut next, now, obs.enforced_objects));
            }
            Verdict::Passed => {
                next.message = format!(
                    "paused at step {} ({}%): the gates pass",
                    next.step + 1,
                    next.ramp
                );
            }
            Verdict::Waiting => {
                let mut what = missing;
                what.extend(waiting.iter().map(|g| format!("{}: {}", g.name, g.message)));
                next.message = format!(
                    "{} at step {} ({}%): waiting for {}",
                    if next.phase == Phase::Paused {
                        "paused"
                    } else {
                        "progressing"
                    },
                    next.step + 1,
                    next.ramp,
                    what.join("; ")
                );
            }
        }
    }
    (next, decisions)
}

/// The gates of an evaluation: as at an interim look, or, when the step would advance on them
/// (progressing, its objects and time met, no gate failed or waiting), as at its decisive look.
fn judged(obs: &Observation, phase: Phase, met: bool) -> Vec<GateResult> {
    let mut gates = obs.gates.clone();
    let advancing =
        phase == Phase::Progressing && met && gates.iter().all(|g| g.result == Verdict::Passed);
    if advancing {
        for d in &obs.decisive {
            match gates.iter_mut().find(|g| g.name == d.name) {
                Some(g) => *g = d.clone(),
                None => gates.push(d.clone()),
            }
        }
    }
    gates
}

/// What the step still needs before the next: its objects and its time.
fn requirements(
    policy: &Policy,
    status: &RolloutStatus,
    obs: &Observation,
    now: Timestamp,
) -> Vec<String> {
    let (_, min_objects, min_duration) = policy.steps[status.step as usize];
    let elapsed = status
        .step_started_at
        .as_deref()
        .and_then(|t| t.parse::<Timestamp>().ok())
        .map_or(SignedDuration::ZERO, |t| now.duration_since(t));
    let mut missing = Vec::new();
    if obs.enforced_objects < min_objects {
        missing.push(format!(
            "{} of {min_objects} objects enforced",
            obs.enforced_objects
        ));
    }
    if elapsed < min_duration {
        missing.push(format!(
            "{}s of {}s",
            elapsed.as_secs(),
            min_duration.as_secs()
        ));
    }
    missing
}

/// Applies a person's action.
fn act(
    policy: &Policy,
    status: &mut RolloutStatus,
    action: Action,
    now: Timestamp,
) -> Option<Decision> {
    let step_ramp = |s: u32| policy.steps[s as usize].0.percent();
    match (action, status.phase) {
        (Action::Promote, Phase::Progressing | Phase::Paused) => {
            status.phase = Phase::Progressing;
            let d = advance(policy, status, now, 0);
            Some(Decision {
                kind: "Promoted".to_owned(),
                message: format!("by hand: {}", d.message),
                ..d
            })
        }
        (Action::Promote, Phase::RolledBack) => {
            status.phase = Phase::Progressing;
            status.ramp = step_ramp(status.step);
            status.step_started_at = Some(now.to_string());
            status.started_at = Some(now.to_string());
            let message = format!(
                "by hand: {} enforced again at step {} ({}%), its gates from now",
                policy.group,
                status.step + 1,
                status.ramp
            );
            Some(decide(status, now, "Promoted", message))
        }
        (Action::Pause, Phase::Progressing) => {
            status.phase = Phase::Paused;
            let message = format!(
                "by hand: held at step {} ({}%)",
                status.step + 1,
                status.ramp
            );
            Some(decide(status, now, "Paused", message))
        }
        (Action::Resume, Phase::Paused) => {
            status.phase = Phase::Progressing;
            let message = format!(
                "by hand: step {} ({}%) goes on",
                status.step + 1,
                status.ramp
            );
            Some(decide(status, now, "Resumed", message))
        }
        (Action::Abort, phase) if phase != Phase::Aborted => {
            status.phase = Phase::Aborted;
            let message = format!("by hand: {} back to shadow until a restart", policy.group);
            Some(decide(status, now, "Aborted", message))
        }
        (Action::Restart, _) => {
            status.phase = Phase::Progressing;
            status.step = 0;
            status.ramp = step_ramp(0);
            status.step_started_at = Some(now.to_string());
            status.started_at = Some(now.to_string());
            status.last_gate = None;
            let message = format!("by hand: {} from step 1 ({}%)", policy.group, status.ramp);
            Some(decide(status, now, "Restarted", message))
        }
        (action, phase) => {
            status.message = format!("{action:?} does nothing in phase {phase}");
            None
        }
    }
}

/// The next step, or the end.
fn advance(policy: &Policy, status: &mut RolloutStatus, now: Timestamp, objects: u64) -> Decision {
    let from = status.step;
    let last = u32::try_from(policy.steps.len() - 1).unwrap_or(u32::MAX);
    if from >= last {
        status.phase = Phase::Completed;
        let message = format!(
            "{} enforced on {}% of the objects: every step passed ({objects} objects at the last)",
            policy.group, status.ramp
        );
        return decide(status, now, "Completed", message);
    }
    status.step = from + 1;
    status.ramp = policy.steps[status.step as usize].0.percent();
    status.step_started_at = Some(now.to_string());
    let message = format!(
        "{} from {}% to {}% (step {} of {}): the gates of step {} passed with {objects} objects enforced",
        policy.group,
        policy.steps[from as usize].0.percent(),
        status.ramp,
        status.step + 1,
        policy.steps.len(),
        from + 1
    );
    decide(status, now, "Advanced", message)
}

/// Records a decision in the status (message, history) and returns it.
fn decide(status: &mut RolloutStatus, now: Timestamp, kind: &str, message: String) -> Decision {
    let d = Decision {
        time: now.to_string(),
        kind: kind.to_owned(),
        step: status.step,
        ramp: if status.phase.enforces() {
            status.ramp
        } else {
            0.0
        },
        message: message.clone(),
    };
    status.message = message;
    status.history.push(d.clone());
    if status.history.len() > HISTORY {
        let drop = status.history.len() - HISTORY;
        status.history.drain(..drop);
    }
    d
}
