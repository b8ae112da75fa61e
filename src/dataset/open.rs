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

/// How a sink writes: the file limits, the queue, the cluster column, retention, and for an object
/// store the spool. The one carrier of the dataset's options: its [`Default`] holds the defaults
/// (the command line's `--parquet-*` options take theirs from it), and [`config`](Self::config)
/// turns it into a sink's configuration.
#[derive(Clone, Debug)]
pub struct SinkOptions {
    /// The cluster the records come from (checked by
    /// [`check_cluster`](super::encode::check_cluster)): a column of every row and the first
    /// partition level (`cluster=NAME/`), so one bucket holds a fleet.
    pub cluster: String,
    /// Rows per row group, counted in step rows (the larger table); at most a file's.
    pub row_group_rows: usize,
    /// A file closes at this many step rows...
    pub max_file_rows: usize,
    /// ...or this many bytes of Arrow data (the values; the file is smaller after encoding, and
    /// the builders' spare capacity, up to a row group's worth, comes on top in memory)...
    pub max_file_bytes: usize,
    /// ...or this long after its first record.
    pub max_file_age: Duration,
    /// Records in flight between the engine and the writer before new ones are dropped.
    pub capacity: usize,
    /// How long a record waits for room in a full queue before it is dropped (zero: never
    /// waits; a reconcile must not).
    pub wait_when_full: Duration,
    /// An object store only: the directory parts wait in until uploaded (kept across restarts).
    pub spool: PathBuf,
    /// An object store only: past this many bytes in the spool, new records are dropped and
    /// counted.
    pub spool_max_bytes: u64,
    /// A local dataset only: how much of it stays (default: everything).
    pub retention: super::retention::Retention,
}

impl Default for SinkOptions {
    /// Row groups of 65,536 step rows; files of at most 262,144 step rows, 64 MiB of Arrow data
    /// or 60 s; 10,000 records in flight, none waiting; the spool `shadow-spool`, at most 1 GiB;
    /// everything kept; cluster `default`.
    fn default() -> Self {
        Self {
            cluster: super::encode::DEFAULT_CLUSTER.to_owned(),
            row_group_rows: 65_536,
            max_file_rows: 262_144,
            max_file_bytes: 64 << 20,
            max_file_age: Duration::from_mins(1),
            capacity: 10_000,
            wait_when_full: Duration::ZERO,
            spool: PathBuf::from("shadow-spool"),
            spool_max_bytes: 1 << 30,
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
    /// The sink's configuration for files in `dir`: these options, retries after a failed
    /// write from 1 s up to 30 s, no lock and no upload yet.
    #[must_use]
    pub fn config(&self, dir: impl Into<PathBuf>) -> SinkConfig {
        SinkConfig {
            dir: dir.into(),
            options: self.clone(),
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            upload: None,
            lock: None,
        }
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
                let spool = &self.spool;
                let lock = lock(spool, Role::Spool, command)?;
                let mut config = self.config(spool);
                config.lock = Some(lock);
                config.upload = Some(UploadConfig {
                    remote: remote.clone(),
                    max_spool_bytes: self.spool_max_bytes,
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
