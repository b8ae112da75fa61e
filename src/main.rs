//! The `shadow-reconciler` command: argument parsing and dispatch; the work is in the library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use shadow_reconciler::plan::ReconcilePlan;
use shadow_reconciler::{scenario, sim, simulate};

mod cli;
mod ingest_cmd;

/// How long `run` waits for its controllers to stop after SIGTERM.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Exit code when a signal interrupted the command (128 + SIGINT, as shells report it).
const EXIT_INTERRUPTED: u8 = 130;

/// Exit code for invalid input (a bad plan, an unknown group); clap uses it for usage errors too.
const EXIT_INVALID: u8 = 2;

#[derive(Parser)]
#[command(name = "shadow-reconciler", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Work with ReconcilePlan files.
    #[command(subcommand)]
    Plan(PlanCommand),
    /// Run the control and candidate models side by side and print what the candidate changes.
    Simulate(SimulateArgs),
    /// The embedded Kubernetes API simulator.
    #[command(subcommand)]
    Sim(SimCommand),
    /// Run the reference controllers against a real cluster (kubeconfig or in-cluster).
    Run(RunArgs),
    /// Judge the plan from recorded Parquet data: verdicts per operation, ordering dependencies,
    /// readiness per rollout group. Exit 0 ready, 1 not ready, 3 inconclusive, 2 bad input.
    Analyze(cli::AnalyzeArgs),
    /// Receive a controller's reconcile spans over OTLP (gRPC 4317, HTTP 4318), rebuild each
    /// reconcile, evaluate the plan's candidate on it, and record it like the engine does.
    Ingest(ingest_cmd::IngestArgs),
    /// Write the generated parts of deploy/ (the CRDs, from the Rust types), or check them.
    Manifests(ManifestsArgs),
}

#[derive(Args)]
struct ManifestsArgs {
    /// The repository root: files go to DIR/deploy/...
    #[arg(long, value_name = "DIR", default_value = ".")]
    dir: PathBuf,
    /// Write nothing; exit 1 listing the files that are missing or stale.
    #[arg(long)]
    check: bool,
}

#[derive(Args)]
pub(crate) struct RunArgs {
    /// Which reconcilers: hostedcluster, addon-install-progression or all.
    #[arg(long, default_value = "all")]
    reconciler: String,
    /// The engines' mode: off, shadow or enforce.
    #[arg(long, default_value = "shadow")]
    mode: shadow_reconciler::engine::Mode,
    /// Rollout group the control enforces in mode enforce (repeatable).
    #[arg(long = "enforce", value_name = "GROUP")]
    enforce: Vec<String>,
    /// Rollout group the candidate enforces (repeatable); default: every group.
    #[arg(long = "candidate", value_name = "GROUP")]
    candidate: Vec<String>,
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
    /// Write every record as Parquet under this directory (hive-style partitions).
    #[arg(long, value_name = "DIR")]
    parquet_dir: Option<PathBuf>,
    #[command(flatten)]
    parquet: cli::ParquetArgs,
    #[command(flatten)]
    flag: cli::FlagArgs,
    /// The cluster's kubeconfig (default: KUBECONFIG, ~/.kube/config, or the pod's service
    /// account).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig's context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
}

#[derive(Subcommand)]
enum SimCommand {
    /// Serve the simulator on loopback until interrupted, then print the audit summary.
    Serve(ServeArgs),
    /// Create the reference population (CRDs, namespaces team-0..team-9, HostedClusters with
    /// the scenario's faults, add-ons) in a cluster, for controllers run by hand or in another
    /// language; print what was planted as JSON.
    Populate(PopulateArgs),
}

