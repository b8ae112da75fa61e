//! The Parquet options of `simulate`, `run` and `ingest`: the sink they start, the dataset
//! directory's lock, and the tally printed at the end.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use shadow_reconciler::dataset::open::Role;
use shadow_reconciler::dataset::{
    HealthCounters, Location, OpenError, ParquetSink, SinkHealth, SinkOptions,
};

/// Parquet options of `simulate`, `run` and `ingest`: `--parquet-dir` and how the sink writes.
// The field names are the flag names (`--parquet-max-rows`), which share their prefix on purpose.
#[allow(clippy::struct_field_names)]
#[derive(Args, Clone)]
pub struct ParquetArgs {
    #[allow(clippy::doc_markdown)] // clap help text: the URLs are shown as written
    /// The dataset the records are written to as Parquet: a directory, or for `run` and `ingest`
    /// an object store's prefix (s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, az://CONTAINER/PREFIX;
    /// credentials from the cloud's standard environment) written through a local spool
    /// (--parquet-spool). One writer per directory: another is refused. `simulate` writes a
    /// directory (default: shadow-data) and analyses it; one that already holds data is left as
    /// it is and the run writes DIR.2 (DIR.3, ...) beside it and says so, unless --replace.
    /// `run` and `ingest` write no Parquet without it.
    #[arg(long, value_name = "DIR|URL")]
    pub parquet_dir: Option<String>,
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
    #[arg(long, default_value_t = SinkOptions::default().max_file_rows, value_parser = at_least_one)]
    pub parquet_max_rows: usize,
    /// A file also closes at this many MiB of buffered data (its Arrow size: held encoded, the
    /// writer's memory is a fraction of it).
    #[arg(long, default_value_t = SinkOptions::default().max_file_bytes >> 20, value_parser = at_least_one)]
    pub parquet_max_mib: usize,
    /// A file also closes this many seconds after its first record.
    #[arg(
        long,
        default_value_t = SinkOptions::default().max_file_age.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub parquet_max_age: u64,
    /// Records in flight between the engine and the writer before new ones are dropped.
    #[arg(long, default_value_t = SinkOptions::default().capacity, value_parser = at_least_one)]
    pub parquet_capacity: usize,
    /// How long a shutdown waits for the writer to flush (and, to an object store, the uploads
    /// to finish), in seconds.
    #[arg(long, default_value_t = ParquetSink::SHUTDOWN_GRACE.as_secs())]
    pub parquet_grace: u64,
    /// With --parquet-dir URL: the local directory parts wait in until they are uploaded (kept
    /// across restarts: a later start uploads what is left) [default: shadow-spool].
    #[arg(long, value_name = "DIR")]
    pub parquet_spool: Option<PathBuf>,
    /// With --parquet-dir URL: past this many MiB in the spool (the store is down), new records
    /// are dropped and counted [default: 1024].
    #[arg(long, value_name = "MIB", value_parser = at_least_one)]
    pub parquet_spool_max_mib: Option<usize>,
    /// A local dataset keeps its records this long (30d, 12h, 90m, 600s): after each rotation,
    /// whole parts that began longer ago are removed, oldest first, counted and logged
    /// [default: kept]. An object store bounds its prefix with its own lifecycle rules.
    #[arg(long, value_name = "AGE", value_parser = retention_age)]
    pub parquet_retention: Option<Duration>,
    /// A local dataset's files stay within this many MiB: after each rotation, past it, whole
    /// parts are removed, oldest first, counted and logged; the newest part always stays
    /// [default: no bound]. Set it below the volume's size.
    #[arg(long, value_name = "MIB", value_parser = at_least_one)]
    pub parquet_max_total_mib: Option<usize>,
}

/// A retention age: a whole number and its unit, `s`, `m`, `h` or `d` (`30d`).
fn retention_age(text: &str) -> Result<Duration, String> {
    match whole_duration(text)? {
        Duration::ZERO => {
            Err("must be more than 0 (leave the option out to keep everything)".into())
        }
        age => Ok(age),
    }
}

