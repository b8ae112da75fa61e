//! Cost of recording one reconcile's metrics (no exporter attached), per operation. Criterion's
//! "thrpt" reads as operations per second; `docs/performance.md` records the results.

use std::hint::black_box;
use std::time::{Duration, SystemTime};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use shadow_reconciler::engine::{ObjectKey, ReconcileRecord, Sink, StepRecord};
use shadow_reconciler::plan::embedded;
use shadow_reconciler::telemetry::http::Telemetry;
use shadow_reconciler::telemetry::traces::TraceSink;
use shadow_reconciler::vocab::{Category, ErrorClass, Execution, Mode};

/// A shadow reconcile of the hostedcluster plan where the control stopped at `SSHKeySync` and the
/// candidate ran everything else in dry-run.
fn record() -> ReconcileRecord {
    let plan = embedded::load("hostedcluster").expect("shipped plan");
    let stop_at = plan
        .legacy_order()
        .iter()
        .position(|&op| plan.name_of(op) == "SSHKeySync")
        .expect("op");
    let step = |i: usize, op: shadow_reconciler::vocab::OpId, candidate: bool| {
        let o = plan.operation(op);
        let (execution, outcome, class) = match (candidate, i.cmp(&stop_at)) {
            (_, std::cmp::Ordering::Less) => (
                if candidate {
                    Execution::Reused
                } else {
                    Execution::Real
                },
                "succeeded",
                None,
            ),
            (_, std::cmp::Ordering::Equal) => (
                if candidate {
                    Execution::Reused
                } else {
                    Execution::Real
                },
                "failed",
                Some(ErrorClass::NotFound),
            ),
            (false, std::cmp::Ordering::Greater) => (Execution::NotRun, "skipped", None),
            (true, std::cmp::Ordering::Greater) => (Execution::DryRun, "succeeded", None),
        };
        StepRecord {
            operation: o.name().to_owned(),
            phase: o.phase(),
            category: if candidate {
                o.category()
            } else {
                Category::Critical
            },
            execution,
            outcome,
            error_class: class,
            message: class.map(|_| "secret ssh-key not found".to_owned()),
            blocked_by: Vec::new(),
            offset: Duration::from_micros(300 * i as u64),
            duration: Duration::from_micros(300),
            conflicts: 0,
            conflict: None,
        }
    };
    let control: Vec<StepRecord> = plan
        .legacy_order()
        .iter()
        .enumerate()
        .map(|(i, &op)| step(i, op, false))
        .collect();
    let candidate: Vec<StepRecord> = plan
        .legacy_order()
        .iter()
        .enumerate()
        .map(|(i, &op)| step(i, op, true))
        .collect();
    let unblocked = candidate
        .iter()
        .filter(|s| s.execution == Execution::DryRun)
        .map(|s| s.operation.clone())
        .collect();
    ReconcileRecord {
        object: ObjectKey {
            kind: "HostedCluster".into(),
            namespace: Some("clusters".into()),
            name: "alpha".into(),
            uid: None,
        },
        plan: plan.name().to_owned(),
        plan_hash: *plan.hash(),
        mode: Mode::Shadow,
        flag: None,
        started_at: SystemTime::now(),
        duration: Duration::from_millis(12),
        control,
        candidate,
        unblocked,
        newly_blocked: Vec::new(),
        changed: Vec::new(),
        control_first_failure: Some("SSHKeySync".into()),
        control_error: Some("secret ssh-key not found".into()),
        candidate_error: Some("secret ssh-key not found".into()),
        trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".into()),
        guard_refusals: 0,
        dry_run_requests: 1,
        write_differences: Vec::new(),
        cancelled: false,
        comparison_skipped: None,
    }
}

fn telemetry(c: &mut Criterion) {
    let telemetry = Telemetry::new();
    let metrics = telemetry.metrics().clone();
    let record = record();
    let mut group = c.benchmark_group("telemetry");
    group.throughput(Throughput::Elements(record.control.len() as u64));
    group.bench_function("metrics per reconcile", |b| {
        b.iter(|| metrics.record(black_box(&record)));
    });
    // Spans go to a batch exporter whose endpoint nobody serves: the cost measured is building and
    // queueing them, which is what a reconcile pays; export happens on the exporter's thread.
    let traces = TraceSink::http("http://127.0.0.1:9/v1/traces").expect("exporter");
    group.bench_function("metrics and spans per reconcile", |b| {
        b.iter(|| {
            metrics.record(black_box(&record));
            traces.record(black_box(&record));
        });
    });
    group.finish();
}

criterion_group!(benches, telemetry);
criterion_main!(benches);
