//! What the candidate would have done differently from the control, on the same operations.

use super::{ModelError, Report};
use crate::vocab::{OpId, Outcome};

/// The difference between a control run and a candidate run of the same plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diff {
    unblocked: Vec<OpId>,
    newly_blocked: Vec<OpId>,
    changed: Vec<OpId>,
    reordered: Vec<(OpId, OpId)>,
}

impl Diff {
    /// Compares two runs of the same plan (same name and hash).
    ///
    /// - `unblocked`: the candidate ran it (its executor was asked to), the control did not, and
    ///   it did not say it had nothing to do.
    /// - `newly_blocked`: the control ran it, the candidate blocked or skipped it.
    /// - `changed`: both ran it to a known outcome, and the outcomes differ (a success and
    ///   "nothing to do" do not).
    /// - `reordered`: pairs `(a, b)` both ran where the control ran `a` first and the candidate `b`.
    ///
    /// An operation the candidate left `unknown` without running it is in none of the lists, and
    /// so is an operation that exists in one of the two runs only (`only:` in the plan: the
    /// legacy loop and the phased reconcile do not have the same operations).
    pub fn between(control: &Report, candidate: &Report) -> Result<Self, ModelError> {
        let (cp, kp) = (control.plan(), candidate.plan());
        if cp.name() != kp.name() || cp.hash() != kp.hash() {
            return Err(ModelError::PlanMismatch {
                control: format!("{}@{}", cp.name(), cp.hash().short()),
                candidate: format!("{}@{}", kp.name(), kp.hash().short()),
            });
        }
        let mut diff = Self::default();
        for step in candidate.steps() {
            let Some(theirs) = control.get(step.op) else {
                continue;
            };
            match (theirs.executed, step.executed) {
                // A step that had nothing to do is not one the candidate unblocked.
                (false, true) if step.outcome != Outcome::Idle => diff.unblocked.push(step.op),
                (true, false)
                    if matches!(
                        step.outcome,
                        Outcome::Blocked { .. } | Outcome::Skipped { .. }
                    ) =>
                {
                    diff.newly_blocked.push(step.op);
                }
                (true, true)
                    if theirs.outcome.ran()
                        && step.outcome.ran()
                        && !(theirs.outcome.ok() && step.outcome.ok())
                        && theirs.outcome != step.outcome =>
                {
                    diff.changed.push(step.op);
                }
                _ => {}
            }
        }
        // Candidate position of every operation both ran, visited in control order.
        let mut position = vec![usize::MAX; cp.len()];
        for (i, step) in candidate.steps().iter().enumerate() {
            position[step.op.index()] = i;
        }
        let both: Vec<OpId> = control
            .steps()
            .iter()
            .filter(|s| s.executed && candidate.get(s.op).is_some_and(|k| k.executed))
            .map(|s| s.op)
            .collect();
        for (i, &a) in both.iter().enumerate() {
            for &b in &both[i + 1..] {
                if position[a.index()] > position[b.index()] {
                    diff.reordered.push((a, b));
                }
            }
        }
        Ok(diff)
    }

    /// Ran in the candidate, not in the control, in candidate order.
    #[must_use]
    pub fn unblocked(&self) -> &[OpId] {
        &self.unblocked
    }
    /// Ran in the control, blocked or skipped in the candidate, in candidate order.
    #[must_use]
    pub fn newly_blocked(&self) -> &[OpId] {
        &self.newly_blocked
    }
    /// Ran in both with a different known outcome, in candidate order.
    #[must_use]
    pub fn changed(&self) -> &[OpId] {
        &self.changed
    }
    /// `(a, b)`: the control ran `a` before `b`, the candidate `b` before `a`.
    #[must_use]
    pub fn reordered(&self) -> &[(OpId, OpId)] {
        &self.reordered
    }
    /// Whether the runs agree on everything.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.unblocked.is_empty()
            && self.newly_blocked.is_empty()
            && self.changed.is_empty()
            && self.reordered.is_empty()
    }
}
