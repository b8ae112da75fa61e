//! What a reconciler implements: named async operations over a shared per-reconcile state.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::classify::classify;
use crate::vocab::{CodePath, ErrorClass, Execution};

/// An operation's error: its class and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpError {
    class: ErrorClass,
    message: String,
}

impl OpError {
    /// An error of a chosen class.
    #[must_use]
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        Self {
            class,
            message: message.into(),
        }
    }
    /// A precondition the operation checks did not hold (an input is missing).
    #[must_use]
    pub fn precondition(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Precondition, message)
    }
    /// A bug or unexpected state inside the operation.
    #[must_use]
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Internal, message)
    }
    /// The error's class.
    #[must_use]
    pub const fn class(&self) -> ErrorClass {
        self.class
    }
    /// The error's text.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
    /// The same error with `context: ` in front of its text.
    #[must_use]
    pub fn context(mut self, context: &str) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.class)
    }
}

impl std::error::Error for OpError {}

impl From<kube::Error> for OpError {
    fn from(error: kube::Error) -> Self {
        let message = match &error {
            kube::Error::Api(status) => status.message.clone(),
            other => other.to_string(),
        };
        Self {
            class: classify(&error),
            message,
        }
    }
}

/// What an operation returns on success.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpOutput {
    requeue_after: Option<Duration>,
    idle: bool,
}

impl OpOutput {
    /// Done, no requeue requested.
    #[must_use]
    pub const fn done() -> Self {
        Self {
            requeue_after: None,
            idle: false,
        }
    }
    /// Done, and reconcile again after `after`.
    #[must_use]
    pub const fn requeue(after: Duration) -> Self {
        Self {
            requeue_after: Some(after),
            idle: false,
        }
    }
    /// Done, and there was nothing to do (a branch the object does not take, an object already
    /// as wanted): the step's outcome is `idle`, a success that is no evidence (a candidate step
    /// with nothing to do is never "unblocked").
    #[must_use]
    pub const fn nothing_to_do() -> Self {
        Self {
            requeue_after: None,
            idle: true,
        }
    }
    /// The requested requeue.
    #[must_use]
    pub const fn requeue_after(&self) -> Option<Duration> {
        self.requeue_after
    }
    /// Whether the operation said it had nothing to do.
    #[must_use]
    pub const fn is_idle(&self) -> bool {
        self.idle
    }
}

/// The result of one operation.
pub type OpResult = Result<OpOutput, OpError>;

/// Everything an operation may use: the client of its run, the object, the state shared with the
/// other operations of the same run, and how it is being executed.
pub struct OpContext<K, S> {
    client: kube::Client,
    object: Arc<K>,
    /// State shared between the operations of one run (e.g. the object one operation created
    /// and a later one needs). The candidate starts from a copy of the control's final state.
    pub state: S,
    execution: Execution,
    path: CodePath,
    retry_on_conflict: bool,
    conflicts: u32,
}

impl<K, S> OpContext<K, S> {
    pub(super) fn new(
        client: kube::Client,
        object: Arc<K>,
        state: S,
        (execution, path): (Execution, CodePath),
    ) -> Self {
        Self {
            client,
            object,
            state,
            execution,
            path,
            retry_on_conflict: false,
            conflicts: 0,
        }
    }

    /// Runs the next operations with `client`, returning the one used so far.
    pub(super) fn swap_client(&mut self, client: kube::Client) -> kube::Client {
        std::mem::replace(&mut self.client, client)
    }

    pub(super) fn prepare(&mut self, retry_on_conflict: bool) {
        self.retry_on_conflict = retry_on_conflict;
        self.conflicts = 0;
    }

    /// The client of this run: real in the control, dry-run in the candidate.
    #[must_use]
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }
    /// The object being reconciled (as the controller's cache saw it).
    #[must_use]
    pub fn object(&self) -> &Arc<K> {
        &self.object
    }
    /// Whether writes are dry runs.
    #[must_use]
    pub const fn is_dry_run(&self) -> bool {
        matches!(self.execution, Execution::DryRun)
    }
    /// Which code path runs the operation: `legacy` in the legacy loop (the `sequential`
    /// model), `phased` in the phased reconcile. An operation whose code differs between the
    /// two is dispatched to [`Reconciler::run_legacy`] or [`Reconciler::run`] by the engine;
    /// code shared by both may read this to log or label.
    #[must_use]
    pub const fn path(&self) -> CodePath {
        self.path
    }
    /// Whether the operation runs under the retry-on-conflict policy.
    #[must_use]
    pub const fn retry_on_conflict(&self) -> bool {
        self.retry_on_conflict
    }
    /// Records one 409 Conflict the operation met.
    pub fn count_conflict(&mut self) {
        self.conflicts += 1;
    }
    /// The 409 Conflicts this operation met so far.
    #[must_use]
    pub const fn conflicts(&self) -> u32 {
        self.conflicts
    }
}

