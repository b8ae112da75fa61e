//! The shadow engine: runs a reconcile's control policy for real and its candidate in shadow, on
//! the same object, and hands one `ReconcileRecord` to the sinks.
//!
//! The same pure models decide both runs ([`crate::model`]); the engine only executes. A candidate
//! step the control already ran reuses its result (no request); one the control did not run
//! executes through the [`dryrun`] client; a `shadow: skip` step is not simulated.
//!
//! Layer 3 of the crate (docs/design.md, "Layers"): builds on [`flag`](crate::flag),
//! [`model`](crate::model), [`plan`](crate::plan), [`util`](crate::util), [`vocab`](crate::vocab);
//! nothing here may use a module of its layer or above.

pub mod classify;
pub mod condition;
pub mod conflict;
pub mod controller;
pub mod dryrun;
pub mod operation;
pub mod record;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use kube::Resource;

pub use operation::{OpContext, OpError, OpOutput, OpResult, Reconciler};
pub use record::{
    ConflictResolution, LogSink, MemorySink, ObjectKey, ReconcileRecord, Sink, StepRecord,
    record_of_world,
};
pub(crate) use record::{Trace, assemble};

use crate::flag::{Evaluation, FlagSpec, FlagState, GroupRef, LiveFlag, PlanFlag};
use crate::model::{Decision, Policy, StepResult};
use crate::plan::{LookupError, ReconcilePlan};
use crate::vocab::{Execution, Mode, Outcome, ShadowPolicy};

/// How the engine runs.
#[derive(Clone, Debug)]
pub struct EngineSettings {
    /// off, shadow or enforce.
    pub mode: Mode,
    /// Rollout groups the control enforces (mode `enforce`).
    pub enforced_groups: Vec<String>,
    /// Rollout groups the candidate enforces; `None`: every group.
    pub candidate_groups: Option<Vec<String>>,
    /// Fraction of the steps the candidate would reuse that it re-executes through the dry-run
    /// client instead, to measure whether the phased order changes their outcome (0 to 1).
    pub reexecute_sample_rate: f64,
    /// The share of objects that get `mode`; the others get the mode below it.
    pub ramp: crate::flag::Ramp,
    /// Whether an object's `shadow-reconciler.io/mode` annotation chooses its mode.
    pub allow_object_override: bool,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            mode: Mode::Shadow,
            enforced_groups: Vec::new(),
            candidate_groups: None,
            reexecute_sample_rate: 0.0,
            ramp: crate::flag::Ramp::ALL,
            allow_object_override: false,
        }
    }
}

/// Errors building an engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The plan names operations the code does not implement, or the reverse.
    #[error(
        "plan {plan} and reconciler disagree: {}{}",
        if missing_in_code.is_empty() { String::new() } else { format!("operations in the plan but not in code: {}", missing_in_code.join(", ")) },
        if missing_in_plan.is_empty() { String::new() } else { format!("{}operations in code but not in the plan: {}", if missing_in_code.is_empty() { "" } else { "; " }, missing_in_plan.join(", ")) }
    )]
    Mismatch {
        /// The plan's name.
        plan: String,
        /// Named by the plan, not implemented.
        missing_in_code: Vec<String>,
        /// Implemented, not in the plan.
        missing_in_plan: Vec<String>,
    },
    /// A rollout group named in the settings does not exist.
    #[error(transparent)]
    Group(#[from] LookupError),
    /// The settings do not make a valid flag.
    #[error(transparent)]
    Flag(#[from] crate::flag::FieldError),
}

/// What the controller gets back from one reconcile: the control's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReconcileOutcome {
    /// The control's aggregate error, `None` on success.
    pub error: Option<String>,
    /// The smallest requeue any control operation asked for.
    pub requeue_after: Option<Duration>,
    /// Whether the `ReconciliationSucceeded` condition was written (it changed).
    pub condition_written: bool,
}

/// The engine for one reconciler and plan.
pub struct Engine<R: Reconciler> {
    reconciler: Arc<R>,
    plan: Arc<ReconcilePlan>,
    flag: Arc<LiveFlag>,
    policies: std::sync::Mutex<Arc<Policies>>,
    real: kube::Client,
    dry: dryrun::DryRunClient,
    sinks: Vec<Arc<dyn Sink>>,
    sample_rate: f64,
    samples: std::sync::atomic::AtomicU64,
    trace_seed: u64,
    traces: std::sync::atomic::AtomicU64,
}

