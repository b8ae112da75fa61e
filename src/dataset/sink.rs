//! The Parquet sink: a bounded channel between the engine and a writer thread. A slow or failing
//! disk never blocks a reconcile: when the channel is full the record is dropped, counted, logged
//! and exported as a metric. A caller that may wait (`ingest`, whose exporters wait for the
//! answer) sets [`SinkOptions::wait_when_full`]: its records wait that long for room first.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::health::{HealthCounters, ShutdownError};
use super::open::SinkOptions;
use super::repair::remove_stale_temporaries;
use super::writer::DatasetWriter;
use crate::engine::{ReconcileRecord, Sink};

/// How the sink runs: its directory and options, and what the process adds (retries, the lock,
/// an upload). Built by [`SinkOptions::config`], which holds the defaults.
#[derive(Clone, Debug)]
pub struct SinkConfig {
    /// The directory the files are written to: the dataset's root, or an object store's spool.
    pub dir: PathBuf,
    /// Files, rotation, the queue, retention: the dataset's options.
    pub options: SinkOptions,
    /// The first wait after a failed write; doubled after each failure up to `max_backoff`.
    pub backoff: Duration,
    /// The longest wait between retries.
    pub max_backoff: Duration,
    /// Upload committed parts to an object store, `dir` being the local spool.
    pub upload: Option<super::upload::UploadConfig>,
    /// The lock of `dir` ([`DatasetLock`](super::DatasetLock)), held by the writer (and
    /// uploader) threads until they end, so that it outlasts a shutdown whose grace expired.
    /// Take it before starting the sink: the repair at start then runs under it.
    pub lock: Option<Arc<super::DatasetLock>>,
}

impl SinkConfig {
    /// [`SinkOptions::default`]'s configuration for `dir`.
    #[must_use]
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        SinkOptions::default().config(dir)
    }
}

/// The sink's counters.
#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicU64,
    dropped: AtomicU64,
    written: AtomicU64,
    files: AtomicU64,
    errors: AtomicU64,
    lost: AtomicU64,
    /// Records the writer took from the channel.
    taken: AtomicU64,
}

/// A snapshot of the sink's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SinkStats {
    /// Records accepted into the channel.
    pub accepted: u64,
    /// Records dropped because the channel was full (or the sink shut down).
    pub dropped: u64,
    /// Records whose rows are in committed files.
    pub written: u64,
    /// Files committed.
    pub files: u64,
    /// Failed writes (each retried).
    pub errors: u64,
    /// Accepted records given up on: retries still failing when the shutdown grace ran out.
    pub lost: u64,
    /// Accepted records still in the channel, not yet taken by the writer.
    pub queued: u64,
}

enum Message {
    Record(Box<ReconcileRecord>),
    Flush(SyncSender<()>),
}

struct Shared {
    counters: Counters,
    /// The last write error (path and cause), for the messages that report failures.
    last_error: Mutex<Option<String>>,
    /// Whether the last write failed (no write succeeded since): `/readyz` says so.
    failing: AtomicBool,
    health: Option<HealthCounters>,
    /// Set by `shutdown`: the writer stops retrying at `deadline`.
    stopping: AtomicBool,
    deadline: Mutex<Option<Instant>>,
    paused: Mutex<bool>,
    resumed: std::sync::Condvar,
    /// The uploader's state, when the dataset goes to an object store.
    upload: Option<(Arc<super::upload::Shared>, u64)>,
    /// Retention of a local dataset, applied after each rotation.
    retention: Option<super::retention::Bound>,
}

/// Writes every record it is given into the Parquet dataset, off the reconcile path.
pub struct ParquetSink {
    sender: Mutex<Option<SyncSender<Message>>>,
    done: Mutex<Option<Receiver<()>>>,
    uploaded: Mutex<Option<Receiver<bool>>>,
    shared: Arc<Shared>,
    dir: std::path::PathBuf,
    wait_when_full: Duration,
}

