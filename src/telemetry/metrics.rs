//! Prometheus metrics: one registry, the families of `docs/metrics.md`, fed by the records.
//!
//! Label values come from bounded sets only: plan and operation names, the enums' `as_str`, and
//! `none` for an absent value. No object name, namespace or UID is ever a label.

use std::sync::Arc;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

use crate::engine::budget::ShadowBudget;
use crate::engine::dryrun::GuardStats;
use crate::engine::pressure::Signal;
use crate::engine::{ReconcileRecord, Sink, StepRecord};

use crate::vocab::METRIC_PREFIX as PREFIX;

/// Buckets of operation durations, in seconds.
const OPERATION_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Buckets of reconcile durations, in seconds.
const RECONCILE_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The engine's metric families.
#[derive(Clone, Debug)]
pub struct EngineMetrics {
    operations: IntCounterVec,
    operation_duration: HistogramVec,
    reconciles: IntCounterVec,
    comparisons_skipped: IntCounterVec,
    reconcile_duration: HistogramVec,
    unblocked: IntCounterVec,
    newly_blocked: IntCounterVec,
    changed: IntCounterVec,
    write_differences: IntCounterVec,
    conflicts: IntCounterVec,
    flag_evaluations: IntCounterVec,
    guard_refusals: IntCounter,
    dry_run_requests: IntCounter,
    info: IntGaugeVec,
    build_info: IntGaugeVec,
    records_exported: IntCounterVec,
    records_dropped: IntCounterVec,
    files_written: IntCounterVec,
    export_errors: IntCounterVec,
    uploads: IntCounterVec,
    upload_errors: IntCounterVec,
    spool_bytes: IntGaugeVec,
    parts_removed: IntCounterVec,
    bytes_removed: IntCounterVec,
    guards: Arc<std::sync::Mutex<Vec<Arc<GuardStats>>>>,
    shadow_pauses: IntCounterVec,
    paused_now: prometheus::IntGauge,
    budget: Arc<std::sync::Mutex<Option<Arc<ShadowBudget>>>>,
}

fn name(suffix: &str) -> String {
    format!("{PREFIX}_{suffix}")
}

