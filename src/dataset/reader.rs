//! Reads a table of the dataset back, file by file, with projection and in batches: a file that
//! cannot be read (corrupt, truncated, not Parquet) is reported and skipped, never fatal.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::schema::Table;
use super::store::Location;

/// Rows per batch read.
pub const BATCH_ROWS: usize = 65_536;

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or listed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid Parquet, or not ours.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Every committed file of `table` under `dir`, sorted by path. Hidden files (writers' temporary
/// files among them) are not listed.
pub fn files(dir: &Path, table: Table) -> Result<Vec<PathBuf>, ReadError> {
    let root = dir.join(format!("table={}", table.as_str()));
    let mut found = Vec::new();
    if !root.exists() {
        return Ok(found);
    }
    let mut stack = vec![root];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|source| ReadError::Io {
            path: d.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| ReadError::Io {
                path: d.clone(),
                source,
            })?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name.starts_with('_') {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else if name.ends_with(".parquet") {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// A file of a part whose `reconciles` file (the commit point) is missing, or a `reconciles`
/// file without its `steps` file: part of a rotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Orphan {
    /// The table the file belongs to.
    pub table: Table,
    /// The file.
    pub path: PathBuf,
}

/// The dataset's committed parts: the files of the tables that belong together (the same
/// partition and name under `table=reconciles`, `table=steps` and `table=writes`, as the writer
/// commits them), and the files whose part is not whole (a writer died between its renames;
/// see docs/parquet.md).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parts {
    /// The whole parts: (`reconciles` file, `steps` file), sorted by path.
    pub pairs: Vec<(PathBuf, PathBuf)>,
    /// The `writes` file of a whole part, by its `reconciles` file. A part written before the
    /// table existed has none (it recorded no write difference).
    pub writes: std::collections::BTreeMap<PathBuf, PathBuf>,
    /// Files of parts that are not whole, sorted by path: not part of the dataset.
    pub orphans: Vec<Orphan>,
}

impl Parts {
    /// The `writes` file of the part whose `reconciles` file is `reconciles`.
    #[must_use]
    pub fn writes_of(&self, reconciles: &Path) -> Option<&Path> {
        self.writes.get(reconciles).map(PathBuf::as_path)
    }
}

/// The parts of the dataset under `dir`.
pub fn parts(dir: &Path) -> Result<Parts, ReadError> {
    pair(dir, |table| files(dir, table))
}

/// The parts of the dataset at `location`, a local directory or an object store's prefix.
pub fn parts_at(location: &Location) -> Result<Parts, ReadError> {
    match location {
        Location::Local(dir) => parts(dir),
        Location::Remote(remote) => pair(&location.root(), |table| {
            let under = format!("table={}", table.as_str());
            let objects = remote.list(&under).map_err(|e| ReadError::Invalid {
                path: PathBuf::from(format!("{}/{under}", remote.url())),
                message: format!("cannot list: {e}"),
            })?;
            Ok(objects
                .into_iter()
                .map(|o| o.path)
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.ends_with(".parquet") && !n.starts_with(['.', '_']))
                })
                .collect())
        }),
    }
}

/// Pairs each table's files under `dir` by their path under `table=...` (a part's two files
/// share it).
fn pair(
    dir: &Path,
    mut files: impl FnMut(Table) -> Result<Vec<PathBuf>, ReadError>,
) -> Result<Parts, ReadError> {
    let mut by_key =
        |table: Table| -> Result<std::collections::BTreeMap<PathBuf, PathBuf>, ReadError> {
            let root = dir.join(format!("table={}", table.as_str()));
            Ok(files(table)?
                .into_iter()
                .map(|path| {
                    let key = path
                        .strip_prefix(&root)
                        .map_or_else(|_| path.clone(), Path::to_path_buf);
                    (key, path)
                })
                .collect())
        };
    let reconciles = by_key(Table::Reconciles)?;
    let mut steps = by_key(Table::Steps)?;
    let mut writes = by_key(Table::Writes)?;
    let mut parts = Parts::default();
    for (key, r) in reconciles {
        match steps.remove(&key) {
            Some(s) => {
                if let Some(w) = writes.remove(&key) {
                    parts.writes.insert(r.clone(), w);
                }
                parts.pairs.push((r, s));
            }
            None => parts.orphans.push(Orphan {
                table: Table::Reconciles,
                path: r,
            }),
        }
    }
    for (table, rest) in [(Table::Steps, steps), (Table::Writes, writes)] {
        parts
            .orphans
            .extend(rest.into_values().map(|path| Orphan { table, path }));
    }
    parts.pairs.sort();
    parts.orphans.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(parts)
}