#[derive(Args)]
struct PopulateArgs {
    /// The cluster (default: $KUBECONFIG, then ~/.kube/config); it must hold no population yet.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig's context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// HostedClusters to create.
    #[arg(long, default_value_t = 200)]
    hosted_clusters: usize,
    /// ClusterManagementAddOns to create.
    #[arg(long, default_value_t = 0)]
    addons: usize,
    /// The faults planted in the objects: healthy or missing-secrets (the request faults of
    /// conflict-storm and mixed belong to `simulate`; `sim serve --faults` injects such rules).
    #[arg(long, default_value = "missing-secrets")]
    scenario: scenario::Scenario,
    /// Seed of the draw (same seed, same faulty objects as `simulate --seed`).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Args)]
struct ServeArgs {
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Fault rules (YAML), active from the start.
    #[arg(long, value_name = "FILE")]
    faults: Option<PathBuf>,
    /// Write a kubeconfig pointing at the simulator here.
    #[arg(long, value_name = "FILE")]
    kubeconfig_out: Option<PathBuf>,
    /// Seed of generated names and uids.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

#[derive(Subcommand)]
enum PlanCommand {
    /// Validate plans and print a summary of each; exit 2 if any is invalid.
    Check {
        /// Plan files (YAML).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(Args)]
struct SimulateArgs {
    /// HostedClusters in the simulated cluster.
    #[arg(long, default_value_t = 200)]
    hosted_clusters: usize,
    /// ClusterManagementAddOns in the simulated cluster.
    #[arg(long, default_value_t = 60)]
    addons: usize,
    /// The faults: healthy, missing-secrets, conflict-storm or mixed.
    #[arg(long, default_value = "mixed")]
    scenario: scenario::Scenario,
    /// The engines' mode: off, shadow or enforce.
    #[arg(long, default_value = "shadow")]
    mode: shadow_reconciler::engine::Mode,
    /// The longest the controllers run, in seconds (a run that settles ends earlier).
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// Seed of every random choice (same seed, same population and faults).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// In mode enforce: a rollout group the control enforces, as PLAN/GROUP (repeatable).
    #[arg(long = "enforce-group", value_name = "PLAN/GROUP", value_parser = parse_plan_group)]
    enforce_groups: Vec<(String, String)>,
    /// A rollout group the candidate enforces, as PLAN/GROUP (repeatable); default: every group.
    #[arg(long = "candidate-group", value_name = "PLAN/GROUP", value_parser = parse_plan_group)]
    candidate_groups: Vec<(String, String)>,
    /// Serve /metrics, /healthz and /readyz here while the run lasts (port 0 picks one).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// Keep serving the endpoints after the run, until SIGTERM or Ctrl-C.
    #[arg(long)]
    serve: bool,
    /// Instead: drive the two models over randomly drawn results, without an API server.
    #[arg(long)]
    model_only: bool,
    /// With --model-only: a shipped plan or a plan file.
    #[arg(long, default_value = "hostedcluster", requires = "model_only")]
    plan: String,
    /// With --model-only: reconciles to simulate.
    #[arg(long, default_value_t = 10_000, requires = "model_only")]
    reconciles: u64,
    /// With --model-only: probability that an operation fails in a reconcile.
    #[arg(long, default_value_t = 0.05, value_parser = parse_probability, requires = "model_only")]
    failure_rate: f64,
    /// With --model-only: rollout group enforced in the candidate (repeatable); default: all.
    #[arg(long = "enforce", value_name = "GROUP", requires = "model_only")]
    enforce: Vec<String>,
    /// Run this plan instead of the shipped plan of the same name (repeatable).
    /// Run on this cluster instead of the embedded simulator: the population is created in it
    /// (CRDs, namespaces team-0..team-9, the HostedClusters and add-ons), which must be fresh.
    #[arg(long, value_name = "FILE", conflicts_with = "model_only")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig's context to use (default: its current context).
    #[arg(long, value_name = "NAME", requires = "kubeconfig")]
    context: Option<String>,
    #[arg(long = "with-plan", value_name = "FILE", conflicts_with = "model_only")]
    with_plans: Vec<PathBuf>,
    /// Where the records are written as Parquet (replacing an earlier simulation's data there),
    /// then analysed.
    #[arg(long, value_name = "DIR", default_value = "shadow-data")]
    parquet_dir: PathBuf,
    /// Write no Parquet and skip the analysis.
    #[arg(long, conflicts_with = "model_only")]
    no_parquet: bool,
    #[command(flatten)]
    parquet: cli::ParquetArgs,
    #[command(flatten)]
    flag: cli::FlagArgs,
}

fn parse_plan_group(s: &str) -> Result<(String, String), String> {
    match s.split_once('/') {
        Some((plan, group)) if !plan.is_empty() && !group.is_empty() => {
            Ok((plan.to_owned(), group.to_owned()))
        }
        _ => Err(format!(
            "{s:?} is not PLAN/GROUP, e.g. hostedcluster/non-critical-syncs"
        )),
    }
}

fn by_plan(pairs: &[(String, String)]) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut map = std::collections::BTreeMap::<String, Vec<String>>::new();
    for (plan, group) in pairs {
        map.entry(plan.clone()).or_default().push(group.clone());
    }
    map
}

fn parse_probability(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .parse()
        .map_err(|e| format!("{s:?} is not a number: {e}"))?;
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(format!("{p} is not a probability; use a value from 0 to 1"))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plan(PlanCommand::Check { files }) => Ok(check_plans(&files)),
        Command::Simulate(args) => simulate(args),
        Command::Sim(SimCommand::Serve(args)) => serve(&args),
        Command::Sim(SimCommand::Populate(args)) => populate(&args),
        Command::Run(args) => run(&args),
        Command::Analyze(args) => cli::analyze(&args),
        Command::Manifests(args) => manifests(&args),
        Command::Ingest(args) => ingest_cmd::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(EXIT_INVALID)
        }
    }
}

fn manifests(args: &ManifestsArgs) -> anyhow::Result<ExitCode> {
    use shadow_reconciler::manifests;
    if args.check {
        let stale = manifests::stale(&args.dir)?;
        for path in &stale {
            eprintln!("stale or missing: {}", path.display());
        }
        if !stale.is_empty() {
            eprintln!("run `shadow-reconciler manifests` to regenerate them");
            return Ok(ExitCode::FAILURE);
        }
        return Ok(ExitCode::SUCCESS);
    }
    for path in manifests::write(&args.dir)? {
        cli::out(format_args!("wrote {}\n", path.display()));
    }
    Ok(ExitCode::SUCCESS)
}

fn check_plans(files: &[PathBuf]) -> ExitCode {
    let mut invalid = 0;
    for file in files {
        match ReconcilePlan::load(file) {
            Ok(plan) => cli::out(format_args!("{}\n", plan.summary())),
            Err(error) => {
                invalid += 1;
                let error = anyhow::Error::from(error);
                eprintln!("{error:#}");
            }
        }
    }
    if invalid == 0 {
        ExitCode::SUCCESS
    } else {
        eprintln!("{invalid} of {} plans invalid", files.len());
        ExitCode::from(EXIT_INVALID)
    }
}

fn simulate(args: SimulateArgs) -> anyhow::Result<ExitCode> {
    if args.model_only {
        return simulate_models(args);
    }
    let telemetry = Arc::new(shadow_reconciler::telemetry::http::Telemetry::new());
    let plans = cli::load_plans(&args.with_plans)?;
    let parquet = if args.no_parquet {
        None
    } else {
        cli::replace_simulated_data(&args.parquet_dir)?;
        let health = telemetry.metrics().sink_health("parquet").into();
        Some(
            args.parquet
                .start(&args.parquet_dir, Some(health), &telemetry)?,
        )
    };
    let settings = scenario::Settings {
        telemetry: Some(telemetry.clone()),
        parquet: parquet.clone(),
        plans: plans.iter().map(|p| Arc::new(p.plan.clone())).collect(),
        enforced_groups: by_plan(&args.enforce_groups),
        candidate_groups: by_plan(&args.candidate_groups),
        hosted_clusters: args.hosted_clusters,
        addons: args.addons,
        scenario: args.scenario,
        seed: args.seed,
        mode: args.mode,
        duration: std::time::Duration::from_secs(args.duration),
        ramp: args.flag.ramp_percent,
        allow_object_override: args.flag.allow_object_override,
        flag: args.flag.target(),
        ..scenario::Settings::default()
    };
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let summary = runtime.block_on(async {
        // Inside the runtime: the gRPC exporter needs one to be built.
        let traces = shadow_reconciler::telemetry::traces::TraceSink::from_env()?.map(Arc::new);
        let cluster = simulated_cluster(&args).await?;
        let settings = scenario::Settings {
            traces: traces.clone(),
            cluster,
            ..settings
        };
        let server =
            shadow_reconciler::telemetry::http::Server::start(args.listen, telemetry.clone())
                .await
                .with_context(|| format!("cannot serve the metrics endpoint on {}", args.listen))?;
        eprintln!("metrics at http://{}/metrics", server.addr());
        let summary = tokio::select! {
            summary = scenario::run(&settings) => summary.context("the simulation failed")?,
            () = shutdown_signal() => {
                // Interrupted: what the sink accepted so far is still written, then we stop.
                if let Some(parquet) = parquet {
                    let grace = args.parquet.grace();
                    tokio::task::spawn_blocking(move || cli::finish(&parquet, grace))
                        .await
                        .context("the Parquet writer failed")??;
                }
                eprintln!("interrupted before the simulation finished");
                return anyhow::Ok(None);
            }
        };
        cli::out(&summary);
        if let Some(parquet) = &parquet {
            let (parquet, grace) = (parquet.clone(), args.parquet.grace());
            tokio::task::spawn_blocking(move || cli::finish(&parquet, grace))
                .await
                .context("the Parquet writer failed")??;
            let (dir, plans) = (args.parquet_dir.clone(), plans);
            tokio::task::spawn_blocking(move || cli::analyze_simulated(&dir, &plans))
                .await
                .context("the analysis failed")??;
        }
        if args.serve {
            eprintln!(
                "run finished; still serving http://{}/metrics until SIGTERM or Ctrl-C",
                server.addr()
            );
            shutdown_signal().await;
        }
        server
            .shutdown()
            .await
            .context("the metrics endpoint failed")?;
        anyhow::Ok(Some(summary))
    })?;
    let Some(summary) = summary else {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    };
    if summary.shadow_persisted > 0 || summary.guard_refusals > 0 {
        anyhow::bail!(
            "the shadow persisted {} mutations and the guard refused {}: both must be 0",
            summary.shadow_persisted,
            summary.guard_refusals
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `simulate --kubeconfig`: the cluster to run on instead of the simulator.
async fn simulated_cluster(args: &SimulateArgs) -> anyhow::Result<Option<kube::Config>> {
    let Some(path) = &args.kubeconfig else {
        return Ok(None);
    };
    let config = cli::cluster_config(Some(path), args.context.as_deref()).await?;
    eprintln!(
        "running on the cluster at {} (from {}): the population is created there",
        config.cluster_url,
        path.display()
    );
    Ok(Some(config))
}

fn simulate_models(args: SimulateArgs) -> anyhow::Result<ExitCode> {
    let plan = cli::shipped_or_file(&args.plan)?;
    let settings = simulate::Settings {
        reconciles: args.reconciles,
        failure_rate: args.failure_rate,
        seed: args.seed,
        candidate_groups: (!args.enforce.is_empty()).then_some(args.enforce),
    };
    let summary = simulate::run(Arc::new(plan), settings).context("--enforce")?;
    cli::out(&summary);
    Ok(ExitCode::SUCCESS)
}

fn serve(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let faults = match &args.faults {
        Some(path) => sim::FaultConfig::load(path)?,
        None => sim::FaultConfig::default(),
    };
    let config = sim::SimConfig {
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], args.port)),
        seed: args.seed,
        faults,
        ..sim::SimConfig::default()
    };
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let mut simulator = sim::Simulator::start(config).await?;
        if let Some(path) = &args.kubeconfig_out {
            std::fs::write(path, simulator.kubeconfig())
                .with_context(|| format!("cannot write the kubeconfig to {}", path.display()))?;
            eprintln!("kubeconfig written to {}", path.display());
        }
        cli::out(format_args!(
            "serving the Kubernetes API simulator at {}\n",
            simulator.url()
        ));
        shutdown_signal().await;
        simulator.shutdown().await?;
        // Whoever started us may have stopped reading: a closed stdout is not a failure here.
        let summary = simulator.audit(ToString::to_string);
        cli::out(summary);
        Ok(ExitCode::SUCCESS)
    })
}

