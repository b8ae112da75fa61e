//! The flag's metric families: what is in force, its changes, refused ConfigMaps and the watch.
//! (Each reconcile's evaluation is counted from its record, with the engine's families.)

use prometheus::{Gauge, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

use super::{Field, FlagState};
use crate::vocab::METRIC_PREFIX as PREFIX;
use crate::vocab::Mode;

/// The flag's families.
#[derive(Clone, Debug)]
pub struct FlagMetrics {
    info: IntGaugeVec,
    ramp: Gauge,
    valid: IntGauge,
    synced: IntGauge,
    changes: IntCounterVec,
    errors: IntCounterVec,
    last_change: Gauge,
}

fn opts(suffix: &str, help: &str) -> Opts {
    Opts::new(format!("{PREFIX}_{suffix}"), help)
}

impl FlagMetrics {
    /// Registers the families in `registry`.
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let this = Self {
            info: IntGaugeVec::new(
                opts(
                    "flag_info",
                    "Always 1: the mode of the flag in force and where it came from (configmap or command-line).",
                ),
                &["mode", "source"],
            )?,
            ramp: Gauge::with_opts(opts(
                "flag_ramp_percent",
                "The share of objects (percent) that get the flag's mode; the others get the mode below it.",
            ))?,
            valid: IntGauge::with_opts(opts(
                "flag_valid",
                "1 when the flag ConfigMap in the cluster is the flag in force; 0 when it is invalid and the last valid flag is kept.",
            ))?,
            synced: IntGauge::with_opts(opts(
                "flag_watch_synced",
                "1 while the watch of the flag ConfigMap is listed and running; 0 before its first list and after a watch error until it recovers.",
            ))?,
            changes: IntCounterVec::new(
                opts(
                    "flag_changes_total",
                    "Changes of the flag in force, by mode before and after.",
                ),
                &["from", "to"],
            )?,
            errors: IntCounterVec::new(
                opts(
                    "flag_errors_total",
                    "Flag ConfigMaps refused, by the first invalid field (unknown: a key the flag does not know).",
                ),
                &["field"],
            )?,
            last_change: Gauge::with_opts(opts(
                "flag_last_change_timestamp_seconds",
                "When the flag in force last changed (Unix seconds); the start of the process until the first change.",
            ))?,
        };
        registry.register(Box::new(this.info.clone()))?;
        registry.register(Box::new(this.ramp.clone()))?;
        registry.register(Box::new(this.valid.clone()))?;
        registry.register(Box::new(this.synced.clone()))?;
        registry.register(Box::new(this.changes.clone()))?;
        registry.register(Box::new(this.errors.clone()))?;
        registry.register(Box::new(this.last_change.clone()))?;
        // Zero series, so dashboards and alerts see the families before the first event.
        for field in Field::ALL {
            this.errors.with_label_values(&[field.as_str()]);
        }
        for from in [Mode::Off, Mode::Shadow, Mode::Enforce] {
            for to in [Mode::Off, Mode::Shadow, Mode::Enforce] {
                this.changes
                    .with_label_values(&[from.as_str(), to.as_str()]);
            }
        }
        this.last_change.set(now());
        Ok(this)
    }

    /// Shows `state` as the flag in force.
    pub fn in_force(&self, state: &FlagState) {
        self.info.reset();
        self.info
            .with_label_values(&[state.spec.mode.as_str(), state.source.as_str()])
            .set(1);
        self.ramp.set(state.spec.ramp.percent());
        self.valid.set(i64::from(!state.stale));
    }

    /// Counts a change of the flag in force.
    pub fn changed(&self, from: Mode, to: Mode) {
        self.changes
            .with_label_values(&[from.as_str(), to.as_str()])
            .inc();
        self.last_change.set(now());
    }

    /// Counts a refused ConfigMap.
    pub fn refused(&self, field: Field) {
        self.errors.with_label_values(&[field.as_str()]).inc();
        self.valid.set(0);
    }

    /// Whether the watch is listed and running.
    pub fn synced(&self, synced: bool) {
        self.synced.set(i64::from(synced));
    }

    /// The families' collectors, for the metrics reference test.
    #[must_use]
    pub fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.info.clone()),
            Box::new(self.ramp.clone()),
            Box::new(self.valid.clone()),
            Box::new(self.synced.clone()),
            Box::new(self.changes.clone()),
            Box::new(self.errors.clone()),
            Box::new(self.last_change.clone()),
        ]
    }
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