std::thread_local! {
    /// Set while [`guarded`] runs on this thread.
    static GUARDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Whether the last panic on this thread came from the Parquet or Arrow libraries.
    static LIBRARY_PANIC: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether a panic at `file` (a source path) is in the Parquet or Arrow libraries (a registry
/// path such as `.../parquet-60.1.0/src/...`, or a vendored `.../parquet/src/...`), not in
/// our own code.
fn in_library(file: &str) -> bool {
    file.split(['/', '\\']).any(|component| {
        component == "parquet"
            || component == "arrow"
            || component
                .strip_prefix("parquet-")
                .is_some_and(|version| version.starts_with(|c: char| c.is_ascii_digit()))
            || component.starts_with("arrow-")
    })
}

/// Runs `read`, which reads the Parquet file `path`, turning a panic of the Parquet or Arrow
/// libraries into an error about the file. The Parquet library asserts on some damaged metadata
/// (for instance a column chunk whose start or length is negative) instead of returning an
/// error: a damaged file must be skipped and reported like any unreadable one, not abort the
/// command. Such a panic prints nothing (the panic hook, installed once, stays quiet for a
/// library panic while a guarded read runs on its thread). A panic in our own code is a bug,
/// not damage: it is printed as usual and goes on unwinding.
pub fn guarded<T>(
    path: &Path,
    read: impl FnOnce() -> Result<T, ReadError>,
) -> Result<T, ReadError> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let library = info.location().is_some_and(|l| in_library(l.file()));
            LIBRARY_PANIC.with(|p| p.set(library));
            if !(library && GUARDED.with(std::cell::Cell::get)) {
                previous(info);
            }
        }));
    });
    let outer = GUARDED.with(|g| g.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(read));
    GUARDED.with(|g| g.set(outer));
    result.unwrap_or_else(|payload| {
        if !LIBRARY_PANIC.with(std::cell::Cell::get) {
            std::panic::resume_unwind(payload);
        }
        let why = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_owned());
        Err(ReadError::Invalid {
            path: path.to_owned(),
            message: format!(
                "a damaged Parquet file: the Parquet reader gave up on it ({})",
                crate::util::yaml::bounded(&why, 200)
            ),
        })
    })
}

/// The batches of one file with only `columns` read. Fails when the file is not Parquet or lacks
/// a column (`?name` names a column added later: read when the file has it, else absent from
/// the batches); a corrupt page surfaces as an error from the iterator.
pub fn open(
    path: &Path,
    columns: &[&str],
) -> Result<impl Iterator<Item = Result<RecordBatch, ReadError>> + use<>, ReadError> {
    let file = File::open(path).map_err(|source| ReadError::Io {
        path: path.to_owned(),
        source,
    })?;
    Ok(named(path, batches(path, file, columns, |_| Ok(()))?))
}

/// A reader's batches, a corrupt page an error naming the file.
fn named(
    path: &Path,
    reader: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
) -> impl Iterator<Item = Result<RecordBatch, ReadError>> + use<> {
    let path = path.to_owned();
    reader.map(move |batch| {
        batch.map_err(|e| ReadError::Invalid {
            path: path.clone(),
            message: format!("corrupt data: {e}"),
        })
    })
}

/// The `time` column of a batch of any table (when the reconcile started, µs).
///
/// # Errors
/// The column is missing or not a timestamp in microseconds.
pub fn time_column<'a>(
    batch: &'a RecordBatch,
    path: &Path,
) -> Result<&'a arrow_array::TimestampMicrosecondArray, ReadError> {
    use arrow_array::cast::AsArray;
    batch
        .column_by_name("time")
        .and_then(|c| c.as_primitive_opt::<arrow_array::types::TimestampMicrosecondType>())
        .ok_or_else(|| ReadError::Invalid {
            path: path.to_owned(),
            message: "column time is not a timestamp in µs".to_owned(),
        })
}

/// [`open`] for a file of the dataset at `location`: a remote file's projected column chunks are
/// fetched at once, with concurrent range requests, before they are decoded.
pub fn open_at(
    location: &Location,
    path: &Path,
    columns: &[&str],
) -> Result<Box<dyn Iterator<Item = Result<RecordBatch, ReadError>>>, ReadError> {
    match location {
        Location::Local(_) => Ok(Box::new(open(path, columns)?)),
        Location::Remote(remote) => {
            let fetch = |e: object_store::Error| ReadError::Invalid {
                path: path.to_owned(),
                message: format!("cannot read: {e}"),
            };
            let file = remote.open(path).map_err(fetch)?;
            let prefetch = file.clone();
            let reader = batches(path, file, columns, |ranges| {
                prefetch.prefetch(ranges).map_err(fetch)
            })?;
            Ok(Box::new(named(path, reader)))
        }
    }
}

