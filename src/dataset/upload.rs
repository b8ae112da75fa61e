//! Uploads a local spool of committed parts to an object store, keeping the dataset's commit
//! rule there: a part's `steps` file is uploaded first, its `reconciles` file last (the part's
//! commit point), each atomically (a multipart upload completed only once the file is whole).
//! Only then are the local files removed, `reconciles` first. A failed upload is retried with
//! backoff; what is not uploaded stays in the spool, on disk, and a writer started later on the
//! same spool uploads it. The spool is bounded: past `max_spool_bytes` the writer stops taking
//! records (the sink's channel fills and drops, counted), so a store that is down never fills
//! the disk.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::reader;
use super::schema::Table;
use super::store::Remote;

/// Where and how parts are uploaded.
#[derive(Clone, Debug)]
pub struct UploadConfig {
    /// The object store's prefix the dataset is uploaded to.
    pub remote: Remote,
    /// Past this many bytes in the spool, the writer waits (and new records are dropped).
    pub max_spool_bytes: u64,
    /// The size of a multipart upload's parts ([`UPLOAD_PART_BYTES`](super::store::UPLOAD_PART_BYTES)
    /// by default; S3 wants at least 5 MiB but for the last).
    pub part_bytes: usize,
}

/// Prometheus series the uploader keeps up to date.
#[derive(Clone, Debug)]
pub struct UploadHealth {
    /// Files uploaded.
    pub uploads: prometheus::IntCounter,
    /// Failed uploads (each retried).
    pub errors: prometheus::IntCounter,
    /// Bytes in the spool, waiting to be uploaded.
    pub spool_bytes: prometheus::IntGauge,
}

/// What the uploader has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UploadStats {
    /// Files uploaded.
    pub files: u64,
    /// Records in the parts uploaded.
    pub records: u64,
    /// Failed uploads.
    pub errors: u64,
    /// Bytes in the spool.
    pub spool_bytes: u64,
    /// Whole parts in the spool, not yet uploaded.
    pub spool_parts: u64,
}

/// State shared between the uploader thread, the writer and the sink.
#[derive(Debug, Default)]
pub struct Shared {
    files: AtomicU64,
    records: AtomicU64,
    errors: AtomicU64,
    spool_bytes: AtomicU64,
    spool_parts: AtomicU64,
    failing: AtomicBool,
    last_error: Mutex<Option<String>>,
    /// Set once the writer has committed its last part: upload what is left, then stop.
    draining: AtomicBool,
    /// Set when the uploader's loop ends (drained, past the deadline, or a bug).
    stopped: AtomicBool,
    /// When the uploader gives up on what is left (the shutdown grace).
    deadline: Mutex<Option<Instant>>,
    wake: Mutex<bool>,
    woken: Condvar,
}

impl Shared {
    /// The counters so far.
    pub fn stats(&self) -> UploadStats {
        UploadStats {
            files: self.files.load(Ordering::Relaxed),
            records: self.records.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            spool_bytes: self.spool_bytes.load(Ordering::Relaxed),
            spool_parts: self.spool_parts.load(Ordering::Relaxed),
        }
    }

    /// The last upload error while uploads fail (none succeeded since), or that the uploader
    /// stopped before the sink did.
    pub fn failing(&self) -> Option<String> {
        if self.stopped.load(Ordering::SeqCst) && !self.draining.load(Ordering::SeqCst) {
            return Some("the upload thread stopped: nothing more is uploaded".to_owned());
        }
        self.failing.load(Ordering::Relaxed).then(|| {
            self.last_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
                .unwrap_or_else(|| "an upload failed".to_owned())
        })
    }

    /// Whether the uploader's loop still runs.
    pub fn running(&self) -> bool {
        !self.stopped.load(Ordering::SeqCst)
    }

