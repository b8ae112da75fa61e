//! The embedded Kubernetes API simulator: an HTTP server on loopback that kube-rs clients,
//! watchers and controllers use unchanged, with seeded fault injection and an audit of every
//! request. See `docs/simulator.md` for what it implements and where it differs from a real
//! API server.
//!
//! Layer 1 of the crate (docs/design.md, "Layers"): builds on [`util`](crate::util); nothing here
//! may use a module of its layer or above.

mod allocate;
mod audit;
mod discovery;
mod faults;
mod http;
pub(crate) mod object;
mod patch;
mod registry;
mod route;
mod status;
mod store;
mod watch;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use audit::{AgentTotals, Audit, AuditRecord};
pub use faults::{Action, FaultConfig, FaultError, Match, Rule};
pub use registry::ResourceType;
pub use status::{ApiError, Details};
pub use store::{Change, EventType, Store, WriteOptions, Written};

/// How the simulator behaves.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Address to listen on; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Changes retained for watches that resume; older resourceVersions answer 410 Gone.
    pub history_limit: usize,
    /// Audit records retained (totals are always exact).
    pub audit_capacity: usize,
    /// How often a watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// Seed of generated names and uids.
    pub seed: u64,
    /// Fault rules active from the start.
    pub faults: FaultConfig,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            history_limit: 10_000,
            audit_capacity: 100_000,
            bookmark_interval: Duration::from_secs(1),
            seed: 0,
            faults: FaultConfig::default(),
        }
    }
}

/// Locks a mutex; a panic elsewhere while it was held does not make the simulator unusable
/// (every critical section leaves the state consistent before it can panic).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// State shared by every request.
#[derive(Debug)]
struct Shared {
    config: SimConfig,
    store: Mutex<Store>,
    faults: Mutex<faults::Faults>,
    audit: Mutex<Audit>,
    /// A new generation ends every open watch stream (a simulated stream drop).
    watch_drops: tokio::sync::watch::Sender<watch::Generation>,
}

impl Shared {
    fn audit(&self, record: AuditRecord) {
        lock(&self.audit).push(record);
    }
}

/// A running simulator. Dropping it stops the server; [`Simulator::shutdown`] also waits.
#[derive(Debug)]
pub struct Simulator {
    shared: Arc<Shared>,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

/// Errors starting or stopping the simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The server stopped with an error.
    #[error("the simulator's server failed")]
    Serve(#[source] std::io::Error),
    /// `shutdown` was called on a simulator already shut down.
    #[error("the simulator is already shut down")]
    AlreadyShutDown,
}

impl Simulator {
    /// Starts serving on `config.listen` (inside a Tokio runtime).
    pub async fn start(config: SimConfig) -> Result<Self, SimError> {
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| SimError::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| SimError::Bind {
            addr: config.listen,
            source,
        })?;
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new(config.history_limit, config.seed)),
            faults: Mutex::new(faults::Faults::new(config.faults.clone())),
            audit: Mutex::new(Audit::new(config.audit_capacity)),
            watch_drops: tokio::sync::watch::Sender::new(watch::Generation::default()),
            config,
        });
        let app = axum::Router::new()
            .fallback(http::handle)
            .with_state(shared.clone());
        let (stop, task) = crate::util::serve::spawn(listener, app);
        Ok(Self {
            shared,
            addr,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The address it listens on.
    #[must_use]
    pub const fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The cluster URL (`http://127.0.0.1:PORT`).
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kubeconfig pointing at the simulator.
    #[must_use]
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: shadow-reconciler-sim\n  cluster:\n    server: {}\ncontexts:\n- name: shadow-reconciler-sim\n  context:\n    cluster: shadow-reconciler-sim\n    user: shadow-reconciler-sim\ncurrent-context: shadow-reconciler-sim\nusers:\n- name: shadow-reconciler-sim\n  user: {{}}\n",
            self.url()
        )
    }

    /// Reads the audit.
    pub fn audit<R>(&self, f: impl FnOnce(&Audit) -> R) -> R {
        f(&lock(&self.shared.audit))
    }

    /// Works on the store directly (seeding objects, compaction, a second writer).
    pub fn store<R>(&self, f: impl FnOnce(&mut Store) -> R) -> R {
        f(&mut lock(&self.shared.store))
    }

    /// Adds a fault rule.
    pub fn add_fault(&self, rule: Rule) {
        lock(&self.shared.faults).add(rule);
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        lock(&self.shared.faults).clear();
    }

    /// A conflict storm: the next `reads` GETs of the object are each followed by a second
    /// writer bumping its resourceVersion, so a client that writes what it read gets 409.
    pub fn conflict_storm(&self, resource: &str, namespace: Option<&str>, name: &str, reads: u64) {
        self.add_fault(Rule {
            name: format!("conflict-storm/{resource}/{name}"),
            matches: Match {
                verbs: vec!["get".into()],
                resource: Some(resource.to_owned()),
                subresource: Some(String::new()),
                namespace: namespace.map(str::to_owned),
                name: Some(name.to_owned()),
                ..Match::default()
            },
            action: Action {
                second_writer: true,
                ..Action::default()
            },
            probability: None,
            count: Some(reads),
            per_object: false,
        });
    }

    /// Ends every open watch stream, as a dropped connection would, and returns how many it
    /// ended (a stream an earlier drop ended is not counted again, even before it closed). A
    /// client between two watches (re-watching, or backing off after an error) has none open,
    /// so a drop then ends nothing: a test that needs a stream ended drops again until this is
    /// more than 0.
    pub fn drop_watches(&self) -> usize {
        watch::drop_all(&self.shared.watch_drops)
    }

    /// Stops the server and waits for it. A second call is an error.
    pub async fn shutdown(&mut self) -> Result<(), SimError> {
        let stop = self.stop.take().ok_or(SimError::AlreadyShutDown)?;
        let _ = stop.send(());
        self.drop_watches();
        if let Some(task) = self.task.take() {
            match task.await {
                Ok(result) => result.map_err(SimError::Serve)?,
                Err(join) => return Err(SimError::Serve(std::io::Error::other(join))),
            }
        }
        Ok(())
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
            self.drop_watches();
        }
    }
}
