//! The `rollout` scenario: the flip to enforce driven by the data. The good group advances
//! through every step to 100%, the bad one is rolled back by its gates; each decision is checked
//! against the records the run wrote (which flag version each reconcile ran under, which groups
//! it enforced), not against timing.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use shadow_reconciler::dataset::{Location, ParquetSink, SinkConfig};
use shadow_reconciler::flag::bucket;
use shadow_reconciler::flag::rollout::{ACTION_ANNOTATION, Phase, RolloutStatus, ShadowRollout};
use shadow_reconciler::rollout::{Driver, Round, Settings as DriverSettings};
use shadow_reconciler::scenario::rollout::{Entry, Timeline, prepare};
use shadow_reconciler::sim::SimConfig;
use shadow_reconciler::util::election;

use crate::common;
use common::records::{Record, records};
use shadow_reconciler::scenario::{Scenario, Settings, run};

fn micros(rfc3339: &str) -> i64 {
    rfc3339
        .parse::<k8s_openapi::jiff::Timestamp>()
        .unwrap()
        .as_microsecond()
}

fn status(timeline: &Timeline, name: &str) -> RolloutStatus {
    timeline
        .statuses
        .iter()
        .find(|(n, _)| n == name)
        .map_or_else(
            || panic!("no status of {name}:\n{timeline}"),
            |(_, s)| s.clone(),
        )
}

/// Each step's decision passed every gate, and the objects the gates counted are objects the
/// records show enforced in that step (between its start and the decision), each inside the
/// step's ramp.
fn check_steps(decisions: &[&Entry], records: &[Record], timeline: &Timeline) {
    let basis_points = [1000_u16, 2500, 5000, 10_000];
    for (k, pair) in decisions.windows(2).enumerate() {
        let (began, judged) = (micros(&pair[0].time), micros(&pair[1].time));
        assert!(
            pair[1].gates.iter().all(|(_, r, _)| r == "Passed"),
            "{timeline}"
        );
        assert!(pair[1].enforced_objects >= 10, "{timeline}");
        let enforced: BTreeSet<&str> = records
            .iter()
            .filter(|r| {
                (began..=judged).contains(&r.time)
                    && r.mode == "enforce"
                    && r.groups.iter().any(|g| g == "gated-components")
            })
            .map(|r| r.uid.as_str())
            .collect();
        assert!(
            pair[1].enforced_objects <= enforced.len() as u64,
            "step {}: the gates counted {} objects, the records show {}",
            k + 1,
            pair[1].enforced_objects,
            enforced.len()
        );
        for uid in &enforced {
            assert!(
                bucket(uid) < basis_points[k],
                "{uid} enforced outside step {}'s ramp",
                k + 1
            );
        }
    }
}

