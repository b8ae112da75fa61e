//! `shadow-reconciler simulate`: the scenario (reference controllers against the embedded
//! simulator or a given cluster), or with `--model-only` the models' Monte Carlo.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use shadow_reconciler::dataset::Location;
use shadow_reconciler::model::montecarlo;
use shadow_reconciler::plan::ReconcilePlan;
use shadow_reconciler::scenario;

use super::options::{
    FlagArgs, LoadedPlan, ParquetArgs, cluster_config, finish, groups_of, load_plans,
    parse_probability, shipped_or_file,
};
use super::{EXIT_INTERRUPTED, shutdown_signal};

#[derive(Args)]
#[allow(clippy::struct_excessive_bools)] // independent command-line switches
pub(super) struct SimulateArgs {
    /// HostedClusters in the simulated cluster.
    #[arg(long, default_value_t = 200, conflicts_with = "model_only")]
    hosted_clusters: usize,
    /// ClusterManagementAddOns in the simulated cluster.
    #[arg(long, default_value_t = 60, conflicts_with = "model_only")]
    addons: usize,
    /// The faults: healthy, missing-secrets, conflict-storm or mixed; or rollout (the missing
    /// secrets, then two rollout groups driven to enforce by their gates: docs/rollout.md).
    #[arg(long, default_value = "mixed", conflicts_with = "model_only")]
    scenario: scenario::Scenario,
    /// The longest the run lasts, in seconds, creating the population and writing and analysing
    /// the data included (a run that settles ends earlier; one the deadline ends says so).
    #[arg(long, default_value_t = 60, conflicts_with = "model_only")]
    duration: u64,
    /// Seed of every random choice (same seed, same population and faults).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The retired spelling of `--model-only --candidate-group`.
    #[arg(
        long = "enforce",
        value_name = "GROUP",
        hide = true,
        requires = "model_only"
    )]
    retired_enforce: Vec<String>,
    /// Serve /metrics, /healthz and /readyz here while the run lasts (port 0 picks one).
    #[arg(long, default_value = "127.0.0.1:0", conflicts_with = "model_only")]
    listen: std::net::SocketAddr,
    /// Log lines (warnings and errors; more with `RUST_LOG`) on stderr: auto (human on a
    /// terminal, JSON otherwise), human or json.
    #[arg(long, default_value = "auto")]
    log_format: shadow_reconciler::telemetry::logging::LogFormat,
    /// No progress and no notes on stderr (errors, warnings and the Parquet writer's tally still
    /// go there); stdout is unchanged.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Keep serving the endpoints after the run, until SIGTERM or Ctrl-C.
    #[arg(long, conflicts_with = "model_only")]
    serve: bool,
    /// The HostedCluster reconciler's legacy loop runs the phased code of every operation both
    /// paths have, while each is still compared as code of its own: a noise check of the write
    /// comparison on this cluster (it must report no write difference but the legacy-only
    /// step's writes).
    #[arg(long, conflicts_with = "model_only")]
    same_code: bool,
    /// Instead: drive the two models over randomly drawn results, without an API server.
    // The flag's and the Parquet writer's options would do nothing here: errors, as the cluster's.
    #[arg(long, conflicts_with_all = [
        "mode", "enforce_groups", "flag_namespace", "flag_name", "no_flag_watch", "ramp_percent", "allow_object_override",
        "parquet_dir", "parquet_max_rows", "parquet_max_mib", "parquet_max_age", "parquet_capacity",
        "parquet_grace", "parquet_retention", "parquet_max_total_mib", "shadow_qps", "shadow_burst",
        "paired_sample_percent",
    ])]
    model_only: bool,
    /// A plan file run instead of the shipped plan of the same name (repeatable); with
    /// --model-only, the one plan to simulate, shipped (by name) or a file [default:
    /// hostedcluster].
    #[arg(long = "plan", alias = "with-plan", value_name = "NAME|FILE")]
    plans: Vec<String>,
    /// With --model-only: reconciles to simulate.
    #[arg(long, default_value_t = 10_000, requires = "model_only")]
    reconciles: u64,
    /// With --model-only: probability that an operation fails in a reconcile.
    #[arg(long, default_value_t = 0.05, value_parser = parse_probability, requires = "model_only")]
    failure_rate: f64,
    /// Run on this cluster instead of the embedded simulator: the population is created in it
    /// (CRDs, namespaces team-0..team-9, the HostedClusters and add-ons), which must be fresh.
    #[arg(long, value_name = "FILE", conflicts_with = "model_only")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig's context to use (default: its current context).
    #[arg(long, value_name = "NAME", requires = "kubeconfig")]
    context: Option<String>,
    /// Where the HTML report of the analysis is written [default: next to the dataset directory,
    /// named after it: shadow-data-report.html]. Never inside the dataset directory, so that
    /// readers of the whole dataset (Spark reading its root) see Parquet files only.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["model_only", "no_parquet"])]
    html: Option<PathBuf>,
    /// Exit with the analysis' code (1 not ready, 3 inconclusive, as `analyze`) when the overall
    /// readiness is this or worse: not-ready, or inconclusive (which fails on both) [default:
    /// exit 0 whatever the verdict].
    #[arg(long, value_name = "READINESS", value_enum, conflicts_with_all = ["model_only", "no_parquet"])]
    fail_on: Option<FailOn>,
    /// Replace the earlier simulation in --parquet-dir (only a dataset simulate wrote), once
    /// every other option was accepted.
    #[arg(long, conflicts_with_all = ["model_only", "no_parquet"])]
    replace: bool,
    /// Write no Parquet and skip the analysis.
    #[arg(long, conflicts_with = "model_only")]
    no_parquet: bool,
    #[command(flatten)]
    budget: super::budget::BudgetArgs,
    #[command(flatten)]
    parquet: ParquetArgs,
    #[command(flatten)]
    flag: FlagArgs,
}

