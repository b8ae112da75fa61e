//! Watches against the simulator: resume, synthetic initial events, bookmarks, timeouts,
//! 410 Gone, stream drops, and a kube-runtime watcher and Controller that survive them.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::start_sim;
use common::wait::{wait_for_async, wait_until_async};
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use shadow_reconciler::sim::{SimConfig, Simulator};

/// Ends the open watch streams once one is open: a drop while the client is between two watches
/// (re-watching, or backing off after a 503) would end nothing. Each call thus ends a stream
/// no earlier call ended, opened by a watch request of its own.
async fn drop_an_open_watch(sim: &Simulator) {
    wait_for_async(
        "a watch stream open to drop",
        Duration::from_mins(5),
        Duration::from_millis(10),
        async || match sim.drop_watches() {
            0 => Err("no watch stream open".to_owned()),
            _ => Ok(()),
        },
    )
    .await;
}

fn cm(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

fn fast() -> SimConfig {
    SimConfig {
        bookmark_interval: Duration::from_millis(100),
        ..SimConfig::default()
    }
}

/// Collects watch events until `n` non-bookmark events arrived (bounded by 5 s).
async fn take_events(
    api: &Api<ConfigMap>,
    wp: &WatchParams,
    rv: &str,
    n: usize,
) -> Vec<(String, String)> {
    let stream = api.watch(wp, rv).await.expect("watch starts");
    let events = stream
        .try_filter_map(|e| async move {
            Ok(match e {
                WatchEvent::Added(o) => Some(("ADDED".to_owned(), o.metadata.name.unwrap())),
                WatchEvent::Modified(o) => Some(("MODIFIED".to_owned(), o.metadata.name.unwrap())),
                WatchEvent::Deleted(o) => Some(("DELETED".to_owned(), o.metadata.name.unwrap())),
                WatchEvent::Error(s) => Some(("ERROR".to_owned(), s.code.to_string())),
                WatchEvent::Bookmark(_) => None,
            })
        })
        .take(n)
        .try_collect::<Vec<_>>();
    tokio::time::timeout(Duration::from_secs(30), events)
        .await
        .expect("events in time")
        .expect("no stream error")
}

#[tokio::test]
async fn watch_resumes_from_a_resource_version() {
    let (_sim, client) = start_sim(fast()).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let a = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let rv = a.metadata.resource_version.unwrap();
    api.create(&PostParams::default(), &cm("b")).await.unwrap();
    api.delete("a", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    let events = take_events(&api, &WatchParams::default(), &rv, 2).await;
    assert_eq!(
        events,
        [("ADDED".into(), "b".into()), ("DELETED".into(), "a".into())]
    );
    // From "0": synthetic ADDED events for the current state, then live changes.
    let live = api.clone();
    let writer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        live.create(&PostParams::default(), &cm("c")).await.unwrap();
    });
    let events = take_events(&api, &WatchParams::default(), "0", 2).await;
    writer.await.unwrap();
    assert_eq!(
        events,
        [("ADDED".into(), "b".into()), ("ADDED".into(), "c".into())]
    );
}

