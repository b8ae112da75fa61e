//! A sink opened at a [`Location`]: a local dataset directory, or an object store's prefix
//! written through a local spool. The one way `run`, `ingest` and a controller embedding the
//! engine start one; `simulate`, which picks its own run directory, starts it on a directory it
//! locked itself ([`SinkOptions::start_locked`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::health::HealthCounters;
use super::upload::{UploadConfig, UploadHealth};
use super::{DatasetLock, Location, LockError, ParquetSink, SinkConfig};

/// How a sink writes: the file limits, the queue, the cluster column, and for an object store
/// the spool.
#[derive(Clone, Debug)]
pub struct SinkOptions {
    /// The cluster the records come from (a column of every row, and the partition).
    pub cluster: String,
    /// A file closes at this many step rows.
    pub max_file_rows: usize,
    /// A file also closes at this many bytes of buffered data.
    pub max_file_bytes: usize,
    /// A file also closes this long after its first record.
    pub max_file_age: Duration,
    /// Records in flight between the engine and the writer before new ones are dropped.
    pub capacity: usize,
    /// How long a record waits for room in a full queue before it is dropped (zero: never
    /// waits; a reconcile must not).
    pub wait_when_full: Duration,
    /// An object store only: the directory parts wait in until uploaded (default
    /// `shadow-spool`, kept across restarts).
    pub spool: Option<PathBuf>,
    /// An object store only: past this many bytes in the spool, new records are dropped and
    /// counted (default 1 GiB).
    pub spool_max_bytes: Option<u64>,
    /// A local dataset only: how much of it stays (default: everything).
    pub retention: super::retention::Retention,
}

impl Default for SinkOptions {
    fn default() -> Self {
        let SinkConfig {
            writer,
            capacity,
            wait_when_full,
            ..
        } = SinkConfig::new(PathBuf::new());
        Self {
            cluster: super::encode::DEFAULT_CLUSTER.to_owned(),
            max_file_rows: writer.max_file_rows,
            max_file_bytes: writer.max_file_bytes,
            max_file_age: writer.max_file_age,
            capacity,
            wait_when_full,
            spool: None,
            spool_max_bytes: None,
            retention: super::retention::Retention::default(),
        }
    }
}

/// The counters a sink keeps up to date for `/readyz` and the metrics.
#[derive(Clone, Debug, Default)]
pub struct SinkHealth {
    /// The writer's.
    pub writes: Option<HealthCounters>,
    /// The uploader's (an object store only).
    pub uploads: Option<UploadHealth>,
}

/// Which directory of a sink could not be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The dataset directory.
    Dataset,
    /// An object store's spool.
    Spool,
}

/// Why a sink could not be opened: the directory, its role, and the cause. It reads
/// `DIR: CAUSE`; a command line puts the option that named the directory before it
/// (`--parquet-dir DIR: ...`).
#[derive(Debug)]
pub struct OpenError {
    /// The directory.
    pub dir: PathBuf,
    /// The dataset's, or the spool.
    pub role: Role,
    /// What is wrong with it (boxed: a lock's refusal carries the holder's whole record).
    pub cause: Box<OpenCause>,
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.dir.display(), self.cause)
    }
}

/// Its source is the cause's (the I/O error), the cause itself being in the message.
impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.cause)
    }
}