fn counter(
    registry: &Registry,
    suffix: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<IntCounterVec> {
    let c = IntCounterVec::new(Opts::new(name(suffix), help), labels)?;
    registry.register(Box::new(c.clone()))?;
    Ok(c)
}

fn histogram(
    registry: &Registry,
    suffix: &str,
    help: &str,
    labels: &[&str],
    buckets: &[f64],
) -> prometheus::Result<HistogramVec> {
    let h = HistogramVec::new(
        HistogramOpts::new(name(suffix), help).buckets(buckets.to_vec()),
        labels,
    )?;
    registry.register(Box::new(h.clone()))?;
    Ok(h)
}

impl EngineMetrics {
    /// Registers the families in `registry`.
    #[allow(clippy::too_many_lines)] // one entry per family: the list reads best in one place
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let guard_refusals = IntCounter::with_opts(Opts::new(
            name("shadow_guard_refusals_total"),
            "Mutating requests of the candidate refused by the shadow guard because they lacked dryRun=All (must stay 0).",
        ))?;
        registry.register(Box::new(guard_refusals.clone()))?;
        let dry_run_requests = IntCounter::with_opts(Opts::new(
            name("dry_run_requests_total"),
            "Mutating requests the candidate sent with dryRun=All.",
        ))?;
        registry.register(Box::new(dry_run_requests.clone()))?;
        let shadow_pauses = IntCounterVec::new(
            Opts::new(
                name("shadow_pauses_total"),
                "Pauses of the shadow under load, by what began them (shadow-throttled, control-throttled, control-slow).",
            ),
            &["reason"],
        )?;
        registry.register(Box::new(shadow_pauses.clone()))?;
        let paused_now = prometheus::IntGauge::with_opts(Opts::new(
            name("shadow_paused"),
            "1 while the shadow is paused under load (no comparison starts), else 0.",
        ))?;
        registry.register(Box::new(paused_now.clone()))?;
        let info = IntGaugeVec::new(
            Opts::new(
                name("info"),
                "Always 1: the plan and its content hash (12 hex digits) of each engine.",
            ),
            &["plan", "hash"],
        )?;
        registry.register(Box::new(info.clone()))?;
        let build = IntGaugeVec::new(
            Opts::new(
                name("build_info"),
                "Always 1: the version of shadow-reconciler.",
            ),
            &["version"],
        )?;
        registry.register(Box::new(build.clone()))?;
        build.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        let spool_bytes = IntGaugeVec::new(
            Opts::new(
                name("spool_bytes"),
                "Bytes of committed files in a sink's local spool, waiting to be uploaded to the object store.",
            ),
            &["sink"],
        )?;
        registry.register(Box::new(spool_bytes.clone()))?;
        Ok(Self {
            operations: counter(
                registry,
                "operations_total",
                "Operations decided, by plan, operation, phase, effective category, policy (control or candidate), execution, outcome and error class.",
                &[
                    "plan",
                    "operation",
                    "phase",
                    "category",
                    "policy",
                    "execution",
                    "outcome",
                    "error_class",
                ],
            )?,
            operation_duration: histogram(
                registry,
                "operation_duration_seconds",
                "Wall time of executed operations.",
                &["plan", "operation", "execution"],
                OPERATION_BUCKETS,
            )?,
            reconciles: counter(
                registry,
                "reconciles_total",
                "Reconciles, by plan, mode, and the control's and the candidate's result (succeeded, failed, none; cancelled for a reconcile cut short before it finished, never a failure).",
                &["plan", "mode", "control_result", "candidate_result"],
            )?,
            comparisons_skipped: counter(
                registry,
                "comparisons_skipped_total",
                "Reconciles whose control ran alone in a mode with a shadow, their comparison skipped, by reason: budget (the shadow's request budget was spent), paused (the shadow stood aside under load), sampled-out (the comparison would pair code and the object is outside the paired sample).",
                &["plan", "mode", "reason"],
            )?,
            reconcile_duration: histogram(
                registry,
                "reconcile_duration_seconds",
                "Wall time of a whole reconcile (control, candidate, condition).",
                &["plan", "mode"],
                RECONCILE_BUCKETS,
            )?,
            unblocked: counter(
                registry,
                "unblocked_operations_total",
                "Operations the candidate ran that the control did not, by the control's first failed operation and the candidate's outcome.",
                &["plan", "operation", "first_failure", "candidate_outcome"],
            )?,
            newly_blocked: counter(
                registry,
                "newly_blocked_operations_total",
                "Operations the control ran that the candidate blocked.",
                &["plan", "operation"],
            )?,
            changed: counter(
                registry,
                "changed_outcomes_total",
                "Operations both ran with different outcomes.",
                &["plan", "operation"],
            )?,
            write_differences: counter(
                registry,
                "write_differences_total",
                "Objects an operation's candidate code wrote differently from the control's code (or wrote at all, for an operation of one code path only), by what each did (none, write, delete) and whether the plan declares it.",
                &["plan", "operation", "control", "candidate", "intended"],
            )?,
            conflicts: counter(
                registry,
                "conflicts_total",
                "Steps that met 409 Conflict, by how the conflicts ended.",
                &["plan", "operation", "resolution"],
            )?,
            flag_evaluations: counter(
                registry,
                "flag_evaluations_total",
                "Reconciles by the mode the flag gave them and why (static, default, split, targeting_match, stale, error).",
                &["plan", "mode", "reason"],
            )?,
            records_exported: counter(
                registry,
                "records_exported_total",
                "Records a sink accepted.",
                &["sink"],
            )?,
            records_dropped: counter(
                registry,
                "records_dropped_total",
                "Records a sink dropped (a full queue, a failed write).",
                &["sink"],
            )?,
            files_written: counter(
                registry,
                "files_written_total",
                "Files a sink completed and made visible.",
                &["sink"],
            )?,
            parts_removed: counter(
                registry,
                "parts_removed_total",
                "Whole parts the retention of a local dataset removed, by reason (age, size).",
                &["sink", "reason"],
            )?,
            bytes_removed: counter(
                registry,
                "bytes_removed_total",
                "Bytes of the files the retention of a local dataset removed.",
                &["sink"],
            )?,
            export_errors: counter(
                registry,
                "export_errors_total",
                "Errors a sink met while exporting (each retried or reported).",
                &["sink"],
            )?,
            uploads: counter(
                registry,
                "uploads_total",
                "Files a sink uploaded whole to the object store.",
                &["sink"],
            )?,
            upload_errors: counter(
                registry,
                "upload_errors_total",
                "Failed uploads to the object store (each retried; the files stay in the spool).",
                &["sink"],
            )?,
            spool_bytes,
            guard_refusals,
            dry_run_requests,
            info,
            build_info: build,
            guards: Arc::new(std::sync::Mutex::new(Vec::new())),
            shadow_pauses,
            paused_now,
            budget: Arc::default(),
        })
    }

    /// Declares an engine: its info series, zero series for the per-operation counters a
    /// dashboard shows even when nothing happened yet (newly blocked, changed outcomes, conflicts
    /// by resolution), and its guard counters exported at every scrape.
    pub fn engine(&self, plan: &crate::plan::ReconcilePlan, guard: Arc<GuardStats>) {
        let name = plan.name();
        self.info
            .with_label_values(&[name, &plan.hash().short()])
            .set(1);
        for op in plan.operations() {
            self.newly_blocked.with_label_values(&[name, op.name()]);
            self.changed.with_label_values(&[name, op.name()]);
            for resolution in crate::engine::record::ConflictResolution::ALL {
                self.conflicts
                    .with_label_values(&[name, op.name(), resolution.as_str()]);
            }
        }
        self.guards
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(guard);
    }

    /// Exports the pauses of the process's shadow (its budget's pause state) at every scrape.
    pub fn shadow_budget(&self, budget: Arc<ShadowBudget>) {
        for signal in Signal::ALL {
            self.shadow_pauses.with_label_values(&[signal.label()]);
        }
        *self
            .budget
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(budget);
    }

    fn steps(&self, plan: &str, policy: &str, steps: &[StepRecord]) {
        for s in steps {
            let phase = phase_label(s.phase);
            let class = s
                .error_class
                .map_or("none", crate::vocab::ErrorClass::as_str);
            self.operations
                .with_label_values(&[
                    plan,
                    &s.operation,
                    &phase,
                    s.category.as_str(),
                    policy,
                    s.execution.as_str(),
                    s.outcome,
                    class,
                ])
                .inc();
            if matches!(
                s.execution,
                crate::vocab::Execution::Real | crate::vocab::Execution::DryRun
            ) {
                self.operation_duration
                    .with_label_values(&[plan, &s.operation, s.execution.as_str()])
                    .observe(s.duration.as_secs_f64());
            }
            if let Some(resolution) = s.conflict {
                self.conflicts
                    .with_label_values(&[plan, &s.operation, resolution.as_str()])
                    .inc();
            }
        }
    }

    /// Sink health: `records_dropped_total`, `files_written_total`, `export_errors_total`,
    /// `parts_removed_total` and `bytes_removed_total` of one sink (the Parquet sink reports
    /// through these).
    #[must_use]
    pub fn sink_health(&self, sink: &str) -> crate::dataset::HealthCounters {
        crate::dataset::HealthCounters {
            dropped: self.records_dropped.with_label_values(&[sink]),
            files: self.files_written.with_label_values(&[sink]),
            errors: self.export_errors.with_label_values(&[sink]),
            retention: Some(crate::dataset::retention::RetentionHealth {
                by_age: self.parts_removed.with_label_values(&[sink, "age"]),
                by_size: self.parts_removed.with_label_values(&[sink, "size"]),
                bytes: self.bytes_removed.with_label_values(&[sink]),
            }),
        }
    }

    /// Upload health of `sink`: `uploads_total`, `upload_errors_total` and `spool_bytes`.
    pub fn upload_health(&self, sink: &str) -> crate::dataset::upload::UploadHealth {
        crate::dataset::upload::UploadHealth {
            uploads: self.uploads.with_label_values(&[sink]),
            errors: self.upload_errors.with_label_values(&[sink]),
            spool_bytes: self.spool_bytes.with_label_values(&[sink]),
        }
    }

    /// The text exposition of every family of `registry`, with the guard counters brought up to
    /// date first.
    pub fn encode(&self, registry: &Registry) -> String {
        let (refused, dry_runs) = self
            .guards
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .fold((0, 0), |(r, d), g| {
                (r + g.refused(), d + g.dry_run_requests())
            });
        self.guard_refusals
            .inc_by(refused.saturating_sub(self.guard_refusals.get()));
        self.dry_run_requests
            .inc_by(dry_runs.saturating_sub(self.dry_run_requests.get()));
        if let Some(budget) = self
            .budget
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
        {
            let pressure = budget.pressure();
            for signal in Signal::ALL {
                let counter = self.shadow_pauses.with_label_values(&[signal.label()]);
                counter.inc_by(pressure.pauses_by(signal).saturating_sub(counter.get()));
            }
            self.paused_now
                .set(i64::from(pressure.paused_at(std::time::Instant::now())));
        }
        let mut buffer = Vec::new();
        let encoder = TextEncoder::new();
        // Encoding gathered families into a Vec cannot fail.
        let _ = encoder.encode(&registry.gather(), &mut buffer);
        String::from_utf8(buffer).unwrap_or_default()
    }
}

