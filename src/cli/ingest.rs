//! The `ingest` command (binary only): OTLP receivers, the endpoints, the sinks.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use shadow_reconciler::engine::Sink;
use shadow_reconciler::ingest::receiver::{self, DEFAULT_MAX_REQUEST_BYTES};
use shadow_reconciler::ingest::{Assembler, Convention, Ingest, Limits};

/// Options of `ingest`.
#[derive(Args)]
pub struct IngestArgs {
    /// The plan the controller's operations follow: a file or a shipped plan's name
    /// (repeatable; reconcile spans name theirs with `shadow_reconciler.plan`).
    #[arg(long = "plan", value_name = "FILE|NAME", required = true)]
    pub plans: Vec<String>,
    /// OTLP/gRPC receiver address. Loopback by default: OTLP is unauthenticated, and a sidecar
    /// receives from the controller in its own pod; give `0.0.0.0:4317` to receive from others.
    #[arg(long, default_value = "127.0.0.1:4317")]
    pub otlp_grpc: SocketAddr,
    /// OTLP/HTTP receiver address (`POST /v1/traces`); loopback by default, as `--otlp-grpc`.
    #[arg(long, default_value = "127.0.0.1:4318")]
    pub otlp_http: SocketAddr,
    /// Serve /metrics, /healthz and /readyz here. Loopback by default; give `0.0.0.0:8080` for
    /// Prometheus and kubelet probes from outside the pod (the manifests do).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub candidate: super::options::CandidateArgs,
    /// Name of reconcile spans (a span with `shadow_reconciler.reconcile=true` counts too).
    #[arg(long, default_value = "reconcile")]
    pub reconcile_span_name: String,
    /// Attribute naming an operation span's operation.
    #[arg(long, default_value = shadow_reconciler::vocab::span::OPERATION)]
    pub operation_attribute: String,
    /// Operation spans buffered while waiting for their reconcile span, at most.
    #[arg(long, default_value_t = 100_000)]
    pub max_buffered_spans: usize,
    /// Seconds an operation span waits for its reconcile span before it is evicted.
    #[arg(long, default_value_t = 30)]
    pub span_timeout: u64,
    /// Largest request accepted, in bytes (after gzip inflation for HTTP).
    #[arg(long, default_value_t = DEFAULT_MAX_REQUEST_BYTES)]
    pub max_request_bytes: usize,
    /// With --parquet-dir: seconds a request's records wait for room when the Parquet writer is
    /// behind (its queue of --parquet-capacity records is full), before they are dropped and
    /// counted. The exporter's request waits with them, which slows the exporter down instead
    /// of losing its data; 0 drops at once.
    #[arg(long, value_name = "SECONDS", default_value_t = shadow_reconciler::ingest::WAIT_WHEN_FULL.as_secs())]
    pub parquet_wait_when_full: u64,
    #[command(flatten)]
    pub parquet: super::options::ParquetArgs,
    #[command(flatten)]
    pub rollout: super::rollout::RolloutArgs,
    #[command(flatten)]
    pub flag_map: super::options::FlagMapArgs,
    /// Log lines: auto, human or json.
    #[arg(long, default_value = "auto")]
    pub log_format: shadow_reconciler::telemetry::logging::LogFormat,
}

/// Runs the receivers until SIGTERM or Ctrl-C.
pub fn run(args: &IngestArgs) -> anyhow::Result<ExitCode> {
    shadow_reconciler::telemetry::logging::init(args.log_format);
    let plans = args
        .plans
        .iter()
        .map(|p| super::options::shipped_or_file(p).map(Arc::new))
        .collect::<anyhow::Result<Vec<_>>>()?;
    super::options::once_each(args.plans.iter().cloned(), plans.iter().map(|p| p.name()))?;
    let loaded: Vec<&shadow_reconciler::plan::ReconcilePlan> =
        plans.iter().map(AsRef::as_ref).collect();
    let candidate =
        super::options::groups_of("candidate-group", &args.candidate.candidate_groups, &loaded)?;
    let assembler = Assembler::new(
        &plans,
        &candidate,
        Convention {
            reconcile_span_name: args.reconcile_span_name.clone(),
            operation_attribute: args.operation_attribute.clone(),
        },
        Limits {
            max_buffered_spans: args.max_buffered_spans.max(1),
            timeout: Duration::from_secs(args.span_timeout),
        },
    )?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let telemetry = Arc::new(shadow_reconciler::telemetry::http::Telemetry::new());
        let metrics = telemetry.metrics().clone();
        for plan in &plans {
            metrics.engine(plan, Arc::default());
        }
        let mut sinks: Vec<Arc<dyn Sink>> = vec![Arc::new(metrics)];
        let parquet = args
            .parquet
            .start(&telemetry, Duration::from_secs(args.parquet_wait_when_full))?;
        if let Some(parquet) = &parquet {
            sinks.push(parquet.clone());
        }
        let ingest = Arc::new(Ingest::new(
            assembler,
            sinks,
            Some(telemetry.ingest().clone()),
            args.max_request_bytes,
        ));
        let server = shadow_reconciler::telemetry::http::Server::start(args.listen, telemetry.clone())
            .await
            .with_context(|| format!("cannot serve the metrics endpoint on {}", args.listen))?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let until = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let driver = if args.rollout.rollout {
            let config = super::options::cluster_config(None, None).await?;
            let client = kube::Client::try_from(config).context("cannot build the kube client")?;
            let flag = args.flag_map.target();
            args.rollout.driver(
                &client,
                (&flag.namespace, &flag.name),
                (
                    (args.parquet.parquet_dir.as_deref(), parquet.as_ref()),
                    &args.parquet.cluster,
                ),
                plans.iter().map(|p| (**p).clone()).collect(),
                &telemetry,
                false,
            )?
        } else {
            None
        };
        let driver_task = driver.map(|d| tokio::spawn(d.run(until(stopped.clone()))));
        let (grpc, grpc_task) = receiver::serve_grpc(args.otlp_grpc, ingest.clone(), until(stopped.clone())).await?;
        let (http, http_task) = receiver::serve_http(args.otlp_http, ingest.clone(), until(stopped)).await?;
        // Listening before saying it is ready: whoever waits for that may signal at once.
        let terminated = super::shutdown_signal();
        telemetry.set_ready(true);
        let names: Vec<&str> = plans.iter().map(|p| p.name()).collect();
        tracing::info!(grpc = %grpc, http = %http, metrics = %server.addr(), plans = ?names, "receiving OTLP traces");
        terminated.await;
        // Said before anything stops, so a log that ends here tells a kill during the
        // shutdown from a stream that was lost.
        tracing::info!("shutting down: closing the receivers, then the rollout driver, then the Parquet writer");
        let _ = stop.send(true);
        let _ = tokio::join!(grpc_task, http_task);
        tracing::info!("receivers closed");
        if let Some(task) = driver_task {
            let _ = task.await;
        }
        server.shutdown().await.context("the metrics endpoint failed")?;
        if let Some(parquet) = parquet {
            let grace = args.parquet.grace();
            tokio::task::spawn_blocking(move || super::options::finish(&parquet, grace)).await.context("the Parquet writer failed")??;
        }
        Ok(ExitCode::SUCCESS)
    })
}
