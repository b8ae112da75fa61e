//! The legacy loop as one function: the shape of a reconciler that kept its old loop as code of
//! its own beside the phased reconcile (HyperShift's `reconcileLegacy`). The function reports
//! where each operation starts ([`LegacyLoop::step`]); the engine runs the candidate's phased
//! code of that operation in dry-run right there (paired, on the same world), attributes the
//! function's writes and its error to the operation it is in, and replays the sequential model
//! over what the marks say. See `docs/engine.md`, "Candidate code".

use std::sync::Arc;
use std::time::Instant;

use super::Engine;
use super::operation::{OpError, Reconciler};
use super::record::Trace;
use super::runs::Shadow;
use super::writes::WriteLog;
use crate::model::{Decision, Policy, Report, StepResult};
use crate::vocab::{CodePath, Execution, OpId};

/// A legacy loop function's writes per operation in its dry-run rehearsal (mode `calibrate`):
/// `None` where it did not get.
type Rehearsed = Vec<Option<Vec<super::writes::Write>>>;

/// What a legacy loop function sees: the client of the control (its writes are real), the object,
/// and the marks of its steps.
pub struct LegacyLoop<'a, R: Reconciler> {
    engine: &'a Engine<R>,
    shadow: &'a mut Shadow,
    candidate: Option<&'a Policy>,
    object: Arc<R::Object>,
    client: kube::Client,
    log: Option<WriteLog>,
    /// The candidate's own state, carried from one paired operation to the next.
    state: Option<R::State>,
    /// The operation the function is in, and when it started.
    current: Option<(OpId, Instant)>,
    results: Vec<Option<StepResult>>,
    trace: Trace,
    unknown: Vec<String>,
    /// Mode `calibrate`, the dry-run rehearsal: each operation's writes, kept for the real pass
    /// (`None` for an operation it did not reach).
    rehearsal: Option<Rehearsed>,
    /// Mode `calibrate`, the real pass: the rehearsal's writes of each operation, compared with
    /// the real ones.
    rehearsed: Option<Rehearsed>,
    /// The rehearsal ends here: at the mark of an operation a dry run cannot contain.
    stop: Option<Arc<tokio::sync::Notify>>,
}

impl<R: Reconciler> LegacyLoop<'_, R> {
    /// The control's client: real writes (logged, for the comparison, in shadow mode).
    #[must_use]
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The object being reconciled, as the controller's cache saw it.
    #[must_use]
    pub fn object(&self) -> &Arc<R::Object> {
        &self.object
    }

    /// Marks the start of operation `name` of the plan's legacy path: the operation before it
    /// succeeded (the function went on); in shadow mode, the candidate's code of `name` runs now
    /// in dry-run, before the function goes on with its own. A name the plan's legacy path does
    /// not have is logged once and ignored.
    pub async fn step(&mut self, name: &str) {
        let plan = &self.engine.plan;
        let Some(op) = plan
            .lookup(name)
            .filter(|&op| plan.operation(op).in_path(CodePath::Legacy))
        else {
            if !self.unknown.iter().any(|n| n == name) {
                tracing::warn!(
                    plan = plan.name(),
                    step = name,
                    "the legacy loop marks a step the plan's legacy path does not have; ignored"
                );
                self.unknown.push(name.to_owned());
            }
            return;
        };
        self.close(StepResult::succeeded());
        if let Some(stop) = &self.stop
            && plan.operation(op).shadow() == crate::vocab::ShadowPolicy::Skip
        {
            // A rehearsal never runs what a dry run cannot contain (an upload to cloud storage,
            // the legacy path's own steps): it ends at this mark, the function not resumed.
            stop.notify_one();
            std::future::pending::<()>().await;
        }
        if let Some(candidate) = self.candidate
            && plan.operation(op).only().is_none()
            && plan.operation(op).shadow() != crate::vocab::ShadowPolicy::Skip
        {
            let state = self.state.take().unwrap_or_default();
            let state = self
                .engine
                .run_paired(op, candidate, &self.object, state, self.shadow)
                .await;
            self.state = Some(state);
        }
        if let Some(log) = &self.log {
            let _ = log.take();
        }
        if let Some(rehearsed) = &mut self.rehearsed {
            // What the rehearsal did not reach is not compared.
            self.shadow.pending = rehearsed[op.index()].take().map(|w| (op, w));
        }
        self.current = Some((op, Instant::now()));
    }

    /// Ends the current step with `result`, its writes compared.
    fn close(&mut self, result: StepResult) {
        let Some((op, started)) = self.current.take() else {
            return;
        };
        let i = op.index();
        self.trace.executions[i] = Execution::Real;
        self.trace.offsets[i] = started.duration_since(self.trace.origin);
        self.trace.durations[i] = started.elapsed();
        let ok = result.error_class().is_none();
        self.results[i] = Some(result);
        if let Some(log) = &self.log {
            let written = log.take();
            match &mut self.rehearsal {
                // A step the rehearsal failed is not compared.
                Some(rehearsal) => rehearsal[i] = ok.then_some(written),
                None => self
                    .engine
                    .collect_differences(op, (&written, ok), self.shadow),
            }
        }
    }
}

