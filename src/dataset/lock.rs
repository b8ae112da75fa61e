//! One writer per dataset directory: an advisory lock on `DIR/.shadow-reconciler.lock`.
//!
//! The lock is the operating system's (`flock`), taken without waiting, so a second writer is
//! refused at once and a writer that died (SIGKILL, OOM, a node that rebooted) holds nothing: the
//! kernel released its lock with its last file descriptor. The file also says who holds it (pid,
//! host, command, since when), for the sentence that refuses a second writer; a writer that ends
//! cleanly empties it, so a next writer that finds it filled knows it takes over from one that
//! died, and says so. The file stays: removing it would let a writer that opened it before the
//! removal and one that creates a new one both hold "the" lock.
//!
//! Readers never take it; Spark, DuckDB and pyarrow skip files whose name starts with a dot.
//! On a network filesystem the lock is as good as its `flock` support (NFS v4 has it).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The lock file's name in the dataset directory.
pub const FILE_NAME: &str = ".shadow-reconciler.lock";

/// Who holds, or held, a dataset's lock: what its file says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holder {
    /// The writer's process id.
    pub pid: u32,
    /// The writer's host (in a pod: the pod's name).
    pub host: String,
    /// What the writer runs (`simulate`, `run`, `ingest`, or a library user's name).
    pub command: String,
    /// When it took the lock (RFC 3339).
    pub since: String,
}

impl Holder {
    /// This process, running `command`.
    fn this(command: &str) -> Self {
        Self {
            pid: std::process::id(),
            host: hostname(),
            command: command.to_owned(),
            since: crate::util::time::now_rfc3339(),
        }
    }

    fn parse(text: &str) -> Option<Self> {
        let mut holder = Self::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(": ") else {
                continue;
            };
            match key {
                "pid" => holder.pid = value.parse().ok()?,
                "host" => value.clone_into(&mut holder.host),
                "command" => value.clone_into(&mut holder.command),
                "since" => value.clone_into(&mut holder.since),
                _ => {}
            }
        }
        (holder.pid != 0).then_some(holder)
    }

    fn render(&self) -> String {
        format!(
            "pid: {}\nhost: {}\ncommand: {}\nsince: {}\n",
            self.pid, self.host, self.command, self.since
        )
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` (pid {} on {}, since {})",
            self.command, self.pid, self.host, self.since
        )
    }
}

/// Why a dataset's lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another writer holds it.
    #[error(
        "{dir} is being written by {holder}: one writer per dataset directory. Stop it, or give this one another directory"
    )]
    Held {
        /// The dataset directory.
        dir: PathBuf,
        /// Who holds the lock (default when its file could not be read).
        holder: Holder,
    },
    /// The lock file could not be created, read or written.
    #[error("cannot lock {path}: {source}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A held lock: released when dropped (the file is emptied first, saying it ended cleanly).
#[derive(Debug)]
pub struct DatasetLock {
    file: File,
    path: PathBuf,
    /// The writer that held it before and died holding it, if any.
    taken_over: Option<Holder>,
}

impl DatasetLock {
    /// Takes the lock of dataset directory `dir` (created if missing) for `command`, or says who
    /// holds it.
    ///
    /// # Errors
    /// [`LockError::Held`] when another writer holds it; [`LockError::Io`] when the directory or
    /// the lock file cannot be created or written.
    pub fn acquire(dir: &Path, command: &str) -> Result<Self, LockError> {
        let path = dir.join(FILE_NAME);
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(LockError::Held {
                    dir: dir.to_owned(),
                    holder: Holder::parse(&text).unwrap_or_default(),
                });
            }
            Err(TryLockError::Error(source)) => return Err(io(source)),
        }
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(io)?;
        let taken_over = Holder::parse(&text);
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(Holder::this(command).render().as_bytes())
            .map_err(io)?;
        file.sync_all().map_err(io)?;
        Ok(Self {
            file,
            path,
            taken_over,
        })
    }

    /// The writer that held this lock before and died holding it (its file was not emptied):
    /// the caller says so, since that writer's last parts may need the repair the sink runs.
    #[must_use]
    pub const fn taken_over(&self) -> Option<&Holder> {
        self.taken_over.as_ref()
    }

    /// The lock file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for DatasetLock {
    fn drop(&mut self) {
        // Emptied while still held: a next writer that finds it filled knows this one died.
        let _ = self.file.set_len(0);
        let _ = self.file.sync_all();
        let _ = self.file.unlock();
    }
}

/// The host's name (a pod's name in Kubernetes), or `unknown`.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::{DatasetLock, FILE_NAME, Holder, LockError};

    #[test]
    fn a_second_writer_is_refused_with_the_first_named() {
        let dir = tempfile::tempdir().unwrap();
        let first = DatasetLock::acquire(dir.path(), "ingest").unwrap();
        assert!(first.taken_over().is_none());
        let error = DatasetLock::acquire(dir.path(), "simulate").unwrap_err();
        let LockError::Held { holder, .. } = &error else {
            panic!("{error}")
        };
        assert_eq!(holder.pid, std::process::id());
        assert_eq!(holder.command, "ingest");
        let message = error.to_string();
        assert!(
            message.contains("is being written by `ingest` (pid ")
                && message.contains("one writer per dataset directory"),
            "{message}"
        );
        drop(first);
        let again = DatasetLock::acquire(dir.path(), "simulate").unwrap();
        assert!(again.taken_over().is_none(), "a clean release is no crash");
    }

    #[test]
    fn a_lock_left_filled_is_taken_over_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let dead = Holder {
            pid: 4_194_301,
            host: "node-a".into(),
            command: "ingest".into(),
            since: "2026-01-01T00:00:00Z".into(),
        };
        std::fs::write(dir.path().join(FILE_NAME), dead.render()).unwrap();
        let lock = DatasetLock::acquire(dir.path(), "run").unwrap();
        assert_eq!(lock.taken_over(), Some(&dead));
        let now = std::fs::read_to_string(lock.path()).unwrap();
        assert!(now.contains("command: run"), "{now}");
        drop(lock);
        assert_eq!(
            std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap(),
            ""
        );
    }
}