impl std::fmt::Debug for ParquetSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetSink")
            .field("dir", &self.dir)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl ParquetSink {
    /// Starts the writer thread. Temporary files that writers which died left behind (older than
    /// ten minutes) are removed first.
    ///
    /// # Panics
    /// If the operating system cannot start a thread.
    #[must_use]
    pub fn start(config: SinkConfig, health: Option<HealthCounters>) -> Self {
        Self::start_with_upload(config, health, None)
    }

    /// [`start`](Self::start), and with `config.upload` an uploader thread that moves committed
    /// parts from the spool (`config.dir`) to the object store, keeping `upload_health`
    /// up to date.
    ///
    /// # Panics
    /// If the operating system cannot start a thread.
    #[must_use]
    pub fn start_with_upload(
        config: SinkConfig,
        health: Option<HealthCounters>,
        upload_health: Option<super::upload::UploadHealth>,
    ) -> Self {
        let (completed, orphans) =
            super::repair::repair_half_rotations(&config.dir, Duration::from_mins(10));
        if completed + orphans > 0 {
            tracing::warn!(dir = %config.dir.display(), completed, removed = orphans, "repaired the halves of rotations a previous writer left: reconciles files completed from their prepared temporary files, orphan steps files removed");
        }
        let removed = remove_stale_temporaries(&config.dir, Duration::from_mins(10));
        if removed > 0 {
            tracing::warn!(dir = %config.dir.display(), removed, "removed temporary Parquet files a previous writer left");
        }
        let (sender, receiver) = mpsc::sync_channel(config.options.capacity.max(1));
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        let retention = (config.upload.is_none() && config.options.retention.bounds()).then(|| {
            let h = health.as_ref().and_then(|h| h.retention.clone());
            super::retention::Bound::new(config.dir.clone(), config.options.retention, h)
        });
        let shared = Arc::new(Shared {
            retention,
            counters: Counters::default(),
            last_error: Mutex::new(None),
            failing: AtomicBool::new(false),
            health,
            stopping: AtomicBool::new(false),
            deadline: Mutex::new(None),
            paused: Mutex::new(false),
            resumed: std::sync::Condvar::new(),
            upload: config.upload.as_ref().map(|u| {
                (
                    Arc::new(super::upload::Shared::default()),
                    u.max_spool_bytes,
                )
            }),
        });
        let uploaded = shared.upload.as_ref().map(|(state, _)| {
            let (uploaded_tx, uploaded_rx) = mpsc::sync_channel(1);
            let (state, spool) = (state.clone(), config.dir.clone());
            let (upload, backoff) = (
                config.upload.clone().expect("an upload configuration"),
                (config.backoff, config.max_backoff),
            );
            let lock = config.lock.clone();
            std::thread::Builder::new()
                .name("parquet-upload".into())
                .spawn(move || {
                    let _held = lock;
                    let emptied = super::upload::run(
                        &spool,
                        &upload,
                        &state,
                        upload_health.as_ref(),
                        backoff,
                    );
                    let _ = uploaded_tx.send(emptied);
                })
                .expect("spawning the Parquet upload thread");
            uploaded_rx
        });
        let (dir, wait_when_full) = (config.dir.clone(), config.options.wait_when_full);
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("parquet-writer".into())
            .spawn(move || {
                run(&config, &receiver, &thread_shared);
                let _ = done_tx.send(());
            })
            .expect("spawning the Parquet writer thread");
        Self {
            sender: Mutex::new(Some(sender)),
            done: Mutex::new(Some(done_rx)),
            uploaded: Mutex::new(uploaded),
            shared,
            dir,
            wait_when_full,
        }
    }

    /// The dataset directory.
    #[must_use]
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// The last write error, naming the path and the cause, if any write failed.
    #[must_use]
    pub fn last_error(&self) -> Option<String> {
        self.shared
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The last write error while the sink cannot write (its last write failed, none succeeded
    /// since); `None` while it writes.
    #[must_use]
    pub fn failing(&self) -> Option<String> {
        if self.shared.failing.load(Ordering::Relaxed) {
            self.last_error()
                .or_else(|| Some("a write failed".to_owned()))
        } else {
            self.shared
                .upload
                .as_ref()
                .and_then(|(state, _)| state.failing())
        }
    }

    /// What the uploader did, when the dataset goes to an object store.
    #[must_use]
    pub fn upload_stats(&self) -> Option<super::upload::UploadStats> {
        self.shared.upload.as_ref().map(|(state, _)| state.stats())
    }

    /// What retention removed so far; `None` without bounds (or with an object store).
    #[must_use]
    pub fn retention_totals(&self) -> Option<super::retention::Removed> {
        self.shared
            .retention
            .as_ref()
            .map(super::retention::Bound::totals)
    }

    /// The counters so far.
    #[must_use]
    pub fn stats(&self) -> SinkStats {
        let c = &self.shared.counters;
        SinkStats {
            accepted: c.accepted.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            written: c.written.load(Ordering::Relaxed),
            files: c.files.load(Ordering::Relaxed),
            errors: c.errors.load(Ordering::Relaxed),
            lost: c.lost.load(Ordering::Relaxed),
            queued: c
                .accepted
                .load(Ordering::Relaxed)
                .saturating_sub(c.taken.load(Ordering::Relaxed)),
        }
    }

    /// Stops the writer before its next record, as a stalled disk would (for tests and benchmarks
    /// of backpressure); [`resume`](Self::resume) lets it go on.
    pub fn pause(&self) {
        *self
            .shared
            .paused
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
    }

    /// Lets a paused writer go on.
    pub fn resume(&self) {
        *self
            .shared
            .paused
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = false;
        self.shared.resumed.notify_all();
    }

    /// Writes everything accepted so far into committed files and waits for it (at most
    /// `timeout`); returns whether it finished.
    pub fn flush(&self, timeout: Duration) -> bool {
        let (ack_tx, ack_rx) = mpsc::sync_channel(1);
        let sent = self
            .sender
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|s| s.send(Message::Flush(ack_tx)).is_ok());
        sent && ack_rx.recv_timeout(timeout).is_ok()
    }

    /// How long a shutdown waits for the writer (and the uploads) by default: 10 s.
    pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

    /// Closes the channel, writes every accepted record and waits up to `grace` for it
    /// ([`SHUTDOWN_GRACE`](Self::SHUTDOWN_GRACE) unless the caller knows better).
    /// Idempotent in effect: a second call returns [`ShutdownError::AlreadyShutDown`].
    pub fn shutdown(&self, grace: Duration) -> Result<SinkStats, ShutdownError> {
        let Some(sender) = self
            .sender
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return Err(ShutdownError::AlreadyShutDown);
        };
        *self
            .shared
            .deadline
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now() + grace);
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.resume();
        drop(sender);
        let done = self
            .done
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let deadline = Instant::now() + grace;
        let finished = done.is_some_and(|d| d.recv_timeout(grace).is_ok());
        // Then the uploader: what the writer committed, until the same deadline; what is left
        // stays in the spool for the next start.
        let mut all_uploaded = true;
        if let Some((state, _)) = &self.shared.upload {
            state.drain(deadline);
            let receiver = self
                .uploaded
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            let left = deadline.saturating_duration_since(Instant::now());
            all_uploaded = receiver.is_some_and(|u| u.recv_timeout(left) == Ok(true));
        }
        let stats = self.stats();
        if !finished {
            return Err(ShutdownError::GraceExpired {
                grace,
                pending: stats.accepted.saturating_sub(stats.written + stats.lost),
                last_error: self.last_error(),
            });
        }
        match &self.shared.upload {
            Some((uploads, _)) if !all_uploaded => Err(ShutdownError::UploadIncomplete {
                grace,
                parts: super::reader::parts(&self.dir).map_or(0, |p| p.pairs.len() as u64),
                spool: self.dir.clone(),
                last_error: uploads.last_error(),
            }),
            _ => Ok(stats),
        }
    }

    fn drop_one(&self) {
        let dropped = self.shared.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(h) = &self.shared.health {
            h.dropped.inc();
        }
        // Logged on the first drop and then every 1,000th, not once per record.
        if dropped == 1 || dropped.is_multiple_of(1000) {
            tracing::warn!(dir = %self.dir.display(), dropped, "Parquet sink is behind: records dropped (the channel is full)");
        }
    }
}

