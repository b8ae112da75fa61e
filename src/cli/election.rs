//! `run --leader-elect`: the options of the process's election, and the identity replicas are
//! told apart by (binary only).

use std::time::Duration;

use clap::Args;
use shadow_reconciler::util::election::Config;

/// Options of the leader election.
#[derive(Args, Clone)]
#[allow(clippy::struct_field_names)] // the options' names, as controller-runtime's flags
pub struct ElectionArgs {
    /// Run the controllers, the rollout driver and the Parquet writer only while this process
    /// holds a `coordination.k8s.io` Lease: replicas stand by, one leads, and a rolling update
    /// never has two controllers writing (deploy/README.md, "Replicas"). A leader that loses
    /// the Lease exits (status 1) after committing its records; on SIGTERM it gives the Lease up.
    #[arg(long)]
    pub leader_elect: bool,
    /// The Lease's name.
    #[arg(long, value_name = "NAME", default_value = "shadow-reconciler")]
    pub leader_elect_lease: String,
    /// The Lease's namespace [default: the flag ConfigMap's].
    #[arg(long, value_name = "NAMESPACE")]
    pub leader_elect_namespace: Option<String>,
    /// How long the others wait, from the last renewal they saw, before they take the Lease.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = super::parquet::whole_duration)]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal (less than the lease
    /// duration: it stops before another may take over).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = super::parquet::whole_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// How often the leader renews and the others try.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = super::parquet::whole_duration)]
    pub leader_elect_retry_period: Duration,
}

impl ElectionArgs {
    /// The election these options ask for, or `None` without `--leader-elect`.
    ///
    /// # Errors
    /// The durations out of order (retry period < renew deadline < lease duration).
    pub fn config(&self, flag_namespace: Option<&str>) -> anyhow::Result<Option<Config>> {
        if !self.leader_elect {
            return Ok(None);
        }
        let namespace = self
            .leader_elect_namespace
            .clone()
            .or_else(|| flag_namespace.map(str::to_owned))
            .or_else(|| {
                std::env::var("POD_NAMESPACE")
                    .ok()
                    .filter(|n| !n.is_empty())
            })
            .unwrap_or_else(|| "shadow-reconciler".to_owned());
        let config = Config {
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
            ..Config::new(&namespace, &self.leader_elect_lease, &identity())
        };
        config.validate().map_err(|problem| {
            anyhow::anyhow!(
                "--leader-elect-retry-period, --leader-elect-renew-deadline, --leader-elect-lease-duration: {problem}"
            )
        })?;
        Ok(Some(config))
    }
}

/// This process among the replicas: the pod's name (`POD_NAME`, else the host name) and a
/// random suffix, as client-go's, so a restarted container never renews its predecessor's Lease
/// as its own.
pub fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "shadow-reconciler".to_owned());
    // The standard library's per-process random hasher keys: random enough to tell two
    // processes apart, without a dependency.
    let random = std::hash::BuildHasher::hash_one(
        &std::collections::hash_map::RandomState::new(),
        std::process::id(),
    );
    format!("{host}_{:08x}", random & 0xffff_ffff)
}
