//! Writes records into hive-style partitions, one file per table per rotation, each written under
//! a temporary name, fsynced, and renamed into place: a reader never sees a partial file.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{Array, RecordBatch};

use super::rowgroup::{AheadEncoder, Encoded, Sealed};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use super::encode::{ReconcileRows, StepRows, time_micros};
use super::open::SinkOptions;
use super::schema::{Table, partition_of};
use super::writes::WriteRows;
use crate::engine::ReconcileRecord;

/// A write that failed, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The filesystem refused (unwritable directory, disk full, ...).
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Encoding failed.
    #[error("cannot encode {path}: {source}")]
    Encode {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// Building a batch failed (a bug: the builders follow the schema).
    #[error("cannot build a batch: {0}")]
    Batch(#[from] arrow_schema::ArrowError),
}

/// The rows of one open part: buffered batches of every table for one partition.
struct Part {
    partition: String,
    opened: Instant,
    /// Seconds since the Unix epoch when the part was opened, for the file name.
    opened_at: u64,
    reconciles: ReconcileRows,
    steps: StepRows,
    writes: WriteRows,
    /// Finished batches of the `reconciles` and `writes` tables (small: a few rows per
    /// reconcile, encoded at rotation).
    reconcile_batches: Vec<RecordBatch>,
    write_batches: Vec<RecordBatch>,
    /// The `steps` row groups, encoded as they are sealed.
    groups: Vec<Sealed>,
    /// Whether each table's file (in [`Table`] order) is already committed.
    committed: [bool; 3],
    step_rows: usize,
    records: usize,
    bytes: usize,
}

impl Part {
    fn new(partition: String, rows: usize, cluster: &Arc<str>) -> Self {
        Self {
            partition,
            opened: Instant::now(),
            opened_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            reconciles: reconcile_rows(rows, cluster),
            steps: step_rows(rows, cluster),
            writes: WriteRows::default().with_cluster(cluster.clone()),
            reconcile_batches: Vec::new(),
            write_batches: Vec::new(),
            groups: Vec::new(),
            committed: [false; 3],
            step_rows: 0,
            records: 0,
            bytes: 0,
        }
    }

    /// Seals the rows built so far as a batch of each table (builders for `rows` more); the
    /// steps batch, a row group, starts encoding at once, and the row groups encoded since the
    /// last seal drop their batches.
    fn seal_batch(
        &mut self,
        rows: usize,
        cluster: &Arc<str>,
        ahead: Option<&AheadEncoder>,
    ) -> Result<(), WriteError> {
        if self.reconciles.rows() > 0 {
            let mut full = std::mem::replace(&mut self.reconciles, reconcile_rows(rows, cluster));
            let batch = full.finish()?;
            self.bytes += data_bytes(&batch);
            self.reconcile_batches.push(batch);
        }
        if self.steps.rows() > 0 {
            let mut full = std::mem::replace(&mut self.steps, step_rows(rows, cluster));
            let batch = full.finish()?;
            self.bytes += data_bytes(&batch);
            self.groups.iter_mut().for_each(Sealed::harvest);
            self.groups.push(match ahead {
                Some(ahead) => Sealed::Encoding(batch.clone(), ahead.spawn(batch)),
                None => Sealed::Batch(batch),
            });
        }
        if self.writes.rows() > 0 {
            let batch = self.writes.finish()?;
            self.bytes += data_bytes(&batch);
            self.write_batches.push(batch);
        }
        Ok(())
    }
}

/// Builders for a row group of `rows` step rows. A batch is sealed after the record that
/// reaches `rows`, so it holds up to a record's rows more: the headroom spares the builders a
/// last-moment reallocation (a copy of everything built) on every row group.
fn step_rows(rows: usize, cluster: &Arc<str>) -> StepRows {
    StepRows::with_capacity(rows + rows / 16).with_cluster(cluster.clone())
}

/// Builders for the reconciles of a row group of `rows` step rows (about 32 or more each).
fn reconcile_rows(rows: usize, cluster: &Arc<str>) -> ReconcileRows {
    ReconcileRows::with_capacity((rows + rows / 16) / 32).with_cluster(cluster.clone())
}

/// The bytes of the values a batch holds (not the capacity its builders reserved, which a
/// builder sized for a whole row group over-reserves: counting it closed files at half their
/// rows).
fn data_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|column| {
            column
                .to_data()
                .get_slice_memory_size()
                .unwrap_or_else(|_| column.get_array_memory_size())
        })
        .sum()
}

