//! What a scenario is asked to do: the named faults ([`Scenario`]), the population, mode, flag and
//! sinks ([`Settings`]), and what can go wrong ([`ScenarioError`]).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use super::population;

/// A named set of faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// No faults, every input present.
    Healthy,
    /// Some HostedClusters miss their SSH key, audit-webhook or pull secret, or carry an
    /// unparseable release image ([`population::Faults::of`]).
    MissingSecrets,
    /// After the restart, a second writer races the add-on controller's status patches.
    ConflictStorm,
    /// Missing secrets, the conflict storm, and 1% of requests answered 503.
    Mixed,
    /// The missing secrets, then the flip to enforce driven by the data: two `ShadowRollout`s,
    /// one advancing to 100%, one rolled back by its gates (`scenario::rollout`).
    Rollout,
}

impl Scenario {
    /// Every scenario.
    pub const ALL: [Self; 5] = [
        Self::Healthy,
        Self::MissingSecrets,
        Self::ConflictStorm,
        Self::Mixed,
        Self::Rollout,
    ];

    /// The scenario's name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Healthy => "healthy",
            Self::MissingSecrets => "missing-secrets",
            Self::ConflictStorm => "conflict-storm",
            Self::Mixed => "mixed",
            Self::Rollout => "rollout",
        }
    }

    pub(crate) const fn missing_secrets(self) -> bool {
        matches!(self, Self::MissingSecrets | Self::Mixed | Self::Rollout)
    }

    pub(super) const fn conflict_storm(self) -> bool {
        matches!(self, Self::ConflictStorm | Self::Mixed)
    }

    pub(super) const fn flaky(self) -> bool {
        matches!(self, Self::Mixed)
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|sc| sc.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown scenario {s:?}; expected one of {}",
                    Self::ALL.map(Self::as_str).join(", ")
                )
            })
    }
}

/// What to simulate.
#[derive(Clone, Debug)]
#[allow(clippy::struct_excessive_bools)] // independent switches of a run, each a command-line flag
pub struct Settings {
    /// HostedClusters to create.
    pub hosted_clusters: usize,
    /// ClusterManagementAddOns to create.
    pub addons: usize,
    /// The faults.
    pub scenario: Scenario,
    /// Seed of every random choice.
    pub seed: u64,
    /// The longest the run lasts, from `started`: creating the population, the controllers'
    /// run and stopping them (a share of it is kept for the caller to write the data).
    pub duration: Duration,
    /// Reconciles at once (controller-runtime's `MaxConcurrentReconciles`) of the HostedCluster
    /// and the add-on controller; 0: no bound.
    pub workers: (u16, u16),
    /// When `duration` started counting (default: when [`run`](super::run) is called).
    pub started: Option<std::time::Instant>,
    /// Quiet time after which a run that reconciled every object ends early.
    pub settle: Duration,
    /// Draw a progress bar on stderr when it is a terminal.
    pub progress: bool,
    /// Log every record.
    pub log_records: bool,
    /// Metrics the engines record into (served by the caller).
    pub telemetry: Option<Arc<crate::telemetry::http::Telemetry>>,
    /// Where the engines' spans go, when traces are on.
    pub traces: Option<Arc<crate::telemetry::traces::TraceSink>>,
    /// The engines' mode, rollout groups, ramp and annotation override: the flag both engines
    /// follow until the ConfigMap (`flag_configmap`) says otherwise. Its groups must exist in
    /// the plans run (`hostedcluster`, `addon-install-progression`, or `plans`' versions).
    pub flag: crate::flag::FlagSpec,
    /// Where the records go as Parquet, when on.
    pub parquet: Option<Arc<crate::dataset::ParquetSink>>,
    /// Plans to run instead of the shipped ones (matched by name), e.g. a hypothesis under test.
    pub plans: Vec<Arc<crate::plan::ReconcilePlan>>,
    /// Run the HostedCluster reconciler with the phased code in both paths, every operation
    /// compared ([`SameCodeReconciler`](type@crate::reconcilers::hostedcluster::SameCodeReconciler)).
    pub same_code: bool,
    /// The flag ConfigMap watched in the simulated cluster; `None`: `flag` decides alone.
    pub flag_configmap: Option<crate::flag::watch::Target>,
    /// The HostedClusters' faults instead of the scenario's (the scenario still decides the
    /// conflict storm and the 503s).
    pub faults: Option<population::Faults>,
    /// A real cluster to run on instead of the embedded simulator (`simulate --kubeconfig`). The
    /// population is created in it; the conflict storm is a real second writer; the 503s, which
    /// only the simulator can inject, are left out.
    pub cluster: Option<kube::Config>,
    /// The shadow's request budget, shared by both engines; `None`: unlimited (a bound on the
    /// embedded simulator would make the run depend on the machine's speed).
    pub shadow_budget: Option<Arc<crate::engine::budget::ShadowBudget>>,
}

/// The flag ConfigMap `simulate` watches in its simulated cluster.
#[must_use]
pub fn default_flag_target() -> crate::flag::watch::Target {
    crate::flag::watch::Target {
        namespace: "shadow-reconciler".into(),
        name: "shadow-reconciler-flag".into(),
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            hosted_clusters: 200,
            addons: 60,
            scenario: Scenario::Mixed,
            seed: 1,
            duration: Duration::from_mins(1),
            started: None,
            workers: (10, 2),
            settle: Duration::from_secs(2),
            progress: true,
            log_records: false,
            telemetry: None,
            traces: None,
            flag: crate::flag::FlagSpec::default(),
            parquet: None,
            plans: Vec::new(),
            same_code: false,
            flag_configmap: Some(default_flag_target()),
            faults: None,
            cluster: None,
            shadow_budget: None,
        }
    }
}

/// Errors of a simulated run.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The simulator did not start.
    #[error(transparent)]
    Sim(#[from] crate::sim::SimError),
    /// Setting up the population failed.
    #[error("cannot create the population")]
    Population(#[source] kube::Error),
    /// An engine could not be built.
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
    /// The cluster holds a population already (`simulate --kubeconfig` on a used cluster).
    #[error(
        "the cluster already holds a population ({0} exists): run on a fresh cluster, or delete the namespaces team-0..team-9 and every ClusterManagementAddOn first"
    )]
    PopulationExists(String),
    /// The kube client could not be built.
    #[error("cannot build the kube client")]
    Client(#[source] kube::Error),
    /// Creating the population took the whole `duration`.
    #[error(
        "the population was not created within the run's {} s (--duration): give a longer duration, or fewer objects",
        .0.as_secs()
    )]
    Deadline(Duration),
    /// The flag settings are invalid.
    #[error(transparent)]
    Flag(#[from] crate::flag::FieldError),
    /// The rollout scenario could not run.
    #[error("rollout scenario: {0}")]
    Rollout(String),
}
