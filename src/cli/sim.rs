//! `shadow-reconciler sim`: serve the embedded Kubernetes API simulator, or plant the reference
//! population in a cluster.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use shadow_reconciler::{scenario, sim};

use super::shutdown_signal;

#[derive(Subcommand)]
pub(super) enum SimCommand {
    /// Serve the simulator on loopback until interrupted, then print the audit summary.
    #[command(
        after_help = "Examples:\n  shadow-reconciler sim serve --kubeconfig-out sim.kubeconfig\n  shadow-reconciler sim serve --port 6443 --faults faults.yaml --seed 7"
    )]
    Serve(ServeArgs),
    /// Create the reference population (CRDs, namespaces team-0..team-9, HostedClusters with
    /// the scenario's faults, add-ons) in a cluster, for controllers run by hand or in another
    /// language; print what was planted as JSON.
    #[command(
        after_help = "Examples:\n  shadow-reconciler sim populate --kubeconfig sim.kubeconfig\n  shadow-reconciler sim populate --kubeconfig kind.kubeconfig --context kind-shadow --hosted-clusters 20 --addons 5"
    )]
    Populate(PopulateArgs),
}

#[derive(Args)]
pub(super) struct PopulateArgs {
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
pub(super) struct ServeArgs {
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

pub(super) fn serve(args: &ServeArgs) -> anyhow::Result<ExitCode> {
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
        // Listening before saying so: whoever waits for the line may signal at once.
        let stop = shutdown_signal();
        super::out(format_args!(
            "serving the Kubernetes API simulator at {}\n",
            simulator.url()
        ));
        stop.await;
        simulator.shutdown().await?;
        // Whoever started us may have stopped reading: a closed stdout is not a failure here.
        let summary = simulator.audit(ToString::to_string);
        super::out(summary);
        Ok(ExitCode::SUCCESS)
    })
}

pub(super) fn populate(args: &PopulateArgs) -> anyhow::Result<ExitCode> {
    use scenario::population;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let config =
            super::options::cluster_config(args.kubeconfig.as_deref(), args.context.as_deref())
                .await?;
        let url = config.cluster_url.clone();
        let client = kube::Client::try_from(config).context("cannot build the kube client")?;
        population::ensure_fresh(&client)
            .await
            .with_context(|| format!("the cluster at {url}"))?;
        population::create_crds(&client)
            .await
            .with_context(|| format!("cannot create the CRDs in the cluster at {url}"))?;
        let mut rng = shadow_reconciler::util::Rng::new(args.seed);
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
        super::out(format_args!("{summary}\n"));
        Ok(ExitCode::SUCCESS)
    })
}
