//! One reconcile's two runs: the control executes for real; the candidate reuses what the
//! control ran with the same code, runs its own code of an operation in dry-run on the same
//! world just before the control's (paired), dry-runs what the control did not run, and leaves
//! `shadow: skip` operations not simulated. What the two codes wrote differently is collected
//! on the way.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Engine;
use super::dryrun::{DryRunRun, GuardStats};
use super::operation::{OpContext, Reconciler};
use super::record::Trace;
use super::writes::{self, WriteDifference, WriteLog};
use crate::model::{Decision, ModelKind, Policy, Report, StepResult, candidate_execution};
use crate::vocab::{CodePath, ErrorClass, Execution, OpId, Outcome, ShadowPolicy};

/// What the candidate side of one reconcile keeps while the two runs go: its trace (paired
/// executions fill it during the control run), the results of paired executions, the dry-run
/// client (made at the first step that needs it: none on the happy path) and the write
/// differences found.
pub(super) struct Shadow {
    pub(super) trace: Trace,
    paired: Vec<Option<StepResult>>,
    dry: Option<DryRunRun>,
    /// The control's recording client and its log, made at the first operation whose writes
    /// are compared.
    recorder: Option<(kube::Client, WriteLog)>,
    /// The paired writes of the operation the control is about to run, and that operation.
    pub(super) pending: Option<(OpId, Vec<writes::Write>)>,
    pub(super) differences: Vec<WriteDifference>,
    /// The error of a legacy loop function that failed without marking a step.
    pub(super) opaque_error: Option<String>,
    /// Mode `calibrate`: the control's own code of every operation is paired with it.
    pub(super) calibrate: bool,
}

impl Shadow {
    pub(super) fn new(n: usize, origin: Instant, calibrate: bool) -> Self {
        Self {
            trace: Trace::new(n, origin),
            paired: vec![None; n],
            dry: None,
            recorder: None,
            pending: None,
            differences: Vec::new(),
            opaque_error: None,
            calibrate,
        }
    }

    /// The reconcile's dry-run client.
    pub(super) fn dry<R: Reconciler>(&mut self, engine: &Engine<R>) -> &DryRunRun {
        self.dry.get_or_insert_with(|| engine.dry.for_run())
    }

    /// The dry-run counters of this reconcile (zero when nothing was dry-run).
    pub(super) fn guard(&self) -> Arc<GuardStats> {
        self.dry
            .as_ref()
            .map(|d| d.stats.clone())
            .unwrap_or_default()
    }
}

impl<R: Reconciler> Engine<R> {
    /// Whether `op` runs with retry-on-conflict under `policy`: only enforced operations whose
    /// plan says so, in the phased model.
    fn retries(&self, op: OpId, policy: &Policy) -> bool {
        policy.kind() == ModelKind::Phased
            && policy.enforced().contains(op)
            && self.plan.operation(op).retry_on_conflict()
    }

    /// Whether a comparison of `control` with `candidate` pairs code: the legacy control beside
    /// a phased candidate, with some operation of distinct code.
    pub(super) fn pairs_code(&self, control: &Policy, candidate: Option<&Policy>) -> bool {
        control.path() == CodePath::Legacy
            && candidate.is_some_and(|c| c.path() == CodePath::Phased)
            && self.plan.phased_order().iter().any(|&op| self.distinct(op))
    }

    /// Whether `op` has legacy code of its own while existing in both paths (its own entry of
    /// `legacy_code`, or a legacy loop function): the candidate cannot reuse the control's result
    /// of it.
    fn distinct(&self, op: OpId) -> bool {
        (self.legacy_code[op.index()] || self.reconciler.legacy_loop().is_some())
            && self.plan.operation(op).only().is_none()
    }