impl<R: Reconciler> fmt::Debug for Engine<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("plan", &self.plan.name())
            .field("flag", &self.flag.current().spec.summary())
            .finish_non_exhaustive()
    }
}

impl<R: Reconciler> Engine<R> {
    /// Matches the plan with the reconciler's operations and builds the policies of `settings`.
    pub fn new(
        reconciler: Arc<R>,
        plan: Arc<ReconcilePlan>,
        client: kube::Client,
        settings: &EngineSettings,
    ) -> Result<Self, EngineError> {
        let code = reconciler.operations();
        let missing_in_code: Vec<String> = plan
            .operations()
            .iter()
            .map(crate::plan::Operation::name)
            .filter(|n| !code.contains(n))
            .map(str::to_owned)
            .collect();
        let missing_in_plan: Vec<String> = code
            .iter()
            .filter(|n| plan.lookup(n).is_none())
            .map(|n| (*n).to_owned())
            .collect();
        if !missing_in_code.is_empty() || !missing_in_plan.is_empty() {
            return Err(EngineError::Mismatch {
                plan: plan.name().to_owned(),
                missing_in_code,
                missing_in_plan,
            });
        }
        // Every named group must exist, whatever the mode: a typo is an error, not a no-op.
        plan.group_members(&settings.enforced_groups)?;
        if let Some(groups) = &settings.candidate_groups {
            plan.group_members(groups)?;
        }
        let qualified = |groups: &[String]| -> Vec<GroupRef> {
            groups
                .iter()
                .map(|g| GroupRef::qualified(plan.name(), g))
                .collect()
        };
        let spec = FlagSpec {
            mode: settings.mode,
            enforced_groups: qualified(&settings.enforced_groups),
            candidate_groups: settings.candidate_groups.as_deref().map(qualified),
            ramp: settings.ramp,
            allow_object_override: settings.allow_object_override,
        };
        let flag = Arc::new(LiveFlag::new(spec, vec![plan.clone()])?);
        let policies = Policies::build(&plan, &flag.current())?;
        Ok(Self {
            reconciler,
            plan,
            flag,
            policies: std::sync::Mutex::new(Arc::new(policies)),
            dry: dryrun::DryRunClient::new(client.clone()),
            real: client,
            sinks: Vec::new(),
            sample_rate: settings.reexecute_sample_rate.clamp(0.0, 1.0),
            samples: std::sync::atomic::AtomicU64::new(0),
            trace_seed: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| {
                    u64::try_from(d.as_nanos() & u128::from(u64::MAX)).unwrap_or(0)
                }),
            traces: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Adds a sink.
    #[must_use]
    pub fn with_sink(mut self, sink: Arc<dyn Sink>) -> Self {
        self.sinks.push(sink);
        self
    }

    /// The plan.
    #[must_use]
    pub fn plan(&self) -> &Arc<ReconcilePlan> {
        &self.plan
    }

    /// Decides every reconcile's mode from `flag` (shared with a watcher and other engines)
    /// instead of the settings given to [`Engine::new`].
    #[must_use]
    pub fn with_flag(mut self, flag: Arc<LiveFlag>) -> Self {
        self.flag = flag;
        self
    }

    /// The flag deciding each reconcile's mode.
    #[must_use]
    pub fn flag(&self) -> &Arc<LiveFlag> {
        &self.flag
    }

    /// The policies for the flag in force, rebuilt when it changed.
    fn policies(&self, state: &FlagState) -> Arc<Policies> {
        let mut cached = self
            .policies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cached.generation != state.generation || !Arc::ptr_eq(&cached.spec, &state.spec) {
            match Policies::build(&self.plan, state) {
                Ok(built) => *cached = Arc::new(built),
                // Unreachable: a flag names only groups the plan has (`FlagSpec::for_plan`).
                Err(error) => {
                    tracing::error!(%error, "cannot build the policies of the flag; keeping the previous ones");
                }
            }
        }
        cached.clone()
    }

    /// The dry-run client's counters (guard refusals must stay 0).
    #[must_use]
    pub fn guard(&self) -> &Arc<dryrun::GuardStats> {
        self.dry.stats()
    }

    /// Reconciles one object: control for real, candidate in shadow, record to the sinks,
    /// condition written from the control when it changed.
    ///
    /// # Panics
    /// Never: the engine completes exactly the operations its models ask for, and both runs
    /// follow the engine's own plan.
    pub async fn reconcile(&self, object: Arc<R::Object>) -> ReconcileOutcome {
        let started_at = SystemTime::now();
        let started = Instant::now();
        let flag = self.flag.current();
        let policies = self.policies(&flag);
        let evaluation = evaluate(&flag, &policies.flag, object.as_ref());
        let (control_policy, candidate_policy) = policies.for_mode(evaluation.mode);
        let (control_report, control, state) =
            self.run_control(control_policy, &object, started).await;
        let candidate = match candidate_policy {
            Some(policy) => Some(
                self.run_candidate(policy, started, &object, &control_report, &control, state)
                    .await,
            ),
            None => None,
        };
        let condition_written = self.write_condition(&object, &control_report).await;
        let mut record = assemble(
            &self.plan,
            key_of(object.as_ref()),
            (evaluation.mode, Some(evaluation)),
            started_at,
            (&control_report, &control),
            candidate.as_ref().map(|(report, trace, _)| (report, trace)),
            Some(self.next_trace_id()),
        );
        if let Some((_, _, guard)) = &candidate {
            record.guard_refusals = u32::try_from(guard.refused()).unwrap_or(u32::MAX);
            record.dry_run_requests = u32::try_from(guard.dry_run_requests()).unwrap_or(u32::MAX);
        }
        record.duration = started.elapsed();
        for sink in &self.sinks {
            sink.record(&record);
        }
        ReconcileOutcome {
            error: record.control_error.clone(),
            requeue_after: control_report.requeue_after(),
            condition_written,
        }
    }

    /// Whether `op` runs with retry-on-conflict under `policy`: only enforced operations whose
    /// plan says so, in the phased model.
    fn retries(&self, op: crate::vocab::OpId, policy: &Policy) -> bool {
        policy.kind() == crate::model::ModelKind::Phased
            && policy.enforced().contains(op)
            && self.plan.operation(op).retry_on_conflict()
    }

    async fn run_control(
        &self,
        policy: &Policy,
        object: &Arc<R::Object>,
        origin: Instant,
    ) -> (crate::model::Report, Trace, R::State) {
        let mut ctx = OpContext::new(
            self.real.clone(),
            object.clone(),
            R::State::default(),
            Execution::Real,
        );
        let mut trace = Trace::new(self.plan.len(), origin);
        let mut run = policy.start();
        while let Some(decision) = run.next() {
            let Decision::Run(op) = decision else {
                continue;
            };
            let retry = self.retries(op, policy);
            ctx.prepare(retry);
            trace.retried[op.index()] = retry;
            trace.executions[op.index()] = Execution::Real;
            let result = self.execute(op, &mut ctx, &mut trace).await;
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

    /// The candidate: reuse what the control ran, dry-run the rest, skip what is `shadow: skip`.
    async fn run_candidate(
        &self,
        policy: &Policy,
        origin: Instant,
        object: &Arc<R::Object>,
        control_report: &crate::model::Report,
        control: &Trace,
        state: R::State,
    ) -> (crate::model::Report, Trace, Arc<dryrun::GuardStats>) {
        // The dry-run client (a client of its own, with its overlay and a worker task) is made
        // only when a step must be dry-run: on the happy path every step is reused and the
        // candidate costs no client at all.
        let (mut state, mut guard, mut ctx) = (Some(state), None, None);
        let mut trace = Trace::new(self.plan.len(), origin);
        let mut run = policy.start();
        while let Some(decision) = run.next() {
            let Decision::Run(op) = decision else {
                continue;
            };
            let i = op.index();
            let theirs = control_report.step(op);
            let retry = self.retries(op, policy);
            let failed_on_conflict =
                theirs.outcome.error_class() == Some(crate::vocab::ErrorClass::Conflict);
            let reevaluate = failed_on_conflict && retry && !control.retried[i];
            let result = if theirs.executed && !reevaluate && !self.sampled() {
                trace.executions[i] = Execution::Reused;
                trace.conflicts[i] = control.conflicts[i];
                reuse(theirs)
            } else if self.plan.operation(op).shadow() == ShadowPolicy::Skip {
                trace.executions[i] = Execution::NotSimulated;
                StepResult::not_simulated()
            } else {
                // Never ran in the control, or failed there on a conflict the candidate would
                // retry: find out, through the dry-run client, what the candidate would get.
                trace.executions[i] = Execution::DryRun;
                trace.retried[i] = retry;
                let ctx = ctx.get_or_insert_with(|| {
                    let (client, counted) = self.dry.for_reconcile_counted();
                    guard = Some(counted);
                    let state = state.take().expect("the state goes to the one context");
                    OpContext::new(client, object.clone(), state, Execution::DryRun)
                });
                ctx.prepare(retry);
                self.execute(op, ctx, &mut trace).await
            };
            run.complete(op, result)
                .expect("the engine completes the pending operation");
        }
        (
            run.into_report()
                .expect("the engine decides every operation"),
            trace,
            guard.unwrap_or_default(),
        )
    }

    /// A fresh W3C trace id (32 hex digits, never all zero) for the next reconcile.
    fn next_trace_id(&self) -> String {
        let n = self
            .traces
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut rng =
            crate::util::Rng::new(self.trace_seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let (high, low) = (rng.next_u64(), rng.next_u64() | 1);
        format!("{high:016x}{low:016x}")
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

    async fn write_condition(
        &self,
        object: &Arc<R::Object>,
        report: &crate::model::Report,
    ) -> bool {
        match condition::write_if_changed(&self.real, object.as_ref(), &report.condition()).await {
            Ok(written) => written,
            Err(error) => {
                let name = object.meta().name.as_deref().unwrap_or_default();
                tracing::warn!(%error, object = name, "cannot write the ReconciliationSucceeded condition");
                false
            }
        }
    }

    async fn execute(
        &self,
        op: crate::vocab::OpId,
        ctx: &mut OpContext<R::Object, R::State>,
        trace: &mut Trace,
    ) -> StepResult {
        let name = self.plan.name_of(op);
        let started = Instant::now();
        trace.offsets[op.index()] = started.duration_since(trace.origin);
        let result = self.reconciler.run(name, ctx).await;
        trace.durations[op.index()] = started.elapsed();
        trace.conflicts[op.index()] = ctx.conflicts();
        match result {
            Ok(output) => with_requeue(StepResult::succeeded(), output.requeue_after()),
            Err(error) => StepResult::failed(error.class(), error.message().to_owned()),
        }
    }
}

/// The policies of one flag for this engine's plan, built once per flag change.
struct Policies {
    spec: Arc<FlagSpec>,
    generation: u64,
    flag: PlanFlag,
    sequential: Policy,
    enforce: Policy,
    candidate: Policy,
}

impl Policies {
    fn build(plan: &Arc<ReconcilePlan>, state: &FlagState) -> Result<Self, LookupError> {
        let flag = state.spec.for_plan(plan);
        let candidate = match &flag.candidate_groups {
            Some(groups) => Policy::phased(plan.clone(), groups)?,
            None => Policy::phased_all_groups(plan.clone()),
        };
        Ok(Self {
            spec: state.spec.clone(),
            generation: state.generation,
            sequential: Policy::sequential(plan.clone()),
            enforce: Policy::phased(plan.clone(), &flag.enforced_groups)?,
            candidate,
            flag,
        })
    }

    /// The control and the candidate of `mode`.
    const fn for_mode(&self, mode: Mode) -> (&Policy, Option<&Policy>) {
        match mode {
            Mode::Off => (&self.sequential, None),
            Mode::Shadow => (&self.sequential, Some(&self.candidate)),
            Mode::Enforce => (&self.enforce, Some(&self.candidate)),
        }
    }
}

/// The object's mode under the flag: by its UID's bucket, or its annotation when allowed.
fn evaluate<K: Resource>(state: &FlagState, flag: &PlanFlag, object: &K) -> Evaluation {
    let meta = object.meta();
    let fallback;
    let uid = if let Some(uid) = &meta.uid {
        uid.as_str()
    } else {
        fallback = format!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default()
        );
        &fallback
    };
    let annotation = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::flag::ANNOTATION))
        .map(String::as_str);
    state.evaluate(flag, uid, annotation)
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
        Outcome::Succeeded | Outcome::Blocked { .. } | Outcome::Skipped { .. } => {
            StepResult::succeeded()
        }
    };
    with_requeue(result, step.requeue_after)
}

fn key_of<K: Resource<DynamicType = ()>>(object: &K) -> ObjectKey {
    let meta = object.meta();
    ObjectKey {
        kind: K::kind(&()).into_owned(),
        namespace: meta.namespace.clone(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone(),
    }
}