    /// The last upload error, if any upload failed.
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// While the spool holds more than `max` bytes (the object store is down or slow), waits: the
    /// writer takes no records, so the channel fills and the engine's side drops and counts, as
    /// for a failing disk. Never while `stopping` (what is accepted is then written to the
    /// spool), nor once the uploader has stopped.
    pub fn wait_while_full(&self, max: u64, stopping: &AtomicBool) {
        let mut logged = false;
        // Checked before every record the writer takes: one atomic load when under the bound.
        while self.spool_bytes.load(Ordering::Relaxed) > max
            && !stopping.load(Ordering::SeqCst)
            && self.running()
        {
            if !logged {
                tracing::warn!(
                    spool_bytes = self.spool_bytes.load(Ordering::Relaxed),
                    max,
                    "the upload spool is full: records are dropped until uploads catch up"
                );
                logged = true;
            }
            self.wake();
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Wakes the uploader (a part was committed, or the sink is stopping).
    pub fn wake(&self) {
        *self.wake.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.woken.notify_all();
    }

    /// Tells the uploader that nothing more will be written: upload what is left until
    /// `deadline`, then stop.
    pub fn drain(&self, deadline: Instant) {
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) = Some(deadline);
        self.draining.store(true, Ordering::SeqCst);
        self.wake();
    }

    fn sleep(&self, timeout: Duration) {
        let mut woken = self.wake.lock().unwrap_or_else(PoisonError::into_inner);
        if !*woken {
            woken = self
                .woken
                .wait_timeout(woken, timeout)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *woken = false;
    }

    fn past_deadline(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
            && self
                .deadline
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some_and(|d| Instant::now() >= d)
    }
}

/// The uploader's loop, on its own thread, until the sink drains and the spool is empty (or the
/// drain's deadline passes); returns whether the spool was emptied.
pub fn run(
    spool: &Path,
    config: &UploadConfig,
    shared: &Shared,
    health: Option<&UploadHealth>,
    backoff: (Duration, Duration),
) -> bool {
    let emptied = upload_all(spool, config, shared, health, backoff);
    shared.stopped.store(true, Ordering::SeqCst);
    emptied
}

fn upload_all(
    spool: &Path,
    config: &UploadConfig,
    shared: &Shared,
    health: Option<&UploadHealth>,
    backoff: (Duration, Duration),
) -> bool {
    let mut wait = backoff.0;
    loop {
        let draining = shared.draining.load(Ordering::SeqCst);
        let pending = spooled(spool, shared, health);
        let Some((reconciles, steps, writes)) = pending.into_iter().next() else {
            if draining {
                return true;
            }
            shared.sleep(Duration::from_secs(1));
            continue;
        };
        match upload_part(
            spool,
            &config.remote,
            config.part_bytes,
            (&reconciles, &steps, writes.as_deref()),
        ) {
            Ok((files, records)) => {
                wait = backoff.0;
                shared.failing.store(false, Ordering::Relaxed);
                shared.files.fetch_add(files, Ordering::Relaxed);
                shared.records.fetch_add(records, Ordering::Relaxed);
                if let Some(h) = health {
                    h.uploads.inc_by(files);
                }
            }
            Err(error) => {
                shared.errors.fetch_add(1, Ordering::Relaxed);
                shared.failing.store(true, Ordering::Relaxed);
                if let Some(h) = health {
                    h.errors.inc();
                }
                *shared
                    .last_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(error.clone());
                if shared.past_deadline() {
                    tracing::error!(%error, spool = %spool.display(), "upload failed; no retry left before the shutdown deadline: the parts stay in the spool for the next start");
                    return false;
                }
                tracing::error!(%error, retry_in = ?wait, "upload failed; retrying (the parts stay in the spool meanwhile)");
                shared.sleep(wait);
                wait = (wait * 2).min(backoff.1);
            }
        }
        if shared.past_deadline() {
            let left = spooled(spool, shared, health);
            return left.is_empty();
        }
    }
}

/// The whole parts in the spool, oldest first, after bringing the spool's gauges up to date.
fn spooled(
    spool: &Path,
    shared: &Shared,
    health: Option<&UploadHealth>,
) -> Vec<(PathBuf, PathBuf, Option<PathBuf>)> {
    let found = reader::parts(spool).unwrap_or_default();
    let parts: Vec<(PathBuf, PathBuf, Option<PathBuf>)> = found
        .pairs
        .iter()
        .map(|(r, s)| {
            (
                r.clone(),
                s.clone(),
                found.writes_of(r).map(Path::to_path_buf),
            )
        })
        .collect();
    let bytes = spool_bytes(spool);
    shared.spool_bytes.store(bytes, Ordering::Relaxed);
    shared
        .spool_parts
        .store(parts.len() as u64, Ordering::Relaxed);
    if let Some(h) = health {
        h.spool_bytes.set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }
    let mut parts = parts;
    // By file name: `part-<opened at>-<writer>-<sequence>`, so oldest first.
    parts.sort_by(|a, b| a.0.file_name().cmp(&b.0.file_name()));
    parts
}

/// The bytes of the files under `spool`, but its lock file (the writer's, not data).
pub fn spool_bytes(spool: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![spool.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_name() == super::lock::FILE_NAME {
                continue;
            }
            match entry.metadata() {
                Ok(m) if m.is_dir() => stack.push(entry.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// Uploads one part (writes, steps, then reconciles: the commit point), then removes its local
/// files (reconciles first, so a crash in between leaves a local half that the writer's repair
/// removes, never a part uploaded twice under a new name). Returns (files, records).
fn upload_part(
    spool: &Path,
    remote: &Remote,
    part_bytes: usize,
    (reconciles, steps, writes): (&Path, &Path, Option<&Path>),
) -> Result<(u64, u64), String> {
    // The records, for the counters only: a file whose footer cannot be read is uploaded all
    // the same (readers skip and report it) rather than hold back every part after it.
    let records = reader::guarded(reconciles, || {
        let file = std::fs::File::open(reconciles).map_err(|source| reader::ReadError::Io {
            path: reconciles.to_owned(),
            source,
        })?;
        parquet::file::reader::SerializedFileReader::new(file)
            .map(|r| {
                use parquet::file::reader::FileReader as _;
                u64::try_from(r.metadata().file_metadata().num_rows()).unwrap_or(0)
            })
            .map_err(|e| reader::ReadError::Invalid {
                path: reconciles.to_owned(),
                message: e.to_string(),
            })
    })
    .unwrap_or_else(|error| {
        tracing::warn!(%error, "uploading a part whose reconciles file cannot be read");
        0
    });
    let files: Vec<(Table, &Path)> = writes
        .map(|w| (Table::Writes, w))
        .into_iter()
        .chain([(Table::Steps, steps), (Table::Reconciles, reconciles)])
        .collect();
    for &(table, path) in &files {
        let relative = path
            .strip_prefix(spool)
            .map_err(|_| format!("{} is not under the spool", path.display()))?;
        let relative = relative.to_string_lossy();
        debug_assert!(relative.starts_with(&format!("table={}", table.as_str())));
        remote
            .upload(path, &relative, part_bytes)
            .map_err(|e| e.to_string())?;
    }
    for &(_, path) in files.iter().rev() {
        std::fs::remove_file(path)
            .map_err(|e| format!("uploaded, but cannot remove {}: {e}", path.display()))?;
    }
    Ok((files.len() as u64, records))
}
