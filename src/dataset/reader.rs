//! Reads a table of the dataset back, file by file, with projection and in batches: a file that
//! cannot be read (corrupt, truncated, not Parquet) is reported and skipped, never fatal.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::schema::Table;

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

/// The batches of one file with only `columns` read. Fails when the file is not Parquet or lacks
/// a column; a corrupt page surfaces as an error from the iterator.
pub fn open(
    path: &Path,
    columns: &[&str],
) -> Result<impl Iterator<Item = Result<RecordBatch, ReadError>> + use<>, ReadError> {
    let invalid = |message: String| ReadError::Invalid {
        path: path.to_owned(),
        message,
    };
    let file = File::open(path).map_err(|source| ReadError::Io {
        path: path.to_owned(),
        source,
    })?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| invalid(format!("not a readable Parquet file: {e}")))?;
    let schema = builder.schema().clone();
    for column in columns {
        if schema.field_with_name(column).is_err() {
            return Err(invalid(format!("no column {column:?}")));
        }
    }
    let mask = ProjectionMask::columns(builder.parquet_schema(), columns.iter().copied());
    let reader = builder
        .with_projection(mask)
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| invalid(e.to_string()))?;
    let path = path.to_owned();
    Ok(reader.map(move |batch| {
        batch.map_err(|e| ReadError::Invalid {
            path: path.clone(),
            message: format!("corrupt data: {e}"),
        })
    }))
}
