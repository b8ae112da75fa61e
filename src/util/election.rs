//! Leader election by a `coordination.k8s.io` Lease, with client-go's semantics: one holder at a
//! time, renewing every retry period; a candidate takes the Lease only after it has seen the
//! record unchanged for the Lease's duration by its own clock (so the nodes' clocks need not
//! agree); a holder that could not renew within the renew deadline, shorter than the duration,
//! stops leading before anyone may take over; a holder that stops gives the Lease up, so another
//! takes over at once. Every write is a replace at the read `resourceVersion`: of two candidates
//! racing for one record, one wins and the other gets a conflict.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

/// Which Lease, who competes for it, and the timing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This process's name in `holderIdentity`: unique among the candidates.
    pub identity: String,
    /// How long a record unchanged lets the others wait before they take over.
    pub lease_duration: Duration,
    /// How long the holder keeps leading without a successful renewal.
    pub renew_deadline: Duration,
    /// How often the holder renews and a candidate tries.
    pub retry_period: Duration,
}

impl Config {
    /// client-go's and controller-runtime's defaults: 15 s, 10 s, 2 s.
    #[must_use]
    pub fn new(namespace: &str, name: &str, identity: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// The timing is sound: `retry_period < renew_deadline < lease_duration`, so a holder stops
    /// leading before its Lease can be taken, and retries at least once before it stops.
    ///
    /// # Errors
    /// The durations out of that order, or an empty name or identity.
    pub fn validate(&self) -> Result<(), String> {
        if self.name.is_empty() || self.namespace.is_empty() || self.identity.is_empty() {
            return Err("the Lease's namespace, name and the identity must not be empty".into());
        }
        if !(Duration::ZERO < self.retry_period
            && self.retry_period < self.renew_deadline
            && self.renew_deadline < self.lease_duration)
        {
            return Err(format!(
                "the retry period ({:?}) must be shorter than the renew deadline ({:?}), and that shorter than the lease duration ({:?})",
                self.retry_period, self.renew_deadline, self.lease_duration
            ));
        }
        Ok(())
    }
}

/// Why the holder stopped leading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lost {
    /// Another candidate holds the Lease.
    TakenBy(String),
    /// No renewal succeeded within the renew deadline; the last error.
    NotRenewed(String),
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TakenBy(holder) => write!(f, "the Lease is held by {holder}"),
            Self::NotRenewed(error) => {
                write!(f, "the Lease could not be renewed in time: {error}")
            }
        }
    }
}

/// The record last read and when this process first saw it.
struct Observed {
    record: (Option<String>, Option<MicroTime>, Option<i32>),
    since: Instant,
    lasts: Duration,
}

/// A candidate for one Lease.
pub struct Elector {
    api: Api<Lease>,
    config: Config,
    observed: Mutex<Option<Observed>>,
}

impl std::fmt::Debug for Elector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elector")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Elector {
    /// A candidate for `config`'s Lease.
    #[must_use]
    pub fn new(client: Client, config: Config) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: Mutex::new(None),
        }
    }

    /// The Lease and the timing.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// One attempt: creates the Lease, renews it, or takes it once it expired or was given up;
    /// whether this process holds it now.
    ///
    /// # Errors
    /// The API server refused (other than a conflict, which loses the race) or was unreachable.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let seconds = i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let me = &self.config.identity;
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me.clone()),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return self.written(self.api.create(&PostParams::default(), &lease).await);
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let mine = holder.as_deref() == Some(me.as_str());
        if !mine && holder.is_some() && !self.observe(spec) {
            return Ok(false);
        }
        if !mine {
            spec.holder_identity = Some(me.clone());
            spec.acquire_time = Some(MicroTime(now));
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            tracing::info!(lease = %self.config.name, identity = %me, previous = ?holder, "took the Lease");
        }
        spec.renew_time = Some(MicroTime(now));
        spec.lease_duration_seconds = Some(seconds);
        let written = self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await;
        self.written(written)
    }

    /// Records `spec` as seen; whether it has stayed unchanged for its duration (expired).
    fn observe(&self, spec: &LeaseSpec) -> bool {
        let record = (
            spec.holder_identity.clone(),
            spec.renew_time.clone(),
            spec.lease_transitions,
        );
        let lasts = Duration::from_secs(
            u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
        );
        let mut observed = self
            .observed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match observed.as_mut() {
            Some(seen) if seen.record == record => seen.since.elapsed() >= seen.lasts,
            _ => {
                *observed = Some(Observed {
                    record,
                    since: Instant::now(),
                    lasts,
                });
                false
            }
        }
    }

    /// The outcome of a create or replace: held, or lost to a concurrent writer.
    fn written(&self, result: Result<Lease, kube::Error>) -> Result<bool, kube::Error> {
        match result {
            Ok(lease) => {
                if let Some(spec) = &lease.spec {
                    self.observe(spec);
                }
                Ok(true)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Tries every retry period until this process holds the Lease.
    pub async fn acquire(&self) {
        let mut failures = 0_u32;
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return,
                Ok(false) => failures = 0,
                Err(error) => {
                    failures += 1;
                    // The first failure, then one in thirty: a server away for long stays visible
                    // without filling the log.
                    if failures % 30 == 1 {
                        tracing::warn!(%error, lease = %self.config.name, "cannot read or take the Lease; retrying");
                    }
                }
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// Renews every retry period while this process holds the Lease; returns once it does not:
    /// another holds it, or no renewal succeeded within the renew deadline (each attempt is cut
    /// at the deadline, so a hanging request cannot keep a holder leading). A renewal refused
    /// with 409 is a failed try: the next one reads the Lease again.
    pub async fn hold(&self) -> Lost {
        let mut renewed = Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let started = Instant::now();
            let left = (renewed + self.config.renew_deadline).saturating_duration_since(started);
            let error = match tokio::time::timeout(left, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => {
                    renewed = started;
                    continue;
                }
                Ok(Ok(false)) => match self.holder() {
                    Some(holder) if holder != self.config.identity => {
                        return Lost::TakenBy(holder);
                    }
                    // The renewal was refused with 409: another writer changed the Lease
                    // between its read and the write. The next try reads it again and sees who
                    // holds it; as client-go, a conflict is a failed try, not a loss.
                    _ => "the Lease changed between its read and the renewal (409 Conflict)"
                        .to_owned(),
                },
                Ok(Err(error)) => error.to_string(),
                Err(_) => format!(
                    "no answer within the renew deadline ({:?})",
                    self.config.renew_deadline
                ),
            };
            if renewed.elapsed() >= self.config.renew_deadline {
                return Lost::NotRenewed(error);
            }
            tracing::warn!(%error, lease = %self.config.name, "cannot renew the Lease; retrying until the renew deadline");
        }
    }

    /// The holder last seen.
    fn holder(&self) -> Option<String> {
        self.observed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .and_then(|o| o.record.0.clone())
    }

    /// Gives the Lease up if this process holds it, so another candidate takes it at once;
    /// whether it was given up.
    ///
    /// # Errors
    /// The API server refused or was unreachable: the Lease then expires on its own.
    pub async fn release(&self) -> Result<bool, kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            return Ok(false);
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(false);
        };
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(false);
        }
        spec.holder_identity = None;
        spec.renew_time = None;
        // One second, as client-go: candidates see the release as a change and take the Lease
        // at their next try.
        spec.lease_duration_seconds = Some(1);
        self.api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await?;
        tracing::info!(lease = %self.config.name, identity = %self.config.identity, "gave the Lease up");
        Ok(true)
    }
}
