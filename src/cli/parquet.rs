//! The Parquet options of `simulate`, `run` and `ingest`: the sink they start, the dataset
//! directory's lock, and the tally printed at the end.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use shadow_reconciler::dataset::{HealthCounters, ParquetSink, SinkConfig};

/// Parquet options of `simulate` and `run`.
// The field names are the flag names (`--parquet-max-rows`), which share their prefix on purpose.
#[allow(clippy::struct_field_names)]
#[derive(Args, Clone)]
pub struct ParquetArgs {
    /// The cluster the records come from (the management cluster's name): a column of every row
    /// and the partition directory cluster=NAME, so one bucket can hold a fleet's data.
    #[arg(
        long,
        env = "SHADOW_RECONCILER_CLUSTER",
        default_value = shadow_reconciler::dataset::encode::DEFAULT_CLUSTER,
        value_parser = cluster_name
    )]
    pub cluster: String,
    /// Records per row group are counted in step rows; a file closes at this many step rows.
    #[arg(long, default_value_t = 262_144, value_parser = at_least_one)]
    pub parquet_max_rows: usize,
    /// A file also closes at this many MiB of buffered data.
    #[arg(long, default_value_t = 64, value_parser = at_least_one)]
    pub parquet_max_mib: usize,
    /// A file also closes this many seconds after its first record.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub parquet_max_age: u64,
    /// Records in flight between the engine and the writer before new ones are dropped.
    #[arg(long, default_value_t = 10_000, value_parser = at_least_one)]
    pub parquet_capacity: usize,
    /// How long a shutdown waits for the writer to flush (and, to an object store, the uploads
    /// to finish), in seconds.
    #[arg(long, default_value_t = 10)]
    pub parquet_grace: u64,
    /// With --parquet-dir URL: the local directory parts wait in until they are uploaded (kept
    /// across restarts: a later start uploads what is left) [default: shadow-spool].
    #[arg(long, value_name = "DIR")]
    pub parquet_spool: Option<PathBuf>,
    /// With --parquet-dir URL: past this many MiB in the spool (the store is down), new records
    /// are dropped and counted [default: 1024].
    #[arg(long, value_name = "MIB", value_parser = at_least_one)]
    pub parquet_spool_max_mib: Option<usize>,
}

fn cluster_name(text: &str) -> Result<String, String> {
    shadow_reconciler::dataset::encode::check_cluster(text).map(|()| text.to_owned())
}

/// A count that must be at least 1 (`--parquet-max-rows 0` would write a file per record).
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a whole number: {e}")),
    }
}

impl ParquetArgs {
    /// Refuses the object-store options for a local dataset `dir`, before anything is touched.
    ///
    /// # Errors
    /// When `--parquet-spool` or `--parquet-spool-max-mib` is given.
    pub fn local_only(&self, dir: &Path) -> anyhow::Result<()> {
        if self.parquet_spool.is_some() || self.parquet_spool_max_mib.is_some() {
            anyhow::bail!(
                "--parquet-spool and --parquet-spool-max-mib apply to an object store (--parquet-dir s3://..., gs://..., az://...); {} is a local directory, written directly",
                dir.display()
            );
        }
        Ok(())
    }

    /// Starts a sink into `dir` with these options, once `dir` is known to take files (created
    /// if missing) and this process holds its lock (one writer per dataset directory): a
    /// directory that cannot be written, or that another writer writes, fails the command at
    /// start-up, naming the path and the cause, instead of at its first write. `/readyz` then
    /// follows the sink: not ready while its writes fail.
    pub fn start(
        &self,
        dir: &Path,
        health: Option<HealthCounters>,
        telemetry: &shadow_reconciler::telemetry::http::Telemetry,
    ) -> anyhow::Result<std::sync::Arc<ParquetSink>> {
        self.local_only(dir)?;
        writable_dir(dir)?;
        let lock = lock_dataset(dir, "--parquet-dir")?;
        Ok(self.start_locked(dir, lock, health, telemetry))
    }

