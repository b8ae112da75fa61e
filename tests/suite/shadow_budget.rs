//! The shadow's own request budget: a reconcile that finds it spent runs its control exactly as
//! with the shadow off (the same requests, the same outcomes), and the skip is counted in the
//! record and the metrics; within it, every request the candidate sends takes one token.

use crate::common;

use std::sync::Arc;

use common::hostedcluster::{self as fixture, PlantedReconciler};
use common::start_sim;
use kube::api::Api;
use shadow_reconciler::engine::budget::ShadowBudget;
use shadow_reconciler::engine::dryrun::USER_AGENT;
use shadow_reconciler::engine::pressure::{Backoff, LatencyRule, Pressure, Signal};
use shadow_reconciler::engine::{Engine, MemorySink, ReconcileRecord, StepRecord};
use shadow_reconciler::flag::{FlagSpec, LiveFlag, Ramp};
use shadow_reconciler::reconcilers::hostedcluster::{HostedCluster, HostedClusterReconciler};
use shadow_reconciler::sim::{Action, Audit, Match, Rule, SimConfig, Simulator};
use shadow_reconciler::telemetry::metrics::EngineMetrics;
use shadow_reconciler::vocab::{ComparisonSkip, Execution, Mode};

/// A request as the control made it: verb, path, status, whether it persisted.
type Request = (&'static str, String, u16, bool);

struct Run {
    records: Vec<ReconcileRecord>,
    /// The control's requests, in order, after the fixture was made.
    control: Vec<Request>,
    /// Requests with the dry-run client's User-Agent.
    shadow: u64,
    metrics: String,
}

/// A fresh simulator with HostedCluster `alpha` whose SSH key Secret is missing (the control
/// stops there; the candidate dry-runs what it would have unblocked, and pairs the operations
/// whose legacy code differs), reconciled `n` times in `mode` by one engine spending `budget`.
async fn run(mode: Mode, budget: &Arc<ShadowBudget>, n: usize) -> Run {
    run_with(mode, budget, n, &[]).await
}

/// [`run`] with fault rules added once the fixture is made; with rules, the control's and the
/// shadow's clients do not retry a 429 themselves (as `run` builds the shadow's).
async fn run_with(mode: Mode, budget: &Arc<ShadowBudget>, n: usize, faults: &[Rule]) -> Run {
    let (sim, client) = start_sim(SimConfig::default()).await;
    fixture::hosted_cluster(&client, "alpha", |spec| {
        spec.ssh_key = Some(fixture::local("absent-ssh-key"));
    })
    .await;
    let hc = Api::<HostedCluster>::namespaced(client.clone(), fixture::NS)
        .get("alpha")
        .await
        .unwrap();
    let plan = HostedClusterReconciler::plan();
    let flag = FlagSpec {
        mode,
        ..FlagSpec::default()
    };
    let registry = prometheus::Registry::new();
    let metrics = EngineMetrics::register(&registry).unwrap();
    metrics.shadow_budget(budget.clone());
    let sink = MemorySink::new();
    let client = if faults.is_empty() {
        client
    } else {
        common::client_for(&sim, |c| c.default_retry = false)
    };
    let engine = Engine::new(
        Arc::new(PlantedReconciler),
        plan.clone(),
        client.clone(),
        Arc::new(LiveFlag::new(flag, vec![plan]).unwrap()),
    )
    .unwrap()
    .with_shadow_budget(budget.clone())
    .with_shadow_client(client)
    .with_sink(Arc::new(sink.clone()))
    .with_sink(Arc::new(metrics.clone()));
    for rule in faults {
        sim.add_fault(rule.clone());
    }
    let mark = sim.audit(Audit::len);
    for _ in 0..n {
        engine.reconcile(Arc::new(hc.clone())).await;
    }
    assert_eq!(engine.guard().refused(), 0);
    let control = sim.audit(|a| {
        a.records()
            .filter(|r| r.seq > mark && r.user_agent != USER_AGENT)
            .map(|r| (r.verb, r.path.clone(), r.code, r.persisted))
            .collect()
    });
    let shadow = requests_of(&sim, USER_AGENT);
    Run {
        records: sink.records(),
        control,
        shadow,
        metrics: metrics.encode(&registry),
    }
}

fn requests_of(sim: &Simulator, agent: &str) -> u64 {
    sim.audit(|a| a.totals().get(agent).map_or(0, |t| t.requests))
}

/// A budget with nothing left, refilled only after some 17 minutes: no comparison can start
/// while the test runs, however slow the machine.
fn spent() -> Arc<ShadowBudget> {
    let budget = ShadowBudget::new(0.001, 1).unwrap();
    budget.spend();
    Arc::new(budget)
}

fn outcomes(steps: &[StepRecord]) -> Vec<(String, Execution, &'static str)> {
    steps
        .iter()
        .map(|s| (s.operation.clone(), s.execution, s.outcome))
        .collect()
}

#[tokio::test]
async fn a_spent_budget_leaves_the_control_as_it_is_with_the_shadow_off() {
    let off = run(Mode::Off, &Arc::new(ShadowBudget::unlimited()), 1).await;
    let budget = spent();
    let skipped = run(Mode::Shadow, &budget, 1).await;
    let (off_record, record) = (&off.records[0], &skipped.records[0]);

    // The control: the same requests in the same order, the same outcomes and error.
    assert!(off.control.len() > 10, "{:?}", off.control);
    assert_eq!(skipped.control, off.control);
    assert_eq!(outcomes(&record.control), outcomes(&off_record.control));
    assert_eq!(record.control_error, off_record.control_error);
    assert!(record.control_error.is_some(), "the SSH key is missing");

    // The shadow: nothing sent, nothing compared, the skip said.
    assert_eq!(skipped.shadow, 0);
    assert_eq!(record.mode, Mode::Shadow);
    assert_eq!(record.comparison_skipped, Some(ComparisonSkip::Budget));
    assert!(record.candidate.is_empty() && record.unblocked.is_empty());
    assert!(record.write_differences.is_empty());
    assert_eq!(record.dry_run_requests, 0);
    assert_eq!((budget.refused(), budget.sent()), (1, 1));
    assert!(
        skipped.metrics.contains(
            "shadow_reconciler_comparisons_skipped_total{mode=\"shadow\",plan=\"hostedcluster\",reason=\"budget\"} 1"
        ),
        "{}",
        skipped.metrics
    );
    assert_eq!(off_record.comparison_skipped, None);
}

/// The paired sample: `alpha`'s comparison pairs code (operations with legacy code of their own).
/// Outside the sample its control runs as with the shadow off, nothing is sent and the skip is
/// `sampled-out` (not a budget refusal); inside it, the comparison runs.
#[tokio::test]
async fn an_object_outside_the_paired_sample_runs_its_control_as_with_the_shadow_off() {
    let off = run(Mode::Off, &Arc::new(ShadowBudget::unlimited()), 1).await;
    let nobody = Arc::new(ShadowBudget::unlimited().with_paired_sample(Ramp::from_basis_points(0)));
    let out = run(Mode::Shadow, &nobody, 1).await;
    let record = &out.records[0];
    assert_eq!(out.control, off.control);
    assert_eq!(outcomes(&record.control), outcomes(&off.records[0].control));
    assert_eq!(out.shadow, 0);
    assert_eq!(record.comparison_skipped, Some(ComparisonSkip::SampledOut));
    assert!(record.candidate.is_empty() && record.write_differences.is_empty());
    assert_eq!((nobody.refused(), nobody.sent()), (0, 0));
    assert!(
        out.metrics.contains(
            "shadow_reconciler_comparisons_skipped_total{mode=\"shadow\",plan=\"hostedcluster\",reason=\"sampled-out\"} 1"
        ),
        "{}",
        out.metrics
    );
    let everyone = Arc::new(ShadowBudget::unlimited().with_paired_sample(Ramp::ALL));
    let compared = run(Mode::Shadow, &everyone, 1).await;
    assert_eq!(compared.records[0].comparison_skipped, None);
    assert!(compared.shadow > 0 && !compared.records[0].candidate.is_empty());
}

#[tokio::test]
async fn every_request_of_the_shadow_takes_a_token_and_a_started_comparison_finishes() {
    // Unlimited: every comparison runs; the budget counts exactly the requests the API server
    // saw from the dry-run client.
    let unlimited = Arc::new(ShadowBudget::unlimited());
    let compared = run(Mode::Shadow, &unlimited, 1).await;
    assert_eq!(compared.records[0].comparison_skipped, None);
    assert!(!compared.records[0].unblocked.is_empty());
    assert!(compared.shadow > 2, "{} shadow requests", compared.shadow);
    assert_eq!(unlimited.sent(), compared.shadow);

    // One token: the first comparison starts, runs to its end in debt, and every later
    // reconcile of the run finds the budget spent.
    let one = Arc::new(ShadowBudget::new(0.001, 1).unwrap());
    let bounded = run(Mode::Shadow, &one, 4).await;
    let skips: Vec<_> = bounded
        .records
        .iter()
        .map(|r| r.comparison_skipped)
        .collect();
    assert_eq!(
        skips,
        [
            None,
            Some(ComparisonSkip::Budget),
            Some(ComparisonSkip::Budget),
            Some(ComparisonSkip::Budget)
        ]
    );
    assert_eq!(
        outcomes(&bounded.records[0].candidate),
        outcomes(&compared.records[0].candidate),
        "the comparison that started is whole"
    );
    assert_eq!(bounded.shadow, one.sent());
    assert_eq!(
        bounded.shadow, compared.shadow,
        "the one comparison sent what the unlimited run's sent, every later one nothing"
    );
    assert_eq!(one.refused(), 3);
}

/// A budget with no bound whose pauses last an hour: a paused shadow stays paused while the
/// test runs, however slow the machine.
fn pausing() -> Arc<ShadowBudget> {
    let hour = std::time::Duration::from_hours(1);
    Arc::new(ShadowBudget::unlimited().with_pressure(Pressure::new(
        Backoff {
            initial: hour,
            max: hour,
        },
        LatencyRule::default(),
    )))
}

/// A 429 with `Retry-After: 1` for the first request matching `matches`.
fn throttle(matches: Match) -> Rule {
    Rule {
        name: "throttle".into(),
        matches,
        action: Action {
            status: Some(429),
            retry_after_seconds: Some(1),
            ..Action::default()
        },
        probability: None,
        count: Some(1),
        per_object: false,
    }
}

fn skips(run: &Run) -> Vec<Option<ComparisonSkip>> {
    run.records.iter().map(|r| r.comparison_skipped).collect()
}

#[tokio::test]
async fn a_throttled_shadow_request_pauses_the_shadow_and_the_control_goes_on_as_with_it_off() {
    let shadow_429 = [throttle(Match {
        user_agent: Some(format!("{USER_AGENT}*")),
        ..Match::default()
    })];
    let off = run_with(Mode::Off, &pausing(), 3, &shadow_429).await;
    let budget = pausing();
    let paused = run_with(Mode::Shadow, &budget, 3, &shadow_429).await;

    // The control: the requests and outcomes of shadow off, reconcile by reconcile.
    assert!(off.control.len() > 10, "{:?}", off.control);
    assert_eq!(paused.control, off.control);
    for (record, off_record) in paused.records.iter().zip(&off.records) {
        assert_eq!(outcomes(&record.control), outcomes(&off_record.control));
        assert_eq!(record.control_error, off_record.control_error);
    }
    // The first comparison met the 429: dropped (it measured the server's load, not the
    // candidate), and the shadow paused; the next two did not start.
    assert_eq!(skips(&paused), [Some(ComparisonSkip::Paused); 3]);
    assert!(paused.records.iter().all(|r| r.candidate.is_empty()
        && r.unblocked.is_empty()
        && r.write_differences.is_empty()));
    assert_eq!(
        (budget.pressure().pauses(), budget.pressure().refused()),
        (1, 2)
    );
    assert_eq!(budget.pressure().pauses_by(Signal::ShadowThrottled), 1);
    for line in [
        "shadow_reconciler_shadow_pauses_total{reason=\"shadow-throttled\"} 1",
        "shadow_reconciler_shadow_pauses_total{reason=\"control-slow\"} 0",
        "shadow_reconciler_shadow_paused 1",
    ] {
        assert!(paused.metrics.contains(line), "{line}:\n{}", paused.metrics);
    }
    assert!(
        paused.shadow >= 1 && paused.shadow == budget.sent(),
        "{}",
        paused.shadow
    );
    assert!(
        paused.metrics.contains(
            "shadow_reconciler_comparisons_skipped_total{mode=\"shadow\",plan=\"hostedcluster\",reason=\"paused\"} 3"
        ),
        "{}",
        paused.metrics
    );
    assert_eq!(skips(&off), [None; 3]);
}

#[tokio::test]
async fn a_throttled_control_request_pauses_the_shadow_before_its_comparison() {
    // The control reads the SSH key Secret first; its 429 comes before any shadow request.
    let control_429 = [throttle(Match {
        verbs: vec!["get".into()],
        resource: Some("secrets".into()),
        ..Match::default()
    })];
    let off = run_with(Mode::Off, &pausing(), 2, &control_429).await;
    let budget = pausing();
    let paused = run_with(Mode::Shadow, &budget, 2, &control_429).await;
    assert_eq!(paused.control, off.control);
    assert!(
        paused.control.iter().any(|r| r.2 == 429),
        "the control met the 429: {:?}",
        paused.control
    );
    for (record, off_record) in paused.records.iter().zip(&off.records) {
        assert_eq!(outcomes(&record.control), outcomes(&off_record.control));
        assert_eq!(record.control_error, off_record.control_error);
    }
    assert_eq!(skips(&paused), [Some(ComparisonSkip::Paused); 2]);
    assert_eq!(
        paused.shadow, 0,
        "the shadow sent nothing after the control's 429"
    );
    assert_eq!(budget.pressure().pauses(), 1);
    assert_eq!(budget.pressure().pauses_by(Signal::ControlThrottled), 1);
}

#[tokio::test]
async fn a_pause_ends_by_itself() {
    let shadow_429 = [throttle(Match {
        user_agent: Some(format!("{USER_AGENT}*")),
        ..Match::default()
    })];
    // A pause of 1 ms: over by the next reconcile, which compares again.
    let budget = Arc::new(ShadowBudget::unlimited().with_pressure(Pressure::new(
        Backoff {
            initial: std::time::Duration::from_millis(1),
            max: std::time::Duration::from_millis(1),
        },
        LatencyRule::default(),
    )));
    let sim_run = run_with(Mode::Shadow, &budget, 1, &shadow_429).await;
    assert_eq!(skips(&sim_run), [Some(ComparisonSkip::Paused)]);
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    assert!(!budget.pressure().paused_at(std::time::Instant::now()));
    assert!(budget.admit(None).is_ok(), "the shadow resumed by itself");
}