/// The verdicts `--fail-on` turns into a failing exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum FailOn {
    /// Fail when not ready (exit 1).
    NotReady,
    /// Fail when not ready (exit 1) or inconclusive (exit 3).
    Inconclusive,
}

pub(super) fn simulate(args: &SimulateArgs) -> anyhow::Result<ExitCode> {
    // kube-client logs every failed response at ERROR; the scenario injects those (503s,
    // conflicts), and the engine records each as a failed step with its class.
    shadow_reconciler::telemetry::logging::init_at(
        args.log_format,
        "warn,kube_client::client::builder=off",
    );
    if args.model_only {
        simulate_models(args)
    } else {
        simulate_scenario(args)
    }
}

/// The scenario on the embedded simulator (or `--kubeconfig`'s cluster), then the analysis.
fn simulate_scenario(args: &SimulateArgs) -> anyhow::Result<ExitCode> {
    // --duration counts from here: setting up, the run, writing and analysing its data.
    let started = std::time::Instant::now();
    // Every option that can be refused is checked before the dataset directory is touched.
    let files: Vec<PathBuf> = args.plans.iter().map(PathBuf::from).collect();
    let plans = load_plans(&files)?;
    let flag = command_line_flag(args, &plans)?;
    let shadow_budget = args.budget.budget(false)?;
    // `--parquet-dir` is declared with the other Parquet options, for every command, and read
    // as a `Location` as theirs; simulate's default is its own.
    let parquet_dir = if args.no_parquet {
        None
    } else {
        let dir = local_dataset(args.parquet.location()?)?;
        args.parquet.local_only(&dir)?;
        Some(dir)
    };
    let telemetry = Arc::new(shadow_reconciler::telemetry::http::Telemetry::new());
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let (traces, cluster, server) = runtime.block_on(endpoints(args, &telemetry))?;
    // Then the run's own dataset, under the directory's lock, held until the analysis is done.
    let run = parquet_dir
        .map(|dir| new_run(&dir, args.replace, args.quiet))
        .transpose()?;
    let parquet = run.as_ref().map(|run| {
        let health = telemetry.metrics().sink_health("parquet");
        args.parquet
            .start_locked(&run.dir, run.lock.clone(), Some(health), &telemetry)
    });
    let settings = scenario::Settings {
        telemetry: Some(telemetry.clone()),
        parquet: parquet.clone(),
        plans: plans.iter().map(|p| Arc::new(p.plan.clone())).collect(),
        flag,
        hosted_clusters: args.hosted_clusters,
        addons: args.addons,
        scenario: args.scenario,
        seed: args.seed,
        duration: std::time::Duration::from_secs(args.duration),
        started: Some(started),
        same_code: args.same_code,
        shadow_budget: Some(shadow_budget),
        flag_configmap: args.flag.target(),
        progress: !args.quiet,
        traces,
        cluster,
        ..scenario::Settings::default()
    };
    let summary = runtime.block_on(async {
        // One listener from the start: a SIGTERM during the run interrupts it; one while the data
        // is written and analysed ends the serving that may follow, instead of being lost.
        let stop = shutdown_signal();
        tokio::pin!(stop);
        let summary = tokio::select! {
            summary = scenario::run(&settings) => summary.context("the simulation failed")?,
            () = &mut stop => {
                // Interrupted: what the sink accepted so far is still written, then we stop.
                if let Some(parquet) = parquet {
                    let grace = args.parquet.grace();
                    tokio::task::spawn_blocking(move || finish(&parquet, grace))
                        .await
                        .context("the Parquet writer failed")??;
                }
                eprintln!("interrupted before the simulation finished");
                return anyhow::Ok(None);
            }
        };
        super::out(&summary);
        // The data written, then analysed (a panic in either is reported, not hidden).
        let readiness = match (&parquet, &run) {
            (Some(parquet), Some(run)) => {
                let (parquet, grace) = (parquet.clone(), args.parquet.grace());
                let dir = run.dir.clone();
                let html = args.html.clone().unwrap_or_else(|| report_beside(&dir));
                let analysed = tokio::task::spawn_blocking(move || {
                    finish(&parquet, grace)?;
                    super::analyze::analyze_simulated(&dir, &html, &plans)
                });
                Some(
                    analysed
                        .await
                        .context("the Parquet writer or the analysis failed")??,
                )
            }
            _ => None,
        };
        if args.serve {
            eprintln!(
                "run finished; still serving http://{}/metrics until SIGTERM or Ctrl-C",
                server.addr()
            );
            stop.await;
        }
        server
            .shutdown()
            .await
            .context("the metrics endpoint failed")?;
        anyhow::Ok(Some((summary, readiness)))
    })?;
    drop(run);
    let Some((summary, readiness)) = summary else {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    };
    conclude(&summary, args.fail_on, readiness)
}