/// The names of every family registered by [`EngineMetrics::register`], from the collectors'
/// descriptors (a family without series yet is not in `Registry::gather`).
#[must_use]
pub fn family_names(metrics: &EngineMetrics) -> Vec<String> {
    use prometheus::core::Collector;
    let collectors: [&dyn Collector; 26] = [
        &metrics.operations,
        &metrics.shadow_pauses,
        &metrics.paused_now,
        &metrics.comparisons_skipped,
        &metrics.write_differences,
        &metrics.operation_duration,
        &metrics.reconciles,
        &metrics.reconcile_duration,
        &metrics.unblocked,
        &metrics.newly_blocked,
        &metrics.changed,
        &metrics.conflicts,
        &metrics.flag_evaluations,
        &metrics.guard_refusals,
        &metrics.dry_run_requests,
        &metrics.info,
        &metrics.build_info,
        &metrics.records_exported,
        &metrics.records_dropped,
        &metrics.files_written,
        &metrics.export_errors,
        &metrics.uploads,
        &metrics.upload_errors,
        &metrics.spool_bytes,
        &metrics.parts_removed,
        &metrics.bytes_removed,
    ];
    collectors
        .iter()
        .flat_map(|c| c.desc())
        .map(|d| d.fq_name.clone())
        .collect()
}