/// The batches of `columns` of the Parquet `file` (named `path`); `fetch` is given every byte
/// range the read will need, before it starts.
fn batches<T: parquet::file::reader::ChunkReader + 'static>(
    path: &Path,
    file: T,
    columns: &[&str],
    fetch: impl FnOnce(Vec<std::ops::Range<u64>>) -> Result<(), ReadError>,
) -> Result<parquet::arrow::arrow_reader::ParquetRecordBatchReader, ReadError> {
    let invalid = |message: String| ReadError::Invalid {
        path: path.to_owned(),
        message,
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| invalid(format!("not a readable Parquet file: {e}")))?;
    let schema = builder.schema().clone();
    // `?name`: a column added to the schema later, read when the file has it.
    let mut present: Vec<&str> = Vec::with_capacity(columns.len());
    for column in columns {
        match column.strip_prefix('?') {
            Some(optional) => {
                if schema.field_with_name(optional).is_ok() {
                    present.push(optional);
                }
            }
            None if schema.field_with_name(column).is_err() => {
                return Err(invalid(format!("no column {column:?}")));
            }
            None => present.push(column),
        }
    }
    let columns = present.as_slice();
    let mask = ProjectionMask::columns(builder.parquet_schema(), columns.iter().copied());
    let wanted: Vec<usize> = builder
        .parquet_schema()
        .columns()
        .iter()
        .enumerate()
        .filter(|(_, c)| columns.contains(&c.path().parts()[0].as_str()))
        .map(|(i, _)| i)
        .collect();
    fetch(
        builder
            .metadata()
            .row_groups()
            .iter()
            .flat_map(|rg| wanted.iter().map(move |&i| rg.column(i).byte_range()))
            .map(|(start, length)| start..start + length)
            .collect(),
    )?;
    let reader = builder
        .with_projection(mask)
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| invalid(e.to_string()))?;
    Ok(reader)
}

#[cfg(test)]
mod tests {
    use super::{ReadError, guarded};
    use std::path::Path;

    /// The Parquet library's assertion on a negative column chunk offset, as `proptest` found it
    /// in `tests/suite/parquet_fuzz.rs`: a panic of the library inside a guarded read is an error
    /// about the file.
    #[test]
    fn a_panic_of_the_parquet_library_is_an_error_naming_the_file() {
        let path = Path::new("data/table=steps/part-1.parquet");
        // A panic located in the library: the library's own `byte_range` on damaged metadata.
        let result: Result<(), ReadError> = guarded(path, || {
            let column = parquet::schema::types::ColumnDescriptor::new(
                std::sync::Arc::new(
                    parquet::schema::types::Type::primitive_type_builder(
                        "c",
                        parquet::basic::Type::INT64,
                    )
                    .build()
                    .expect("a type"),
                ),
                0,
                0,
                parquet::schema::types::ColumnPath::new(vec!["c".into()]),
            );
            let chunk =
                parquet::file::metadata::ColumnChunkMetaData::builder(std::sync::Arc::new(column))
                    .set_data_page_offset(-4)
                    .build()
                    .expect("metadata");
            let _ = chunk.byte_range();
            Ok(())
        });
        let message = result.expect_err("an error").to_string();
        assert!(
            message.starts_with("data/table=steps/part-1.parquet: a damaged Parquet file")
                && message.contains("column start and length should not be negative"),
            "{message}"
        );
        // Results and errors of a read that does not panic pass through unchanged.
        assert_eq!(guarded(path, || Ok(7)).expect("ok"), 7);
        let error = guarded::<()>(path, || {
            Err(ReadError::Invalid {
                path: path.to_owned(),
                message: "no column \"plan\"".into(),
            })
        })
        .expect_err("the read's own error");
        assert!(error.to_string().ends_with("no column \"plan\""), "{error}");
    }

    /// A panic in our own code inside a guarded read is a bug: it is not taken for a damaged
    /// file, it goes on unwinding.
    #[test]
    fn a_panic_of_our_own_code_goes_on_unwinding() {
        let path = Path::new("data/table=steps/part-1.parquet");
        let unwound = std::panic::catch_unwind(|| {
            let _ = guarded::<()>(path, || panic!("a bug of ours"));
        });
        let payload = unwound.expect_err("the panic went on");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"a bug of ours"));
    }

    #[test]
    fn library_paths() {
        for file in [
            "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/parquet-60.1.0/src/file/metadata/mod.rs",
            "/root/.cargo/registry/src/x/arrow-array-60.0.0/src/array/mod.rs",
            "vendor/parquet/src/file/reader.rs",
        ] {
            assert!(super::in_library(file), "{file}");
        }
        for file in [
            "src/dataset/reader.rs",
            "/home/me/parquet-tools/shadow-reconciler/src/analyze/scan.rs",
            "tests/suite/parquet_fuzz.rs",
        ] {
            assert!(!super::in_library(file), "{file}");
        }
    }
}
