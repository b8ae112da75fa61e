//! The rollout driver's metric families: where each group's rollout stands, its gates, its
//! decisions and rollbacks, and whether this process drives.

use prometheus::{Gauge, GaugeVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

use super::rollout::{Decision, GateReport, Phase, Verdict};
use crate::vocab::METRIC_PREFIX as PREFIX;

/// The driver's families.
#[derive(Clone, Debug)]
pub struct RolloutMetrics {
    leader: IntGauge,
    phase: IntGaugeVec,
    step: IntGaugeVec,
    ramp: GaugeVec,
    gate: IntGaugeVec,
    gate_figure: GaugeVec,
    decisions: IntCounterVec,
    rollbacks: IntCounterVec,
    evaluations: IntCounterVec,
    last_evaluation: Gauge,
}

fn opts(suffix: &str, help: &str) -> Opts {
    Opts::new(format!("{PREFIX}_{suffix}"), help)
}

const PHASES: [Phase; 5] = [
    Phase::Progressing,
    Phase::Paused,
    Phase::RolledBack,
    Phase::Completed,
    Phase::Aborted,
];

impl RolloutMetrics {
    /// Registers the families in `registry`.
    ///
    /// # Errors
    /// A family of the same name is registered already.
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let this = Self {
            leader: IntGauge::with_opts(opts(
                "rollout_leader",
                "1 while this process holds the rollout Lease and drives the rollouts; 0 otherwise.",
            ))?,
            phase: IntGaugeVec::new(
                opts(
                    "rollout_phase",
                    "1 for the phase each rollout is in (Progressing, Paused, RolledBack, Completed, Aborted), 0 for the others.",
                ),
                &["rollout", "group", "phase"],
            )?,
            step: IntGaugeVec::new(
                opts("rollout_step", "The step each rollout is at (1 first)."),
                &["rollout", "group"],
            )?,
            ramp: GaugeVec::new(
                opts(
                    "rollout_ramp_percent",
                    "The share of objects (percent) whose control enforces the group; 0 when the group is in shadow (rolled back, aborted).",
                ),
                &["rollout", "group"],
            )?,
            gate: IntGaugeVec::new(
                opts(
                    "rollout_gate_result",
                    "Each gate's last result: 1 passed, 0 waiting, -1 failed.",
                ),
                &["rollout", "group", "gate"],
            )?,
            gate_figure: GaugeVec::new(
                opts(
                    "rollout_gate_figure",
                    "Each gate's last figures, by name (objects, failures, the comparison's lower bound, ...).",
                ),
                &["rollout", "group", "gate", "figure"],
            )?,
            decisions: IntCounterVec::new(
                opts(
                    "rollout_decisions_total",
                    "Decisions of the rollouts, by kind (Started, Advanced, Completed, RolledBack, Paused, Resumed, Promoted, Aborted, Restarted).",
                ),
                &["rollout", "group", "kind"],
            )?,
            rollbacks: IntCounterVec::new(
                opts(
                    "rollout_rollbacks_total",
                    "Automatic rollbacks: a gate failed and the group went back to shadow.",
                ),
                &["rollout", "group"],
            )?,
            evaluations: IntCounterVec::new(
                opts(
                    "rollout_evaluations_total",
                    "Evaluations of the gates, by result (Passed, Waiting, Failed, error: the data could not be read).",
                ),
                &["rollout", "group", "result"],
            )?,
            last_evaluation: Gauge::with_opts(opts(
                "rollout_last_evaluation_timestamp_seconds",
                "When this process last evaluated the rollouts as their driver (Unix seconds).",
            ))?,
        };
        for c in this.collectors() {
            registry.register(c)?;
        }
        Ok(this)
    }

    /// The families, for listing their names.
    #[must_use]
    pub fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.leader.clone()),
            Box::new(self.phase.clone()),
            Box::new(self.step.clone()),
            Box::new(self.ramp.clone()),
            Box::new(self.gate.clone()),
            Box::new(self.gate_figure.clone()),
            Box::new(self.decisions.clone()),
            Box::new(self.rollbacks.clone()),
            Box::new(self.evaluations.clone()),
            Box::new(self.last_evaluation.clone()),
        ]
    }

    /// Whether this process drives.
    pub fn leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Where a rollout stands.
    pub fn status(&self, rollout: &str, group: &str, phase: Phase, step: u32, ramp: f64) {
        for p in PHASES {
            self.phase
                .with_label_values(&[rollout, group, p.as_str()])
                .set(i64::from(p == phase));
        }
        self.step
            .with_label_values(&[rollout, group])
            .set(i64::from(step) + 1);
        self.ramp
            .with_label_values(&[rollout, group])
            .set(if phase.enforces() { ramp } else { 0.0 });
    }

    /// A gates' evaluation.
    pub fn gates(&self, rollout: &str, group: &str, report: &GateReport) {
        self.evaluations
            .with_label_values(&[rollout, group, report.result.as_str()])
            .inc();
        for g in &report.gates {
            self.gate
                .with_label_values(&[rollout, group, &g.name])
                .set(match g.result {
                    Verdict::Passed => 1,
                    Verdict::Waiting => 0,
                    Verdict::Failed => -1,
                });
            for (name, value) in &g.figures {
                self.gate_figure
                    .with_label_values(&[rollout, group, &g.name, name])
                    .set(*value);
            }
        }
        self.last_evaluation.set(crate::util::time::now_seconds());
    }

    /// The gates could not be evaluated.
    pub fn gates_error(&self, rollout: &str, group: &str) {
        self.evaluations
            .with_label_values(&[rollout, group, "error"])
            .inc();
    }

    /// A decision.
    pub fn decision(&self, rollout: &str, group: &str, d: &Decision) {
        self.decisions
            .with_label_values(&[rollout, group, &d.kind])
            .inc();
        if d.kind == "RolledBack" {
            self.rollbacks.with_label_values(&[rollout, group]).inc();
        }
    }

    /// Declares a rollout's series at zero, so alerts see them before the first rollback or
    /// the first evaluation that could not read its data.
    pub fn declare(&self, rollout: &str, group: &str) {
        self.rollbacks.with_label_values(&[rollout, group]);
        for result in [
            Verdict::Passed.as_str(),
            Verdict::Waiting.as_str(),
            Verdict::Failed.as_str(),
            "error",
        ] {
            self.evaluations
                .with_label_values(&[rollout, group, result]);
        }
    }
}
