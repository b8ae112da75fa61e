//! `shadow-reconciler run`: the reference controllers against a real cluster, with the engine in
//! the chosen mode, the telemetry endpoints and the optional Parquet and trace sinks.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use shadow_reconciler::engine::budget::ShadowBudget;
use shadow_reconciler::engine::controller::crd_name;
use shadow_reconciler::flag::LiveFlag;
use shadow_reconciler::plan::ReconcilePlan;
use shadow_reconciler::reconcilers::addon::{AddOnReconciler, ClusterManagementAddOn};
use shadow_reconciler::reconcilers::hostedcluster::{HostedCluster, HostedClusterReconciler};
use shadow_reconciler::scenario;
use shadow_reconciler::util::election::{Elector, Lost};
use shadow_reconciler::wiring::Wiring;

use super::options::{FlagArgs, ParquetArgs, cluster_config, finish, parse_probability};
use super::shutdown_signal;

/// How long `run` waits for its controllers to stop after SIGTERM.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

#[derive(Args)]
pub(super) struct RunArgs {
    /// Which reconcilers: hostedcluster, addon-install-progression or all.
    #[arg(long, default_value = "all")]
    reconciler: String,
    /// The retired spelling of `--enforce-group`.
    #[arg(long = "enforce", value_name = "[PLAN/]GROUP", hide = true)]
    retired_enforce: Vec<String>,
    /// Fraction of reused candidate steps re-executed in dry-run (0 to 1).
    #[arg(long, default_value_t = 0.0, value_parser = parse_probability)]
    sample_rate: f64,
    /// Serve /metrics, /healthz and /readyz here. Loopback by default; give `0.0.0.0:8080` for
    /// Prometheus and kubelet probes from outside the pod (the manifests do).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: std::net::SocketAddr,
    /// Log lines: auto (human on a terminal, JSON otherwise), human or json.
    #[arg(long, default_value = "auto")]
    log_format: shadow_reconciler::telemetry::logging::LogFormat,
    #[command(flatten)]
    budget: super::budget::BudgetArgs,
    /// The identity the shadow's requests impersonate, as kubectl's --as (a service account is
    /// `system:serviceaccount:NAMESPACE:NAME`): the API server's Priority and Fairness then
    /// classifies them by that identity's flow schema, apart from the control's, and can shed
    /// them first (docs/engine.md, "The shadow's own flow"; deploy/components/shadow-flow).
    /// The controller's identity needs `impersonate` on it, and it needs the controller's
    /// permissions (a dry run is authorized as the write). Default: the controller's identity.
    #[arg(long, value_name = "USER", value_parser = parse_identity)]
    shadow_as: Option<String>,
    #[command(flatten)]
    parquet: ParquetArgs,
    #[command(flatten)]
    flag: FlagArgs,
    #[command(flatten)]
    rollout: super::rollout::RolloutArgs,
    #[command(flatten)]
    election: super::election::ElectionArgs,
    /// The cluster's kubeconfig (default: KUBECONFIG, ~/.kube/config, or the pod's service
    /// account).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig's context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// Reconcile the HostedClusters of this namespace only (default: every namespace). Add-ons
    /// are cluster-scoped and always watched whole; the flag ConfigMap's namespace is
    /// --flag-namespace.
    #[arg(long, short = 'n', value_name = "NAMESPACE")]
    namespace: Option<String>,
}

pub(super) fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    use shadow_reconciler::reconcilers::addon::AddOnReconciler;
    use shadow_reconciler::reconcilers::hostedcluster::HostedClusterReconciler;

    let (hostedcluster, addon) = match args.reconciler.as_str() {
        "all" => (true, true),
        "hostedcluster" => (true, false),
        "addon-install-progression" => (false, true),
        other => anyhow::bail!(
            "--reconciler {other:?}: expected hostedcluster, addon-install-progression or all"
        ),
    };
    shadow_reconciler::telemetry::logging::init(args.log_format);
    // The plans are read once here; the flag, the engines and the rollout driver share them.
    let reconcilers: Reconcilers = (
        hostedcluster.then(HostedClusterReconciler::plan),
        addon.then(AddOnReconciler::plan),
    );
    let plans = [&reconcilers.0, &reconcilers.1]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    let flag = Arc::new(flag_defaults(args, plans)?);
    let shadow_budget = args.budget.budget(true)?;
    let flag_namespace = args.flag.target().map(|t| t.namespace);
    let election = args.election.config(flag_namespace.as_deref())?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(controllers(
        args,
        reconcilers,
        (&flag, shadow_budget),
        election,
    ))
}