/// What a writer has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Files renamed into place.
    pub files: u64,
    /// Records whose rows are in committed files.
    pub records: u64,
    /// Step rows in committed files.
    pub step_rows: u64,
}

/// Buffers records and writes them as Parquet files. Not thread-safe: the sink runs it on its own
/// thread.
pub struct DatasetWriter {
    /// The dataset's root directory (it holds `table=reconciles/` and `table=steps/`).
    dir: PathBuf,
    /// Where the records come from: a column of every table and the first partition level
    /// (`cluster=NAME/`).
    cluster: Arc<str>,
    /// Rows per row group (counted in step rows), at most a file's.
    row_group_rows: usize,
    /// The file limits (rows, bytes, age), as the sink's options say.
    options: SinkOptions,
    properties: [WriterProperties; 3],
    /// Encodes the `steps` row groups as they are sealed (`None`: at rotation only).
    ahead: Option<AheadEncoder>,
    part: Option<Part>,
    instance: String,
    sequence: u64,
    stats: WriterStats,
}

fn properties(table: Table, row_group_rows: usize) -> WriterProperties {
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_dictionary_enabled(true)
        // Min/max statistics prune row groups by time; on the other columns every row group holds
        // nearly every value, so they would cost a comparison per value and prune nothing.
        .set_statistics_enabled(EnabledStatistics::None)
        .set_column_statistics_enabled(ColumnPath::from("time"), EnabledStatistics::Chunk)
        .set_max_row_group_row_count(Some(row_group_rows.max(1)))
        .set_created_by(concat!("shadow-reconciler ", env!("CARGO_PKG_VERSION")).to_owned());
    for column in table.plain_columns() {
        builder = builder.set_column_dictionary_enabled(ColumnPath::from(*column), false);
    }
    builder.build()
}

impl DatasetWriter {
    /// A writer into `dir`, with the file limits and cluster of `options`; nothing is touched on
    /// disk until the first rotation.
    #[must_use]
    pub fn new(dir: impl Into<PathBuf>, options: &SinkOptions) -> Self {
        let row_group_rows = options.row_group_rows.min(options.max_file_rows).max(1);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mut rng = crate::util::Rng::new(u64::from(std::process::id()) << 32 | u64::from(nanos));
        let steps = properties(Table::Steps, row_group_rows);
        Self {
            ahead: AheadEncoder::new(Table::Steps.schema(), &steps).ok(),
            properties: [
                properties(Table::Reconciles, row_group_rows),
                steps,
                properties(Table::Writes, row_group_rows),
            ],
            dir: dir.into(),
            cluster: options.cluster.as_str().into(),
            row_group_rows,
            options: options.clone(),
            part: None,
            instance: format!("{:08x}", rng.next_u64() & 0xffff_ffff),
            sequence: 0,
            stats: WriterStats::default(),
        }
    }

    /// What was committed so far.
    #[must_use]
    pub const fn stats(&self) -> WriterStats {
        self.stats
    }

    /// Records buffered, not yet in a committed file.
    #[must_use]
    pub fn pending_records(&self) -> usize {
        self.part.as_ref().map_or(0, |p| p.records)
    }

    /// Adds a record: [`prepare`](Self::prepare), [`append`](Self::append), then
    /// [`rotate_if_full`](Self::rotate_if_full).
    pub fn push(&mut self, record: &ReconcileRecord, id: &str) -> Result<(), WriteError> {
        self.prepare(record)?;
        self.append(record, id);
        self.rotate_if_full()
    }

    /// Rotates when `record` belongs to another partition (hour) than the open part. Retrying
    /// after an error is safe.
    pub fn prepare(&mut self, record: &ReconcileRecord) -> Result<(), WriteError> {
        let partition = partition_of(time_micros(record));
        if self.part.as_ref().is_some_and(|p| p.partition != partition) {
            self.rotate()?;
        }
        Ok(())
    }

