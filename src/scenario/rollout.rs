//! The `rollout` scenario: the flip to enforce driven by the data. After the restart has
//! settled, two `ShadowRollout`s start in the simulated cluster and the rollout driver runs in
//! the process, as it does in `run`: `gated-components` (whose phased behaviour is the legacy
//! loop's where it matters) through every step to 100%, and `critical-core` (whose members the
//! plan lets run after `CPOImageAndNamespace` failed, although they depend on it: enforced, they
//! run and fail where the legacy loop stopped) rolled back by its gates. Between rounds every
//! HostedCluster is touched, as a controller's resync would, so each step sees its objects
//! reconciled under the new ramp.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::CustomResourceExt;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};

use super::{Settings, Tally};
use crate::flag::rollout::{
    Gates, Phase, ReadinessGate, RolloutStatus, RolloutStep, ShadowRollout, ShadowRolloutSpec,
};
use crate::reconcilers::hostedcluster::HostedCluster;
use crate::rollout::{Driver, Settings as DriverSettings};

/// The namespace of the flag, the rollouts and the Lease in the simulated cluster.
const NAMESPACE: &str = "shadow-reconciler";

/// One line of the timeline: when, which rollout, what was decided, with the gates' figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Seconds since the rollouts started.
    pub at: f64,
    /// The rollout's group.
    pub group: String,
    /// The decision's kind (`Started`, `Advanced`, `Completed`, `RolledBack`).
    pub kind: String,
    /// The step (1 first) and its ramp (0: shadow) after the decision.
    pub step: u32,
    /// The ramp after the decision.
    pub ramp: f64,
    /// The decision's message.
    pub message: String,
    /// The gates that decided: name, result and message.
    pub gates: Vec<(String, String, String)>,
    /// Objects reconciled with the group enforced in the step the gates judged.
    pub enforced_objects: u64,
    /// When the decision was taken (RFC 3339, as in the rollout's status).
    pub time: String,
    /// The flag ConfigMap's resourceVersion once the round had written the decision.
    pub flag_version: Option<String>,
}

/// What the rollouts did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// Every decision, in order.
    pub entries: Vec<Entry>,
    /// Each rollout's group and final status.
    pub statuses: Vec<(String, RolloutStatus)>,
    /// Driver rounds run.
    pub rounds: u32,
    /// The flag ConfigMap's resourceVersion after each round, in order.
    pub flag_versions: Vec<Option<String>>,
    /// The driver stopped deciding: [`STALL_ROUNDS`] rounds in a row without a decision, each
    /// after every HostedCluster was reconciled again. The gates wait for evidence the
    /// population does not give (too few objects for a step's minimum, say): more rounds on the
    /// same objects add nothing.
    pub stalled: bool,
}

/// Rounds in a row without a decision after which the scenario stops driving.
pub const STALL_ROUNDS: u32 = 3;

