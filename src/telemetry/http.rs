//! `/metrics`, `/healthz` and `/readyz` over HTTP.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus::Registry;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::metrics::EngineMetrics;

/// What the endpoints serve.
pub struct Telemetry {
    registry: Registry,
    metrics: EngineMetrics,
    flag: crate::flag::FlagMetrics,
    rollout: crate::flag::RolloutMetrics,
    ingest: crate::ingest::IngestMetrics,
    leader: prometheus::IntGauge,
    /// While standing by for the leader Lease: which Lease (`/readyz` says so, and answers 200).
    standby: std::sync::Mutex<Option<String>>,
    ready: AtomicBool,
    /// The reconciled kinds not listed yet, by CRD name (`/readyz` names them).
    unlisted: std::sync::Mutex<std::collections::BTreeSet<String>>,
    sink_checks: std::sync::Mutex<Vec<SinkCheck>>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("ready", &self.ready)
            .finish_non_exhaustive()
    }
}

/// A sink's health check for `/readyz`.
type SinkCheck = Box<dyn Fn() -> Option<String> + Send + Sync>;

impl Telemetry {
    /// A registry with the engine's families.
    ///
    /// # Panics
    /// Never: the families are registered once, in a fresh registry, with distinct names.
    #[must_use]
    pub fn new() -> Self {
        let registry = Registry::new();
        let metrics =
            EngineMetrics::register(&registry).expect("distinct families in a fresh registry");
        let flag = crate::flag::FlagMetrics::register(&registry)
            .expect("distinct families in a fresh registry");
        let rollout = crate::flag::RolloutMetrics::register(&registry)
            .expect("distinct families in a fresh registry");
        let ingest = crate::ingest::IngestMetrics::register(&registry)
            .expect("distinct families in a fresh registry");
        let leader = prometheus::IntGauge::with_opts(prometheus::Opts::new(
            format!("{}_leader", crate::vocab::METRIC_PREFIX),
            "1 while this process holds its leader-election Lease and runs the controllers (run --leader-elect); 0 while it stands by.",
        ))
        .expect("a valid family");
        registry
            .register(Box::new(leader.clone()))
            .expect("distinct families in a fresh registry");
        Self {
            registry,
            metrics,
            flag,
            rollout,
            ingest,
            leader,
            standby: std::sync::Mutex::new(None),
            ready: AtomicBool::new(false),
            unlisted: std::sync::Mutex::new(std::collections::BTreeSet::new()),
            sink_checks: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The engine metrics (a sink for the engines).
    #[must_use]
    pub fn metrics(&self) -> &EngineMetrics {
        &self.metrics
    }

    /// The flag's metrics (for the flag watcher).
    #[must_use]
    pub fn flag(&self) -> &crate::flag::FlagMetrics {
        &self.flag
    }

    /// The rollout driver's metrics.
    #[must_use]
    pub fn rollout(&self) -> &crate::flag::RolloutMetrics {
        &self.rollout
    }

    /// The ingest's metrics (for `ingest`).
    #[must_use]
    pub fn ingest(&self) -> &crate::ingest::IngestMetrics {
        &self.ingest
    }

    /// The leader-election gauge (`run --leader-elect`).
    #[must_use]
    pub fn leader(&self) -> &prometheus::IntGauge {
        &self.leader
    }

    /// Standing by for `lease` (`Some`): `/readyz` answers 200 and says so, as a replica that
    /// does not lead is healthy and a rolling update must move on; `None` once leading.
    pub fn standby(&self, lease: Option<String>) {
        *self
            .standby
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = lease;
    }

    fn standing_by(&self) -> Option<String> {
        self.standby
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The name of every family registered, whether or not it has a series yet.
    #[must_use]
    pub fn family_names(&self) -> Vec<String> {
        let mut names = crate::telemetry::metrics::family_names(&self.metrics);
        names.extend(
            prometheus::core::Collector::desc(&self.leader)
                .iter()
                .map(|d| d.fq_name.clone()),
        );
        for collector in self
            .flag
            .collectors()
            .into_iter()
            .chain(self.rollout.collectors())
            .chain(self.ingest.collectors())
        {
            names.extend(collector.desc().iter().map(|d| d.fq_name.clone()));
        }
        names
    }

    /// The registry.
    #[must_use]
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Marks the process ready (plans loaded, controllers started, their kinds listable) or not.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// Whether `/readyz` answers 200: ready, and no sink reports that it cannot write.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        self.standing_by().is_some()
            || (self.ready.load(Ordering::Relaxed) && self.sink_problem().is_none())
    }

    /// Adds a check `/readyz` runs: `Some(why)` while a sink cannot write (the Parquet writer on
    /// a full disk, say), so an orchestrator stops sending work to a process that would drop it.
    pub fn add_sink_check(&self, check: impl Fn() -> Option<String> + Send + Sync + 'static) {
        self.sink_checks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Box::new(check));
    }

    fn sink_problem(&self) -> Option<String> {
        self.sink_checks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .find_map(|check| check())
    }

    /// Expects one controller per kind (its CRD name, `plural.group`) to report the kind
    /// listable: returns one callback per kind, in order; the process is ready once every
    /// callback ran, and until then `/readyz` names the kinds still waited for.
    pub fn ready_when_listed(self: &Arc<Self>, kinds: &[String]) -> Vec<Box<dyn FnOnce() + Send>> {
        self.set_ready(kinds.is_empty());
        self.unlisted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(kinds.iter().cloned());
        kinds
            .iter()
            .map(|kind| {
                let (kind, telemetry) = (kind.clone(), self.clone());
                Box::new(move || {
                    let mut unlisted = telemetry
                        .unlisted
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    unlisted.remove(&kind);
                    if unlisted.is_empty() {
                        telemetry.set_ready(true);
                    }
                }) as Box<dyn FnOnce() + Send>
            })
            .collect()
    }

    /// The text exposition.
    #[must_use]
    pub fn exposition(&self) -> String {
        self.metrics.encode(&self.registry)
    }
}

impl Default for Telemetry {
    fn default() -> Self {
        Self::new()
    }
}

async fn metrics(State(t): State<Arc<Telemetry>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        t.exposition(),
    )
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(t): State<Arc<Telemetry>>) -> (StatusCode, String) {
    if let Some(lease) = t.standing_by() {
        return (
            StatusCode::OK,
            format!("ready: standing by for the leader Lease {lease}\n"),
        );
    }
    if !t.ready.load(Ordering::Relaxed) {
        let unlisted: Vec<String> = t
            .unlisted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .cloned()
            .collect();
        if !unlisted.is_empty() {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "not ready: cannot list {} yet; apply the CRDs (deploy/crds) or check the service account's RBAC\n",
                    unlisted.join(", ")
                ),
            );
        }
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: not started yet (the reconciled kinds cannot be listed yet, or the receivers are not listening)\n".to_owned(),
        );
    }
    match t.sink_problem() {
        Some(problem) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: a sink cannot write: {problem}\n"),
        ),
        None => (StatusCode::OK, "ready\n".to_owned()),
    }
}

/// A running endpoint server.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Serves the endpoints on `addr` (port 0 picks one).
    pub async fn start(addr: SocketAddr, telemetry: Arc<Telemetry>) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let app = Router::new()
            .route("/metrics", get(metrics))
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz))
            .with_state(telemetry);
        let (stop, task) = crate::util::serve::spawn(listener, app);
        Ok(Self {
            addr,
            stop: Some(stop),
            task,
        })
    }

    /// The address served.
    #[must_use]
    pub const fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving and waits.
    pub async fn shutdown(mut self) -> std::io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.await.map_err(std::io::Error::other)?
    }
}
