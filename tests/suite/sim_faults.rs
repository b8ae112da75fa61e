//! Fault injection and the audit, observed through kube-rs.

use crate::common;

use std::time::{Duration, Instant};

use common::{api_error, client_for, start_sim};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams, WatchEvent, WatchParams};
use shadow_reconciler::sim::{Action, FaultConfig, Match, Rule, SimConfig, Simulator};

fn cm(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

fn rule(name: &str, verbs: &[&str], action: Action, count: Option<u64>) -> Rule {
    Rule {
        name: name.into(),
        matches: Match {
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
            resource: Some("configmaps".into()),
            ..Match::default()
        },
        action,
        probability: None,
        count,
        per_object: false,
    }
}

/// A simulator with one ConfigMap, and a client that does not retry (to see each fault).
async fn setup() -> (Simulator, Api<ConfigMap>) {
    let (sim, client) = start_sim(SimConfig::default()).await;
    Api::<ConfigMap>::namespaced(client, "default")
        .create(&PostParams::default(), &cm("a"))
        .await
        .unwrap();
    let raw = client_for(&sim, |c| {
        c.default_retry = false;
        c.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static("fault-test/1"),
        ));
    });
    (sim, Api::namespaced(raw, "default"))
}

#[tokio::test]
async fn injected_status_codes() {
    let (sim, api) = setup().await;
    for (code, reason) in [
        (503, "ServiceUnavailable"),
        (500, "InternalError"),
        (409, "Conflict"),
    ] {
        sim.add_fault(rule(
            "once",
            &["get"],
            Action {
                status: Some(code),
                ..Action::default()
            },
            Some(1),
        ));
        let err = api.get("a").await.unwrap_err();
        assert_eq!(api_error(&err).0, code);
        assert_eq!(api_error(&err).1, reason);
        api.get("a").await.expect("a counted rule fires once");
    }
    sim.add_fault(rule(
        "throttle",
        &["list"],
        Action {
            status: Some(429),
            retry_after_seconds: Some(2),
            ..Action::default()
        },
        Some(1),
    ));
    let err = api
        .list(&kube::api::ListParams::default())
        .await
        .unwrap_err();
    let kube::Error::Api(status) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (429, "TooManyRequests")
    );
    assert_eq!(
        status.details.as_ref().map(|d| d.retry_after_seconds),
        Some(2)
    );
}

#[tokio::test]
async fn the_default_kube_client_retries_through_a_short_burst() {
    let (sim, client) = start_sim(SimConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    sim.add_fault(rule(
        "burst",
        &["create"],
        Action {
            status: Some(503),
            ..Action::default()
        },
        Some(2),
    ));
    api.create(&PostParams::default(), &cm("b"))
        .await
        .expect("retried past two 503s");
    let codes: Vec<u16> = sim.audit(|a| {
        a.records()
            .filter(|r| r.verb == "create")
            .map(|r| r.code)
            .collect()
    });
    assert_eq!(codes, [503, 503, 201]);
}

#[tokio::test]
async fn latency_and_timeouts() {
    let (sim, api) = setup().await;
    sim.add_fault(rule(
        "slow",
        &["get"],
        Action {
            latency_ms: Some(150),
            ..Action::default()
        },
        Some(1),
    ));
    let started = Instant::now();
    api.get("a").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(150));
    sim.add_fault(rule(
        "hang",
        &["get"],
        Action {
            timeout_ms: Some(100),
            ..Action::default()
        },
        Some(1),
    ));
    let started = Instant::now();
    let err = api.get("a").await.unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert_eq!(api_error(&err).0, 504);
    assert_eq!(api_error(&err).1, "Timeout");
}

#[tokio::test]
async fn dropped_watch_streams_end_early() {
    let (sim, api) = setup().await;
    sim.add_fault(rule(
        "drop",
        &["watch"],
        Action {
            drop_watch_after_events: Some(1),
            ..Action::default()
        },
        Some(1),
    ));
    let events: Vec<_> = tokio::time::timeout(
        Duration::from_secs(5),
        api.watch(&WatchParams::default().timeout(30), "0")
            .await
            .unwrap()
            .collect::<Vec<_>>(),
    )
    .await
    .expect("the stream ends long before its timeout");
    assert_eq!(events.len(), 1);
    assert!(matches!(events[0], Ok(WatchEvent::Added(_))));
}