/// The plans of the reconcilers `--reconciler` chose: the HostedCluster's, the add-on's.
type Reconcilers = (Option<Arc<ReconcilePlan>>, Option<Arc<ReconcilePlan>>);

/// A user name for `Impersonate-User`: not empty, no space or control character (so a header
/// value).
fn parse_identity(s: &str) -> Result<String, String> {
    if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{s:?} is not a user name: give one without spaces, e.g. system:serviceaccount:NAMESPACE:NAME"
        ));
    }
    Ok(s.to_owned())
}

/// The controllers' client, and the shadow's own: the same server and identity (or the one of
/// `--shadow-as`, impersonated), without kube's retry of 429s, so the first one pauses the
/// shadow instead of holding its request
/// (docs/engine.md, "Backing off").
async fn clients(args: &RunArgs) -> anyhow::Result<(kube::Client, kube::Client)> {
    let mut config = cluster_config(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(scenario::CONTROLLER_USER_AGENT),
    ));
    let mut shadow_config = config.clone();
    shadow_config.default_retry = false;
    if let Some(user) = &args.shadow_as {
        // One identity for the shadow: none of the kubeconfig's own impersonation mixed in.
        let auth = &mut shadow_config.auth_info;
        auth.impersonate = Some(user.clone());
        (auth.impersonate_uid, auth.impersonate_groups) = (None, None);
        auth.impersonate_user_extra = None;
        tracing::info!(user = %user, "the shadow's requests impersonate their own identity");
    }
    let shadow =
        kube::Client::try_from(shadow_config).context("cannot build the shadow's kube client")?;
    let client = kube::Client::try_from(config).context("cannot build the kube client")?;
    Ok((client, shadow))
}

