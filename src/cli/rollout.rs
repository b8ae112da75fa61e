//! The rollout driver's options, shared by `run` and `ingest` (binary only).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use shadow_reconciler::dataset::{Location, ParquetSink};
use shadow_reconciler::plan::ReconcilePlan;
use shadow_reconciler::rollout::{Driver, Settings};
use shadow_reconciler::util::election;

/// Options of the rollout driver.
#[derive(Args, Clone)]
pub struct RolloutArgs {
    #[allow(clippy::doc_markdown)] // clap help text: the kind's name as written
    /// Drive the ShadowRollouts in the flag ConfigMap's namespace: each step's gates read the
    /// Parquet dataset (--parquet-dir, needed) since the step began, and the driver writes the
    /// flag's `groups` key and the rollouts' status (docs/rollout.md). With several replicas,
    /// the holder of the rollout Lease drives (with `run --leader-elect`, the leader).
    #[arg(long)]
    pub rollout: bool,
    /// Seconds between two evaluations of the rollouts.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub rollout_interval: u64,
    /// The Lease that elects the driver among replicas (in the flag's namespace); not used
    /// with `run --leader-elect`, whose leader drives.
    #[arg(long, default_value = "shadow-reconciler-rollout")]
    pub rollout_lease: String,
    /// Seconds a driver's Lease lasts without renewal: another replica takes over after it.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub rollout_lease_seconds: u64,
}

impl RolloutArgs {
    /// The driver these options ask for, or `None` without `--rollout`. `elected`: the process
    /// runs only while it leads (`run --leader-elect`), so the driver needs no Lease of its own.
    ///
    /// # Errors
    /// `--rollout` without `--parquet-dir` (the gates have no data), or a dataset location that
    /// cannot be read.
    pub fn driver(
        &self,
        client: &kube::Client,
        flag: (&str, &str),
        (dataset, cluster): ((Option<&str>, Option<&Arc<ParquetSink>>), &str),
        plans: Vec<ReconcilePlan>,
        metrics: &shadow_reconciler::telemetry::http::Telemetry,
        elected: bool,
    ) -> anyhow::Result<Option<Driver>> {
        if !self.rollout {
            return Ok(None);
        }
        let (Some(dir), Some(sink)) = dataset else {
            anyhow::bail!(
                "--rollout reads each step's gates from the Parquet dataset: give --parquet-dir"
            );
        };
        let location = Location::parse(dir).with_context(|| format!("--parquet-dir {dir}"))?;
        let identity = std::env::var("POD_NAME")
            .ok()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("shadow-reconciler-{}", std::process::id()));
        let sink = sink.clone();
        let lease = (!elected).then(|| election::Config {
            lease_duration: Duration::from_secs(self.rollout_lease_seconds),
            // Tried once a round.
            retry_period: Duration::from_secs(self.rollout_interval),
            renew_deadline: Duration::from_secs(self.rollout_lease_seconds),
            ..election::Config::new(flag.0, &self.rollout_lease, &identity)
        });
        let settings = Settings {
            namespace: flag.0.to_owned(),
            cluster: cluster.to_owned(),
            flag: flag.1.to_owned(),
            lease,
            identity,
            interval: Duration::from_secs(self.rollout_interval),
            location,
            plans,
            flush: Some(Arc::new(move || {
                let _ = sink.flush(Duration::from_secs(10));
            })),
        };
        let lease = settings
            .lease
            .as_ref()
            .map_or("(the leader's)", |l| l.name.as_str());
        tracing::info!(namespace = %settings.namespace, flag = %settings.flag, lease, identity = %settings.identity, "driving the ShadowRollouts");
        Ok(Some(Driver::new(
            client.clone(),
            settings,
            Some(metrics.rollout().clone()),
        )))
    }
}