#[tokio::test]
async fn a_conflict_storm_makes_read_then_write_fail() {
    let (sim, api) = setup().await;
    sim.conflict_storm("configmaps", Some("default"), "a", 2);
    for _ in 0..2 {
        let read = api.get("a").await.unwrap();
        let err = api
            .replace("a", &PostParams::default(), &read)
            .await
            .unwrap_err();
        assert_eq!(api_error(&err).1, "Conflict");
    }
    let read = api.get("a").await.unwrap();
    let mut changed = read.clone();
    changed.data = Some([("k".to_owned(), "v".to_owned())].into());
    api.replace("a", &PostParams::default(), &changed)
        .await
        .expect("the storm is over");
    let bumped = read.metadata.annotations.unwrap_or_default();
    assert!(
        bumped.contains_key("sim.shadow-reconciler.io/second-writer"),
        "the second writer's mark is visible"
    );
}

#[tokio::test]
async fn rules_match_user_agent_namespace_name_and_dry_run() {
    let (sim, api) = setup().await;
    let only = |m: Match| Rule {
        name: "scoped".into(),
        matches: m,
        action: Action {
            status: Some(500),
            ..Action::default()
        },
        probability: None,
        count: None,
        per_object: false,
    };
    sim.add_fault(only(Match {
        user_agent: Some("other-*".into()),
        ..Match::default()
    }));
    api.get("a")
        .await
        .expect("another user agent's rule does not fire");
    sim.clear_faults();
    sim.add_fault(only(Match {
        user_agent: Some("fault-*".into()),
        name: Some("z*".into()),
        ..Match::default()
    }));
    api.get("a").await.expect("name pattern does not match");
    sim.clear_faults();
    sim.add_fault(only(Match {
        dry_run: Some(true),
        ..Match::default()
    }));
    api.create(&PostParams::default(), &cm("real"))
        .await
        .expect("only dry runs fail");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    assert_eq!(
        api_error(&api.create(&dry, &cm("dry")).await.unwrap_err()).0,
        500
    );
}

#[tokio::test]
async fn audit_counts_persisted_and_dry_run_mutations_per_user_agent() {
    let (sim, api) = setup().await;
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    api.create(&dry, &cm("d1")).await.unwrap();
    api.create(&dry, &cm("d2")).await.unwrap();
    api.create(&PostParams::default(), &cm("r1")).await.unwrap();
    api.get("r1").await.unwrap();
    let _ = api.get("missing").await;
    let (mine, total) = sim.audit(|a| (a.totals()["fault-test/1"].clone(), a.len()));
    assert_eq!(mine.requests, 5);
    assert_eq!(mine.persisted_mutations, 1);
    assert_eq!(mine.dry_run_mutations, 2);
    assert_eq!(mine.errors, 1);
    assert_eq!(sim.audit(|a| a.persisted_mutations("fault-test/1")), 1);
    assert_eq!(
        total, 6,
        "the setup's create (no user agent) is audited too"
    );
    let summary = sim.audit(ToString::to_string);
    assert!(summary.contains("fault-test/1"), "{summary}");
}

#[test]
fn fault_files_load_and_report_their_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("faults.yaml");
    std::fs::write(&path, "seed: 3\nrules:\n  - name: flaky\n    match: {verbs: [get], resource: secrets, namespace: 'clusters-*'}\n    action: {status: 503}\n    probability: 0.05\n").unwrap();
    let config = FaultConfig::load(&path).unwrap();
    assert_eq!(config.seed, 3);
    assert_eq!(
        config.rules[0].matches.namespace.as_deref(),
        Some("clusters-*")
    );
    std::fs::write(
        &path,
        "rules:\n  - name: x\n    match: {verb: [get]}\n    action: {status: 503}\n",
    )
    .unwrap();
    let err = FaultConfig::load(&path).unwrap_err().to_string();
    assert!(err.starts_with(&format!("{}:3:", path.display())), "{err}");
    assert!(err.contains("unknown field `verb`"), "{err}");
}

#[tokio::test]
async fn a_second_writer_before_a_write_makes_its_precondition_fail() {
    let (sim, api) = setup().await;
    sim.add_fault(rule(
        "race",
        &["update"],
        Action {
            second_writer: true,
            ..Action::default()
        },
        Some(1),
    ));
    let read = api.get("a").await.unwrap();
    let err = api
        .replace("a", &PostParams::default(), &read)
        .await
        .unwrap_err();
    assert_eq!(
        api_error(&err).1,
        "Conflict",
        "a real 409 from the resourceVersion precondition"
    );
    let read = api.get("a").await.unwrap();
    api.replace("a", &PostParams::default(), &read)
        .await
        .expect("the race is over");
}
