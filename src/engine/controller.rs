//! kube-runtime `Controller`s driving the engine: one per reconciler, with an error policy that
//! backs off per object like controller-runtime's default rate limiter.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use kube::Resource;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;

use crate::engine::{Engine, Reconciler};

/// The first retry waits this long; each failure doubles it.
const BACKOFF_BASE: Duration = Duration::from_millis(5);
/// The longest wait between retries.
const BACKOFF_MAX: Duration = Duration::from_mins(5);

/// A reconcile that failed: the control's aggregate error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReconcileFailed(String);

struct Context<R: Reconciler> {
    engine: Arc<Engine<R>>,
    failures: Mutex<HashMap<String, u32>>,
}

fn key<K: Resource>(object: &K) -> String {
    format!(
        "{}/{}",
        object.meta().namespace.as_deref().unwrap_or(""),
        object.meta().name.as_deref().unwrap_or("")
    )
}

/// The wait after `failures` consecutive failures: 5 ms doubling, at most 5 minutes.
#[must_use]
pub fn backoff(failures: u32) -> Duration {
    BACKOFF_BASE
        .saturating_mul(1u32.checked_shl(failures.min(31)).unwrap_or(u32::MAX))
        .min(BACKOFF_MAX)
}

async fn reconcile<R: Reconciler>(
    object: Arc<R::Object>,
    ctx: Arc<Context<R>>,
) -> Result<Action, ReconcileFailed> {
    let outcome = ctx.engine.reconcile(object.clone()).await;
    if let Some(error) = outcome.error {
        Err(ReconcileFailed(error))
    } else {
        ctx.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key(object.as_ref()));
        Ok(outcome
            .requeue_after
            .map_or_else(Action::await_change, Action::requeue))
    }
}

#[allow(clippy::needless_pass_by_value)] // the signature kube-runtime's Controller::run expects
fn error_policy<R: Reconciler>(
    object: Arc<R::Object>,
    _: &ReconcileFailed,
    ctx: Arc<Context<R>>,
) -> Action {
    let mut failures = ctx.failures.lock().unwrap_or_else(PoisonError::into_inner);
    let n = failures.entry(key(object.as_ref())).or_default();
    *n += 1;
    Action::requeue(backoff(*n - 1))
}

/// Runs a controller for `api`'s objects until `shutdown` resolves; calls `on_synced` once the
/// kind can be listed (the API server serves it and the client may list it). Reconciles of
/// different objects run concurrently without bound (kube-runtime's default); see [`run_with`].
pub async fn run<R>(
    engine: Arc<Engine<R>>,
    api: Api<R::Object>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    on_synced: impl FnOnce() + Send + 'static,
) where
    R: Reconciler,
    <R::Object as Resource>::DynamicType: Eq + Hash + Clone + Debug + Default + Unpin,
{
    run_with(engine, api, 0, shutdown, on_synced).await;
}

/// [`run`] with at most `concurrency` reconciles at once (0: no bound), as controller-runtime's
/// `MaxConcurrentReconciles`: a restart then queues its objects instead of reconciling them all
/// at once, and one object is never reconciled by two workers at the same time either way.
pub async fn run_with<R>(
    engine: Arc<Engine<R>>,
    api: Api<R::Object>,
    concurrency: u16,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    on_synced: impl FnOnce() + Send + 'static,
) where
    R: Reconciler,
    <R::Object as Resource>::DynamicType: Eq + Hash + Clone + Debug + Default + Unpin,
{
    let ctx = Arc::new(Context {
        engine,
        failures: Mutex::new(HashMap::new()),
    });
    // Readiness: the kind is served and listable. (The controller's own store readiness is not
    // polled: kube-runtime wakes only the last waiter on it, and a second waiter can starve the
    // controller's applier, which waits on it too.)
    let probe = api.clone();
    tokio::spawn(async move {
        let kind = crd_name::<R::Object>();
        for attempt in 0u64.. {
            match probe.list(&kube::api::ListParams::default().limit(1)).await {
                Ok(_) => {
                    if attempt > 0 {
                        tracing::info!(%kind, "the reconciled kind can be listed now");
                    }
                    on_synced();
                    break;
                }
                // Said at once, then every minute, so a missing CRD is never silent.
                Err(error) if attempt % 60 == 0 => tracing::warn!(
                    %kind,
                    %error,
                    "cannot list the reconciled kind: is its CRD applied (deploy/crds) and may the service account list it? Retrying every second"
                ),
                Err(_) => {}
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let controller = Controller::new(api, watcher::Config::default())
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency));
    controller
        .graceful_shutdown_on(shutdown)
        .run(reconcile::<R>, error_policy::<R>, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "reconcile error");
            }
        })
        .await;
}

/// The CRD name of a kind, `plural.group` (`hostedclusters.example.shadow-reconciler.io`), as
/// `deploy/crds` names its files and `kubectl get crd` lists it.
pub fn crd_name<K: Resource<DynamicType = ()>>() -> String {
    let (plural, group) = (K::plural(&()), K::group(&()));
    if group.is_empty() {
        plural.into_owned()
    } else {
        format!("{plural}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_cap() {
        assert_eq!(backoff(0), Duration::from_millis(5));
        assert_eq!(backoff(1), Duration::from_millis(10));
        assert_eq!(backoff(10), Duration::from_millis(5120));
        assert_eq!(backoff(40), BACKOFF_MAX);
    }
}
