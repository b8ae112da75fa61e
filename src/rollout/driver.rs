//! The driver's loop: while it holds the namespace's rollout Lease, every interval it reads the
//! `ShadowRollout` objects, applies a person's action, evaluates the gates of each step over the
//! data since the step began, writes each rollout's status (the truth a restarted driver resumes
//! from), publishes an Event per decision, and writes the flag ConfigMap's `groups` key from
//! every rollout's status. It writes nothing else: the flag's other keys (`mode`, the kill
//! switch) stay a person's.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::{Api, Client, Resource, ResourceExt};

use super::gates;
use super::groups::merged_groups;
use super::prom;
use crate::dataset::Location;
use crate::dataset::rollouts as record;
use crate::flag::rollout::{
    ACTION_ANNOTATION, Action, Decision, GateResult, Observation, Phase, Policy, RolloutStatus,
    ShadowRollout, Verdict, evolve, start,
};
use crate::flag::{GroupRamp, RolloutMetrics};
use crate::plan::ReconcilePlan;
use crate::util::election::{self, Elector};

/// The Events' reporting controller.
const REPORTER: &str = "shadow-reconciler-rollout";

/// The driver's settings.
#[derive(Clone)]
pub struct Settings {
    /// The namespace of the rollouts and the flag ConfigMap.
    pub namespace: String,
    /// The cluster's name in the records (`--cluster`).
    pub cluster: String,
    /// The flag ConfigMap's name.
    pub flag: String,
    /// The Lease that elects the driver among replicas, tried once a round (its retry period
    /// is the interval); `None` when the process's own election already makes it the only
    /// driver (`run --leader-elect`), so it always drives.
    pub lease: Option<election::Config>,
    /// The Events' reporting instance (the pod's name).
    pub identity: String,
    /// How often the rollouts are evaluated.
    pub interval: Duration,
    /// Where the dataset is read.
    pub location: Location,
    /// The plans the gates judge.
    pub plans: Vec<ReconcilePlan>,
    /// Called before each evaluation: commits the process's open Parquet part, so the gates see
    /// the reconciles up to now.
    pub flush: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("namespace", &self.namespace)
            .field("flag", &self.flag)
            .field("lease", &self.lease)
            .field("identity", &self.identity)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

/// What one round did.
#[derive(Clone, Debug, Default)]
pub struct Round {
    /// Whether this process held the Lease.
    pub leader: bool,
    /// Each rollout's name and the decisions taken for it.
    pub decisions: Vec<(String, Decision)>,
    /// Each rollout's name and its status after the round.
    pub statuses: Vec<(String, RolloutStatus)>,
    /// The flag's `groups` key after the round (`None`: not written).
    pub groups: Option<String>,
    /// The flag ConfigMap's resourceVersion after the round: the version the reconciles
    /// evaluated under this round's decisions carry (`reconciles.flag_version`).
    pub flag_version: Option<String>,
}

/// The driver.
pub struct Driver {
    client: Client,
    settings: Settings,
    metrics: Option<RolloutMetrics>,
    recorder: Recorder,
    elector: Option<Elector>,
}

impl Driver {
    /// A driver of `settings.namespace`.
    #[must_use]
    pub fn new(client: Client, settings: Settings, metrics: Option<RolloutMetrics>) -> Self {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: REPORTER.into(),
                instance: Some(settings.identity.clone()),
            },
        );
        let elector = settings
            .lease
            .clone()
            .map(|lease| Elector::new(client.clone(), lease));
        Self {
            client,
            settings,
            metrics,
            recorder,
            elector,
        }
    }

    /// Rounds every interval until `shutdown` resolves; then gives the Lease up.
    pub async fn run(mut self, shutdown: impl Future<Output = ()> + Send) {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            match self.round().await {
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, namespace = %self.settings.namespace, "rollout round failed; retrying at the next interval");
                }
            }
            tokio::select! {
                () = &mut shutdown => break,
                () = tokio::time::sleep(self.settings.interval) => {}
            }
        }
        self.release().await;
    }

    /// One round: the Lease, then every rollout, then the flag.
    ///
    /// # Errors
    /// The API server refused or could not be reached (the Lease, the list, the flag).
    pub async fn round(&mut self) -> Result<Round, kube::Error> {
        let leader = match &self.elector {
            Some(elector) => elector.try_acquire_or_renew().await?,
            None => true,
        };
        if let Some(m) = &self.metrics {
            m.leader(leader);
        }
        let mut round = Round {
            leader,
            ..Round::default()
        };
        if !leader {
            return Ok(round);
        }
        if let Some(flush) = &self.settings.flush {
            let flush = flush.clone();
            let _ = tokio::task::spawn_blocking(move || flush()).await;
        }
        let api: Api<ShadowRollout> =
            Api::namespaced(self.client.clone(), &self.settings.namespace);
        let mut rollouts = api.list(&ListParams::default()).await?.items;
        rollouts.sort_by_key(ResourceExt::name_any);
        let mut entries = Vec::new();
        let mut rows = Vec::new();
        for rollout in &rollouts {
            let name = rollout.name_any();
            match self.handle(&api, rollout).await {
                Ok((policy, status, decisions)) => {
                    entries.push(policy.entry(&status));
                    rows.push(row(
                        &self.settings.cluster,
                        &name,
                        &policy,
                        &status,
                        &decisions,
                    ));
                    round
                        .decisions
                        .extend(decisions.into_iter().map(|d| (name.clone(), d)));
                    round.statuses.push((name, status));
                }
                Err(problem) => {
                    // Its group keeps the entry the flag has (`merged_groups`).
                    tracing::warn!(rollout = %name, %problem, "rollout not driven");
                }
            }
        }
        (round.groups, round.flag_version) = self.write_flag(&entries).await?;
        self.record(rows, round.flag_version.clone()).await;
        Ok(round)
    }

    /// The rollout's decision for this round, its status written and its Events published.
    async fn handle(
        &self,
        api: &Api<ShadowRollout>,
        rollout: &ShadowRollout,
    ) -> Result<(Policy, RolloutStatus, Vec<Decision>), String> {
        let name = rollout.name_any();
        let policy = match Policy::of(&rollout.spec) {
            Ok(p) => p,
            Err(problem) => {
                let mut status = rollout.status.clone().unwrap_or_default();
                if status.message != problem {
                    status.message.clone_from(&problem);
                    let _ = self.write_status(api, &name, &status, false).await;
                    self.publish(
                        rollout,
                        EventType::Warning,
                        "InvalidRollout",
                        problem.clone(),
                    )
                    .await;
                }
                return Err(problem);
            }
        };
        let group = policy.group.to_string();
        if let Some(m) = &self.metrics {
            m.declare(&name, &group);
        }
        let now = Timestamp::now();
        let (mut status, mut decisions) = match &rollout.status {
            Some(s) if s.step_started_at.is_some() => (s.clone(), Vec::new()),
            _ => {
                let (s, d) = start(&policy, now);
                (s, vec![d])
            }
        };
        let annotation = rollout.annotations().get(ACTION_ANNOTATION).cloned();
        let (action, refused) = match annotation.as_deref().map(Action::parse) {
            Some(Ok(a)) => (Some(a), None),
            Some(Err(problem)) => {
                self.publish(
                    rollout,
                    EventType::Warning,
                    "InvalidAction",
                    problem.clone(),
                )
                .await;
                (None, Some(problem))
            }
            None => (None, None),
        };
        let observation = if matches!(status.phase, Phase::Progressing | Phase::Paused) {
            self.observe(rollout, &policy, &status).await
        } else {
            None
        };
        let (next, more) = evolve(&policy, &status, action, observation.as_ref(), now);
        decisions.extend(more);
        status = next;
        if let Some(problem) = refused {
            status.message = format!(
                "{problem} (not applied; the annotation is removed); {}",
                status.message
            );
        }
        status.observed_generation = rollout.metadata.generation;
        status.step_of = format!("{}/{}", status.step + 1, policy.steps.len());
        self.write_status(api, &name, &status, annotation.is_some())
            .await
            .map_err(|e| format!("cannot write the status: {e}"))?;
        if let Some(m) = &self.metrics {
            if let Some(report) = status.last_gate.as_ref().filter(|_| observation.is_some()) {
                m.gates(&name, &group, report);
            }
            for d in &decisions {
                m.decision(&name, &group, d);
            }
            m.status(&name, &group, status.phase, status.step, status.ramp);
        }
        for d in &decisions {
            let type_ = if matches!(d.kind.as_str(), "RolledBack" | "Aborted") {
                EventType::Warning
            } else {
                EventType::Normal
            };
            tracing::info!(rollout = %name, group = %group, decision = %d.kind, step = d.step + 1, ramp = d.ramp, message = %d.message, "rollout decision");
            self.publish(rollout, type_, &d.kind, d.message.clone())
                .await;
        }
        Ok((policy, status, decisions))
    }

    /// The gates' figures over the data since the step began; `None` when they cannot be read
    /// (nothing moves on a round without figures).
    async fn observe(
        &self,
        rollout: &ShadowRollout,
        policy: &Policy,
        status: &RolloutStatus,
    ) -> Option<Observation> {
        let name = rollout.name_any();
        let micros = |t: Option<&str>| {
            t.and_then(|t| t.parse::<Timestamp>().ok())
                .map_or(i64::MIN, Timestamp::as_microsecond)
        };
        let since = micros(status.step_started_at.as_deref());
        // A status written before `startedAt` existed: its step's start.
        let readiness_since = micros(
            status
                .started_at
                .as_deref()
                .or(status.step_started_at.as_deref()),
        );
        let location = self.settings.location.clone();
        let plans = self.settings.plans.clone();
        let group = policy.group.clone();
        let gates_spec = rollout.spec.gates.clone();
        let read = tokio::task::spawn_blocking(move || {
            gates::observe(
                &location,
                &group,
                &plans,
                &gates_spec,
                gates::Windows {
                    step_us: since,
                    readiness_us: readiness_since,
                },
            )
        })
        .await;
        let mut observation = match read {
            Ok(Ok(o)) => o,
            Ok(Err(error)) => {
                tracing::warn!(rollout = %name, %error, "cannot read the data of the gates; nothing moves this round");
                if let Some(m) = &self.metrics {
                    m.gates_error(&name, &policy.group.to_string());
                }
                return None;
            }
            Err(error) => {
                tracing::error!(rollout = %name, %error, "the gates' reading panicked; nothing moves this round");
                return None;
            }
        };
        if let Some(url) = &rollout.spec.gates.prometheus_url {
            for gate in &rollout.spec.gates.prometheus {
                observation.gates.push(prom::evaluate(url, gate).await);
            }
        }
        Some(observation)
    }

    /// The Parquet record of the round (one row per rollout driven), beside the reconciles; a
    /// failure to write it is logged, never a failed round.
    async fn record(&self, mut rows: Vec<record::Row>, version: Option<String>) {
        if rows.is_empty() {
            return;
        }
        for r in &mut rows {
            r.flag_version.clone_from(&version);
        }
        let location = self.settings.location.clone();
        let identity = self.settings.identity.clone();
        match tokio::task::spawn_blocking(move || record::write(&location, &identity, &rows)).await
        {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => {
                tracing::warn!(%error, "cannot write the rollouts' Parquet record of this round");
            }
            Err(error) => tracing::error!(%error, "writing the rollouts' record panicked"),
        }
    }

    /// Writes `status` (and removes the action annotation once applied).
    async fn write_status(
        &self,
        api: &Api<ShadowRollout>,
        name: &str,
        status: &RolloutStatus,
        clear_action: bool,
    ) -> Result<(), kube::Error> {
        let patch = serde_json::json!({ "status": status });
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        if clear_action {
            let patch = serde_json::json!({"metadata": {"annotations": {ACTION_ANNOTATION: null}}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        Ok(())
    }

    /// Writes the flag's `groups` key when it differs (the driven groups' entries as
    /// `driven` says, every other entry kept); returns what it holds and the ConfigMap's
    /// resourceVersion.
    async fn write_flag(
        &self,
        driven: &[GroupRamp],
    ) -> Result<(Option<String>, Option<String>), kube::Error> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.settings.namespace);
        let cm = api.get_opt(&self.settings.flag).await?;
        let version = cm
            .as_ref()
            .and_then(|c| c.metadata.resource_version.clone());
        let current = cm
            .and_then(|cm| cm.data)
            .and_then(|d| d.get("groups").cloned());
        let groups = merged_groups(current.as_deref(), driven);
        if current.as_deref().map(str::trim) == Some(groups.trim())
            || (current.is_none() && driven.is_empty())
        {
            return Ok((current, version));
        }
        let patch = serde_json::json!({"data": {"groups": groups}});
        let written = match api
            .patch(
                &self.settings.flag,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(cm) => cm,
            Err(kube::Error::Api(e)) if e.code == 404 => {
                // Not created here: the driver may write its flag ConfigMap, not create
                // ConfigMaps (a create cannot be restricted to a name).
                tracing::error!(flag = %self.settings.flag, namespace = %self.settings.namespace, "the flag ConfigMap does not exist: create it (deploy/base/flag-configmap.yaml, or `kubectl create configmap`) for the rollouts to reach the controllers");
                return Err(kube::Error::Api(e));
            }
            Err(e) => return Err(e),
        };
        let version = written.metadata.resource_version;
        tracing::info!(flag = %self.settings.flag, groups = %groups.replace('\n', ", "), version = ?version, "rollout wrote the flag's groups");
        Ok((Some(groups), version))
    }

    /// Gives the Lease up, so another replica drives at once.
    async fn release(&self) {
        if let Some(elector) = &self.elector
            && let Err(error) = elector.release().await
        {
            tracing::warn!(%error, "cannot give the rollout Lease up; it expires on its own");
        }
        if let Some(m) = &self.metrics {
            m.leader(false);
        }
    }

    async fn publish(&self, rollout: &ShadowRollout, type_: EventType, reason: &str, note: String) {
        let event = KubeEvent {
            type_,
            reason: reason.into(),
            note: Some(crate::util::truncate(note, 1024)),
            action: "Rollout".into(),
            secondary: None,
        };
        if let Err(error) = self
            .recorder
            .publish(&event, &rollout.object_ref(&()))
            .await
        {
            tracing::warn!(%error, rollout = %rollout.name_any(), reason, "cannot publish the rollout's Event");
        }
    }
}