/// The driver's Parquet record holds every decision of the timeline, in order, with the gates
/// and the flag version of its round.
fn check_record(dir: &std::path::Path, timeline: &Timeline) {
    let rows =
        shadow_reconciler::dataset::rollouts::read(&Location::Local(dir.to_owned())).unwrap();
    let recorded: Vec<(String, String)> = rows
        .iter()
        .filter(|r| !r.decision.is_empty())
        .flat_map(|r| {
            r.decision
                .split(',')
                .map(|d| (r.group.clone(), d.to_owned()))
        })
        .collect();
    let mut expected: Vec<(String, String)> = timeline
        .entries
        .iter()
        .map(|e| (e.group.clone(), e.kind.clone()))
        .collect();
    let mut recorded_sorted = recorded.clone();
    recorded_sorted.sort();
    expected.sort();
    assert_eq!(recorded_sorted, expected, "{timeline}");
    for r in rows.iter().filter(|r| r.decision.contains("RolledBack")) {
        assert_eq!(r.result, "Failed");
        assert!(r.gates.contains("\"Failed\""), "{}", r.gates);
        assert!(r.flag_version.is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_good_group_reaches_100_percent_and_the_bad_one_is_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Arc::new(ParquetSink::start(SinkConfig::new(dir.path()), None));
    let settings = Settings {
        scenario: Scenario::Rollout,
        progress: false,
        // A bound for a broken run, not a speed target: the rollouts must end before it.
        duration: Duration::from_mins(10),
        parquet: Some(sink.clone()),
        ..Settings::default()
    };
    let summary = run(&settings).await.unwrap();
    sink.shutdown(Duration::from_secs(30)).unwrap();
    let timeline = summary
        .rollout
        .clone()
        .expect("the rollout scenario's timeline");
    let (good, bad) = (
        status(&timeline, "gated-components"),
        status(&timeline, "critical-core"),
    );
    assert_eq!(
        (good.phase, good.step, good.rollbacks),
        (Phase::Completed, 3, 0),
        "{timeline}"
    );
    assert!((good.ramp - 100.0).abs() < f64::EPSILON, "{timeline}");
    assert_eq!(
        (good.step_of.as_str(), bad.step_of.as_str()),
        ("4/4", "1/3")
    );
    assert_eq!(
        (bad.phase, bad.rollbacks),
        (Phase::RolledBack, 1),
        "{timeline}"
    );
    let records = records(dir.path());

    let decisions: Vec<&Entry> = timeline
        .entries
        .iter()
        .filter(|e| e.group == "hostedcluster/gated-components")
        .collect();
    let kinds: Vec<String> = decisions
        .iter()
        .map(|e| format!("{} {}", e.kind, e.ramp))
        .collect();
    assert_eq!(
        kinds,
        [
            "Started 10",
            "Advanced 25",
            "Advanced 50",
            "Advanced 100",
            "Completed 100"
        ],
        "{timeline}"
    );
    check_steps(&decisions, &records, &timeline);
    check_record(dir.path(), &timeline);

    check_rollback(&timeline, &records);
}

/// A population too small for the steps' minimum (10 objects enforced, 10% of 20 HostedClusters
/// is 2): no gate can pass, so the driver waits, and the scenario ends after
/// `STALL_ROUNDS` rounds without a decision instead of running to its deadline; the printed
/// timeline says what each rollout waits for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_population_too_small_for_the_steps_stalls_and_says_why() {
    use shadow_reconciler::scenario::rollout::STALL_ROUNDS;
    let dir = tempfile::tempdir().unwrap();
    let sink = Arc::new(ParquetSink::start(SinkConfig::new(dir.path()), None));
    let settings = Settings {
        scenario: Scenario::Rollout,
        hosted_clusters: 20,
        addons: 2,
        progress: false,
        // A bound for a broken run, not a speed target: the stall must end the run before it.
        duration: Duration::from_mins(10),
        parquet: Some(sink.clone()),
        ..Settings::default()
    };
    let summary = run(&settings).await.unwrap();
    sink.shutdown(Duration::from_secs(30)).unwrap();
    let timeline = summary.rollout.expect("the rollout scenario's timeline");
    assert!(timeline.stalled, "{timeline}");
    assert!(summary.settled, "{timeline}");
    // The first round starts both rollouts; then STALL_ROUNDS rounds decide nothing.
    assert_eq!(timeline.rounds, STALL_ROUNDS + 1, "{timeline}");
    for name in ["gated-components", "critical-core"] {
        let s = status(&timeline, name);
        assert_eq!((s.phase, s.step), (Phase::Progressing, 0), "{timeline}");
        assert!(s.message.contains("waiting for"), "{name}: {}", s.message);
    }
    let printed = timeline.to_string();
    assert!(
        printed.contains("stalled: no decision in 3 rounds"),
        "{printed}"
    );
}

/// The bad group: rolled back at its first step by a failed gate, with its figures; no object
/// outside its 10% ever enforced it; and no reconcile that ran under the flag the rollback
/// wrote, or any later one, enforced it. Those that did after the decision ran under the flag
/// before it (the documented bound: the flag's propagation).
fn check_rollback(timeline: &Timeline, records: &[Record]) {
    let rolled = timeline
        .entries
        .iter()
        .find(|e| e.group == "hostedcluster/critical-core" && e.kind == "RolledBack")
        .unwrap_or_else(|| panic!("no rollback:\n{timeline}"));
    assert!(
        rolled
            .gates
            .iter()
            .any(|(_, r, m)| r == "Failed" && !m.is_empty()),
        "{timeline}"
    );
    let written = rolled
        .flag_version
        .clone()
        .expect("the rollback's flag version");
    let from = timeline
        .flag_versions
        .iter()
        .position(|v| v.as_ref() == Some(&written))
        .unwrap();
    let after: BTreeSet<&String> = timeline.flag_versions[from..].iter().flatten().collect();
    let (_, late) = common::records::check_rollback(
        records,
        "critical-core",
        10.0,
        &after,
        micros(&rolled.time),
    );
    println!(
        "{timeline}\nreconciles enforcing critical-core after its rollback was decided: {late}, each under the flag before it"
    );
}

/// A driver of the scenario's namespace reading `dir`.
fn driver(client: &kube::Client, identity: &str, dir: &std::path::Path, lease: Duration) -> Driver {
    Driver::new(
        client.clone(),
        DriverSettings {
            namespace: "shadow-reconciler".into(),
            cluster: "default".into(),
            flag: "shadow-reconciler-flag".into(),
            lease: Some(election::Config {
                lease_duration: lease,
                ..election::Config::new("shadow-reconciler", "shadow-reconciler-rollout", identity)
            }),
            identity: identity.into(),
            interval: Duration::from_secs(1),
            location: Location::Local(dir.to_owned()),
            plans: vec![shadow_reconciler::plan::embedded::load("hostedcluster").unwrap()],
            flush: None,
        },
        None,
    )
}

async fn act(client: &kube::Client, rollout: &str, action: &str) {
    let api: Api<ShadowRollout> = Api::namespaced(client.clone(), "shadow-reconciler");
    let patch = serde_json::json!({"metadata": {"annotations": {ACTION_ANNOTATION: action}}});
    api.patch(rollout, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn flag_groups(client: &kube::Client) -> String {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "shadow-reconciler");
    cms.get("shadow-reconciler-flag")
        .await
        .unwrap()
        .data
        .unwrap()["groups"]
        .clone()
}

fn of<'a>(round: &'a Round, name: &str) -> &'a RolloutStatus {
    round
        .statuses
        .iter()
        .find(|(n, _)| n == name)
        .map_or_else(|| panic!("no {name} in {round:?}"), |(_, s)| s)
}