    /// Buffers the record's rows (no I/O).
    pub fn append(&mut self, record: &ReconcileRecord, id: &str) {
        let part = self.part.get_or_insert_with(|| {
            Part::new(
                partition_of(time_micros(record)),
                self.row_group_rows,
                &self.cluster,
            )
        });
        part.reconciles.append(record, id);
        part.writes.append(record, id);
        let before = part.steps.rows();
        part.steps.append(record, id);
        part.step_rows += part.steps.rows() - before;
        part.records += 1;
    }

    /// Seals a full row group and rotates at the row or byte limit. Retrying after an error is
    /// safe.
    pub fn rotate_if_full(&mut self) -> Result<(), WriteError> {
        let Some(part) = self.part.as_mut() else {
            return Ok(());
        };
        if part.steps.rows() >= self.row_group_rows {
            part.seal_batch(self.row_group_rows, &self.cluster, self.ahead.as_ref())?;
        }
        if part.step_rows >= self.options.max_file_rows || part.bytes >= self.options.max_file_bytes
        {
            self.rotate()?;
        }
        Ok(())
    }

    /// Rotates when the open part is older than `max_file_age`.
    pub fn poll(&mut self) -> Result<(), WriteError> {
        if self
            .part
            .as_ref()
            .is_some_and(|p| p.opened.elapsed() >= self.options.max_file_age)
        {
            self.rotate()?;
        }
        Ok(())
    }

    /// Writes the open part's files and starts over. On error the rows stay buffered (a table
    /// whose file was committed is not written twice) and a later call retries.
    pub fn rotate(&mut self) -> Result<(), WriteError> {
        let Some(part) = self.part.as_mut() else {
            return Ok(());
        };
        part.seal_batch(self.row_group_rows, &self.cluster, self.ahead.as_ref())?;
        if part.records == 0 {
            self.part = None;
            return Ok(());
        }
        // Unique across writers (a random instance id) and sortable by time within one.
        let name = format!(
            "part-{}-{}-{:06}.parquet",
            part.opened_at, self.instance, self.sequence
        );
        // Phase 1: each table's file written under its temporary name and fsynced. Phase 2:
        // renamed into place, writes first, then steps: the reconciles file is the part's
        // commit point. A crash between the renames leaves a writes or steps file without its
        // reconciles file, which readers skip and report (`reader::parts`) and the next writer
        // completes or removes. The files are prepared at once: the steps' row groups are
        // mostly encoded already, the reconciles' and the writes' (few rows: the write
        // differences, often none) are encoded now, beside them.
        let Part {
            partition,
            groups,
            reconcile_batches,
            write_batches,
            committed,
            ..
        } = &mut *part;
        let dir_of = |table: Table| {
            self.dir
                .join(format!("table={}", table.as_str()))
                .join(format!("cluster={}", self.cluster))
                .join(&*partition)
        };
        let fallback;
        let encoder = if let Some(encoder) = &self.ahead {
            encoder
        } else {
            let steps = &self.properties[Table::Steps as usize];
            fallback = AheadEncoder::new(Table::Steps.schema(), steps)
                .map_err(|e| encode_error(dir_of(Table::Steps).join(&name), e))?;
            &fallback
        };
        let prepare = |table: Table, rows: Rows<'_>| {
            let i = table as usize;
            if committed[i] {
                return Ok(None);
            }
            let dir = dir_of(table);
            let tmp = prepare_file(&dir, &name, rows, &self.properties[i], table)?;
            Ok::<_, WriteError>(Some((i, dir, tmp)))
        };
        let (steps, reconciles) = std::thread::scope(|scope| {
            let reconciles = scope.spawn(|| {
                let writes = prepare(Table::Writes, Rows::Batches(write_batches));
                (
                    writes,
                    prepare(Table::Reconciles, Rows::Batches(reconcile_batches)),
                )
            });
            // The row groups encoded ahead (the last one is finishing); any whose encoding
            // failed is encoded now. They stay encoded for a retry if this rotation fails.
            let steps = if committed[Table::Steps as usize] {
                Ok(None)
            } else {
                groups
                    .iter_mut()
                    .map(|group| group.finish(encoder))
                    .collect::<Result<Vec<&Encoded>, _>>()
                    .map_err(|e| encode_error(dir_of(Table::Steps).join(&name), e))
                    .and_then(|encoded| prepare(Table::Steps, Rows::Groups(&encoded)))
            };
            (steps, reconciles.join())
        });
        let (writes, reconciles) =
            reconciles.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let prepared: Vec<_> = [writes?, steps?, reconciles?]
            .into_iter()
            .flatten()
            .collect();
        for (i, dir, tmp) in prepared {
            commit_file(&dir, &tmp, &name)?;
            part.committed[i] = true;
            self.stats.files += 1;
        }
        self.stats.records += part.records as u64;
        self.stats.step_rows += part.step_rows as u64;
        self.sequence += 1;
        self.part = None;
        Ok(())
    }

    /// Drops what is buffered (after retries ran out); returns how many records were lost.
    pub fn discard(&mut self) -> usize {
        self.part.take().map_or(0, |p| p.records)
    }
}