#[tokio::test]
async fn watch_sends_bookmarks_when_asked() {
    let (_sim, client) = start_sim(fast()).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let rv = created.metadata.resource_version.unwrap();
    let mut stream = api
        .watch(&WatchParams::default().timeout(5), &rv)
        .await
        .unwrap()
        .boxed();
    let first = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("a bookmark in time");
    match first {
        Some(Ok(WatchEvent::Bookmark(b))) => assert_eq!(b.metadata.resource_version, rv),
        other => panic!("expected a bookmark, got {other:?}"),
    }
    let mut quiet = api
        .watch(
            &WatchParams {
                bookmarks: false,
                ..WatchParams::default()
            }
            .timeout(1),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    let next = tokio::time::timeout(Duration::from_secs(30), quiet.next())
        .await
        .expect("the stream ends at its timeout");
    assert!(
        next.is_none(),
        "no bookmark without allowWatchBookmarks: {next:?}"
    );
}

#[tokio::test]
async fn too_old_resource_version_is_410_gone() {
    let (sim, client) = start_sim(fast()).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let a = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    api.create(&PostParams::default(), &cm("b")).await.unwrap();
    sim.store(shadow_reconciler::sim::Store::compact);
    let events = take_events(
        &api,
        &WatchParams::default(),
        &a.metadata.resource_version.unwrap(),
        1,
    )
    .await;
    assert_eq!(events, [("ERROR".into(), "410".into())]);
}

/// Names in a reflector store.
fn names(store: &reflector::Store<ConfigMap>) -> BTreeSet<String> {
    store
        .state()
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect()
}

/// Waits until the names in `store` pass `check` (up to 5 minutes: a bound for a broken run only,
/// however loaded the machine).
async fn eventually(
    what: &str,
    store: &reflector::Store<ConfigMap>,
    check: impl Fn(&BTreeSet<String>) -> bool,
) {
    wait_for_async(
        what,
        Duration::from_mins(5),
        Duration::from_millis(50),
        async || {
            let now = names(store);
            if check(&now) {
                Ok(())
            } else {
                Err(format!("the store holds {now:?}"))
            }
        },
    )
    .await;
}

#[tokio::test]
async fn kube_runtime_watcher_survives_drops_and_relists_after_410() {
    let (sim, client) = start_sim(SimConfig {
        history_limit: 4,
        ..fast()
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let (reader, writer) = reflector::store();
    let stream = reflector(writer, watcher(api.clone(), watcher::Config::default()))
        .default_backoff()
        .applied_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    eventually("a", &reader, |names| names.contains("a")).await;

    drop_an_open_watch(&sim).await;
    api.create(&PostParams::default(), &cm("b")).await.unwrap();
    eventually("b after a stream drop", &reader, |names| {
        names.contains("b")
    })
    .await;

    // Drop the stream, then write more than the retained history: the resume answers 410 and
    // the watcher relists.
    drop_an_open_watch(&sim).await;
    for name in ["c", "d", "e", "f", "g", "h"] {
        api.create(&PostParams::default(), &cm(name)).await.unwrap();
    }
    api.delete("a", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    eventually("the relisted state", &reader, |names| {
        *names == ["b", "c", "d", "e", "f", "g", "h"].map(String::from).into()
    })
    .await;
    let watches = sim.audit(|a| a.records().filter(|r| r.verb == "watch").count());
    assert!(watches >= 3, "the watcher re-watched ({watches} watches)");
    task.abort();
    drop(sim);
}

mod controller {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::CustomResourceExt;
    use kube::api::{Patch, PatchParams};
    use kube::runtime::controller::{Action, Controller};
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use shadow_reconciler::sim::{Action as FaultAction, Match, Rule};

    #[derive(kube::CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
    #[kube(
        group = "example.shadow-reconciler.io",
        version = "v1",
        kind = "Widget",
        namespaced,
        status = "WidgetStatus"
    )]
    pub struct WidgetSpec {
        size: u32,
    }

    #[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
    pub struct WidgetStatus {
        observed_size: u32,
    }

    #[derive(Debug, thiserror::Error)]
    #[error(transparent)]
    struct ReconcileError(#[from] kube::Error);

    async fn reconcile(
        widget: Arc<Widget>,
        api: Arc<Api<Widget>>,
    ) -> Result<Action, ReconcileError> {
        let name = widget.metadata.name.clone().unwrap_or_default();
        let status = serde_json::json!({"status": {"observed_size": widget.spec.size}});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        Ok(Action::await_change())
    }

    fn error_policy(_: Arc<Widget>, _: &ReconcileError, _: Arc<Api<Widget>>) -> Action {
        Action::requeue(Duration::from_millis(50))
    }

    const OBJECTS: u32 = 1_000;

    fn flaky(name: &str, verbs: &[&str], subresource: &str) -> Rule {
        Rule {
            name: name.into(),
            matches: Match {
                verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
                resource: Some("widgets.example.shadow-reconciler.io".into()),
                subresource: Some(subresource.into()),
                ..Match::default()
            },
            action: FaultAction {
                status: Some(503),
                ..FaultAction::default()
            },
            probability: Some(0.05),
            count: None,
            per_object: false,
        }
    }

    /// Widgets whose status reflects their current spec, read from the store directly.
    fn reconciled(sim: &Simulator) -> usize {
        sim.store(|store| {
            let rt = store
                .registry()
                .get("example.shadow-reconciler.io", "v1", "widgets")
                .cloned()
                .expect("CRD served");
            store
                .list(&rt, Some("default"))
                .filter(|w| {
                    w.pointer("/status/observed_size").is_some()
                        && w.pointer("/status/observed_size") == w.pointer("/spec/size")
                })
                .count()
        })
    }

    async fn wait_reconciled(sim: &Simulator, drop_every: Option<u32>) -> usize {
        let (mut done, mut round) = (0, 0);
        // A bound for a broken run only (5 minutes), however loaded the machine. The caller
        // asserts on the count reached.
        let waited = wait_until_async(
            "every widget reconciled",
            Duration::from_mins(5),
            Duration::from_millis(100),
            async || {
                if drop_every.is_some_and(|n| round % n == 0) {
                    sim.drop_watches();
                }
                round += 1;
                done = reconciled(sim);
                if done == OBJECTS as usize {
                    Ok(())
                } else {
                    Err(format!("{done} of {OBJECTS} widgets reconciled"))
                }
            },
        )
        .await;
        if let Err(e) = waited {
            eprintln!("{e}");
        }
        done
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn controller_reconciles_1000_objects_through_watch_drops_and_503s() {
        let (sim, client) = start_sim(fast()).await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        crds.create(&PostParams::default(), &Widget::crd())
            .await
            .unwrap();
        let api: Api<Widget> = Api::namespaced(client.clone(), "default");
        for i in 0..OBJECTS {
            let widget = Widget::new(&format!("w{i:04}"), WidgetSpec { size: i });
            api.create(&PostParams::default(), &widget).await.unwrap();
        }
        // 5% of the controller's lists, watches and status patches answer 503; the test's own
        // spec updates (main resource) are spared.
        sim.add_fault(flaky("flaky-503-reads", &["list", "watch"], ""));
        sim.add_fault(flaky("flaky-503-status", &["patch"], "status"));
        let ctx = Arc::new(api.clone());
        let controller = Controller::new(api.clone(), watcher::Config::default())
            .run(reconcile, error_policy, ctx)
            .for_each(|_| async {});
        let task = tokio::spawn(controller);
        assert_eq!(
            wait_reconciled(&sim, None).await,
            OBJECTS as usize,
            "every widget reconciled"
        );

        // Drop the controller's watch, then change every spec while dropping it again and again:
        // the controller must pick every change up through re-watches.
        drop_an_open_watch(&sim).await;
        for i in 0..OBJECTS {
            let patch = serde_json::json!({"spec": {"size": i + OBJECTS}});
            api.patch(
                &format!("w{i:04}"),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .unwrap();
            if i % 250 == 0 {
                drop_an_open_watch(&sim).await;
            }
        }
        assert_eq!(
            wait_reconciled(&sim, Some(5)).await,
            OBJECTS as usize,
            "every change reconciled"
        );
        task.abort();
        let (faulted, watches) = sim.audit(|a| {
            let faulted = a.records().filter(|r| !r.faults.is_empty()).count();
            (faulted, a.records().filter(|r| r.verb == "watch").count())
        });
        assert!(faulted > 10, "the 503s fired ({faulted})");
        // Five drops each ended a stream of its own watch request.
        assert!(
            watches >= 5,
            "the watch was dropped and resumed ({watches} watches)"
        );
    }
}

#[tokio::test]
async fn streaming_lists_get_initial_events_and_the_end_bookmark() {
    let (_sim, client) = start_sim(fast()).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for name in ["a", "b", "c"] {
        api.create(&PostParams::default(), &cm(name)).await.unwrap();
    }
    let (reader, writer) = reflector::store();
    let config = watcher::Config::default().streaming_lists();
    let stream = reflector(writer, watcher(api.clone(), config))
        .default_backoff()
        .applied_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    tokio::time::timeout(Duration::from_secs(30), reader.wait_until_ready())
        .await
        .expect("ready in time")
        .unwrap();
    assert_eq!(names(&reader), ["a", "b", "c"].map(String::from).into());
    task.abort();
}

#[tokio::test]
async fn shutdown_ends_open_watches_and_a_second_shutdown_is_an_error() {
    let (mut sim, client) = start_sim(fast()).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let stream = api
        .watch(&WatchParams::default().timeout(60), "0")
        .await
        .unwrap();
    let drained = tokio::spawn(stream.collect::<Vec<_>>());
    tokio::time::timeout(Duration::from_secs(30), sim.shutdown())
        .await
        .expect("shutdown in time")
        .unwrap();
    tokio::time::timeout(Duration::from_secs(30), drained)
        .await
        .expect("the watch ended")
        .unwrap();
    assert!(matches!(
        sim.shutdown().await,
        Err(shadow_reconciler::sim::SimError::AlreadyShutDown)
    ));
}

/// A watch from a resourceVersion the store has not reached is accepted, and its events come
/// once the store reaches it; as kube-apiserver v1.37.2, which answers 200 and sends nothing
/// meanwhile (no error either).
#[tokio::test]
async fn a_watch_from_a_future_version_waits_for_it() {
    let (_sim, client) = start_sim(SimConfig {
        bookmark_interval: Duration::from_hours(1),
        ..fast()
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let rv: u64 = created.metadata.resource_version.unwrap().parse().unwrap();
    let mut stream = api
        .watch(
            &WatchParams {
                bookmarks: false,
                ..WatchParams::default()
            }
            .timeout(60),
            &(rv + 1).to_string(),
        )
        .await
        .expect("accepted")
        .boxed();
    // Later writes reach and pass the requested version: the stream shows the changes after
    // it, and only those.
    let mut written = Vec::new();
    for name in ["b", "c", "d"] {
        let object = api.create(&PostParams::default(), &cm(name)).await.unwrap();
        let at: u64 = object.metadata.resource_version.unwrap().parse().unwrap();
        written.push((name, at));
    }
    let expected = written
        .iter()
        .find(|(_, at)| *at > rv + 1)
        .map(|(name, _)| *name)
        .expect("a write after the requested version");
    let first = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("an event once the store passed the version")
        .expect("the stream is open")
        .expect("not an error");
    match first {
        WatchEvent::Added(object) => {
            assert_eq!(
                object.metadata.name.as_deref(),
                Some(expected),
                "{written:?}"
            );
        }
        other => panic!("expected {expected}'s ADDED, got {other:?}"),
    }
}