/// The driver's I/O on the simulator: one leader per Lease, a person's actions applied once
/// (the annotation removed), a bad action refused with the known ones, the flag's `groups` key
/// written from the statuses, and a restarted driver resuming from the status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_leads_alone_applies_actions_once_and_resumes_from_the_status() {
    let (sim, client) = common::start_sim(SimConfig::default()).await;
    prepare(&client).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut a = driver(&client, "a", data.path(), Duration::from_hours(1));
    let mut b = driver(&client, "b", data.path(), Duration::from_hours(1));
    let first = a.round().await.unwrap();
    assert!(first.leader);
    assert_eq!(first.decisions.len(), 2, "{first:?}");
    assert_eq!(
        flag_groups(&client).await,
        "hostedcluster/critical-core: enforce 10%\nhostedcluster/gated-components: enforce 10%"
    );
    // No data: each step waits for its objects.
    assert!(
        of(&first, "gated-components")
            .message
            .contains("0 of 10 objects enforced"),
        "{first:?}"
    );
    assert!(!b.round().await.unwrap().leader, "two drivers led at once");

    act(&client, "critical-core", "promote").await;
    act(&client, "gated-components", "promot").await;
    let round = a.round().await.unwrap();
    let core = of(&round, "critical-core");
    assert_eq!(
        (core.step, core.phase),
        (1, Phase::Progressing),
        "{round:?}"
    );
    assert_eq!(round.decisions.len(), 1, "{round:?}");
    assert_eq!(round.decisions[0].1.kind, "Promoted");
    let gated = of(&round, "gated-components");
    assert!(
        gated
            .message
            .contains("known: promote, pause, resume, abort, restart"),
        "{gated:?}"
    );
    let api: Api<ShadowRollout> = Api::namespaced(client.clone(), "shadow-reconciler");
    for name in ["critical-core", "gated-components"] {
        let r = api.get(name).await.unwrap();
        assert!(
            !r.annotations().contains_key(ACTION_ANNOTATION),
            "{name}: the action stays"
        );
    }
    // Applied once: the next round decides nothing.
    assert!(a.round().await.unwrap().decisions.is_empty());

    act(&client, "critical-core", "abort").await;
    a.round().await.unwrap();
    assert_eq!(
        flag_groups(&client).await,
        "hostedcluster/critical-core: shadow\nhostedcluster/gated-components: enforce 10%"
    );

    // A restarted driver (same identity) resumes: no new start, the steps as the status says.
    let mut again = driver(&client, "a", data.path(), Duration::from_hours(1));
    let resumed = again.round().await.unwrap();
    assert!(
        resumed.leader && resumed.decisions.is_empty(),
        "{resumed:?}"
    );
    assert_eq!(of(&resumed, "critical-core").phase, Phase::Aborted);
    assert_eq!(of(&resumed, "gated-components").step, 0);

    // Another replica takes over only once it has seen the Lease unrenewed for its duration, by
    // its own clock (a first sight starts that clock).
    let mut short = driver(&client, "a", data.path(), Duration::from_secs(1));
    assert!(short.round().await.unwrap().leader);
    let mut c = driver(&client, "c", data.path(), Duration::from_secs(1));
    assert!(!c.round().await.unwrap().leader, "taken at first sight");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(
        c.round().await.unwrap().leader,
        "the expired Lease was not taken over"
    );
    assert!(!short.round().await.unwrap().leader);
    drop(sim);
}