/// A reconciler: the operations of a plan, as async functions.
///
/// `run` dispatches on the operation name; `operations` lists every name it implements, and the
/// engine refuses to start when the plan and this list differ. The object's type must carry
/// `status.conditions` (the engine reads the `ReconciliationSucceeded` condition from it to write
/// it only when it changed) and have a status subresource.
///
/// **Two code paths.** By default an operation is one piece of code that the legacy loop and
/// the phased reconcile both run, so the candidate reuses the control's result. When the legacy
/// code of some operations differs (a fix landed in the phased path only, the legacy loop does a
/// step inline), list them in [`legacy_code`](Reconciler::legacy_code) and implement them in
/// [`run_legacy`](Reconciler::run_legacy): the legacy loop runs that code, the phased reconcile
/// `run`'s, and the engine runs the candidate's code in dry-run on the same world just before
/// the control's and records what it would have written differently. An operation the plan
/// marks `only: legacy` is implemented by `run_legacy` alone.
///
/// A reconciler of two operations on the embedded simulator: the legacy loop stops at the
/// missing secret, the phased reconcile (in shadow, through the dry-run client) renders the
/// config map anyway, and the record says so:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
/// use kube::api::{Api, PostParams};
/// use shadow_reconciler::engine::{Engine, MemorySink, OpContext, OpError, OpOutput, OpResult, Reconciler};
/// use shadow_reconciler::flag::{FlagSpec, LiveFlag};
/// use shadow_reconciler::plan::ReconcilePlan;
/// use shadow_reconciler::reconcilers::hostedcluster::HostedCluster;
/// use shadow_reconciler::vocab::{ErrorClass, Execution};
///
/// struct Renderer;
///
/// impl Reconciler for Renderer {
///     type Object = HostedCluster;
///     type State = ();
///
///     fn operations(&self) -> &'static [&'static str] {
///         &["FetchSecret", "RenderConfig"]
///     }
///
///     // The client is real in the control and dry-run in the candidate.
///     async fn run(&self, op: &str, ctx: &mut OpContext<HostedCluster, ()>) -> OpResult {
///         let ns = "clusters";
///         let fail = |e: kube::Error| OpError::new(ErrorClass::Server, e.to_string());
///         match op {
///             "FetchSecret" => match Api::<Secret>::namespaced(ctx.client(), ns).get_opt("ssh-key").await {
///                 Ok(Some(_)) => Ok(OpOutput::done()),
///                 Ok(None) => Err(OpError::new(ErrorClass::NotFound, "secret ssh-key not found")),
///                 Err(e) => Err(fail(e)),
///             },
///             "RenderConfig" => {
///                 let mut map = ConfigMap::default();
///                 map.metadata.name = Some("rendered".into());
///                 Api::<ConfigMap>::namespaced(ctx.client(), ns)
///                     .create(&PostParams::default(), &map)
///                     .await
///                     .map(|_| OpOutput::done())
///                     .map_err(fail)
///             }
///             other => Err(OpError::internal(format!("no operation {other}"))),
///         }
///     }
/// }
///
/// // The legacy loop's order, and the phases the phased reconcile runs them in.
/// let plan = Arc::new(ReconcilePlan::from_yaml("renderer.yaml", "
/// apiVersion: shadow-reconciler.io/v1alpha1
/// kind: ReconcilePlan
/// metadata: {name: renderer}
/// spec:
///   operations:
///     - {name: FetchSecret, phase: 1, category: critical, shadow: dry-run}
///     - {name: RenderConfig, phase: 1, category: non-critical, shadow: dry-run}
///   legacy: {order: [FetchSecret, RenderConfig]}
/// ")?);
/// let sim = shadow_reconciler::sim::Simulator::start(Default::default()).await?;
/// let client = kube::Client::try_from(kube::Config::new(sim.url().parse()?))?;
/// shadow_reconciler::scenario::population::create_crds(&client).await?;
/// let mut ns = Namespace::default();
/// ns.metadata.name = Some("clusters".into());
/// Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
/// let hc = Api::<HostedCluster>::namespaced(client.clone(), "clusters")
///     .create(&PostParams::default(), &HostedCluster::new("alpha", Default::default()))
///     .await?;
///
/// let flag = Arc::new(LiveFlag::new(FlagSpec::default(), vec![plan.clone()])?); // shadow
/// let sink = MemorySink::new();
/// let engine = Engine::new(Arc::new(Renderer), plan, client.clone(), flag)?
///     .with_sink(Arc::new(sink.clone()));
/// let outcome = engine.reconcile(Arc::new(hc)).await;
///
/// assert!(outcome.error.unwrap().contains("secret ssh-key not found"));
/// let record = sink.records().pop().unwrap();
/// assert_eq!(record.unblocked, ["RenderConfig"]);
/// let render = record.candidate.iter().find(|s| s.operation == "RenderConfig").unwrap();
/// assert_eq!(render.execution, Execution::DryRun);
/// // Shadow persisted nothing: the config map exists only in the dry run's answer.
/// assert!(Api::<ConfigMap>::namespaced(client, "clusters").get_opt("rendered").await?.is_none());
/// # Ok(())
/// # }
/// ```
pub trait Reconciler: Send + Sync + 'static {
    /// The kind reconciled.
    type Object: kube::Resource<DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + fmt::Debug
        + Send
        + Sync
        + 'static;
    /// The per-reconcile state the operations share.
    type State: Default + Clone + Send + Sync + 'static;

    /// The names of the operations implemented.
    fn operations(&self) -> &'static [&'static str];

    /// Runs the operation `op`: its phased code, and its legacy code too unless it is listed in
    /// [`legacy_code`](Reconciler::legacy_code).
    fn run<'a>(
        &'a self,
        op: &'a str,
        ctx: &'a mut OpContext<Self::Object, Self::State>,
    ) -> impl Future<Output = OpResult> + Send + 'a;

    /// The operations whose legacy code is [`run_legacy`](Reconciler::run_legacy)'s rather than
    /// `run`'s (each also in `operations`). Default: none, one code for both paths.
    fn legacy_code(&self) -> &'static [&'static str] {
        &[]
    }

    /// Runs the legacy code of an operation listed in
    /// [`legacy_code`](Reconciler::legacy_code). The engine calls it for nothing else.
    fn run_legacy<'a>(
        &'a self,
        op: &'a str,
        ctx: &'a mut OpContext<Self::Object, Self::State>,
    ) -> impl Future<Output = OpResult> + Send + 'a {
        self.run(op, ctx)
    }

    /// The legacy loop as one function (the HyperShift shape), when the reconciler keeps it:
    /// an optional capability of its own ([`LegacyLoopFn`]), offered by returning it (usually
    /// `Some(self)`). Default: none, the legacy path is per-operation code.
    fn legacy_loop(&self) -> Option<&dyn LegacyLoopFn<Self>>
    where
        Self: Sized,
    {
        None
    }
}

/// The legacy loop as one function: the shape of a reconciler that kept its old loop beside the
/// phased reconcile (HyperShift's `reconcileLegacy`). An optional capability of a
/// [`Reconciler`], which offers it through [`Reconciler::legacy_loop`], as a Go controller's
/// optional interfaces are (`shadow.DryRunner`, `shadow.Attempter`).
pub trait LegacyLoopFn<R: Reconciler>: Send + Sync {
    /// Runs the legacy loop: the control whenever the legacy path runs (modes `off` and
    /// `shadow`). It marks where each operation of the plan's legacy path starts with
    /// [`LegacyLoop::step`](super::LegacyLoop::step) and writes through
    /// [`LegacyLoop::client`](super::LegacyLoop::client); its error is the failure of the step it
    /// is in. Boxed, so that the capability is an object the reconciler can hand out:
    /// `Box::pin(self.reconcile_legacy(lp))`.
    fn call<'a>(
        &'a self,
        lp: &'a mut super::LegacyLoop<'_, R>,
    ) -> futures_util::future::BoxFuture<'a, OpResult>;
}