/// What is wrong with a sink's directory.
#[derive(Debug, thiserror::Error)]
pub enum OpenCause {
    /// A file is where the directory should be.
    #[error("this is a file, not a directory; give a directory (it is created if missing)")]
    NotADirectory,
    /// The directory cannot be created.
    #[error("cannot create the directory")]
    Create(#[source] std::io::Error),
    /// No file can be written in it.
    #[error("cannot write a file there")]
    NotWritable(#[source] std::io::Error),
    /// Another writer holds it, or its lock cannot be taken.
    #[error(transparent)]
    Lock(#[from] LockError),
}

impl SinkOptions {
    /// The sink's configuration for files in `dir`.
    #[must_use]
    pub fn config(&self, dir: &Path) -> SinkConfig {
        let mut config = SinkConfig::new(dir);
        config.writer.cluster = self.cluster.as_str().into();
        config.capacity = self.capacity;
        config.wait_when_full = self.wait_when_full;
        config.writer.max_file_rows = self.max_file_rows;
        config.writer.row_group_rows = config
            .writer
            .row_group_rows
            .min(config.writer.max_file_rows);
        config.writer.max_file_bytes = self.max_file_bytes;
        config.writer.max_file_age = self.max_file_age;
        config.retention = self.retention;
        config
    }

    /// Opens a sink at `location`, once its directory takes files (created if missing) and this
    /// process holds its lock (one writer per dataset directory; `command` is what the lock
    /// file says of this writer): a directory that cannot be written, or that another writer
    /// writes, is an error at once, instead of at the first write. An object store's prefix is
    /// written through the spool (locked like a dataset directory) and uploaded part by part;
    /// several writers may share a prefix (every part's key carries its writer's random
    /// instance id, and nothing deletes what is in the store).
    ///
    /// ```
    /// use shadow_reconciler::dataset::{Location, SinkHealth, SinkOptions};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let location = Location::parse(dir.path().to_str().unwrap()).unwrap();
    /// let sink = SinkOptions::default()
    ///     .open(&location, SinkHealth::default(), "my-controller")
    ///     .unwrap();
    /// // A second writer of the same directory is refused, naming the first.
    /// let refused = SinkOptions::default()
    ///     .open(&location, SinkHealth::default(), "another")
    ///     .unwrap_err();
    /// assert!(refused.to_string().contains("is being written by `my-controller`"));
    /// let stats = sink.shutdown(std::time::Duration::from_secs(10)).unwrap();
    /// assert_eq!(stats.lost, 0);
    /// ```
    pub fn open(
        &self,
        location: &Location,
        health: SinkHealth,
        command: &str,
    ) -> Result<ParquetSink, OpenError> {
        match location {
            Location::Local(dir) => {
                let lock = lock(dir, Role::Dataset, command)?;
                Ok(self.start_locked(dir, lock, health.writes))
            }
            Location::Remote(remote) => {
                let spool = self
                    .spool
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("shadow-spool"));
                let lock = lock(&spool, Role::Spool, command)?;
                let mut config = self.config(&spool);
                config.lock = Some(lock);
                config.upload = Some(UploadConfig {
                    remote: remote.clone(),
                    max_spool_bytes: self.spool_max_bytes.unwrap_or(1 << 30),
                    part_bytes: super::store::UPLOAD_PART_BYTES,
                });
                Ok(ParquetSink::start_with_upload(
                    config,
                    health.writes,
                    health.uploads,
                ))
            }
        }
    }

    /// A sink into the local directory `dir`, whose `lock` the caller took.
    #[must_use]
    pub fn start_locked(
        &self,
        dir: &Path,
        lock: Arc<DatasetLock>,
        health: Option<HealthCounters>,
    ) -> ParquetSink {
        let mut config = self.config(dir);
        config.lock = Some(lock);
        ParquetSink::start(config, health)
    }
}

/// Creates `dir` if missing, checks that a file can be written there, and takes its lock for
/// this process, saying when it takes over from a writer that died holding it.
///
/// # Errors
/// What is wrong with `dir` (as `role`).
pub fn lock(dir: &Path, role: Role, command: &str) -> Result<Arc<DatasetLock>, OpenError> {
    let fail = |cause| OpenError {
        dir: dir.to_owned(),
        role,
        cause: Box::new(cause),
    };
    writable(dir).map_err(fail)?;
    let lock = DatasetLock::acquire(dir, command).map_err(|e| fail(e.into()))?;
    if let Some(dead) = lock.taken_over() {
        tracing::warn!(
            dir = %dir.display(),
            previous = %dead,
            "took over the dataset's lock from a writer that ended without releasing it (killed, or its node stopped); its unfinished files are repaired or removed"
        );
    }
    Ok(Arc::new(lock))
}

/// Creates `dir` if missing and checks that a file can be written there.
fn writable(dir: &Path) -> Result<(), OpenCause> {
    if dir.exists() && !dir.is_dir() {
        return Err(OpenCause::NotADirectory);
    }
    std::fs::create_dir_all(dir).map_err(OpenCause::Create)?;
    if !dir.is_dir() {
        return Err(OpenCause::NotADirectory);
    }
    let probe = dir.join(format!(".write-check-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(OpenCause::NotWritable)?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}