/// The temporary name of a file being written: hidden (a leading dot) and with a suffix that no
/// `*.parquet` glob matches.
#[must_use]
pub fn temporary_name(name: &str) -> String {
    format!(".{name}.tmp")
}

/// A table's rows for its file.
#[derive(Clone, Copy)]
enum Rows<'a> {
    /// Arrow batches, which `ArrowWriter` merges into row groups of up to the configured rows
    /// (the `reconciles` and `writes` tables).
    Batches(&'a [RecordBatch]),
    /// Row groups already encoded (the `steps` table: its batches hold dictionary arrays,
    /// which only the row group encoder takes for the file's plain columns, a batch per row
    /// group).
    Groups(&'a [&'a Encoded]),
}

/// Writes a table's rows to `dir/.name.tmp` and fsyncs it; returns the temporary path. On error
/// the temporary file is removed.
fn prepare_file(
    dir: &Path,
    name: &str,
    rows: Rows<'_>,
    properties: &WriterProperties,
    table: Table,
) -> Result<PathBuf, WriteError> {
    fs::create_dir_all(dir).map_err(io(dir))?;
    let tmp = dir.join(temporary_name(name));
    let result = (|| {
        let file = File::create(&tmp).map_err(io(&tmp))?;
        let encode = |source| encode_error(dir.join(name), source);
        let file = match rows {
            Rows::Groups(groups) => super::rowgroup::write_file(
                file,
                table.schema(),
                properties,
                groups.iter().copied(),
            )
            .map_err(encode)?,
            Rows::Batches(batches) => {
                let mut writer =
                    ArrowWriter::try_new(file, table.schema(), Some(properties.clone()))
                        .map_err(encode)?;
                for batch in batches {
                    writer.write(batch).map_err(encode)?;
                }
                writer.into_inner().map_err(encode)?
            }
        };
        file.sync_all().map_err(io(&tmp))
    })();
    if let Err(error) = result {
        let _ = fs::remove_file(&tmp);
        return Err(error);
    }
    Ok(tmp)
}

/// A failure of the Parquet encoder while writing `path`: the filesystem's refusal (a full disk,
/// a quota) is a write error in the filesystem's words, not the library's `External:` wrapping
/// of it; anything else is an encoding error.
fn encode_error(path: PathBuf, source: parquet::errors::ParquetError) -> WriteError {
    match source {
        parquet::errors::ParquetError::External(inner) => match inner.downcast::<io::Error>() {
            Ok(io_error) => WriteError::Io {
                path,
                source: *io_error,
            },
            Err(inner) => WriteError::Encode {
                path,
                source: parquet::errors::ParquetError::External(inner),
            },
        },
        other => WriteError::Encode {
            path,
            source: other,
        },
    }
}

/// Renames a prepared file into place and makes the rename durable.
pub(super) fn commit_file(dir: &Path, tmp: &Path, name: &str) -> Result<(), WriteError> {
    let path = dir.join(name);
    fs::rename(tmp, &path).map_err(io(&path))?;
    // The rename is durable once the directory is.
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WriteError {
    let path = path.to_owned();
    move |source| WriteError::Io { path, source }
}