/// Serves the endpoints, stands by for the leader Lease with `--leader-elect`, then runs the
/// controllers until SIGTERM or Ctrl-C, or until the Lease is lost.
async fn controllers(
    args: &RunArgs,
    reconcilers: Reconcilers,
    (flag, shadow_budget): (&Arc<LiveFlag>, Arc<ShadowBudget>),
    election: Option<shadow_reconciler::util::election::Config>,
) -> anyhow::Result<ExitCode> {
    let (client, shadow_client) = clients(args).await?;
    // One listener for the whole run, registered now: a SIGTERM at any moment from here on
    // (standing by, waiting for the flag, starting the controllers, running) is kept until it
    // is awaited.
    let terminated = shutdown_signal();
    tokio::pin!(terminated);
    let telemetry = Arc::new(shadow_reconciler::telemetry::http::Telemetry::new());
    let server = shadow_reconciler::telemetry::http::Server::start(args.listen, telemetry.clone())
        .await
        .with_context(|| format!("cannot serve the metrics endpoint on {}", args.listen))?;
    tracing::info!(address = %server.addr(), "serving /metrics, /healthz and /readyz");
    let elector = election.map(|config| Arc::new(Elector::new(client.clone(), config)));
    if let Some(elector) = &elector {
        let lease = format!("{}/{}", elector.config().namespace, elector.config().name);
        telemetry.standby(Some(lease.clone()));
        tracing::info!(%lease, identity = %elector.config().identity, "standing by for the leader Lease");
        tokio::select! {
            () = elector.acquire() => {}
            () = &mut terminated => {
                server.shutdown().await.context("the metrics endpoint failed")?;
                return Ok(ExitCode::SUCCESS);
            }
        }
        telemetry.standby(None);
        telemetry.leader().set(1);
        tracing::info!(%lease, identity = %elector.config().identity, "leading: starting the controllers");
    }
    let holder = elector.clone();
    let lost = async move {
        match holder {
            Some(elector) => elector.hold().await,
            None => std::future::pending().await,
        }
    };
    let running = Running {
        client,
        shadow_client,
        telemetry: telemetry.clone(),
        server,
        elector,
    };
    let outcome = lead(
        args,
        running,
        reconcilers,
        (flag, shadow_budget),
        (terminated, lost),
    )
    .await;
    telemetry.leader().set(0);
    match outcome? {
        None => Ok(ExitCode::SUCCESS),
        Some(lost) => {
            // Status 1, as controller-runtime's managers: the container restarts and stands by.
            tracing::error!(
                "lost the leader Lease ({lost}): stopped the controllers and committed the records; exiting so that a restart stands by again"
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

/// What `lead` starts from: the clients and the endpoints, serving already.
struct Running {
    client: kube::Client,
    shadow_client: kube::Client,
    telemetry: Arc<shadow_reconciler::telemetry::http::Telemetry>,
    server: shadow_reconciler::telemetry::http::Server,
    /// The Lease the process leads by: given up once the controllers stopped on SIGTERM (the
    /// rollout driver then needs none of its own).
    elector: Option<Arc<Elector>>,
}

/// Runs the chosen controllers, with the sinks around them, until `terminated` (`None`) or
/// `lost` (`Some`, the Lease lost: the controllers are stopped at once, before another replica
/// may take over, and the records made so far committed).
async fn lead(
    args: &RunArgs,
    running: Running,
    reconcilers: Reconcilers,
    (flag, shadow_budget): (&Arc<LiveFlag>, Arc<ShadowBudget>),
    (terminated, lost): (
        impl std::future::Future<Output = ()>,
        impl std::future::Future<Output = Lost>,
    ),
) -> anyhow::Result<Option<Lost>> {
    let Running {
        client,
        shadow_client,
        telemetry,
        server,
        elector,
    } = running;
    let elected = elector.is_some();
    let traces = shadow_reconciler::telemetry::traces::TraceSink::from_env()?.map(Arc::new);
    let parquet = start_parquet(args, &telemetry, elected).await?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    tokio::pin!(terminated, lost);
    let mut tasks = Vec::new();
    if let Some(target) = args.flag.target() {
        let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
        tracing::info!(
            flag = %target,
            "waiting for the flag ConfigMap to be listed before starting the controllers"
        );
        tasks.push(tokio::spawn(shadow_reconciler::flag::watch::run(
            client.clone(),
            target,
            flag.clone(),
            Some(telemetry.flag().clone()),
            move || {
                let _ = synced_tx.send(());
            },
            until_stopped(stopped.clone()),
        )));
        tokio::select! {
            _ = synced_rx => {}
            () = &mut terminated => anyhow::bail!("interrupted while waiting for the flag ConfigMap"),
            lost = &mut lost => {
                let _ = stop.send(true);
                stop_controllers(tasks, Duration::ZERO).await;
                return Ok(Some(lost));
            }
        }
    } else {
        telemetry.flag().synced(true);
        telemetry.flag().in_force(&flag.current());
    }
    let wiring = Wiring::new(client.clone(), flag.clone())
        .with_reexecute_sample_rate(args.sample_rate)
        .with_shadow_budget(shadow_budget)
        .with_shadow_client(Some(shadow_client))
        .with_log_records(true)
        .with_metrics(telemetry.metrics().clone())
        .with_traces(traces.clone())
        .with_parquet(parquet.clone());
    let mut synced =
        telemetry.ready_when_listed(&kinds(reconcilers.0.is_some(), reconcilers.1.is_some()));
    if let Some(plan) = &reconcilers.0 {
        let api = match &args.namespace {
            Some(namespace) => kube::Api::namespaced(client.clone(), namespace),
            None => kube::Api::all(client.clone()),
        };
        let engine = wiring.engine(HostedClusterReconciler, plan.clone())?;
        let shutdown = until_stopped(stopped.clone());
        tasks.push(spawn(engine, api, shutdown, synced.remove(0)));
    }
    if let Some(plan) = &reconcilers.1 {
        let engine = wiring.engine(AddOnReconciler, plan.clone())?;
        let (api, shutdown) = (
            kube::Api::all(client.clone()),
            until_stopped(stopped.clone()),
        );
        tasks.push(spawn(engine, api, shutdown, synced.remove(0)));
    }
    tracing::info!(flag = %flag.current().spec.summary(), reconciler = %args.reconciler, "controllers started");
    let sinks = (parquet.as_ref(), telemetry.as_ref());
    if let Some(driver) = rollout_driver(args, &client, &reconcilers, sinks, elected)? {
        tasks.push(tokio::spawn(driver.run(until_stopped(stopped.clone()))));
    }
    let outcome = tokio::select! {
        () = &mut terminated => None,
        lost = &mut lost => Some(lost),
    };
    let _ = stop.send(true);
    // Lost: another replica may take over once the Lease expires, so nothing waits for
    // reconciles in flight (their records are not made; the ones made are committed below).
    let grace = outcome.as_ref().map_or(SHUTDOWN_GRACE, |_| Duration::ZERO);
    stop_controllers(tasks, grace).await;
    // Given up as soon as nothing writes any more, so another replica leads at once.
    if let Some(elector) = elector.filter(|_| outcome.is_none())
        && let Err(error) = elector.release().await
    {
        tracing::warn!(%error, "cannot give the leader Lease up; it expires on its own");
    }
    stop_sinks(server, traces, parquet, args.parquet.grace()).await?;
    Ok(outcome)
}

/// The Parquet sink of `--parquet-dir`. Elected, a dataset directory still locked by the
/// replica that led before (it commits its last part after it gave the Lease up, or after it
/// lost it) is waited for, up to that replica's shutdown time; otherwise a lock held is refused.
async fn start_parquet(
    args: &RunArgs,
    telemetry: &shadow_reconciler::telemetry::http::Telemetry,
    elected: bool,
) -> anyhow::Result<Option<Arc<shadow_reconciler::dataset::ParquetSink>>> {
    use shadow_reconciler::dataset::{LockError, OpenCause};
    let patience = SHUTDOWN_GRACE + args.parquet.grace() + Duration::from_secs(30);
    let started = std::time::Instant::now();
    let mut said = false;
    loop {
        match args.parquet.start(telemetry, std::time::Duration::ZERO) {
            Err(error)
                if elected
                    && started.elapsed() < patience
                    && error.chain().any(|cause| {
                        matches!(
                            cause.downcast_ref::<OpenCause>(),
                            Some(OpenCause::Lock(LockError::Held { .. }))
                        )
                    }) =>
            {
                if !std::mem::replace(&mut said, true) {
                    tracing::info!(%error, "the replica that led before still commits its last part; waiting for the dataset");
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            other => return other,
        }
    }
}

/// The CRD names of the kinds the chosen controllers list.
fn kinds(hostedcluster: bool, addon: bool) -> Vec<String> {
    [
        hostedcluster.then(crd_name::<HostedCluster>),
        addon.then(crd_name::<ClusterManagementAddOn>),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The rollout driver of `--rollout`, over the plans of the controllers run.
fn rollout_driver(
    args: &RunArgs,
    client: &kube::Client,
    reconcilers: &Reconcilers,
    (parquet, telemetry): (
        Option<&Arc<shadow_reconciler::dataset::ParquetSink>>,
        &shadow_reconciler::telemetry::http::Telemetry,
    ),
    elected: bool,
) -> anyhow::Result<Option<shadow_reconciler::rollout::Driver>> {
    if !args.rollout.rollout {
        return Ok(None);
    }
    let Some(target) = args.flag.target() else {
        anyhow::bail!(
            "--rollout writes the flag ConfigMap the controllers watch: drop --no-flag-watch"
        );
    };
    let plans: Vec<ReconcilePlan> = [&reconcilers.0, &reconcilers.1]
        .into_iter()
        .flatten()
        .map(|p| (**p).clone())
        .collect();
    args.rollout.driver(
        client,
        (&target.namespace, &target.name),
        (
            (args.parquet.parquet_dir.as_deref(), parquet),
            &args.parquet.cluster,
        ),
        plans,
        telemetry,
        elected,
    )
}

/// Stops the controllers: reconciles in flight finish within `grace`; a controller that cannot
/// stop (kube-runtime waits for a cache that never synced when its kind is not served) is
/// abandoned after it.
async fn stop_controllers(tasks: Vec<tokio::task::JoinHandle<()>>, grace: std::time::Duration) {
    let aborts: Vec<_> = tasks
        .iter()
        .map(tokio::task::JoinHandle::abort_handle)
        .collect();
    if tokio::time::timeout(grace, futures_util::future::join_all(tasks))
        .await
        .is_err()
    {
        tracing::warn!(?grace, "controllers did not stop in time; abandoning them");
        aborts.iter().for_each(tokio::task::AbortHandle::abort);
    }
    tracing::info!("controllers stopped");
}

/// Stops the endpoints, then flushes the traces and the Parquet data.
async fn stop_sinks(
    server: shadow_reconciler::telemetry::http::Server,
    traces: Option<Arc<shadow_reconciler::telemetry::traces::TraceSink>>,
    parquet: Option<Arc<shadow_reconciler::dataset::ParquetSink>>,
    grace: std::time::Duration,
) -> anyhow::Result<()> {
    server
        .shutdown()
        .await
        .context("the metrics endpoint failed")?;
    if let Some(traces) = traces {
        tokio::task::spawn_blocking(move || traces.shutdown())
            .await
            .context("flushing the traces failed")?;
    }
    if let Some(parquet) = parquet {
        tokio::task::spawn_blocking(move || finish(&parquet, grace))
            .await
            .context("the Parquet writer failed")??;
    }
    Ok(())
}

/// Spawns `engine`'s controller on `api`.
fn spawn<R: shadow_reconciler::engine::Reconciler>(
    engine: shadow_reconciler::engine::Engine<R>,
    api: kube::Api<R::Object>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    on_synced: impl FnOnce() + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(shadow_reconciler::engine::controller::run(
        Arc::new(engine),
        api,
        shutdown,
        on_synced,
    ))
}

/// The command line's flag for `run`: --mode, --enforce-group, --candidate-group, --ramp-percent and
/// --allow-object-override, with every group checked against `plans`.
pub fn flag_defaults(
    args: &RunArgs,
    plans: Vec<std::sync::Arc<ReconcilePlan>>,
) -> anyhow::Result<LiveFlag> {
    let loaded: Vec<&ReconcilePlan> = plans.iter().map(AsRef::as_ref).collect();
    let (spec, note) = args.flag.spec(&args.retired_enforce, &loaded)?;
    if let Some(note) = note {
        tracing::warn!("{note}");
    }
    LiveFlag::new(spec, plans).map_err(|error| {
        let option = match error.field() {
            shadow_reconciler::flag::Field::CandidateGroups => "--candidate-group",
            _ => "--enforce-group",
        };
        anyhow::anyhow!("{option} {:?}: {}", error.value(), error.message())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn shadow_as_takes_a_user_name_and_refuses_what_is_not_one() {
        assert_eq!(
            super::parse_identity("system:serviceaccount:ops:operator-shadow").unwrap(),
            "system:serviceaccount:ops:operator-shadow"
        );
        for bad in ["", "a b", "x\ny", "tab\there"] {
            let error = super::parse_identity(bad).unwrap_err();
            assert!(error.contains("is not a user name"), "{bad:?}: {error}");
        }
    }
}
