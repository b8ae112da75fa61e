//! The live flag against the simulator: a controller, the flag's watcher and a ConfigMap that an
//! operator edits. Each test changes the ConfigMap, waits until the watcher applied it, touches
//! objects to cause their next reconcile, and reads the mode off that reconcile's record.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::start_sim;
use common::wait::{wait_for_async, wait_until_async};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use shadow_reconciler::engine::{Engine, MemorySink, ReconcileRecord};
use shadow_reconciler::flag::watch::{self, Target};
use shadow_reconciler::flag::{FlagSpec, LiveFlag, Ramp, Reason, bucket};
use shadow_reconciler::reconcilers::addon::{AddOnReconciler, ClusterManagementAddOn};
use shadow_reconciler::scenario::population;
use shadow_reconciler::sim::{SimConfig, Simulator};
use shadow_reconciler::telemetry::http::Telemetry;
use shadow_reconciler::util::Rng;
use shadow_reconciler::vocab::Mode;

const NS: &str = "shadow-reconciler";
const NAME: &str = "shadow-reconciler-flag";
const ADDONS: usize = 40;
/// A bound for a broken run, not a speed target.
const WAIT: Duration = Duration::from_mins(5);

fn target() -> Target {
    Target {
        namespace: NS.into(),
        name: NAME.into(),
    }
}