impl Sink for ParquetSink {
    fn record(&self, record: &ReconcileRecord) {
        // Copied before taking the lock, so concurrent reconciles hold it only to enqueue.
        let mut message = Message::Record(Box::new(record.clone()));
        // Read the clock only once the channel is full, and never for a caller that must not
        // wait (a reconcile): the common path stays one lock and one `try_send`.
        let mut deadline = None;
        let sent = loop {
            let sent = match self
                .sender
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
            {
                Some(sender) => sender.try_send(message),
                None => break false,
            };
            match sent {
                Ok(()) => break true,
                // Polled rather than blocked on the channel: the lock is not held while waiting.
                Err(TrySendError::Full(m))
                    if !self.wait_when_full.is_zero()
                        && Instant::now()
                            < *deadline
                                .get_or_insert_with(|| Instant::now() + self.wait_when_full) =>
                {
                    message = m;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => break false,
            }
        };
        if sent {
            self.shared
                .counters
                .accepted
                .fetch_add(1, Ordering::Relaxed);
        } else {
            self.drop_one();
        }
    }
}

/// The writer thread.
fn run(config: &SinkConfig, receiver: &Receiver<Message>, shared: &Shared) {
    let mut writer = DatasetWriter::new(config.dir.clone(), &config.options);
    let tick = config.options.max_file_age.min(Duration::from_secs(1));
    let mut sequence = 0u64;
    loop {
        wait_while_paused(shared);
        wait_while_spool_full(shared);
        let message = match receiver.recv_timeout(tick) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => {
                retrying(config, shared, &mut writer, DatasetWriter::poll);
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        match message {
            Message::Record(record) => {
                shared.counters.taken.fetch_add(1, Ordering::Relaxed);
                sequence += 1;
                let id = record
                    .trace_id
                    .clone()
                    .unwrap_or_else(|| format!("{}-{sequence}", std::process::id()));
                retrying(config, shared, &mut writer, |w| w.prepare(&record));
                writer.append(&record, &id);
                retrying(config, shared, &mut writer, DatasetWriter::rotate_if_full);
            }
            Message::Flush(ack) => {
                retrying(config, shared, &mut writer, DatasetWriter::rotate);
                let _ = ack.send(());
            }
        }
    }
    retrying(config, shared, &mut writer, DatasetWriter::rotate);
    let lost = writer.discard();
    if lost > 0 {
        shared
            .counters
            .lost
            .fetch_add(lost as u64, Ordering::Relaxed);
        tracing::error!(lost, dir = %config.dir.display(), "Parquet sink gave up: accepted records were not written before the shutdown deadline");
    }
}

/// While the spool is over its bound, the writer takes no records ([`super::upload::Shared::wait_while_full`]).
fn wait_while_spool_full(shared: &Shared) {
    if let Some((state, max)) = &shared.upload {
        state.wait_while_full(*max, &shared.stopping);
    }
}

fn wait_while_paused(shared: &Shared) {
    let mut paused = shared.paused.lock().unwrap_or_else(PoisonError::into_inner);
    while *paused {
        paused = shared
            .resumed
            .wait(paused)
            .unwrap_or_else(PoisonError::into_inner);
    }
}

/// Runs a writer step; on failure reports it, waits (backing off) and retries, until it succeeds
/// or the shutdown deadline passes. The channel is not read meanwhile, so it fills and the
/// engine's side drops and counts.
fn retrying(
    config: &SinkConfig,
    shared: &Shared,
    writer: &mut DatasetWriter,
    mut step: impl FnMut(&mut DatasetWriter) -> Result<(), super::writer::WriteError>,
) {
    let mut backoff = config.backoff;
    loop {
        let before = writer.stats();
        let result = step(writer);
        publish(shared, before, writer.stats());
        let Err(error) = result else {
            shared.failing.store(false, Ordering::Relaxed);
            return;
        };
        shared.failing.store(true, Ordering::Relaxed);
        *shared
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(error_chain(&error));
        shared.counters.errors.fetch_add(1, Ordering::Relaxed);
        if let Some(h) = &shared.health {
            h.errors.inc();
        }
        let deadline = *shared
            .deadline
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let wait = match deadline {
            Some(d) if shared.stopping.load(Ordering::SeqCst) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    tracing::error!(%error, "Parquet write failed; no retry left before the shutdown deadline");
                    return;
                }
                backoff.min(left)
            }
            _ => backoff,
        };
        tracing::error!(%error, retry_in = ?wait, pending = writer.pending_records(), "Parquet write failed; retrying");
        std::thread::sleep(wait);
        backoff = (backoff * 2).min(config.max_backoff);
    }
}

/// An error with its causes, one after the other (`cannot write PATH: No space left on device`).
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let message = cause.to_string();
        if !text.contains(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        source = cause.source();
    }
    text
}

fn publish(shared: &Shared, before: super::writer::WriterStats, after: super::writer::WriterStats) {
    let files = after.files - before.files;
    if files > 0
        && let Some((state, _)) = &shared.upload
    {
        state.wake();
    }
    if files > 0 {
        shared.counters.files.fetch_add(files, Ordering::Relaxed);
        if let Some(h) = &shared.health {
            h.files.inc_by(files);
        }
        if let Some(bound) = &shared.retention {
            bound.after_rotation();
        }
    }
    shared
        .counters
        .written
        .fetch_add(after.records - before.records, Ordering::Relaxed);
}