impl<R: Reconciler> Engine<R> {
    /// The control as the reconciler's legacy loop function, replayed through `policy` (the
    /// sequential model): returns its report, trace and the state the candidate starts from.
    pub(super) async fn run_legacy_loop(
        &self,
        (policy, compare): (&Policy, Option<&Policy>),
        object: &Arc<R::Object>,
        origin: Instant,
        shadow: &mut Shadow,
    ) -> (Report, Trace, R::State) {
        let n = self.plan.len();
        // Calibrate: the whole function first in dry-run, on the world the real pass then runs
        // in; its writes, step by step, are the paired runs of the real pass's steps.
        let rehearsed = if shadow.calibrate {
            Some(self.rehearse(object, origin, shadow).await)
        } else {
            None
        };
        let (client, log) = if compare.is_none() && rehearsed.is_none() {
            (self.real.clone(), None)
        } else {
            let (client, log) = super::recording::recording(&self.real);
            (client, Some(log))
        };
        let mut lp = LegacyLoop {
            engine: self,
            shadow,
            candidate: compare,
            object: object.clone(),
            client,
            log,
            state: None,
            current: None,
            results: vec![None; n],
            trace: Trace::new(n, origin),
            unknown: Vec::new(),
            rehearsal: None,
            rehearsed,
            stop: None,
        };
        let result = match self.reconciler.legacy_loop() {
            Some(function) => function.call(&mut lp).await,
            None => Err(OpError::internal(
                "the reconciler offers no legacy loop function",
            )),
        };
        let marked = lp.current.is_some() || lp.results.iter().any(Option::is_some);
        let outcome = match &result {
            Ok(output) => match output.requeue_after() {
                Some(after) => StepResult::succeeded().with_requeue(after),
                None => StepResult::succeeded(),
            },
            Err(error) => failure(error),
        };
        if marked {
            lp.close(outcome.clone());
        } else if let Err(error) = &result {
            // Which step failed is not known: the steps are unknown, the error is the control's.
            lp.shadow.opaque_error = Some(error.message().to_owned());
        }
        let LegacyLoop {
            results,
            mut trace,
            state,
            ..
        } = lp;
        // The sequential model over the marks: a marked operation's result; an unmarked one
        // succeeded (the function went past it, or returned). A function that marked nothing
        // and failed: not known.
        let mut run = policy.start();
        let mut first = true;
        while let Some(decision) = run.next() {
            let Decision::Run(op) = decision else {
                continue;
            };
            let i = op.index();
            trace.executions[i] = Execution::Real;
            let result = match (&results[i], marked, &result) {
                (Some(result), _, _) => result.clone(),
                (None, false, Err(_)) => StepResult::not_simulated(),
                // The function's requeue, on its first step when it marked none.
                (None, false, Ok(_)) if first => outcome.clone(),
                (None, _, _) => StepResult::succeeded(),
            };
            first = false;
            run.complete(op, result)
                .expect("the engine completes the pending operation");
        }
        (
            run.into_report()
                .expect("the engine decides every operation"),
            trace,
            state.unwrap_or_default(),
        )
    }
}

impl<R: Reconciler> Engine<R> {
    /// Mode `calibrate` with a legacy loop function: the function run through the dry-run
    /// client, its writes kept per step (its outcome is not the control's), up to the mark of
    /// the first operation a dry run cannot contain (`shadow: skip`, the legacy path's own),
    /// where it is dropped.
    async fn rehearse(
        &self,
        object: &Arc<R::Object>,
        origin: Instant,
        shadow: &mut Shadow,
    ) -> Rehearsed {
        let n = self.plan.len();
        let dry = shadow.dry(self).clone();
        dry.reset_overlay();
        let _ = dry.writes.take();
        let stop = Arc::new(tokio::sync::Notify::new());
        let mut lp = LegacyLoop {
            engine: self,
            shadow,
            candidate: None,
            object: object.clone(),
            client: dry.client.clone(),
            log: Some(dry.writes.clone()),
            state: None,
            current: None,
            results: vec![None; n],
            trace: Trace::new(n, origin),
            unknown: Vec::new(),
            rehearsal: Some(vec![None; n]),
            rehearsed: None,
            stop: Some(stop.clone()),
        };
        {
            if let Some(function) = self.reconciler.legacy_loop() {
                tokio::select! {
                    _ = function.call(&mut lp) => {}
                    () = stop.notified() => {}
                }
            }
        }
        lp.close(StepResult::succeeded());
        lp.rehearsal.take().unwrap_or_default()
    }
}

fn failure(error: &OpError) -> StepResult {
    StepResult::failed(error.class(), error.message().to_owned())
}