/// The simulated cluster: add-ons to reconcile and the flag's namespace.
async fn cluster() -> (Simulator, kube::Client) {
    let (sim, client) = start_sim(SimConfig::default()).await;
    population::create_crds(&client).await.unwrap();
    population::create(
        &client,
        population::Faults::NONE,
        0,
        ADDONS,
        &mut Rng::new(3),
    )
    .await
    .unwrap();
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(NS.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    (sim, client)
}

/// One process: the add-on controller with the flag's watcher, as `run` starts them.
struct Process {
    sink: MemorySink,
    flag: Arc<LiveFlag>,
    telemetry: Arc<Telemetry>,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Process {
    async fn start(client: &kube::Client, defaults: FlagSpec) -> Self {
        let plan = AddOnReconciler::plan();
        let flag = Arc::new(LiveFlag::new(defaults, vec![plan.clone()]).unwrap());
        let telemetry = Arc::new(Telemetry::new());
        let sink = MemorySink::new();
        let engine = Engine::new(
            Arc::new(AddOnReconciler),
            plan,
            client.clone(),
            flag.clone(),
        )
        .unwrap()
        .with_sink(Arc::new(sink.clone()))
        .with_sink(Arc::new(telemetry.metrics().clone()));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let until = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
        let watcher = tokio::spawn(watch::run(
            client.clone(),
            target(),
            flag.clone(),
            Some(telemetry.flag().clone()),
            move || {
                let _ = synced_tx.send(());
            },
            until(stopped.clone()),
        ));
        synced_rx
            .await
            .expect("the flag's watch lists the ConfigMap");
        let controller = tokio::spawn(shadow_reconciler::engine::controller::run(
            Arc::new(engine),
            Api::<ClusterManagementAddOn>::all(client.clone()),
            until(stopped),
            || {},
        ));
        let process = Self {
            sink,
            flag,
            telemetry,
            stop,
            tasks: vec![watcher, controller],
        };
        process.wait_for("every add-on reconciled", distinct).await;
        process
    }

    async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            task.await.unwrap();
        }
    }

    /// Waits until `reconciled` counts every add-on in the records.
    async fn wait_for(&self, what: &str, reconciled: impl Fn(&[ReconcileRecord]) -> usize) {
        wait_for_async(
            what,
            WAIT,
            Duration::from_millis(20),
            async || match reconciled(&self.sink.records()) {
                ADDONS => Ok(()),
                n => Err(format!("{n} of {ADDONS} add-ons")),
            },
        )
        .await;
    }

    /// Waits until the watcher applied the ConfigMap at `version` (or refused it).
    async fn wait_applied(&self, version: &str, refused: bool) {
        let what = format!("the flag at {version} (refused: {refused})");
        wait_for_async(&what, WAIT, Duration::from_millis(10), async || {
            let state = self.flag.current();
            let at = matches!(&state.source, shadow_reconciler::flag::Source::ConfigMap { resource_version, .. } if resource_version == version);
            if (refused && state.stale) || (!refused && at && !state.stale) {
                Ok(())
            } else {
                Err(format!("{state:?}"))
            }
        })
        .await;
    }

    /// Touches every add-on and returns each one's next record (the first that started after
    /// this call: a reconcile already running when the flag changed keeps its mode), by UID.
    async fn next_reconciles(&self, client: &kube::Client) -> BTreeMap<String, ReconcileRecord> {
        let since = SystemTime::now();
        let after = |records: &[ReconcileRecord]| -> Vec<ReconcileRecord> {
            records
                .iter()
                .filter(|r| r.started_at >= since)
                .cloned()
                .collect()
        };
        let api = Api::<ClusterManagementAddOn>::all(client.clone());
        let list = api.list(&ListParams::default()).await.unwrap();
        let stamp = format!("{since:?}");
        for addon in &list.items {
            let patch = serde_json::json!({"metadata": {"annotations": {"test/touch": stamp}}});
            api.patch(
                addon.metadata.name.as_deref().unwrap(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .unwrap();
        }
        self.wait_for("every add-on reconciled after the touch", |records| {
            distinct(&after(records))
        })
        .await;
        let mut next = BTreeMap::new();
        for record in after(&self.sink.records()) {
            let uid = record.object.uid.clone().unwrap();
            next.entry(uid).or_insert(record);
        }
        next
    }
}

fn distinct(records: &[ReconcileRecord]) -> usize {
    records
        .iter()
        .map(|r| r.object.name.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len()
}

/// Creates or replaces the flag ConfigMap (as `kubectl apply` of the whole object would leave it:
/// keys not given are gone); returns its resourceVersion.
async fn put_flag(client: &kube::Client, data: &[(&str, &str)]) -> String {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let data: BTreeMap<String, String> = data
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let stored = if let Some(mut cm) = api.get_opt(NAME).await.unwrap() {
        cm.data = Some(data);
        api.replace(NAME, &PostParams::default(), &cm).await
    } else {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(NAME.into()),
                ..ObjectMeta::default()
            },
            data: Some(data),
            ..ConfigMap::default()
        };
        api.create(&PostParams::default(), &cm).await
    }
    .unwrap();
    stored.metadata.resource_version.unwrap()
}

fn modes(records: &BTreeMap<String, ReconcileRecord>) -> BTreeMap<Mode, usize> {
    let mut count = BTreeMap::new();
    for r in records.values() {
        *count.entry(r.mode).or_default() += 1;
    }
    count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flipping_the_config_map_changes_the_next_reconcile_and_rollback_too() {
    let (mut sim, client) = cluster().await;
    let p = Process::start(&client, FlagSpec::default()).await;
    assert!(
        p.sink
            .records()
            .iter()
            .all(|r| r.mode == Mode::Shadow && r.flag.as_ref().unwrap().reason == Reason::Default),
        "no ConfigMap: the command line's mode"
    );

    let v = put_flag(
        &client,
        &[("mode", "enforce"), ("enforcedGroups", "status-patches")],
    )
    .await;
    p.wait_applied(&v, false).await;
    let next = p.next_reconciles(&client).await;
    assert_eq!(modes(&next), BTreeMap::from([(Mode::Enforce, ADDONS)]));
    for r in next.values() {
        let flag = r.flag.as_ref().unwrap();
        assert_eq!(
            (flag.reason, flag.version.as_deref()),
            (Reason::Static, Some(v.as_str()))
        );
        assert!(
            !r.candidate.is_empty(),
            "enforce still evaluates the candidate"
        );
    }

    // Rollback: one edit, effective at the next reconcile.
    let v = put_flag(&client, &[("mode", "shadow")]).await;
    p.wait_applied(&v, false).await;
    let next = p.next_reconciles(&client).await;
    assert_eq!(modes(&next), BTreeMap::from([(Mode::Shadow, ADDONS)]));

    // Off, then the ConfigMap deleted: back to the command line's flag.
    let v = put_flag(&client, &[("mode", "off")]).await;
    p.wait_applied(&v, false).await;
    let next = p.next_reconciles(&client).await;
    assert_eq!(modes(&next), BTreeMap::from([(Mode::Off, ADDONS)]));
    assert!(
        next.values().all(|r| r.candidate.is_empty()),
        "off: no candidate"
    );
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    wait_for_async(
        "the flag back to the command line's",
        WAIT,
        Duration::from_millis(10),
        async || {
            let state = p.flag.current();
            if state.source == shadow_reconciler::flag::Source::CommandLine {
                Ok(())
            } else {
                Err(format!("{:?}", state.source))
            }
        },
    )
    .await;
    let next = p.next_reconciles(&client).await;
    assert_eq!(modes(&next), BTreeMap::from([(Mode::Shadow, ADDONS)]));

    let exposition = p.telemetry.exposition();
    for line in [
        r#"shadow_reconciler_flag_changes_total{from="shadow",to="enforce"} 1"#,
        r#"shadow_reconciler_flag_changes_total{from="enforce",to="shadow"} 1"#,
        r#"shadow_reconciler_flag_changes_total{from="off",to="shadow"} 1"#,
        r#"shadow_reconciler_flag_info{mode="shadow",source="command-line"} 1"#,
        "shadow_reconciler_flag_watch_synced 1",
        "shadow_reconciler_flag_valid 1",
    ] {
        assert!(exposition.contains(line), "missing {line}\n{exposition}");
    }
    let changed = flag_events(&client, "FlagChanged").await;
    assert!(
        changed
            .iter()
            .any(|note| note.contains("mode=shadow") && note.contains("-> mode=enforce")),
        "{changed:?}"
    );
    p.stop().await;
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ramp_splits_objects_stably_across_restarts() {
    let (mut sim, client) = cluster().await;
    let v = put_flag(&client, &[("mode", "enforce"), ("rampPercent", "50")]).await;
    let p = Process::start(&client, FlagSpec::default()).await;
    p.wait_applied(&v, false).await;
    let first = p.next_reconciles(&client).await;
    for (uid, r) in &first {
        let inside = Ramp::from_percent(50.0).unwrap().includes(bucket(uid));
        let expected = if inside { Mode::Enforce } else { Mode::Shadow };
        assert_eq!(r.mode, expected, "{uid}: bucket {}", bucket(uid));
        assert_eq!(r.flag.as_ref().unwrap().reason, Reason::Split);
    }
    let count = modes(&first);
    assert!(
        count[&Mode::Enforce] >= 8 && count[&Mode::Shadow] >= 8,
        "a 50% ramp of {ADDONS} objects puts some on each side: {count:?}"
    );
    let again = p.next_reconciles(&client).await;
    p.stop().await;

    // A new process (a restart) puts every object on the same side.
    let p = Process::start(&client, FlagSpec::default()).await;
    let after_restart = p.next_reconciles(&client).await;
    for (uid, r) in &first {
        assert_eq!(again[uid].mode, r.mode, "same object, same side");
        assert_eq!(after_restart[uid].mode, r.mode, "same side after a restart");
    }

    // Widening the ramp keeps every enforced object enforced.
    let v = put_flag(&client, &[("mode", "enforce"), ("rampPercent", "100")]).await;
    p.wait_applied(&v, false).await;
    let widened = p.next_reconciles(&client).await;
    assert_eq!(modes(&widened), BTreeMap::from([(Mode::Enforce, ADDONS)]));
    p.stop().await;
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_override_wins_only_when_allowed() {
    let (mut sim, client) = cluster().await;
    let p = Process::start(&client, FlagSpec::default()).await;
    let api = Api::<ClusterManagementAddOn>::all(client.clone());
    let chosen = api.list(&ListParams::default()).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    let patch =
        serde_json::json!({"metadata": {"annotations": {"shadow-reconciler.io/mode": "enforce"}}});
    api.patch(&chosen, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();

    let v = put_flag(&client, &[("mode", "shadow")]).await;
    p.wait_applied(&v, false).await;
    let next = p.next_reconciles(&client).await;
    assert_eq!(
        modes(&next),
        BTreeMap::from([(Mode::Shadow, ADDONS)]),
        "not allowed: the annotation is ignored"
    );

    let v = put_flag(
        &client,
        &[("mode", "shadow"), ("allowObjectOverride", "true")],
    )
    .await;
    p.wait_applied(&v, false).await;
    let next = p.next_reconciles(&client).await;
    for r in next.values() {
        let reason = r.flag.as_ref().unwrap().reason;
        if r.object.name == chosen {
            assert_eq!((r.mode, reason), (Mode::Enforce, Reason::TargetingMatch));
        } else {
            assert_eq!((r.mode, reason), (Mode::Shadow, Reason::Static));
        }
    }
    p.stop().await;
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_config_map_keeps_the_last_valid_flag_with_an_event_and_a_metric() {
    let (mut sim, client) = cluster().await;
    let p = Process::start(&client, FlagSpec::default()).await;
    let v = put_flag(&client, &[("mode", "enforce")]).await;
    p.wait_applied(&v, false).await;

    let bad = put_flag(&client, &[("mode", "enforce"), ("rampPercent", "150")]).await;
    p.wait_applied(&bad, true).await;
    let next = p.next_reconciles(&client).await;
    assert_eq!(modes(&next), BTreeMap::from([(Mode::Enforce, ADDONS)]));
    assert!(
        next.values()
            .all(|r| r.flag.as_ref().unwrap().reason == Reason::Stale),
        "the records say the flag is stale"
    );
    let exposition = p.telemetry.exposition();
    for line in [
        r#"shadow_reconciler_flag_errors_total{field="rampPercent"} 1"#,
        "shadow_reconciler_flag_valid 0",
        r#"shadow_reconciler_flag_info{mode="enforce",source="configmap"} 1"#,
    ] {
        assert!(exposition.contains(line), "missing {line}\n{exposition}");
    }
    let warnings = flag_events(&client, "InvalidFlag").await;
    assert!(
        warnings
            .iter()
            .any(|note| note.starts_with("data.rampPercent: \"150\"")
                && note.contains("keeping the last valid flag: mode=enforce")),
        "{warnings:?}"
    );

    // Fixed: valid again, and the rollback to shadow applies at the next reconcile.
    let v = put_flag(&client, &[("mode", "shadow")]).await;
    p.wait_applied(&v, false).await;
    let next = p.next_reconciles(&client).await;
    assert_eq!(modes(&next), BTreeMap::from([(Mode::Shadow, ADDONS)]));
    assert!(
        p.telemetry
            .exposition()
            .contains("shadow_reconciler_flag_valid 1")
    );
    p.stop().await;
    sim.shutdown().await.unwrap();
}

/// The notes of the flag's Events with this reason, regarding the flag ConfigMap.
async fn flag_events(client: &kube::Client, reason: &str) -> Vec<String> {
    let what = format!("a {reason} Event");
    // None after the wait: the caller's assertion says what was expected.
    wait_until_async(&what, WAIT, Duration::from_millis(20), async || {
        let events: Api<Event> = Api::namespaced(client.clone(), NS);
        let notes: Vec<String> = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .filter(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(NAME)
                    && e.type_.as_deref()
                        == Some(if reason == "InvalidFlag" {
                            "Warning"
                        } else {
                            "Normal"
                        })
                    && e.reporting_controller.as_deref() == Some(watch::REPORTER)
            })
            .filter_map(|e| e.note)
            .collect();
        if notes.is_empty() {
            Err("none".to_owned())
        } else {
            Ok(notes)
        }
    })
    .await
    .unwrap_or_default()
}