fn populate(args: &PopulateArgs) -> anyhow::Result<ExitCode> {
    use scenario::population;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let config =
            cli::cluster_config(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
        let url = config.cluster_url.clone();
        let client = kube::Client::try_from(config).context("cannot build the kube client")?;
        population::ensure_fresh(&client)
            .await
            .with_context(|| format!("the cluster at {url}"))?;
        population::create_crds(&client)
            .await
            .with_context(|| format!("cannot create the CRDs in the cluster at {url}"))?;
        let mut rng = shadow_reconciler::simulate::Rng::new(args.seed);
        let planted = population::create(
            &client,
            population::Faults::of(args.scenario),
            args.hosted_clusters,
            args.addons,
            &mut rng,
        )
        .await
        .with_context(|| format!("cannot create the population in the cluster at {url}"))?;
        let summary = serde_json::json!({
            "hosted_clusters": planted.hosted_clusters,
            "addons": planted.addons,
            "missing_ssh_key": planted.missing_ssh_key,
            "missing_audit_webhook": planted.missing_audit_webhook,
            "missing_pull_secret": planted.missing_pull_secret,
            "bad_release_image": planted.bad_release_image,
        });
        cli::out(format_args!("{summary}\n"));
        Ok(ExitCode::SUCCESS)
    })
}

