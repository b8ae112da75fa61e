//! `simulate`: the embedded API simulator, a realistic population, a named scenario of faults,
//! and both reference reconcilers running their controllers in shadow mode.
//!
//! Layer 6 of the crate (docs/design.md, "Layers"): builds on [`analyze`](crate::analyze),
//! [`telemetry`](crate::telemetry), [`dataset`](crate::dataset),
//! [`reconcilers`](crate::reconcilers), [`engine`](crate::engine), [`flag`](crate::flag),
//! [`plan`](crate::plan), [`sim`](crate::sim), [`util`](crate::util), [`vocab`](crate::vocab);
//! nothing here may use a module of its layer or above.

pub mod population;
pub mod rollout;
mod settings;
pub mod summary;
mod tally;

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::Api;

pub use settings::{Scenario, ScenarioError, Settings, default_flag_target};
pub use summary::Summary;
use tally::wait_until_settled;
pub use tally::{Progress, Tally};

use crate::engine::Engine;
use crate::engine::dryrun::USER_AGENT as SHADOW_USER_AGENT;
use crate::reconcilers::addon::{AddOnReconciler, ClusterManagementAddOn};
use crate::reconcilers::hostedcluster::{
    HostedCluster, HostedClusterReconciler, SameCodeReconciler,
};
use crate::sim::{Action, Match, Rule, SimConfig, Simulator};
use crate::util::Rng;
use crate::wiring::Wiring;

/// The `User-Agent` of the controllers' real client.
pub const CONTROLLER_USER_AGENT: &str = concat!("shadow-reconciler/", env!("CARGO_PKG_VERSION"));

/// Runs a simulation and returns its summary.
///
/// # Panics
/// Never: the simulator's own URL is a valid URI.
pub async fn run(settings: &Settings) -> Result<Summary, ScenarioError> {
    let begun = settings.started.unwrap_or_else(Instant::now);
    let reserve = stop_reserve(settings.duration);
    let deadline = begun + settings.duration.saturating_sub(reserve);
    if settings.progress && std::io::stderr().is_terminal() {
        eprintln!(
            "creating the population: {} HostedClusters, {} add-ons",
            settings.hosted_clusters, settings.addons
        );
    }
    let World {
        mut sim,
        client,
        planted,
        audit_before: before,
        second_writer,
    } = tokio::time::timeout_at(deadline.into(), World::create(settings))
        .await
        .map_err(|_| ScenarioError::Deadline(settings.duration))??;
    if settings.scenario == Scenario::Rollout {
        rollout::prepare(&client)
            .await
            .map_err(ScenarioError::Population)?;
    }

    // The restart: both controllers start and queue every object for their workers.
    let tally = Arc::new(Tally::new());
    let (hc_engine, addon_engine, flag) = engines(settings, &client, &tally)?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let flag_watch = watch_flag(settings, &client, flag, until_stopped(stopped.clone())).await;
    let mut synced = sync_callbacks(settings);
    let started = Instant::now();
    let controllers = [
        hc_engine.spawn(
            Api::<HostedCluster>::all(client.clone()),
            settings.workers.0,
            until_stopped(stopped.clone()),
            synced.remove(0),
        ),
        tokio::spawn(crate::engine::controller::run_with(
            addon_engine.clone(),
            Api::<ClusterManagementAddOn>::all(client.clone()),
            settings.workers.1,
            until_stopped(stopped),
            synced.remove(0),
        )),
    ];
    let second_writer = second_writer.map(|client| {
        tokio::spawn(second_writer_after_restart(
            client,
            tally.clone(),
            settings.addons,
        ))
    });
    let settled = wait_until_settled(
        &tally,
        settings,
        planted.hosted_clusters + planted.addons,
        started,
        deadline,
    )
    .await;
    let timeline = if settings.scenario == Scenario::Rollout {
        Some(
            rollout::drive(&client, settings, &tally, planted.hosted_clusters, deadline)
                .await
                .map_err(ScenarioError::Rollout)?,
        )
    } else {
        None
    };
    let _ = stop.send(true);
    stop_by(deadline + reserve / 2, controllers).await;
    if let Some(watch) = flag_watch {
        let _ = watch.await;
    }
    if let Some(writer) = second_writer {
        writer.abort();
    }
    let mut summary = Summary {
        planted,
        settled,
        rollout: timeline,
        elapsed: started.elapsed(),
        ..tally.summary()
    };
    summary.guard_refusals = hc_engine.guard().refused() + addon_engine.guard().refused();
    if let Some(sim) = &mut sim {
        sim.clear_faults();
        record_audit(&mut summary, sim, before);
        sim.shutdown().await?;
    } else {
        summary.cluster = settings.cluster.as_ref().map(|c| c.cluster_url.to_string());
        summary.shadow_dry_runs =
            hc_engine.guard().dry_run_requests() + addon_engine.guard().dry_run_requests();
    }
    Ok(summary)
}