/// A phase's label value: plans have few phases, whose labels need no allocation per step.
fn phase_label(phase: u32) -> std::borrow::Cow<'static, str> {
    const PHASES: [&str; 16] = [
        "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15",
    ];
    usize::try_from(phase)
        .ok()
        .and_then(|p| PHASES.get(p))
        .map_or_else(|| phase.to_string().into(), |p| (*p).into())
}

fn result(error: Option<&String>, ran: bool) -> &'static str {
    match (ran, error) {
        (false, _) => "none",
        (true, None) => "succeeded",
        (true, Some(_)) => "failed",
    }
}

impl Sink for EngineMetrics {
    fn record(&self, r: &ReconcileRecord) {
        let plan = r.plan.as_str();
        let mode = r.mode.as_str();
        let (control, candidate) = if r.cancelled {
            ("cancelled", "cancelled")
        } else {
            (
                result(r.control_error.as_ref(), true),
                result(r.candidate_error.as_ref(), !r.candidate.is_empty()),
            )
        };
        self.reconciles
            .with_label_values(&[plan, mode, control, candidate])
            .inc();
        if let Some(reason) = r.comparison_skipped {
            self.comparisons_skipped
                .with_label_values(&[plan, mode, reason.as_str()])
                .inc();
        }
        self.reconcile_duration
            .with_label_values(&[plan, mode])
            .observe(r.duration.as_secs_f64());
        self.steps(plan, "control", &r.control);
        self.steps(plan, "candidate", &r.candidate);
        if let Some(flag) = &r.flag {
            self.flag_evaluations
                .with_label_values(&[plan, mode, flag.reason.as_str()])
                .inc();
        }
        let first = r.control_first_failure.as_deref().unwrap_or("none");
        for op in &r.unblocked {
            let outcome = r.candidate_step(op).map_or("unknown", |s| s.outcome);
            self.unblocked
                .with_label_values(&[plan, op, first, outcome])
                .inc();
        }
        for op in &r.newly_blocked {
            self.newly_blocked.with_label_values(&[plan, op]).inc();
        }
        for op in &r.changed {
            self.changed.with_label_values(&[plan, op]).inc();
        }
        for d in &r.write_differences {
            self.write_differences
                .with_label_values(&[
                    plan,
                    &d.operation,
                    d.control_action().as_str(),
                    d.candidate_action().as_str(),
                    if d.intended { "true" } else { "false" },
                ])
                .inc();
        }
        self.records_exported.with_label_values(&["metrics"]).inc();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn phase_labels_are_the_numbers() {
        for phase in [0, 1, 9, 15, 16, 123, u32::MAX] {
            assert_eq!(super::phase_label(phase), phase.to_string());
        }
    }
}