    pub(super) async fn run_control(
        &self,
        (policy, candidate): (&Policy, Option<&Policy>),
        object: &Arc<R::Object>,
        origin: Instant,
        shadow: &mut Shadow,
    ) -> (Report, Trace, R::State) {
        if policy.path() == CodePath::Legacy && self.reconciler.legacy_loop().is_some() {
            let compare = candidate.filter(|c| c.path() == CodePath::Phased);
            return self
                .run_legacy_loop((policy, compare), object, origin, shadow)
                .await;
        }
        // Calibrate: every operation's code is paired with itself (its dry run, then the real
        // run); shadow: an operation whose two codes differ is paired with the candidate's.
        let calibrate = shadow.calibrate.then_some(policy);
        let mut ctx = OpContext::new(
            self.real.clone(),
            object.clone(),
            R::State::default(),
            (Execution::Real, policy.path()),
        );
        let mut trace = Trace::new(self.plan.len(), origin);
        let mut run = policy.start();
        // The legacy code runs in the control and a candidate runs the phased code: operations
        // whose code differs are paired and their writes compared.
        let compare = calibrate.or_else(|| {
            candidate.filter(|c| policy.path() == CodePath::Legacy && c.path() == CodePath::Phased)
        });
        while let Some(decision) = run.next() {
            let Decision::Run(op) = decision else {
                continue;
            };
            let operation = self.plan.operation(op);
            let paired = (calibrate.is_some() || self.distinct(op))
                && operation.shadow() != ShadowPolicy::Skip;
            let compared = compare.is_some()
                && (paired || (calibrate.is_none() && operation.only() == Some(CodePath::Legacy)));
            // A `shadow: skip` operation is never run by the candidate, paired or not: its
            // effects are outside what a dry run contains.
            if let Some(candidate) = compare
                && paired
            {
                self.run_paired(op, candidate, object, ctx.state.clone(), shadow)
                    .await;
            }
            let retry = self.retries(op, policy);
            ctx.prepare(retry);
            trace.retried[op.index()] = retry;
            trace.executions[op.index()] = Execution::Real;
            let result = if compared {
                let recorder = shadow
                    .recorder
                    .get_or_insert_with(|| super::recording::recording(&self.real));
                let (client, log) = (recorder.0.clone(), recorder.1.clone());
                let real = ctx.swap_client(client);
                let result = self.execute(op, &mut ctx, &mut trace).await;
                ctx.swap_client(real);
                let ok = result.error_class().is_none();
                self.collect_differences(op, (&log.take(), ok), shadow);
                result
            } else {
                self.execute(op, &mut ctx, &mut trace).await
            };
            run.complete(op, result)
                .expect("the engine completes the pending operation");
        }
        (
            run.into_report()
                .expect("the engine decides every operation"),
            trace,
            ctx.state,
        )
    }

    /// The candidate's code of `op` (the code of `candidate`'s path: the control's own in mode
    /// `calibrate`), in dry-run, on the world the control's code is about to run in, from a copy
    /// of the control's state: its result waits for the candidate run, its writes for the
    /// control's to be compared with.
    pub(super) async fn run_paired(
        &self,
        op: OpId,
        candidate: &Policy,
        object: &Arc<R::Object>,
        state: R::State,
        shadow: &mut Shadow,
    ) -> R::State {
        let dry = shadow.dry(self).clone();
        dry.reset_overlay();
        let _ = dry.writes.take();
        let mut ctx = OpContext::new(
            dry.client.clone(),
            object.clone(),
            state,
            (Execution::DryRun, candidate.path()),
        );
        let retry = self.retries(op, candidate);
        ctx.prepare(retry);
        let i = op.index();
        shadow.trace.executions[i] = Execution::DryRun;
        shadow.trace.retried[i] = retry;
        let result = self.execute(op, &mut ctx, &mut shadow.trace).await;
        shadow.paired[i] = Some(result);
        // Kept until the control's writes of the same operation are logged.
        shadow.pending = Some((op, dry.writes.take()));
        ctx.state
    }

    /// Compares the control's writes of `op` with the candidate's paired writes of it (or, for
    /// an operation of the legacy path only, records them all). An operation that was not paired
    /// (`shadow: skip`) is not compared: the candidate did not run it; nor is one either side
    /// failed (`control_ok`, the paired result): a failure stops a step's writes part way, and
    /// the step's outcome already says that the two runs differ.
    pub(super) fn collect_differences(
        &self,
        op: OpId,
        (control, control_ok): (&[writes::Write], bool),
        shadow: &mut Shadow,
    ) {
        let operation = self.plan.operation(op);
        let candidate_ok = shadow.paired[op.index()]
            .as_ref()
            .is_none_or(|r| r.error_class().is_none());
        let found = if operation.only() == Some(CodePath::Legacy) && !shadow.calibrate {
            writes::one_sided(operation, CodePath::Legacy, control, &self.kinds)
        } else {
            match shadow.pending.take() {
                Some(_) if !(control_ok && candidate_ok) => Vec::new(),
                Some((paired, candidate)) if paired == op => writes::compare(
                    operation,
                    (control, &candidate),
                    self.plan.volatile(),
                    &self.kinds,
                ),
                _ => Vec::new(),
            }
        };
        shadow.differences.extend(found);
    }

