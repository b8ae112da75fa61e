//! The Prometheus counters a Parquet sink keeps up to date.

/// Prometheus counters the sink keeps up to date (see `EngineMetrics::sink_health`).
#[derive(Clone, Debug)]
pub struct HealthCounters {
    /// Records dropped.
    pub dropped: prometheus::IntCounter,
    /// Files written.
    pub files: prometheus::IntCounter,
    /// Write errors.
    pub errors: prometheus::IntCounter,
    /// The parts retention removed (a local dataset with `Retention` bounds).
    pub retention: Option<super::retention::RetentionHealth>,
}

impl From<[prometheus::IntCounter; 3]> for HealthCounters {
    fn from([dropped, files, errors]: [prometheus::IntCounter; 3]) -> Self {
        Self {
            dropped,
            files,
            errors,
            retention: None,
        }
    }
}
