//! What a Parquet sink reports about itself: the Prometheus counters it keeps up to date, and
//! how its shutdown can fail.

use std::time::Duration;

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

/// Errors of [`ParquetSink::shutdown`](super::ParquetSink::shutdown).
#[derive(Debug, thiserror::Error)]
pub enum ShutdownError {
    /// `shutdown` was called before.
    #[error("the Parquet sink was already shut down")]
    AlreadyShutDown,
    /// The writer did not finish within the grace period.
    #[error(
        "the Parquet sink did not finish within {grace:?}: {pending} accepted records may not be on disk{}",
        last_error.as_ref().map_or_else(String::new, |e| format!(" (the last write error: {e})"))
    )]
    GraceExpired {
        /// The grace period.
        grace: Duration,
        /// Records accepted but not yet written.
        pending: u64,
        /// The last write error, naming the path and the cause (a full disk, say).
        last_error: Option<String>,
    },
    /// Everything was written to the spool, but not all of it uploaded within the grace period.
    #[error(
        "the uploads did not finish within {grace:?}: {parts} parts stay in the spool {}, to be uploaded by the next start with it{}",
        spool.display(),
        last_error.as_ref().map_or_else(String::new, |e| format!(" (the last upload error: {e})"))
    )]
    UploadIncomplete {
        /// The grace period.
        grace: Duration,
        /// Whole parts left in the spool.
        parts: u64,
        /// The spool.
        spool: std::path::PathBuf,
        /// The last upload error.
        last_error: Option<String>,
    },
}
