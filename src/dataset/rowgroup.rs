//! Row groups encoded ahead: as soon as the writer seals a row group of the `steps` table, its
//! columns are encoded (dictionaries, pages, Snappy) into Parquet column chunks on a background
//! thread, shared with a helper, while the writer builds the next row group. Building the Arrow
//! data and encoding it overlap instead of adding up, and a rotation only has the last row group
//! left to encode before it assembles the file. (Handing the encoder smaller pieces of a row group
//! measured slower: each piece costs a synchronisation of the column encoders.)
//!
//! The Arrow batches stay with the part until its file is committed: a rotation that fails (a full
//! disk) is retried from them, encoding again, exactly as without encoding ahead.

use std::fs::File;
use std::sync::Arc;
use std::thread::JoinHandle;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{
    ArrowColumnChunk, ArrowColumnWriter, ArrowLeafColumn, ArrowRowGroupWriterFactory,
    compute_leaves,
};
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;

/// Makes column writers of one table's schema and properties (they do not depend on the file).
pub(super) struct AheadEncoder {
    factory: Arc<ArrowRowGroupWriterFactory>,
    schema: SchemaRef,
}

/// One row group being encoded, or encoded: the thread returns its column chunks.
pub(super) struct Group(JoinHandle<Result<Vec<ArrowColumnChunk>, ParquetError>>);

impl AheadEncoder {
    /// An encoder for `schema` written with `properties`.
    pub(super) fn new(
        schema: SchemaRef,
        properties: &WriterProperties,
    ) -> Result<Self, ParquetError> {
        let template =
            ArrowWriter::try_new(std::io::sink(), schema.clone(), Some(properties.clone()))?;
        let (_, factory) = template.into_serialized_writer()?;
        Ok(Self {
            factory: Arc::new(factory),
            schema,
        })
    }

    /// Starts encoding `batch` as one row group, its columns shared between two threads.
    pub(super) fn spawn(&self, batch: RecordBatch) -> Group {
        let (factory, schema) = (self.factory.clone(), self.schema.clone());
        Group(std::thread::spawn(move || {
            let mut writers = factory.create_column_writers(0)?;
            let mut leaves = Vec::with_capacity(writers.len());
            for (array, field) in batch.columns().iter().zip(schema.fields()) {
                leaves.extend(compute_leaves(field, array)?);
            }
            if leaves.len() != writers.len() {
                return Err(ParquetError::General(format!(
                    "{} leaves for {} columns",
                    leaves.len(),
                    writers.len()
                )));
            }
            let (mut even, mut odd) = (Vec::new(), Vec::new());
            for (i, job) in writers.iter_mut().zip(leaves).enumerate() {
                if i % 2 == 0 {
                    even.push(job);
                } else {
                    odd.push(job);
                }
            }
            std::thread::scope(|scope| {
                let helper = scope.spawn(|| write(odd));
                write(even)?;
                helper
                    .join()
                    .map_err(|_| ParquetError::General("a column encoder panicked".into()))?
            })?;
            writers.into_iter().map(ArrowColumnWriter::close).collect()
        }))
    }
}

fn write(jobs: Vec<(&mut ArrowColumnWriter, ArrowLeafColumn)>) -> Result<(), ParquetError> {
    jobs.into_iter()
        .try_for_each(|(writer, leaf)| writer.write(&leaf))
}

/// Writes `groups` in order as the row groups of a Parquet file of `schema` into `file`, and
/// returns the file (not yet synced).
pub(super) fn write_file(
    file: File,
    schema: SchemaRef,
    properties: &WriterProperties,
    groups: Vec<Group>,
) -> Result<File, ParquetError> {
    let writer = ArrowWriter::try_new(file, schema, Some(properties.clone()))?;
    let (mut writer, _) = writer.into_serialized_writer()?;
    for group in groups {
        let chunks = group
            .0
            .join()
            .map_err(|_| ParquetError::General("the row group's encoder panicked".into()))??;
        let mut row_group = writer.next_row_group()?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut row_group)?;
        }
        row_group.close()?;
    }
    writer.into_inner()
}