/// Ctrl-C or SIGTERM.
pub(crate) async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let terminated = async {
        match term.as_mut() {
            Some(term) => {
                term.recv().await;
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminated => {}
    }
}

fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    use shadow_reconciler::engine::{Engine, EngineSettings};
    use shadow_reconciler::reconcilers::addon::{AddOnReconciler, ClusterManagementAddOn};
    use shadow_reconciler::reconcilers::hostedcluster::{HostedCluster, HostedClusterReconciler};

    let (hostedcluster, addon) = match args.reconciler.as_str() {
        "all" => (true, true),
        "hostedcluster" => (true, false),
        "addon-install-progression" => (false, true),
        other => anyhow::bail!(
            "--reconciler {other:?}: expected hostedcluster, addon-install-progression or all"
        ),
    };
    shadow_reconciler::telemetry::logging::init(args.log_format);
    let mut plans = Vec::new();
    if hostedcluster {
        plans.push(HostedClusterReconciler::plan());
    }
    if addon {
        plans.push(AddOnReconciler::plan());
    }
    let flag = Arc::new(cli::flag_defaults(args, plans)?);
    // The groups come from the shared flag (checked against every plan that runs).
    let settings = EngineSettings {
        mode: args.mode,
        reexecute_sample_rate: args.sample_rate,
        ..EngineSettings::default()
    };
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let mut config = cli::cluster_config(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
        config.headers.push((http::header::USER_AGENT, http::HeaderValue::from_static(scenario::CONTROLLER_USER_AGENT)));
        let client = kube::Client::try_from(config).context("cannot build the kube client")?;
        let telemetry = Arc::new(shadow_reconciler::telemetry::http::Telemetry::new());
        let traces = shadow_reconciler::telemetry::traces::TraceSink::from_env()?.map(Arc::new);
        let parquet = match &args.parquet_dir {
            Some(dir) => {
                let health = telemetry.metrics().sink_health("parquet").into();
                Some(args.parquet.start(dir, Some(health), &telemetry)?)
            }
            None => None,
        };
        let server = shadow_reconciler::telemetry::http::Server::start(args.listen, telemetry.clone())
            .await
            .with_context(|| format!("cannot serve the metrics endpoint on {}", args.listen))?;
        tracing::info!(address = %server.addr(), "serving /metrics, /healthz and /readyz");
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let until_stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let mut tasks = Vec::new();
        if let Some(target) = args.flag.target() {
            let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
            tracing::info!(flag = %target, "waiting for the flag ConfigMap to be listed before starting the controllers");
            tasks.push(tokio::spawn(shadow_reconciler::flag::watch::run(client.clone(), target, flag.clone(), Some(telemetry.flag().clone()), move || { let _ = synced_tx.send(()); }, until_stopped(stopped.clone()))));
            tokio::select! {
                _ = synced_rx => {}
                () = shutdown_signal() => anyhow::bail!("interrupted while waiting for the flag ConfigMap"),
            }
        } else {
            telemetry.flag().synced(true);
            telemetry.flag().in_force(&flag.current());
        }
        let mut synced = telemetry.ready_when_synced(usize::from(hostedcluster) + usize::from(addon));
        if hostedcluster {
            let engine = observed(Engine::new(Arc::new(HostedClusterReconciler), HostedClusterReconciler::plan(), client.clone(), &settings)?.with_flag(flag.clone()), &telemetry, traces.as_ref(), parquet.as_ref());
            let api = kube::Api::<HostedCluster>::all(client.clone());
            tasks.push(tokio::spawn(shadow_reconciler::controller::run(Arc::new(engine), api, until_stopped(stopped.clone()), synced.remove(0))));
        }
        if addon {
            let engine = observed(Engine::new(Arc::new(AddOnReconciler), AddOnReconciler::plan(), client.clone(), &settings)?.with_flag(flag.clone()), &telemetry, traces.as_ref(), parquet.as_ref());
            let api = kube::Api::<ClusterManagementAddOn>::all(client.clone());
            tasks.push(tokio::spawn(shadow_reconciler::controller::run(Arc::new(engine), api, until_stopped(stopped.clone()), synced.remove(0))));
        }
        tracing::info!(flag = %flag.current().spec.summary(), reconciler = %args.reconciler, "controllers started");
        shutdown_signal().await;
        let _ = stop.send(true);
        // Reconciles in flight finish; a controller that cannot stop (kube-runtime waits for a
        // cache that never synced when its kind is not served) is abandoned after the grace time.
        let aborts: Vec<_> = tasks.iter().map(tokio::task::JoinHandle::abort_handle).collect();
        if tokio::time::timeout(SHUTDOWN_GRACE, futures_util::future::join_all(tasks)).await.is_err() {
            tracing::warn!(grace = ?SHUTDOWN_GRACE, "controllers did not stop in time; abandoning them");
            aborts.iter().for_each(tokio::task::AbortHandle::abort);
        }
        tracing::info!("controllers stopped");
        server.shutdown().await.context("the metrics endpoint failed")?;
        if let Some(traces) = traces {
            tokio::task::spawn_blocking(move || traces.shutdown()).await.context("flushing the traces failed")?;
        }
        if let Some(parquet) = parquet {
            let grace = args.parquet.grace();
            tokio::task::spawn_blocking(move || cli::finish(&parquet, grace)).await.context("the Parquet writer failed")??;
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// An engine with the log, metrics and (when on) trace sinks, declared in the metrics.
fn observed<R: shadow_reconciler::engine::Reconciler>(
    engine: shadow_reconciler::engine::Engine<R>,
    telemetry: &shadow_reconciler::telemetry::http::Telemetry,
    traces: Option<&Arc<shadow_reconciler::telemetry::traces::TraceSink>>,
    parquet: Option<&Arc<shadow_reconciler::dataset::ParquetSink>>,
) -> shadow_reconciler::engine::Engine<R> {
    let plan = engine.plan().clone();
    let metrics = telemetry.metrics().clone();
    metrics.engine(&plan, engine.guard().clone());
    let engine = engine
        .with_sink(Arc::new(shadow_reconciler::engine::LogSink))
        .with_sink(Arc::new(metrics));
    let engine = match traces {
        Some(traces) => engine.with_sink(traces.clone()),
        None => engine,
    };
    match parquet {
        Some(parquet) => engine.with_sink(parquet.clone()),
        None => engine,
    }
}