/// What of `--duration` is kept for stopping the controllers and writing and analysing the data:
/// 3%, between 0.3 and 10 seconds, and never over half of it.
fn stop_reserve(duration: Duration) -> Duration {
    (duration * 3 / 100)
        .clamp(Duration::from_millis(300), Duration::from_secs(10))
        .min(duration / 2)
}

/// Waits for the controllers to stop: reconciles under way finish; past `cut` they are cut short
/// (their records are not written), so that the deadline holds with writing included.
async fn stop_by(cut: Instant, controllers: [tokio::task::JoinHandle<()>; 2]) {
    for mut controller in controllers {
        if tokio::time::timeout_at(cut.into(), &mut controller)
            .await
            .is_err()
        {
            controller.abort();
            tracing::warn!(
                "a controller did not stop by the deadline: its reconciles under way were cut short"
            );
        }
    }
}

/// The cluster a run works on, with its population planted and its faults armed.
struct World {
    /// The embedded simulator, or `None` on a real cluster.
    sim: Option<Simulator>,
    /// The controllers' client.
    client: kube::Client,
    planted: population::Planted,
    /// The simulator's audit length before the restart.
    audit_before: u64,
    /// The client of the conflict storm's writer on a real cluster.
    second_writer: Option<kube::Client>,
}

impl World {
    async fn create(settings: &Settings) -> Result<Self, ScenarioError> {
        let sim = match settings.cluster {
            Some(_) => None,
            None => Some(
                Simulator::start(SimConfig {
                    seed: settings.seed,
                    ..SimConfig::default()
                })
                .await?,
            ),
        };
        let client = match (&sim, &settings.cluster) {
            (Some(sim), _) => controller_client(sim)?,
            (None, Some(config)) => cluster_client(config)?,
            (None, None) => unreachable!("a simulator is started when no cluster is given"),
        };
        let mut rng = Rng::new(settings.seed);
        // On a cluster of the user's, refuse a used one before changing anything in it.
        if sim.is_none() {
            population::ensure_fresh(&client).await?;
        }
        population::create_crds(&client)
            .await
            .map_err(ScenarioError::Population)?;
        let planted = population::create(
            &client,
            settings
                .faults
                .unwrap_or_else(|| population::Faults::of(settings.scenario)),
            settings.hosted_clusters,
            settings.addons,
            &mut rng,
        )
        .await
        .map_err(ScenarioError::Population)?;
        let before = sim
            .as_ref()
            .map_or(0, |sim| sim.audit(crate::sim::Audit::len));
        let second_writer = match &sim {
            Some(sim) => {
                add_faults(sim, settings);
                None
            }
            None => match (&settings.cluster, settings.scenario.conflict_storm()) {
                (Some(config), true) => Some(client_as(config, SECOND_WRITER_USER_AGENT)?),
                _ => None,
            },
        };
        Ok(Self {
            sim,
            client,
            planted,
            audit_before: before,
            second_writer,
        })
    }
}

/// Both engines, sharing the one flag built from the settings (checked against the plans run:
/// a group no plan has is an error).
#[allow(clippy::type_complexity)] // a one-off tuple, unpacked at the only call
fn engines(
    settings: &Settings,
    client: &kube::Client,
    sink: &Arc<Tally>,
) -> Result<
    (
        HostedClusterEngine,
        Arc<Engine<AddOnReconciler>>,
        Arc<crate::flag::LiveFlag>,
    ),
    ScenarioError,
