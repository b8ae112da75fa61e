//! The one place engines are assembled: an [`Engine`] for a reconciler and its plan, following
//! the process's one [`LiveFlag`], writing to the process's sinks (the log, the metrics with the
//! engine declared in them, the traces, the Parquet dataset, and any of the caller's).
//!
//! `run`, `simulate` and a controller embedding the engine build their engines here, so an engine
//! gets the same sinks, in the same order, whoever starts it.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use shadow_reconciler::flag::{FlagSpec, LiveFlag};
//! use shadow_reconciler::reconcilers::addon::AddOnReconciler;
//! use shadow_reconciler::wiring::Wiring;
//!
//! let client = kube::Client::try_default().await?;
//! let plan = AddOnReconciler::plan();
//! // The command line's defaults (shadow, every object, every group); a ConfigMap watcher may
//! // replace them while the engines run (`flag::watch::run`).
//! let flag = Arc::new(LiveFlag::new(FlagSpec::default(), vec![plan.clone()])?);
//! let engine = Wiring::new(client.clone(), flag)
//!     .with_log_records(true)
//!     .engine(AddOnReconciler, plan)?;
//! tokio::spawn(shadow_reconciler::engine::controller::run(
//!     Arc::new(engine),
//!     kube::Api::all(client),
//!     std::future::pending(),
//!     || {},
//! ));
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;

use crate::dataset::ParquetSink;
use crate::engine::budget::ShadowBudget;
use crate::engine::{Engine, EngineError, LogSink, Reconciler, Sink};
use crate::flag::LiveFlag;
use crate::plan::ReconcilePlan;
use crate::telemetry::metrics::EngineMetrics;
use crate::telemetry::traces::TraceSink;

/// What every engine of a process shares: the client, the flag and the sinks.
#[derive(Clone)]
pub struct Wiring {
    client: kube::Client,
    flag: Arc<LiveFlag>,
    sinks: Vec<Arc<dyn Sink>>,
    log_records: bool,
    metrics: Option<EngineMetrics>,
    traces: Option<Arc<TraceSink>>,
    parquet: Option<Arc<ParquetSink>>,
    reexecute_sample_rate: f64,
    shadow_budget: Arc<ShadowBudget>,
    shadow_client: Option<kube::Client>,
}

impl std::fmt::Debug for Wiring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wiring")
            .field("flag", &self.flag.current().spec.summary())
            .field("sinks", &self.sinks.len())
            .field("log_records", &self.log_records)
            .field("metrics", &self.metrics.is_some())
            .field("traces", &self.traces.is_some())
            .field("parquet", &self.parquet.is_some())
            .field("reexecute_sample_rate", &self.reexecute_sample_rate)
            .field("shadow_budget", &self.shadow_budget.rate())
            .finish_non_exhaustive()
    }
}

impl Wiring {
    /// Engines on `client`, each deciding its reconciles' modes from `flag`; no sink yet.
    #[must_use]
    pub fn new(client: kube::Client, flag: Arc<LiveFlag>) -> Self {
        Self {
            client,
            flag,
            sinks: Vec::new(),
            log_records: false,
            metrics: None,
            traces: None,
            parquet: None,
            reexecute_sample_rate: 0.0,
            shadow_budget: Arc::new(ShadowBudget::unlimited()),
            shadow_client: None,
        }
    }

    /// Also writes every record to `sink` (first, before the sinks below).
    #[must_use]
    pub fn with_sink(mut self, sink: Arc<dyn Sink>) -> Self {
        self.sinks.push(sink);
        self
    }

    /// Logs every record ([`LogSink`]) when `on`.
    #[must_use]
    pub const fn with_log_records(mut self, on: bool) -> Self {
        self.log_records = on;
        self
    }

    /// Records into these metrics, each engine declared in them (its plan, its guard's counters).
    #[must_use]
    pub fn with_metrics(mut self, metrics: EngineMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Exports every reconcile as a trace, when given.
    #[must_use]
    pub fn with_traces(mut self, traces: Option<Arc<TraceSink>>) -> Self {
        self.traces = traces;
        self
    }

    /// Writes every record to the Parquet dataset, when given.
    #[must_use]
    pub fn with_parquet(mut self, parquet: Option<Arc<ParquetSink>>) -> Self {
        self.parquet = parquet;
        self
    }

    /// See [`Engine::with_reexecute_sample_rate`].
    #[must_use]
    pub const fn with_reexecute_sample_rate(mut self, rate: f64) -> Self {
        self.reexecute_sample_rate = rate;
        self
    }

    /// Every engine's candidate spends this one budget (default: unlimited); see
    /// [`Engine::with_shadow_budget`].
    #[must_use]
    pub fn with_shadow_budget(mut self, budget: Arc<ShadowBudget>) -> Self {
        self.shadow_budget = budget;
        self
    }

    /// The shadow's requests go through `client` (default: the control's); see
    /// [`Engine::with_shadow_client`].
    #[must_use]
    pub fn with_shadow_client(mut self, client: Option<kube::Client>) -> Self {
        self.shadow_client = client;
        self
    }

    /// The engine of `reconciler` on `plan`, with every sink.
    pub fn engine<R: Reconciler>(
        &self,
        reconciler: R,
        plan: Arc<ReconcilePlan>,
    ) -> Result<Engine<R>, EngineError> {
        let mut engine = Engine::new(
            Arc::new(reconciler),
            plan,
            self.client.clone(),
            self.flag.clone(),
        )?
        .with_reexecute_sample_rate(self.reexecute_sample_rate)
        .with_shadow_budget(self.shadow_budget.clone());
        if let Some(client) = &self.shadow_client {
            engine = engine.with_shadow_client(client.clone());
        }
        for sink in &self.sinks {
            engine = engine.with_sink(sink.clone());
        }
        if self.log_records {
            engine = engine.with_sink(Arc::new(LogSink));
        }
        if let Some(metrics) = &self.metrics {
            metrics.engine(engine.plan(), engine.guard().clone());
            metrics.shadow_budget(engine.shadow_budget().clone());
            engine = engine.with_sink(Arc::new(metrics.clone()));
        }
        if let Some(traces) = &self.traces {
            engine = engine.with_sink(traces.clone());
        }
        if let Some(parquet) = &self.parquet {
            engine = engine.with_sink(parquet.clone());
        }
        Ok(engine)
    }
}