/// What `simulate` talks to, each refused before the dataset is touched: the trace exporter of
/// the standard variables, `--kubeconfig`'s cluster, and the metrics endpoint on `--listen`.
async fn endpoints(
    args: &SimulateArgs,
    telemetry: &Arc<shadow_reconciler::telemetry::http::Telemetry>,
) -> anyhow::Result<(
    Option<Arc<shadow_reconciler::telemetry::traces::TraceSink>>,
    Option<kube::Config>,
    shadow_reconciler::telemetry::http::Server,
)> {
    // Inside the runtime: the gRPC exporter needs one to be built.
    let traces = shadow_reconciler::telemetry::traces::TraceSink::from_env()?.map(Arc::new);
    let cluster = simulated_cluster(args).await?;
    let server = shadow_reconciler::telemetry::http::Server::start(args.listen, telemetry.clone())
        .await
        .with_context(|| format!("cannot serve the metrics endpoint on {}", args.listen))?;
    if !args.quiet {
        eprintln!("metrics at http://{}/metrics", server.addr());
    }
    Ok((traces, cluster, server))
}

/// The exit code of a finished run: an error if the shadow wrote anything, else the analysis'
/// code when `--fail-on` asks for it, else 0.
fn conclude(
    summary: &scenario::Summary,
    fail_on: Option<FailOn>,
    readiness: Option<shadow_reconciler::analyze::Readiness>,
) -> anyhow::Result<ExitCode> {
    if summary.shadow_persisted > 0 || summary.guard_refusals > 0 {
        anyhow::bail!(
            "the shadow persisted {} mutations and the guard refused {}: both must be 0",
            summary.shadow_persisted,
            summary.guard_refusals
        );
    }
    Ok(match (fail_on, readiness) {
        (Some(FailOn::NotReady), Some(r @ shadow_reconciler::analyze::Readiness::NotReady))
        | (
            Some(FailOn::Inconclusive),
            Some(
                r @ (shadow_reconciler::analyze::Readiness::NotReady
                | shadow_reconciler::analyze::Readiness::Inconclusive),
            ),
        ) => ExitCode::from(r.exit_code()),
        _ => ExitCode::SUCCESS,
    })
}