> {
    let (hc_plan, addon_plan) = (
        plan_or(settings, HostedClusterReconciler::plan()),
        plan_or(settings, AddOnReconciler::plan()),
    );
    let flag = Arc::new(crate::flag::LiveFlag::new(
        settings.flag.clone(),
        vec![hc_plan.clone(), addon_plan.clone()],
    )?);
    let mut wiring = Wiring::new(client.clone(), flag.clone())
        .with_sink(sink.clone())
        .with_log_records(settings.log_records)
        .with_traces(settings.traces.clone())
        .with_parquet(settings.parquet.clone());
    if let Some(budget) = &settings.shadow_budget {
        wiring = wiring.with_shadow_budget(budget.clone());
    }
    if let Some(telemetry) = &settings.telemetry {
        wiring = wiring.with_metrics(telemetry.metrics().clone());
    }
    let hc = if settings.same_code {
        HostedClusterEngine::SameCode(Arc::new(wiring.engine(SameCodeReconciler, hc_plan)?))
    } else {
        HostedClusterEngine::Shipped(Arc::new(wiring.engine(HostedClusterReconciler, hc_plan)?))
    };
    let addon = wiring.engine(AddOnReconciler, addon_plan)?;
    Ok((hc, Arc::new(addon), flag))
}

/// The HostedCluster engine: the shipped reconciler, or its same-code variant (`--same-code`).
enum HostedClusterEngine {
    Shipped(Arc<Engine<HostedClusterReconciler>>),
    SameCode(Arc<Engine<SameCodeReconciler>>),
}

impl HostedClusterEngine {
    fn guard(&self) -> &Arc<crate::engine::dryrun::GuardStats> {
        match self {
            Self::Shipped(e) => e.guard(),
            Self::SameCode(e) => e.guard(),
        }
    }

    fn spawn(
        &self,
        api: Api<HostedCluster>,
        workers: u16,
        until: impl std::future::Future<Output = ()> + Send + Sync + 'static,
        synced: impl FnOnce() + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        match self {
            Self::Shipped(e) => tokio::spawn(crate::engine::controller::run_with(
                e.clone(),
                api,
                workers,
                until,
                synced,
            )),
            Self::SameCode(e) => tokio::spawn(crate::engine::controller::run_with(
                e.clone(),
                api,
                workers,
                until,
                synced,
            )),
        }
    }
}

/// A client of the simulator with the controllers' user agent.
fn controller_client(sim: &Simulator) -> Result<kube::Client, ScenarioError> {
    let url = sim
        .url()
        .parse()
        .expect("the simulator's URL is a valid URI");
    client_as(&kube::Config::new(url), CONTROLLER_USER_AGENT)
}

/// A client of a real cluster with the controllers' user agent.
fn cluster_client(config: &kube::Config) -> Result<kube::Client, ScenarioError> {
    client_as(config, CONTROLLER_USER_AGENT)
}

fn client_as(
    config: &kube::Config,
    user_agent: &'static str,
) -> Result<kube::Client, ScenarioError> {
    let mut config = config.clone();
    config
        .headers
        .retain(|(name, _)| name != http::header::USER_AGENT);
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(user_agent),
    ));
    kube::Client::try_from(config).map_err(ScenarioError::Client)
}

/// The user agent of the conflict storm's second writer on a real cluster.
pub const SECOND_WRITER_USER_AGENT: &str = "shadow-reconciler-second-writer";

/// The conflict storm on a real cluster: once the add-on controller has reconciled its first
/// add-on (its cache is filled: the restart happened), another writer touches every add-on twice
/// (the budget of the simulator's rule), so that status patches the add-on controller builds on
/// what its cache saw meet a 409. Unlike the simulator's rule, which fires between the read and
/// the write of exactly those patches, how many it beats depends on timing.
async fn second_writer_after_restart(client: kube::Client, tally: Arc<Tally>, addons: usize) {
    let plan = AddOnReconciler::plan().name().to_owned();
    while !tally.saw_plan(&plan) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    second_writer(client, addons).await;
}

async fn second_writer(client: kube::Client, addons: usize) {
    let api: Api<ClusterManagementAddOn> = Api::all(client);
    let params = kube::api::PatchParams::default();
    for round in 0..2 {
        for i in 0..addons {
            let patch = serde_json::json!({"metadata": {"annotations": {
                "sim.shadow-reconciler.io/second-writer": format!("{round}"),
            }}});
            // A write that fails (the add-on is gone, the server is busy) is simply not a fault.
            let _ = api
                .patch(
                    &format!("addon-{i:02}"),
                    &params,
                    &kube::api::Patch::Merge(patch),
                )
                .await;
        }
    }
}

