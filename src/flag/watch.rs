//! Watches the flag ConfigMap with a kube-runtime reflector and applies every change to the
//! [`LiveFlag`]: changes logged, counted and announced with a `Normal` Event; an invalid ConfigMap
//! keeps the last valid flag and gets a `Warning` Event naming the bad field.

use std::future::Future;
use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, reflector as reflect};
use kube::{Client, Resource};

use super::{Applied, FlagMetrics, LiveFlag};

/// The `reportingController` of the flag's Events.
pub const REPORTER: &str = "shadow-reconciler.io/flag";
/// Reason of the Event for a refused ConfigMap.
pub const REASON_INVALID: &str = "InvalidFlag";
/// Reason of the Event for a change of the flag in force.
pub const REASON_CHANGED: &str = "FlagChanged";

/// Which ConfigMap holds the flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

struct Watcher {
    flag: Arc<LiveFlag>,
    metrics: Option<FlagMetrics>,
    recorder: Recorder,
    target: Target,
    store: Store<ConfigMap>,
    /// The resourceVersion last refused, so a re-list does not repeat its Event and count.
    refused: Option<String>,
}

/// Watches `target` until `shutdown` resolves, applying it to `flag`; calls `on_synced` after
/// the first complete list (whether or not the ConfigMap exists), so a caller can hold its
/// controllers until the flag is known.
pub async fn run(
    client: Client,
    target: Target,
    flag: Arc<LiveFlag>,
    metrics: Option<FlagMetrics>,
    on_synced: impl FnOnce() + Send,
    shutdown: impl Future<Output = ()> + Send,
) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &target.namespace);
    let (store, writer) = reflector::store();
    let config = watcher::Config::default().fields(&format!("metadata.name={}", target.name));
    let stream = reflect(writer, watcher::watcher(api, config)).default_backoff();
    let instance = std::env::var("POD_NAME").ok();
    let mut this = Watcher {
        recorder: Recorder::new(
            client,
            Reporter {
                controller: REPORTER.into(),
                instance,
            },
        ),
        flag,
        metrics,
        target,
        store,
        refused: None,
    };
    if let Some(m) = &this.metrics {
        m.synced(false);
        m.in_force(&this.flag.current());
    }
    let mut on_synced = Some(on_synced);
    let mut stream = std::pin::pin!(stream);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let event = tokio::select! {
            () = &mut shutdown => break,
            event = stream.next() => event,
        };
        match event {
            None => break,
            Some(Err(error)) => {
                tracing::warn!(%error, flag = %this.target, "the watch of the flag ConfigMap failed; keeping the flag in force and retrying");
                if let Some(m) = &this.metrics {
                    m.synced(false);
                }
            }
            Some(Ok(Event::Init | Event::InitApply(_))) => {}
            Some(Ok(Event::InitDone)) => {
                if let Some(m) = &this.metrics {
                    m.synced(true);
                }
                this.sync().await;
                if let Some(f) = on_synced.take() {
                    f();
                }
            }
            Some(Ok(Event::Apply(_) | Event::Delete(_))) => this.sync().await,
        }
    }
}

impl Watcher {
    /// Applies what the reflector's store holds now.
    async fn sync(&mut self) {
        let key = ObjectRef::<ConfigMap>::new(&self.target.name).within(&self.target.namespace);
        let cm = self.store.get(&key);
        let before = self.flag.current();
        match self.flag.apply(cm.as_deref()) {
            Ok(Applied::Changed { from, to }) => {
                let state = self.flag.current();
                tracing::info!(
                    flag = %self.target,
                    source = state.source.as_str(),
                    from = %from.summary(),
                    to = %to.summary(),
                    "flag changed"
                );
                if let Some(m) = &self.metrics {
                    m.changed(from.mode, to.mode);
                }
                self.refused = None;
                if let Some(cm) = &cm {
                    let note = format!("{} -> {}", from.summary(), to.summary());
                    self.publish(cm, EventType::Normal, REASON_CHANGED, note)
                        .await;
                }
            }
            Ok(Applied::Unchanged) => {
                self.refused = None;
                if before.stale {
                    tracing::info!(flag = %self.target, "the flag ConfigMap is valid again");
                }
            }
            Err(error) => {
                let version = cm
                    .as_ref()
                    .and_then(|c| c.metadata.resource_version.clone());
                if self.refused != version {
                    self.refused = version;
                    let kept = self.flag.current().spec.summary();
                    tracing::error!(flag = %self.target, %error, kept = %kept, "invalid flag ConfigMap; keeping the last valid flag");
                    if let Some(m) = &self.metrics {
                        m.refused(error.field());
                    }
                    if let Some(cm) = &cm {
                        let note = format!("{error}; keeping the last valid flag: {kept}");
                        self.publish(cm, EventType::Warning, REASON_INVALID, note)
                            .await;
                    }
                }
            }
        }
        if let Some(m) = &self.metrics {
            m.in_force(&self.flag.current());
        }
    }

    async fn publish(&self, cm: &ConfigMap, type_: EventType, reason: &str, note: String) {
        let event = KubeEvent {
            type_,
            reason: reason.into(),
            note: Some(crate::util::truncate(note, 1024)),
            action: "ApplyFlag".into(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &cm.object_ref(&())).await {
            tracing::warn!(%error, flag = %self.target, reason, "cannot publish the flag's Event");
        }
    }
}