    /// The candidate: paired results where the control's code differs, the control's result
    /// where it is the same code, dry runs of what the control did not run, `shadow: skip` not
    /// simulated.
    pub(super) async fn run_candidate(
        &self,
        policy: &Policy,
        object: &Arc<R::Object>,
        (control_report, control): (&Report, &Trace),
        state: R::State,
        shadow: &mut Shadow,
    ) -> Report {
        // The context of the candidate's own dry runs is made at its first one: on the happy
        // path every step is reused and the candidate costs no client at all.
        let mut state = Some(state);
        let mut ctx: Option<OpContext<R::Object, R::State>> = None;
        let mut run = policy.start();
        while let Some(decision) = run.next() {
            let Decision::Run(op) = decision else {
                continue;
            };
            let i = op.index();
            let theirs = control_report.get(op);
            let retry = self.retries(op, policy);
            let failed_on_conflict =
                theirs.and_then(|s| s.outcome.error_class()) == Some(ErrorClass::Conflict);
            let reevaluate = failed_on_conflict && retry && !control.retried[i];
            // Code of its own only against a control that ran the legacy code: in mode enforce
            // both runs are phased code and the control's result is the candidate's.
            let own = self.distinct(op) && control_report.kind() == ModelKind::Sequential;
            let execution = candidate_execution(self.plan.operation(op), control_report, own);
            let result = if let Some(paired) = shadow.paired[i].take() {
                // The candidate's own code ran just before the control's: where the control
                // then met a 409, its run is the answer to what the candidate would have done.
                shadow.trace.reevaluated[i] = failed_on_conflict;
                paired
            } else if execution == Execution::Reused && !reevaluate && !self.sampled() {
                shadow.trace.executions[i] = Execution::Reused;
                shadow.trace.conflicts[i] = control.conflicts[i];
                reuse(theirs.expect("the control ran it"))
            } else if self.plan.operation(op).shadow() == ShadowPolicy::Skip {
                shadow.trace.executions[i] = Execution::NotSimulated;
                StepResult::not_simulated()
            } else {
                // Never ran in the control (or not in the candidate's code), or failed there on
                // a conflict the candidate would retry: find out, through the dry-run client,
                // what the candidate would get.
                shadow.trace.executions[i] = Execution::DryRun;
                shadow.trace.retried[i] = retry;
                shadow.trace.reevaluated[i] = reevaluate;
                if ctx.is_none() {
                    let dry = shadow.dry(self).clone();
                    dry.reset_overlay();
                    let state = state.take().expect("the state goes to the one context");
                    ctx = Some(OpContext::new(
                        dry.client,
                        object.clone(),
                        state,
                        (Execution::DryRun, policy.path()),
                    ));
                }
                let ctx = ctx.as_mut().expect("made above");
                ctx.prepare(retry);
                let dry = shadow.dry(self).clone();
                let _ = dry.writes.take();
                let result = self.execute(op, ctx, &mut shadow.trace).await;
                let operation = self.plan.operation(op);
                if operation.only() == Some(CodePath::Phased)
                    && control_report.kind() == ModelKind::Sequential
                {
                    let written = dry.writes.take();
                    shadow.differences.extend(writes::one_sided(
                        operation,
                        CodePath::Phased,
                        &written,
                        &self.kinds,
                    ));
                }
                result
            };
            run.complete(op, result)
                .expect("the engine completes the pending operation");
        }
        run.into_report()
            .expect("the engine decides every operation")
    }

    /// Whether this reused step is re-executed instead (the sample rate, drawn deterministically).
    fn sampled(&self) -> bool {
        if self.sample_rate <= 0.0 {
            return false;
        }
        let n = self
            .samples
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        crate::util::Rng::new(n).next_f64() < self.sample_rate
    }

    async fn execute(
        &self,
        op: OpId,
        ctx: &mut OpContext<R::Object, R::State>,
        trace: &mut Trace,
    ) -> StepResult {
        let name = self.plan.name_of(op);
        let started = Instant::now();
        trace.offsets[op.index()] = started.duration_since(trace.origin);
        let result = if ctx.path() == CodePath::Legacy && self.legacy_code[op.index()] {
            self.reconciler.run_legacy(name, ctx).await
        } else {
            self.reconciler.run(name, ctx).await
        };
        trace.durations[op.index()] = started.elapsed();
        trace.conflicts[op.index()] = ctx.conflicts();
        match result {
            Ok(output) if output.is_idle() => {
                with_requeue(StepResult::idle(), output.requeue_after())
            }
            Ok(output) => with_requeue(StepResult::succeeded(), output.requeue_after()),
            Err(error) => StepResult::failed(error.class(), error.message().to_owned()),
        }
    }
}

fn with_requeue(result: StepResult, requeue: Option<Duration>) -> StepResult {
    match requeue {
        Some(after) => result.with_requeue(after),
        None => result,
    }
}

/// The control's result of a step, as the candidate reuses it.
fn reuse(step: &crate::model::Step) -> StepResult {
    let result = match &step.outcome {
        Outcome::Failed { class } => {
            StepResult::failed(*class, step.message.clone().unwrap_or_default())
        }
        Outcome::Unknown { .. } => StepResult::not_simulated(),
        Outcome::Idle => StepResult::idle(),
        Outcome::Succeeded | Outcome::Blocked { .. } | Outcome::Skipped { .. } => {
            StepResult::succeeded()
        }
    };
    with_requeue(result, step.requeue_after)
}
