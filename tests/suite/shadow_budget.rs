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
use shadow_reconciler::engine::{Engine, MemorySink, ReconcileRecord, StepRecord};
use shadow_reconciler::flag::{FlagSpec, LiveFlag};
use shadow_reconciler::reconcilers::hostedcluster::{HostedCluster, HostedClusterReconciler};
use shadow_reconciler::sim::{Audit, SimConfig, Simulator};
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
    let sink = MemorySink::new();
    let engine = Engine::new(
        Arc::new(PlantedReconciler),
        plan.clone(),
        client.clone(),
        Arc::new(LiveFlag::new(flag, vec![plan]).unwrap()),
    )
    .unwrap()
    .with_shadow_budget(budget.clone())
    .with_sink(Arc::new(sink.clone()))
    .with_sink(Arc::new(metrics.clone()));
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