/// The flag the engines follow until the simulated cluster's ConfigMap says otherwise.
fn command_line_flag(
    args: &SimulateArgs,
    plans: &[LoadedPlan],
) -> anyhow::Result<shadow_reconciler::flag::FlagSpec> {
    let plans: Vec<&ReconcilePlan> = plans.iter().map(|p| &p.plan).collect();
    let (spec, note) = args.flag.spec(&[], &plans)?;
    if let Some(note) = note.filter(|_| !args.quiet) {
        eprintln!("note: {note}");
    }
    Ok(spec)
}

/// `simulate --kubeconfig`: the cluster to run on instead of the simulator.
async fn simulated_cluster(args: &SimulateArgs) -> anyhow::Result<Option<kube::Config>> {
    let Some(path) = &args.kubeconfig else {
        return Ok(None);
    };
    let config = cluster_config(Some(path), args.context.as_deref()).await?;
    if !args.quiet {
        eprintln!(
            "running on the cluster at {} (from {}): the population is created there",
            config.cluster_url,
            path.display()
        );
    }
    Ok(Some(config))
}

fn simulate_models(args: &SimulateArgs) -> anyhow::Result<ExitCode> {
    let plan = match args.plans.as_slice() {
        [] => shipped_or_file("hostedcluster")?,
        [one] => shipped_or_file(one)?,
        more => anyhow::bail!(
            "--plan given {} times: --model-only simulates one plan",
            more.len()
        ),
    };
    let given: Vec<String> = args
        .flag
        .candidate
        .candidate_groups
        .iter()
        .chain(&args.retired_enforce)
        .cloned()
        .collect();
    let candidate_groups: Vec<String> = groups_of("candidate-group", &given, &[&plan])?
        .iter()
        .map(|group| group.name().to_owned())
        .collect();
    let settings = montecarlo::Settings {
        reconciles: args.reconciles,
        failure_rate: args.failure_rate,
        seed: args.seed,
        candidate_groups: (!candidate_groups.is_empty()).then_some(candidate_groups),
    };
    let summary = montecarlo::run(Arc::new(plan), settings).context("--candidate-group")?;
    super::out(&summary);
    Ok(ExitCode::SUCCESS)
}

/// `simulate` writes a local dataset (`shadow-data` when `--parquet-dir` is not given): an object
/// store's prefix is an error that says what to use instead.
fn local_dataset(location: Option<Location>) -> anyhow::Result<PathBuf> {
    match location {
        None => Ok(PathBuf::from("shadow-data")),
        Some(Location::Local(dir)) => Ok(dir),
        Some(Location::Remote(remote)) => {
            let url = remote.url();
            let scheme = url.split_once("://").map_or(url, |(scheme, _)| scheme);
            anyhow::bail!(
                "--parquet-dir {url}: simulate writes a local dataset (it replaces an earlier simulation's and analyses it at the end); {scheme}:// is an object store: to write to one, run `run` or `ingest` with --parquet-dir URL, and read it with `analyze URL`"
            )
        }
    }
}