    /// [`start`](Self::start) into `dir`, whose `lock` the caller took.
    pub fn start_locked(
        &self,
        dir: &Path,
        lock: std::sync::Arc<shadow_reconciler::dataset::DatasetLock>,
        health: Option<HealthCounters>,
        telemetry: &shadow_reconciler::telemetry::http::Telemetry,
    ) -> std::sync::Arc<ParquetSink> {
        let mut config = self.config(dir);
        config.lock = Some(lock);
        let sink = std::sync::Arc::new(ParquetSink::start(config, health));
        let watched = std::sync::Arc::downgrade(&sink);
        telemetry.add_sink_check(move || watched.upgrade().and_then(|s| s.failing()));
        sink
    }

    /// [`start_at`](Self::start_at) when `--parquet-dir` is given; without it, no sink, and the
    /// options that only apply to one are errors rather than silently ignored.
    pub fn start_if(
        &self,
        location: Option<&str>,
        telemetry: &shadow_reconciler::telemetry::http::Telemetry,
    ) -> anyhow::Result<Option<std::sync::Arc<ParquetSink>>> {
        match location {
            Some(location) => self.start_at(location, telemetry).map(Some),
            None if self.parquet_spool.is_some() || self.parquet_spool_max_mib.is_some() => {
                anyhow::bail!(
                    "--parquet-spool and --parquet-spool-max-mib hold parts on their way to an object store, and no --parquet-dir was given: nothing is written, so they would do nothing. Add --parquet-dir s3://BUCKET/PREFIX (or gs://, az://), or drop them"
                )
            }
            None => Ok(None),
        }
    }

    /// [`start`](Self::start) at `location`: a local directory, or an object store's prefix
    /// (`s3://`, `gs://`, `az://`), written through the local spool (`--parquet-spool`, locked
    /// like a dataset directory) and uploaded part by part. Several writers may share a prefix
    /// (a fleet's clusters do): every part's key carries its writer's random instance id, and
    /// nothing deletes what is in the store. `/readyz` is not ready while writes or uploads
    /// fail.
    pub fn start_at(
        &self,
        location: &str,
        telemetry: &shadow_reconciler::telemetry::http::Telemetry,
    ) -> anyhow::Result<std::sync::Arc<ParquetSink>> {
        let health = telemetry.metrics().sink_health("parquet").into();
        let remote = match shadow_reconciler::dataset::Location::parse(location)
            .with_context(|| format!("--parquet-dir {location}"))?
        {
            shadow_reconciler::dataset::Location::Local(dir) => {
                return self.start(&dir, Some(health), telemetry);
            }
            shadow_reconciler::dataset::Location::Remote(remote) => remote,
        };
        let spool = self
            .parquet_spool
            .clone()
            .unwrap_or_else(|| PathBuf::from("shadow-spool"));
        writable_dir(&spool).with_context(|| format!("--parquet-spool {}", spool.display()))?;
        let mut config = self.config(&spool);
        config.lock = Some(lock_dataset(&spool, "--parquet-spool")?);
        config.upload = Some(shadow_reconciler::dataset::upload::UploadConfig {
            remote,
            max_spool_bytes: (self.parquet_spool_max_mib.unwrap_or(1024) as u64) << 20,
            part_bytes: shadow_reconciler::dataset::store::UPLOAD_PART_BYTES,
        });
        let upload = telemetry.metrics().upload_health("parquet");
        let sink = std::sync::Arc::new(ParquetSink::start_with_upload(
            config,
            Some(health),
            Some(upload),
        ));
        let watched = std::sync::Arc::downgrade(&sink);
        telemetry.add_sink_check(move || watched.upgrade().and_then(|s| s.failing()));
        Ok(sink)
    }

    fn config(&self, dir: &Path) -> SinkConfig {
        let mut config = SinkConfig::new(dir);
        config.writer.cluster = self.cluster.as_str().into();
        config.capacity = self.parquet_capacity;
        config.writer.max_file_rows = self.parquet_max_rows;
        config.writer.row_group_rows = config
            .writer
            .row_group_rows
            .min(config.writer.max_file_rows);
        config.writer.max_file_bytes = self.parquet_max_mib << 20;
        config.writer.max_file_age = Duration::from_secs(self.parquet_max_age);
        config
    }