/// A whole number and its unit, `s`, `m`, `h` or `d` (`30d`, `15s`); 0 is `Duration::ZERO`.
pub(super) fn whole_duration(text: &str) -> Result<Duration, String> {
    let unit = text.chars().last().filter(char::is_ascii_alphabetic);
    let seconds = match unit {
        Some('s') => 1,
        Some('m') => 60,
        Some('h') => 3_600,
        Some('d') => 86_400,
        _ => {
            return Err(format!(
                "{text:?} is not a duration such as 30d, 12h, 90m or 15s (a whole number and its unit)"
            ));
        }
    };
    let number = &text[..text.len() - 1];
    match number.parse::<u64>() {
        Ok(n) => n
            .checked_mul(seconds)
            .map(Duration::from_secs)
            .ok_or_else(|| format!("{text:?} is too long")),
        Err(_) => Err(format!(
            "{text:?} is not a duration such as 30d, 12h, 90m or 15s (a whole number and its unit)"
        )),
    }
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

    /// The library's options of the sink these flags describe: the one conversion of the
    /// `--parquet-*` options, over the library's defaults for what they leave out.
    pub fn options(&self) -> SinkOptions {
        let defaults = SinkOptions::default();
        SinkOptions {
            cluster: self.cluster.clone(),
            max_file_rows: self.parquet_max_rows,
            max_file_bytes: self.parquet_max_mib << 20,
            max_file_age: Duration::from_secs(self.parquet_max_age),
            capacity: self.parquet_capacity,
            spool: self.parquet_spool.clone().unwrap_or(defaults.spool),
            spool_max_bytes: self
                .parquet_spool_max_mib
                .map_or(defaults.spool_max_bytes, |mib| (mib as u64) << 20),
            retention: shadow_reconciler::dataset::retention::Retention {
                max_age: self.parquet_retention,
                max_bytes: self.parquet_max_total_mib.map(|mib| (mib as u64) << 20),
            },
            ..defaults
        }
    }

    /// A sink into the local directory `dir`, whose `lock` the caller took; `/readyz` follows it
    /// (not ready while its writes fail).
    pub fn start_locked(
        &self,
        dir: &Path,
        lock: std::sync::Arc<shadow_reconciler::dataset::DatasetLock>,
        health: Option<HealthCounters>,
        telemetry: &shadow_reconciler::telemetry::http::Telemetry,
    ) -> std::sync::Arc<ParquetSink> {
        followed(self.options().start_locked(dir, lock, health), telemetry)
    }

    /// A sink at `--parquet-dir`'s location (`run`, `ingest`) when it is given (the library's
    /// [`SinkOptions::open`]: a local directory, or an object store's prefix through the
    /// spool); without it, no sink, and the options that only apply to one are errors rather
    /// than silently ignored. `/readyz` is not ready while writes or uploads fail. A record
    /// waits up to `wait_when_full` for room in the writer's queue (zero for a reconcile, which
    /// must never wait).
    pub fn start(
        &self,
        telemetry: &shadow_reconciler::telemetry::http::Telemetry,
        wait_when_full: Duration,
    ) -> anyhow::Result<Option<std::sync::Arc<ParquetSink>>> {
        let Some(parsed) = self.location()? else {
            if self.parquet_spool.is_some() || self.parquet_spool_max_mib.is_some() {
                anyhow::bail!(
                    "--parquet-spool and --parquet-spool-max-mib hold parts on their way to an object store, and no --parquet-dir was given: nothing is written, so they would do nothing. Add --parquet-dir s3://BUCKET/PREFIX (or gs://, az://), or drop them"
                );
            }
            return Ok(None);
        };
        match &parsed {
            Location::Local(dir) => self.local_only(dir)?,
            Location::Remote(remote) => {
                if self.parquet_retention.is_some() || self.parquet_max_total_mib.is_some() {
                    anyhow::bail!(
                        "--parquet-retention and --parquet-max-total-mib bound a local dataset; {} is an object store's prefix: bound it with the store's lifecycle rules (expire objects under {}/table=*/ after the age you want)",
                        remote.url(),
                        remote.url()
                    );
                }
            }
        }
        let health = SinkHealth {
            writes: Some(telemetry.metrics().sink_health("parquet")),
            uploads: matches!(parsed, Location::Remote(_))
                .then(|| telemetry.metrics().upload_health("parquet")),
        };
        let options = SinkOptions {
            wait_when_full,
            ..self.options()
        };
        let sink = options
            .open(&parsed, health, &command_line())
            .map_err(open_error)?;
        Ok(Some(followed(sink, telemetry)))
    }

    /// `--parquet-dir` as the library's [`Location`] (a directory, a `file://` one, or an object
    /// store's prefix): the one conversion of the option; `None` when it is not given.
    pub fn location(&self) -> anyhow::Result<Option<Location>> {
        self.parquet_dir
            .as_deref()
            .map(|text| Location::parse(text).with_context(|| format!("--parquet-dir {text}")))
            .transpose()
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
    if let Some(removed) = sink.retention_totals().filter(|r| r.bytes > 0) {
        eprintln!(
            "parquet: retention removed {} whole parts ({} for their age, {} for the size) and {} rollout files, {} bytes; {} bytes left",
            removed.parts(),
            removed.parts_by_age,
            removed.parts_by_size,
            removed.rollout_files,
            removed.bytes,
            removed.left_bytes
        );
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

/// Takes the lock of the dataset directory `dir` for this process (created if missing and
/// checked writable first), worded as `--parquet-dir`'s.
pub fn lock_dataset(
    dir: &Path,
) -> anyhow::Result<std::sync::Arc<shadow_reconciler::dataset::DatasetLock>> {
    shadow_reconciler::dataset::open::lock(dir, Role::Dataset, &command_line()).map_err(open_error)
}

/// `sink`, shared, with `/readyz` following it: not ready while its writes (or uploads) fail.
fn followed(
    sink: ParquetSink,
    telemetry: &shadow_reconciler::telemetry::http::Telemetry,
) -> std::sync::Arc<ParquetSink> {
    let sink = std::sync::Arc::new(sink);
    let watched = std::sync::Arc::downgrade(&sink);
    telemetry.add_sink_check(move || watched.upgrade().and_then(|s| s.failing()));
    sink
}

/// A sink's directory that cannot be used, after the option that named it.
fn open_error(e: OpenError) -> anyhow::Error {
    let option = match e.role {
        Role::Dataset => "--parquet-dir",
        Role::Spool => "--parquet-spool",
    };
    anyhow::Error::new(*e.cause).context(format!("{option} {}", e.dir.display()))
}
