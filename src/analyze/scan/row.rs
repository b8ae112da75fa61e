//! One `steps` row, decoded to indices: the shape both the steps pass (which decodes it) and the
//! tally (which counts it) speak.

/// One step row, decoded to indices.
#[derive(Clone, Debug)]
pub(super) struct Row {
    pub(super) control: bool,
    pub(super) seq: u32,
    pub(super) op: usize,
    pub(super) exec: Exec,
    pub(super) outcome: Outcome,
    pub(super) class: Option<usize>,
    pub(super) blocked_by: Vec<usize>,
    /// The candidate's retry on conflict would have succeeded.
    pub(super) retry_resolved: bool,
    /// The candidate's re-evaluation of a control 409 would have failed too.
    pub(super) retry_failed: bool,
}

/// How a row's result was obtained, as far as counting goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Exec {
    Real,
    DryRun,
    Reused,
    NotSimulated,
    NotExecuted,
}

impl Row {
    /// Executed now (really or in dry-run), not reused.
    pub(super) fn executed(&self) -> bool {
        matches!(self.exec, Exec::Real | Exec::DryRun)
    }

    /// Executed now and did something: evidence of what the operation does. A step that said
    /// it had nothing to do ran, but says nothing (it is never unblocked, and no observation).
    pub(super) fn evidence(&self) -> bool {
        self.executed() && self.outcome != Outcome::Idle
    }
}

/// What a row's step came to, as far as counting goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    Succeeded,
    Idle,
    Failed,
    Blocked,
    Other,
}