/// The two rollouts of the scenario: name, group, steps.
fn rollouts() -> [(&'static str, &'static str, &'static [f64]); 2] {
    [
        (
            "gated-components",
            "hostedcluster/gated-components",
            &[10.0, 25.0, 50.0, 100.0],
        ),
        (
            "critical-core",
            "hostedcluster/critical-core",
            &[10.0, 50.0, 100.0],
        ),
    ]
}

/// Creates the `ShadowRollout` kind, the flag ConfigMap (mode `enforce`, both groups in shadow
/// until the driver's first round) and the two rollouts.
///
/// # Errors
/// The simulator refused a write.
pub async fn prepare(client: &kube::Client) -> Result<(), kube::Error> {
    super::population::apply_crds(client, &[ShadowRollout::crd()]).await?;
    let namespace = k8s_openapi::api::core::v1::Namespace {
        metadata: ObjectMeta {
            name: Some(NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        ..Default::default()
    };
    match Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e),
    }
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let mut data = std::collections::BTreeMap::new();
    data.insert("mode".to_owned(), "enforce".to_owned());
    data.insert(
        "groups".to_owned(),
        rollouts()
            .iter()
            .map(|(_, g, _)| format!("{g}: shadow"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("shadow-reconciler-flag".into()),
            namespace: Some(NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    };
    cms.patch(
        "shadow-reconciler-flag",
        &PatchParams::apply("shadow-reconciler").force(),
        &Patch::Apply(&cm),
    )
    .await?;
    let api: Api<ShadowRollout> = Api::namespaced(client.clone(), NAMESPACE);
    for (name, group, steps) in rollouts() {
        // The critical group requires a `ready` verdict: while the evidence is still building
        // (`inconclusive`) its step waits instead of passing, so how fast the objects are
        // reconciled never decides whether it advances before its defect shows.
        let readiness = if name == "critical-core" {
            ReadinessGate::RequireReady
        } else {
            ReadinessGate::BlockNotReady
        };
        let rollout = ShadowRollout::new(
            name,
            ShadowRolloutSpec {
                group: group.to_owned(),
                steps: steps
                    .iter()
                    .map(|ramp| RolloutStep {
                        ramp: *ramp,
                        min_objects: Some(10),
                        min_duration: None,
                    })
                    .collect(),
                gates: Gates {
                    readiness,
                    ..Gates::default()
                },
            },
        );
        api.create(&PostParams::default(), &rollout).await?;
    }
    Ok(())
}

/// Drives the rollouts every `interval` until both have ended (completed or rolled back) or
/// `deadline`, touching every HostedCluster between rounds and waiting for their reconciles.
///
/// # Errors
/// The run has no Parquet dataset (the gates read it).
pub async fn drive(
    client: &kube::Client,
    settings: &Settings,
    tally: &Arc<Tally>,
    hosted_clusters: usize,
    deadline: Instant,
) -> Result<Timeline, String> {
    let sink = settings
        .parquet
        .clone()
        .ok_or("the rollout scenario reads its gates from the Parquet dataset: run it without --no-parquet")?;
    let plans: Vec<crate::plan::ReconcilePlan> = [
        super::plan_or(
            settings,
            crate::reconcilers::hostedcluster::HostedClusterReconciler::plan(),
        ),
        super::plan_or(settings, crate::reconcilers::addon::AddOnReconciler::plan()),
    ]
    .iter()
    .map(|p| (**p).clone())
    .collect();
    let flush_sink = sink.clone();
    let mut driver = Driver::new(
        client.clone(),
        DriverSettings {
            namespace: NAMESPACE.into(),
            cluster: crate::dataset::encode::DEFAULT_CLUSTER.into(),
            flag: "shadow-reconciler-flag".into(),
            // One process drives alone.
            lease: None,
            identity: "simulate".into(),
            interval: Duration::from_secs(1),
            location: crate::dataset::Location::Local(sink.dir().to_owned()),
            plans,
            flush: Some(Arc::new(move || {
                let _ = flush_sink.flush(Duration::from_secs(10));
            })),
        },
        settings.telemetry.as_ref().map(|t| t.rollout().clone()),
    );
    let begun = Instant::now();
    let mut timeline = Timeline::default();
    let hcs: Api<HostedCluster> = Api::all(client.clone());
    let mut quiet = 0;
    while Instant::now() < deadline {
        let round = driver
            .round()
            .await
            .map_err(|e| format!("rollout round: {e}"))?;
        timeline.rounds += 1;
        timeline.flag_versions.push(round.flag_version.clone());
        timeline
            .entries
            .extend(entries(&round, begun.elapsed().as_secs_f64()));
        timeline.statuses = round
            .statuses
            .iter()
            .map(|(n, s)| (n.clone(), s.clone()))
            .collect();
        let ended = timeline.statuses.len() == rollouts().len()
            && timeline
                .statuses
                .iter()
                .all(|(_, s)| !matches!(s.phase, Phase::Progressing | Phase::Paused));
        quiet = if round.decisions.is_empty() {
            quiet + 1
        } else {
            0
        };
        if ended {
            break;
        }
        if quiet >= STALL_ROUNDS {
            timeline.stalled = true;
            break;
        }
        tally.mark();
        touch_all(client, &hcs, timeline.rounds).await;
        wait_for_reconciles(tally, hosted_clusters, deadline).await;
    }
    Ok(timeline)
}

/// The timeline's entries of a round: each decision, with the gates that took it.
fn entries(round: &crate::rollout::Round, at: f64) -> Vec<Entry> {
    let mut out = Vec::new();
    for (name, d) in &round.decisions {
        let status = round
            .statuses
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s);
        let group = rollouts()
            .iter()
            .find(|(n, _, _)| n == name)
            .map_or_else(|| name.clone(), |(_, g, _)| (*g).to_owned());
        out.push(Entry {
            at,
            group,
            kind: d.kind.clone(),
            step: d.step + 1,
            ramp: d.ramp,
            message: d.message.clone(),
            enforced_objects: status
                .and_then(|s| s.last_gate.as_ref())
                .filter(|_| d.kind != "Started")
                .map_or(0, |g| g.enforced_objects),
            time: d.time.clone(),
            flag_version: round.flag_version.clone(),
            gates: status
                .and_then(|s| s.last_gate.as_ref())
                .filter(|_| d.kind != "Started")
                .map(|g| {
                    g.gates
                        .iter()
                        .map(|r| {
                            (
                                r.name.clone(),
                                r.result.as_str().to_owned(),
                                r.message.clone(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
        });
    }
    out
}

/// Touches every HostedCluster (an annotation), as a resync would: each is reconciled again.
async fn touch_all(client: &kube::Client, api: &Api<HostedCluster>, round: u32) {
    let Ok(list) = api.list(&kube::api::ListParams::default()).await else {
        return;
    };
    for hc in list.items {
        let (Some(ns), Some(name)) = (hc.metadata.namespace, hc.metadata.name) else {
            continue;
        };
        let patch = serde_json::json!({"metadata": {"annotations": {
            "sim.shadow-reconciler.io/resync": round.to_string(),
        }}});
        let _ = Api::<HostedCluster>::namespaced(client.clone(), &ns)
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await;
    }
}

/// Waits until every touched HostedCluster was reconciled since the touch, or the deadline.
async fn wait_for_reconciles(tally: &Tally, objects: usize, deadline: Instant) {
    let plan = crate::reconcilers::hostedcluster::HostedClusterReconciler::plan();
    while tally.reconciled_since_mark(plan.name()) < objects && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl std::fmt::Display for Timeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "rollout: {} ShadowRollouts driven by their gates, {} rounds of the driver",
            self.statuses.len(),
            self.rounds
        )?;
        for e in &self.entries {
            let ramp = if e.kind == "RolledBack" || e.ramp == 0.0 {
                "shadow".to_owned()
            } else {
                format!("{}%", e.ramp)
            };
            writeln!(
                f,
                "  [{:>5.1} s] {:<32} step {} {:>6}  {}: {}",
                e.at, e.group, e.step, ramp, e.kind, e.message
            )?;
            for (name, result, message) in &e.gates {
                writeln!(f, "              {name:<18} {result:<7} {message}")?;
            }
        }
        let ends: Vec<String> = self
            .statuses
            .iter()
            .map(|(name, s)| {
                format!(
                    "{name} {} at step {} ({}), {} rollback{}",
                    s.phase,
                    s.step + 1,
                    if s.phase.enforces() {
                        format!("{}%", s.ramp)
                    } else {
                        "shadow".to_owned()
                    },
                    s.rollbacks,
                    if s.rollbacks == 1 { "" } else { "s" }
                )
            })
            .collect();
        writeln!(f, "  result: {}", ends.join("; "))?;
        if self.stalled {
            writeln!(
                f,
                "  stalled: no decision in {STALL_ROUNDS} rounds, each after every HostedCluster was reconciled again; the gates wait for what these objects do not give:"
            )?;
            for (name, s) in &self.statuses {
                if matches!(s.phase, Phase::Progressing | Phase::Paused) {
                    writeln!(f, "    {name}: {}", s.message)?;
                }
            }
        }
        Ok(())
    }
}
