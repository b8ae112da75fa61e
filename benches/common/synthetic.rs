//! Synthetic shadow reconciles for the benchmarks: the same records for the Parquet writer's
//! throughput, the analyzer's, and the analyzer at scale.

use std::time::{Duration, SystemTime};

use shadow_reconciler::engine::{ObjectKey, ReconcileRecord, StepRecord};
use shadow_reconciler::plan::ReconcilePlan;
use shadow_reconciler::util::Rng;
use shadow_reconciler::vocab::{Category, ErrorClass, Execution, Mode};

/// The `i`th shadow reconcile of `plan`, of one of `population` objects: the control stops at a random operation (or succeeds), the
/// candidate reuses what the control ran and dry-runs the rest, 5% of which fail.
pub fn record(plan: &ReconcilePlan, i: usize, population: usize, rng: &mut Rng) -> ReconcileRecord {
    let n = plan.legacy_order().len();
    let stop_at = if rng.next_f64() < 0.3 {
        usize::try_from(rng.next_u64() % n as u64).unwrap_or(0)
    } else {
        n
    };
    let mut step = |seq: usize, op: shadow_reconciler::vocab::OpId, candidate: bool| {
        let o = plan.operation(op);
        let (execution, outcome, class) = match (candidate, seq.cmp(&stop_at)) {
            (false, std::cmp::Ordering::Less) => (Execution::Real, "succeeded", None),
            (true, std::cmp::Ordering::Less) => (Execution::Reused, "succeeded", None),
            (false, std::cmp::Ordering::Equal) => {
                (Execution::Real, "failed", Some(ErrorClass::NotFound))
            }
            (true, std::cmp::Ordering::Equal) => {
                (Execution::Reused, "failed", Some(ErrorClass::NotFound))
            }
            (false, std::cmp::Ordering::Greater) => (Execution::NotRun, "skipped", None),
            (true, std::cmp::Ordering::Greater) if rng.next_f64() < 0.05 => {
                (Execution::DryRun, "failed", Some(ErrorClass::Conflict))
            }
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
            message: class.map(|c| format!("{}: secrets \"hc-{i}-ssh-key\" not found", c.as_str())),
            blocked_by: if outcome == "skipped" {
                vec![plan.name_of(plan.legacy_order()[stop_at]).to_owned()]
            } else {
                Vec::new()
            },
            offset: Duration::from_micros(300 * seq as u64),
            duration: Duration::from_micros(300),
            conflicts: 0,
            conflict: None,
        }
    };
    let control: Vec<StepRecord> = plan
        .legacy_order()
        .iter()
        .enumerate()
        .map(|(seq, &op)| step(seq, op, false))
        .collect();
    let candidate: Vec<StepRecord> = plan
        .legacy_order()
        .iter()
        .enumerate()
        .map(|(seq, &op)| step(seq, op, true))
        .collect();
    ReconcileRecord {
        object: ObjectKey {
            kind: "HostedCluster".into(),
            namespace: Some(format!("team-{}", i % 10)),
            name: format!("hc-{:04}", i % population),
            uid: Some(format!("00000000-0000-0000-0000-{i:012}")),
        },
        plan: plan.name().to_owned(),
        plan_hash: *plan.hash(),
        mode: Mode::Shadow,
        flag: None,
        started_at: SystemTime::now(),
        duration: Duration::from_millis(12),
        unblocked: candidate
            .iter()
            .filter(|s| s.execution == Execution::DryRun)
            .map(|s| s.operation.clone())
            .collect(),
        control_first_failure: (stop_at < n)
            .then(|| plan.name_of(plan.legacy_order()[stop_at]).to_owned()),
        control_error: (stop_at < n).then(|| "secrets \"ssh-key\" not found".to_owned()),
        candidate_error: None,
        control,
        candidate,
        newly_blocked: Vec::new(),
        changed: Vec::new(),
        trace_id: Some(format!("{:016x}{:016x}", rng.next_u64(), i)),
        guard_refusals: 0,
        dry_run_requests: 3,
        write_differences: Vec::new(),
        cancelled: false,
        comparison_skipped: None,
    }
}
