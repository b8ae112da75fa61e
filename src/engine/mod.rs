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

pub mod allocated;
pub mod budget;
pub mod classify;
pub mod condition;
pub mod conflict;
pub mod controller;
pub mod dryrun;
pub mod fielddiff;
mod legacy;
pub mod operation;
mod policies;
pub mod pressure;
pub mod record;
mod recording;
mod runs;
pub mod writes;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use kube::Resource;

pub use legacy::LegacyLoop;
pub use operation::{LegacyLoopFn, OpContext, OpError, OpOutput, OpResult, Reconciler};
pub use record::{
    ConflictResolution, LogSink, MemorySink, ObjectKey, ReconcileRecord, Sink, StepRecord,
    cancelled_record, record_of_world,
};
pub(crate) use record::{Trace, assemble};
pub use writes::WriteDifference;

use crate::flag::{Evaluation, FlagState, LiveFlag, PlanFlag};
use crate::plan::{LookupError, ReconcilePlan};
use crate::vocab::{CodePath, ComparisonSkip, Mode};
use policies::Policies;

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
    /// `legacy_code` names an operation that cannot have legacy code of its own.
    #[error(
        "plan {plan}: the reconciler gives operation {operation} legacy code, but it {problem}"
    )]
    LegacyCode {
        /// The plan's name.
        plan: String,
        /// The operation.
        operation: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// The flag was built for other plans than the engine's: it cannot place this plan's
    /// groups.
    #[error(
        "plan {plan}: the flag given to the engine was built for the plans {known}, not this one (build the LiveFlag with every plan its engines run)"
    )]
    FlagPlan {
        /// The engine's plan.
        plan: String,
        /// The plans the flag knows.
        known: String,
    },
    /// A rollout group of the flag does not exist in the engine's plan.
    #[error(transparent)]
    Group(#[from] LookupError),
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

/// The engine for one reconciler and plan: [`reconcile`](Engine::reconcile) runs the control for
/// real and the candidate in shadow, records both to the sinks, and answers with the control's
/// verdict ([`Reconciler`] shows a whole reconcile; `wiring::Wiring` adds the process's sinks).
///
/// It starts only when the plan and the code name the same operations:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use shadow_reconciler::engine::Engine;
/// use shadow_reconciler::flag::{FlagSpec, LiveFlag};
/// use shadow_reconciler::reconcilers::addon::AddOnReconciler;
/// use shadow_reconciler::reconcilers::hostedcluster::HostedClusterReconciler;
///
/// // No request is made until a reconcile: any address will do here.
/// let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse()?))?;
/// let plan = HostedClusterReconciler::plan();
/// let flag = Arc::new(LiveFlag::new(FlagSpec::default(), vec![plan.clone()])?);
/// let engine = Engine::new(Arc::new(HostedClusterReconciler), plan.clone(), client.clone(), flag.clone())?;
/// assert_eq!(engine.plan().name(), "hostedcluster");
///
/// // The add-on reconciler's code against the HostedCluster plan: refused, the differences named.
/// let refused = Engine::new(Arc::new(AddOnReconciler), plan, client, flag).unwrap_err();
/// assert!(refused.to_string().starts_with("plan hostedcluster and reconciler disagree"));
/// # Ok(())
/// # }
/// ```
pub struct Engine<R: Reconciler> {
    reconciler: Arc<R>,
    plan: Arc<ReconcilePlan>,
    /// Per operation: whether `run_legacy` is its legacy code.
    legacy_code: Vec<bool>,
    /// The kinds of the resources written, for naming deleted objects.
    kinds: writes::Kinds,
    flag: Arc<LiveFlag>,
    policies: std::sync::Mutex<Arc<Policies>>,
    /// The control's client as given, and watched for load ([`pressure::watched`]).
    given: kube::Client,
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
    /// Matches the plan with the reconciler's operations; every reconcile's mode, rollout groups,
    /// ramp and annotation override then come from `flag` (the one carrier of those settings,
    /// built from the command line and updated by the ConfigMap watcher; engines of several
    /// plans share one).
    pub fn new(
        reconciler: Arc<R>,
        plan: Arc<ReconcilePlan>,
        client: kube::Client,
        flag: Arc<LiveFlag>,
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
        let mut legacy_code = vec![false; plan.len()];
        for name in reconciler.legacy_code() {
            let op = plan
                .lookup(name)
                .filter(|_| code.contains(name))
                .ok_or_else(|| EngineError::LegacyCode {
                    plan: plan.name().to_owned(),
                    operation: (*name).to_owned(),
                    problem: "is not one of the reconciler's operations (list it in `operations` too)",
                })?;
            if plan.operation(op).only() == Some(CodePath::Phased) {
                return Err(EngineError::LegacyCode {
                    plan: plan.name().to_owned(),
                    operation: (*name).to_owned(),
                    problem: "has `only: phased` in the plan: the legacy loop never runs it, so it has no legacy code",
                });
            }
            legacy_code[op.index()] = true;
        }
        // A declared difference of an operation whose two paths share their code never matches:
        // said once, at start, rather than found missing in the data.
        for op in plan.operations() {
            if !op.intended_differences().is_empty()
                && op.only().is_none()
                && !legacy_code[op.id().index()]
                && reconciler.legacy_loop().is_none()
            {
                tracing::warn!(
                    plan = plan.name(),
                    operation = op.name(),
                    "the plan declares intended write differences for an operation whose legacy and phased code are the same here (not in the reconciler's legacy_code): they are never compared"
                );
            }
        }
        // The flag checked its groups against its plans (a typo is an error, not a no-op); it
        // must know this one.
        if !flag.plans().iter().any(|p| p.name() == plan.name()) {
            return Err(EngineError::FlagPlan {
                plan: plan.name().to_owned(),
                known: flag
                    .plans()
                    .iter()
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let policies = Policies::build(&plan, &flag.current())?;
        Ok(Self {
            reconciler,
            plan,
            legacy_code,
            kinds: writes::Kinds::default(),
            flag,
            policies: std::sync::Mutex::new(Arc::new(policies)),
            dry: dryrun::DryRunClient::new(client.clone()),
            real: client.clone(),
            given: client,
            sinks: Vec::new(),
            sample_rate: 0.0,
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

    /// Re-executes this fraction (0 to 1, clamped) of the steps the candidate would reuse through
    /// the dry-run client instead, to measure whether the phased order changes their outcome
    /// (default 0: every reusable step reused).
    #[must_use]
    pub fn with_reexecute_sample_rate(mut self, rate: f64) -> Self {
        self.sample_rate = rate.clamp(0.0, 1.0);
        self
    }

    /// The shadow's own request budget (shared by the engines of one process): every request
    /// the candidate sends takes a token, and a reconcile whose comparison finds it spent runs
    /// its control alone, counted (default: unlimited; `run` gives
    /// [`ShadowBudget::default`](budget::ShadowBudget::default)).
    #[must_use]
    pub fn with_shadow_budget(mut self, budget: Arc<budget::ShadowBudget>) -> Self {
        self.real = pressure::watched(self.given.clone(), budget.pressure().clone());
        self.dry.set_budget(budget);
        self
    }

    /// The shadow's requests go through `client` instead of the control's: best one built
    /// without kube's retry of 429s (`kube::Config::default_retry` off), so that the first 429
    /// pauses the shadow ([`pressure`]) instead of the client waiting for the server.
    #[must_use]
    pub fn with_shadow_client(mut self, client: kube::Client) -> Self {
        self.dry.set_client(client);
        self
    }

    /// The budget the candidate's requests spend.
    #[must_use]
    pub fn shadow_budget(&self) -> &Arc<budget::ShadowBudget> {
        self.dry.budget()
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
        let (control_policy, candidate_policy) = policies.of(&evaluation);
        let calibrate = evaluation.mode == Mode::Calibrate;
        // A comparison starts only within the shadow's budget, and one that pairs code (the
        // candidate's own code beside the control's, or calibrate's) for the objects of the
        // paired sample only: otherwise the control runs alone, exactly as it would with the
        // shadow off, and the skip is recorded.
        let mut skipped = if candidate_policy.is_some() || calibrate {
            let pairs = calibrate || self.pairs_code(control_policy, candidate_policy);
            let uid = pairs.then(|| uid_of(object.as_ref()));
            self.dry.budget().admit(uid.as_deref()).err()
        } else {
            None
        };
        let (candidate_policy, calibrate) = if skipped.is_some() {
            (None, false)
        } else {
            (candidate_policy, calibrate)
        };
        // Dropped before the end (a shutdown's grace expired, a timeout around the reconcile),
        // it leaves a cancelled record instead of nothing.
        let mut unfinished = Unfinished {
            engine: self,
            parts: Some((key_of(object.as_ref()), evaluation, started_at, started)),
        };
        let mut shadow = runs::Shadow::new(self.plan.len(), started, calibrate);
        let (control_report, control, state) = self
            .run_control(
                (control_policy, candidate_policy),
                &object,
                started,
                &mut shadow,
            )
            .await;
        // Paused during the control's run (its request met a 429, or slowed down): the shadow
        // steps aside at once, before the candidate's requests.
        let candidate_policy = candidate_policy.filter(|_| {
            let paused = self.dry.budget().pressure().paused_at(Instant::now());
            if paused {
                skipped = Some(ComparisonSkip::Paused);
            }
            !paused
        });
        let mut candidate = match candidate_policy {
            Some(policy) => Some(
                self.run_candidate(
                    policy,
                    &object,
                    (&control_report, &control),
                    state,
                    &mut shadow,
                )
                .await,
            ),
            None => None,
        };
        // A legacy loop function that failed without marking a step: its error is the
        // control's, whatever the (unknown) steps say.
        let opaque = shadow.opaque_error.take();
        let condition = match &opaque {
            Some(message) => crate::model::Condition {
                type_: crate::model::CONDITION_TYPE,
                status: crate::model::ConditionStatus::False,
                reason: crate::model::REASON_ERROR,
                message: message.clone(),
            },
            None => control_report.condition(),
        };
        let condition_written = self.write_condition(&object, &condition).await;
        // A comparison whose requests the server throttled measured the server's load, not the
        // candidate: it is dropped, counted as paused (the shadow is, from now).
        let compared = candidate.is_some() || calibrate;
        let guard = shadow.guard();
        if compared && guard.throttled() > 0 {
            candidate = None;
            shadow.differences.clear();
            skipped = Some(ComparisonSkip::Paused);
        }
        let (key, evaluation, _, _) = unfinished.finish();
        let mut record = assemble(
            &self.plan,
            key,
            (evaluation.mode, Some(evaluation.decision)),
            started_at,
            (&control_report, &control),
            candidate.as_ref().map(|report| (report, &shadow.trace)),
            Some(self.next_trace_id()),
        );
        if let Some(error) = opaque {
            record.control_error = Some(error);
        }
        if compared {
            record.guard_refusals = u32::try_from(guard.refused()).unwrap_or(u32::MAX);
            record.dry_run_requests = u32::try_from(guard.dry_run_requests()).unwrap_or(u32::MAX);
            record.write_differences = std::mem::take(&mut shadow.differences);
        }
        record.comparison_skipped = skipped;
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

    async fn write_condition(
        &self,
        object: &Arc<R::Object>,
        condition: &crate::model::Condition,
    ) -> bool {
        match condition::write_if_changed(&self.real, object.as_ref(), condition).await {
            Ok(written) => written,
            Err(error) => {
                let name = object.meta().name.as_deref().unwrap_or_default();
                tracing::warn!(%error, object = name, "cannot write the ReconciliationSucceeded condition");
                false
            }
        }
    }
}

/// A reconcile that has not finished yet: when its future is dropped before [`finish`]
/// (`Unfinished::finish`), the sinks get a cancelled record of it (`ReconcileRecord::cancelled`).
struct Unfinished<'e, R: Reconciler> {
    engine: &'e Engine<R>,
    parts: Option<(ObjectKey, Evaluation, SystemTime, Instant)>,
}

impl<R: Reconciler> Unfinished<'_, R> {
    /// The reconcile finished: what it was started with, and nothing is recorded on drop.
    fn finish(&mut self) -> (ObjectKey, Evaluation, SystemTime, Instant) {
        self.parts.take().expect("a reconcile finishes once")
    }
}

impl<R: Reconciler> Drop for Unfinished<'_, R> {
    fn drop(&mut self) {
        let Some((key, evaluation, started_at, started)) = self.parts.take() else {
            return;
        };
        let record = record::cancelled_record(
            &self.engine.plan,
            key,
            (evaluation.mode, Some(evaluation.decision)),
            started_at,
            started.elapsed(),
            Some(self.engine.next_trace_id()),
        );
        for sink in &self.engine.sinks {
            sink.record(&record);
        }
    }
}

/// The object's mode under the flag: by its UID's bucket, or its annotation when allowed.
fn evaluate<K: Resource>(state: &FlagState, plan: &PlanFlag, object: &K) -> Evaluation {
    let annotation = object
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::flag::ANNOTATION))
        .map(String::as_str);
    state.evaluate(plan, &uid_of(object), annotation)
}

/// The object's UID, or `namespace/name` when it has none (an object not from a server).
fn uid_of<K: Resource>(object: &K) -> std::borrow::Cow<'_, str> {
    let meta = object.meta();
    meta.uid.as_deref().map_or_else(
        || {
            let (namespace, name) = (meta.namespace.as_deref(), meta.name.as_deref());
            format!(
                "{}/{}",
                namespace.unwrap_or_default(),
                name.unwrap_or_default()
            )
            .into()
        },
        Into::into,
    )
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