    /// The shutdown grace.
    pub const fn grace(&self) -> Duration {
        Duration::from_secs(self.parquet_grace)
    }
}

/// Flushes and closes the sink, reporting what it wrote.
pub fn finish(sink: &ParquetSink, grace: Duration) -> anyhow::Result<()> {
    let stats = match sink.shutdown(grace) {
        Ok(stats) => stats,
        Err(error) => {
            // What was uploaded and what waits in the spool, before the error says why.
            print_uploads(sink);
            return Err(error).with_context(|| {
                format!(
                    "cannot complete the Parquet dataset in {}",
                    sink.dir().display()
                )
            });
        }
    };
    eprintln!(
        "parquet: {} records accepted, {} written to {} in {} files ({} dropped, {} write errors, {} lost)",
        stats.accepted,
        stats.written,
        sink.dir().display(),
        stats.files,
        stats.dropped,
        stats.errors,
        stats.lost
    );
    if let Some(error) = sink.last_error() {
        eprintln!("parquet: the last write error: {error}");
    }
    print_uploads(sink);
    if stats.lost > 0 {
        anyhow::bail!(
            "{} accepted records were not written to {}{}",
            stats.lost,
            sink.dir().display(),
            sink.last_error()
                .map_or_else(String::new, |e| format!(": {e}"))
        );
    }
    Ok(())
}

/// With an object store: what was uploaded and what waits in the spool.
fn print_uploads(sink: &ParquetSink) {
    if let Some(upload) = sink.upload_stats() {
        eprintln!(
            "parquet: {} records uploaded in {} files ({} upload errors); {} parts ({} bytes) left in the spool {}{}",
            upload.records,
            upload.files,
            upload.errors,
            upload.spool_parts,
            upload.spool_bytes,
            sink.dir().display(),
            if upload.spool_parts > 0 {
                ": the next start with this spool uploads them"
            } else {
                ""
            }
        );
    }
}

/// This process's command line, as the lock file records it (at most 300 characters).
pub fn command_line() -> String {
    let mut line = std::env::args()
        .map(|a| {
            let name = std::path::Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned());
            // The program by its name only: the lock file names no path of the machine.
            if a.contains('/') && name.as_deref() == Some("shadow-reconciler") {
                "shadow-reconciler".to_owned()
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    if line.len() > 300 {
        let mut end = 300;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        line.truncate(end);
        line.push_str("...");
    }
    line
}

/// Takes the lock of the dataset directory `dir` (given as `option`) for this process, saying
/// when it takes over from a writer that died holding it.
pub fn lock_dataset(
    dir: &Path,
    option: &str,
) -> anyhow::Result<std::sync::Arc<shadow_reconciler::dataset::DatasetLock>> {
    let lock = shadow_reconciler::dataset::DatasetLock::acquire(dir, &command_line())
        .with_context(|| format!("{option} {}", dir.display()))?;
    if let Some(dead) = lock.taken_over() {
        tracing::warn!(
            dir = %dir.display(),
            previous = %dead,
            "took over the dataset's lock from a writer that ended without releasing it (killed, or its node stopped); its unfinished files are repaired or removed"
        );
    }
    Ok(std::sync::Arc::new(lock))
}

/// Creates `dir` if missing and checks that a file can be written there.
pub fn writable_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!(
            "--parquet-dir {}: this is a file, not a directory; give a directory (it is created if missing)",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "--parquet-dir {}: cannot create the directory",
            dir.display()
        )
    })?;
    if !dir.is_dir() {
        anyhow::bail!("--parquet-dir {}: not a directory", dir.display());
    }
    let probe = dir.join(format!(".write-check-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .with_context(|| format!("--parquet-dir {}: cannot write a file there", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}