/// The record's row of one rollout after a round.
fn row(
    cluster: &str,
    name: &str,
    policy: &Policy,
    status: &RolloutStatus,
    decisions: &[Decision],
) -> record::Row {
    let now = Timestamp::now();
    let gate = status.last_gate.as_ref();
    record::Row {
        time_us: now.as_microsecond(),
        cluster: cluster.to_owned(),
        rollout: name.to_owned(),
        group: policy.group.to_string(),
        phase: status.phase.as_str().to_owned(),
        step: status.step + 1,
        ramp: if status.phase.enforces() {
            status.ramp
        } else {
            0.0
        },
        result: gate
            .map(|g| g.result.as_str().to_owned())
            .unwrap_or_default(),
        decision: decisions
            .iter()
            .map(|d| d.kind.as_str())
            .collect::<Vec<_>>()
            .join(","),
        // What was decided, else what the step waits for.
        message: decisions
            .last()
            .map_or_else(|| status.message.clone(), |d| d.message.clone()),
        enforced_objects: gate.map_or(0, |g| g.enforced_objects),
        gates: gate.map_or_else(
            || "[]".to_owned(),
            |g| serde_json::to_string(&g.gates).unwrap_or_default(),
        ),
        flag_version: None,
    }
}

/// A gate that could not be evaluated: it waits, never passes.
#[must_use]
pub fn unavailable(name: &str, why: String) -> GateResult {
    GateResult {
        name: name.to_owned(),
        result: Verdict::Waiting,
        message: why,
        figures: BTreeMap::new(),
    }
}