/// The default report path: `NAME-report.html` beside the dataset directory `.../NAME`.
fn report_beside(dir: &Path) -> PathBuf {
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    let name = absolute.file_name().map_or_else(
        || "shadow-data".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    absolute
        .parent()
        .unwrap_or(Path::new("."))
        .join(format!("{name}-report.html"))
}

/// The file `simulate` leaves in a dataset it wrote: `--replace` replaces only such a dataset.
const MARKER: &str = ".shadow-reconciler-simulate";

/// The dataset a `simulate` run writes, and the lock this process holds on it.
struct Run {
    dir: PathBuf,
    lock: Arc<shadow_reconciler::dataset::DatasetLock>,
}

/// Chooses and locks the run's dataset directory. `dir` when it holds no dataset yet; with
/// `replace`, `dir` with its earlier simulation's tables removed (only a dataset simulate wrote);
/// otherwise the first free `DIR.2`, `DIR.3`, ... beside it, so that nothing written before is
/// deleted or mixed with this run's records. Refused while another writer holds `dir`.
fn new_run(dir: &Path, replace: bool, quiet: bool) -> anyhow::Result<Run> {
    use shadow_reconciler::dataset::Table;
    let holds_tables = |d: &Path| {
        Table::ALL
            .iter()
            .any(|t| d.join(format!("table={}", t.as_str())).exists())
    };
    let lock = super::options::lock_dataset(dir)?;
    if !holds_tables(dir) {
        return mark(dir, lock);
    }
    if replace {
        if !dir.join(MARKER).exists() {
            anyhow::bail!(
                "--replace: {} holds a dataset that simulate did not write (it has no {MARKER}: `run` or `ingest` wrote it, or a simulate of an earlier version); simulate never deletes data it did not write: give it another --parquet-dir, or move that data away yourself",
                dir.display()
            );
        }
        for table in Table::ALL {
            let path = dir.join(format!("table={}", table.as_str()));
            if path.exists() {
                std::fs::remove_dir_all(&path).with_context(|| {
                    format!(
                        "--replace: cannot remove the earlier simulation's {}",
                        path.display()
                    )
                })?;
            }
        }
        if !quiet {
            eprintln!("replaced the earlier simulation in {}", dir.display());
        }
        return mark(dir, lock);
    }
    drop(lock);
    let name = dir.file_name().map_or_else(
        || "shadow-data".to_owned(),
        |n| n.to_string_lossy().into_owned(),
    );
    for n in 2..10_000 {
        let apart = dir.with_file_name(format!("{name}.{n}"));
        match std::fs::create_dir(&apart) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("cannot create {} for this run's data", apart.display())
                });
            }
        }
        let lock = super::options::lock_dataset(&apart)?;
        if !quiet {
            eprintln!(
                "{} holds an earlier run's data, left as it is; this run writes {} (--replace replaces an earlier simulation instead)",
                dir.display(),
                apart.display()
            );
        }
        return mark(&apart, lock);
    }
    anyhow::bail!(
        "--parquet-dir {}: {name}.2 to {name}.9999 beside it all exist; give another directory or --replace",
        dir.display()
    )
}

/// Marks `dir` as simulate's dataset, under its `lock`.
fn mark(dir: &Path, lock: Arc<shadow_reconciler::dataset::DatasetLock>) -> anyhow::Result<Run> {
    std::fs::write(
        dir.join(MARKER),
        format!(
            "written by `{}` since {}\n",
            super::options::command_line(),
            shadow_reconciler::util::time::now_rfc3339()
        ),
    )
    .with_context(|| format!("cannot write {}", dir.join(MARKER).display()))?;
    Ok(Run {
        dir: dir.to_owned(),
        lock,
    })
}

#[cfg(test)]
mod tests {
    use super::{FailOn, conclude, report_beside};
    use shadow_reconciler::analyze::Readiness;
    use shadow_reconciler::scenario::Summary;
    use std::process::ExitCode;

    #[test]
    fn fail_on_maps_each_verdict_to_analyze_s_code() {
        let ok = Summary::default();
        let code = |fail_on, readiness| conclude(&ok, fail_on, readiness).unwrap();
        for readiness in [
            Readiness::Ready,
            Readiness::NotReady,
            Readiness::Inconclusive,
        ] {
            assert_eq!(code(None, Some(readiness)), ExitCode::SUCCESS);
        }
        assert_eq!(
            code(Some(FailOn::NotReady), Some(Readiness::NotReady)),
            ExitCode::from(1)
        );
        assert_eq!(
            code(Some(FailOn::NotReady), Some(Readiness::Inconclusive)),
            ExitCode::SUCCESS
        );
        assert_eq!(
            code(Some(FailOn::NotReady), Some(Readiness::Ready)),
            ExitCode::SUCCESS
        );
        assert_eq!(
            code(Some(FailOn::Inconclusive), Some(Readiness::NotReady)),
            ExitCode::from(1)
        );
        assert_eq!(
            code(Some(FailOn::Inconclusive), Some(Readiness::Inconclusive)),
            ExitCode::from(3)
        );
        assert_eq!(
            code(Some(FailOn::Inconclusive), Some(Readiness::Ready)),
            ExitCode::SUCCESS
        );
        // A shadow that wrote is an error whatever the verdict.
        let wrote = Summary {
            shadow_persisted: 1,
            ..Summary::default()
        };
        assert!(conclude(&wrote, None, Some(Readiness::Ready)).is_err());
    }

    #[test]
    fn the_default_report_is_beside_the_dataset_directory() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            report_beside(std::path::Path::new("shadow-data")),
            cwd.join("shadow-data-report.html")
        );
        assert_eq!(
            report_beside(std::path::Path::new("/srv/data/fleet/")),
            std::path::Path::new("/srv/data/fleet-report.html")
        );
    }
}