/// Starts the flag's watcher (when the settings name a ConfigMap) and waits for its first list,
/// so no reconcile runs on a stale mode.
async fn watch_flag(
    settings: &Settings,
    client: &kube::Client,
    flag: Arc<crate::flag::LiveFlag>,
    stopped: impl std::future::Future<Output = ()> + Send + 'static,
) -> Option<tokio::task::JoinHandle<()>> {
    let target = settings.flag_configmap.clone()?;
    let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
    let watch = tokio::spawn(crate::flag::watch::run(
        client.clone(),
        target,
        flag,
        settings.telemetry.as_ref().map(|t| t.flag().clone()),
        move || {
            let _ = synced_tx.send(());
        },
        stopped,
    ));
    let _ = synced_rx.await;
    Some(watch)
}

/// One callback per controller, making `/readyz` answer 200 once both kinds can be listed.
fn sync_callbacks(settings: &Settings) -> Vec<Box<dyn FnOnce() + Send>> {
    match &settings.telemetry {
        Some(telemetry) => telemetry.ready_when_listed(&[
            crate::engine::controller::crd_name::<HostedCluster>(),
            crate::engine::controller::crd_name::<ClusterManagementAddOn>(),
        ]),
        None => vec![Box::new(|| {}), Box::new(|| {})],
    }
}

/// The simulator's side of the summary: what the shadow wrote, what was answered and faulted.
fn record_audit(summary: &mut Summary, sim: &Simulator, before: u64) {
    sim.audit(|audit| {
        let shadow = audit
            .totals()
            .get(SHADOW_USER_AGENT)
            .cloned()
            .unwrap_or_default();
        summary.shadow_persisted = shadow.persisted_mutations;
        summary.shadow_dry_runs = shadow.dry_run_mutations;
        summary.requests = audit.len() - before;
        summary.faulted = audit.totals().values().map(|t| t.faulted).sum();
    });
}

/// The plan of `settings.plans` named like `shipped`, or `shipped`.
fn plan_or(
    settings: &Settings,
    shipped: Arc<crate::plan::ReconcilePlan>,
) -> Arc<crate::plan::ReconcilePlan> {
    settings
        .plans
        .iter()
        .find(|p| p.name() == shipped.name())
        .cloned()
        .unwrap_or(shipped)
}

/// The scenario's faults, from the restart on.
fn add_faults(sim: &Simulator, settings: &Settings) {
    if settings.scenario.conflict_storm() {
        // After the restart another controller writes the same add-ons: each of the add-on
        // controller's first status patches finds the object changed since its cache saw it.
        sim.add_fault(Rule {
            name: "conflict-storm".into(),
            matches: Match {
                verbs: vec!["patch".into()],
                resource: Some("clustermanagementaddons.example.shadow-reconciler.io".into()),
                subresource: Some("status".into()),
                user_agent: Some(CONTROLLER_USER_AGENT.into()),
                ..Match::default()
            },
            action: Action {
                second_writer: true,
                ..Action::default()
            },
            probability: None,
            // Each add-on's first two status patches, whatever the order the workers take them.
            count: Some(2),
            per_object: true,
        });
    }
    if settings.scenario.flaky() {
        sim.add_fault(Rule {
            name: "flaky-503".into(),
            matches: Match::default(),
            action: Action {
                status: Some(503),
                ..Action::default()
            },
            probability: Some(0.01),
            count: None,
            // Drawn per object and request number: the same requests fail in every run.
            per_object: true,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_a_small_share_of_the_duration() {
        assert_eq!(
            stop_reserve(Duration::from_mins(1)),
            Duration::from_millis(1800)
        );
        assert_eq!(
            stop_reserve(Duration::from_secs(2)),
            Duration::from_millis(300)
        );
        assert_eq!(
            stop_reserve(Duration::from_millis(400)),
            Duration::from_millis(200)
        );
        assert_eq!(
            stop_reserve(Duration::from_hours(1)),
            Duration::from_secs(10)
        );
    }
}
