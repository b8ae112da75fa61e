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

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, FieldRef, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{
    ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory, compute_leaves,
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

    /// Starts encoding `batch` as one row group, its columns shared between two threads (each
    /// computes its columns' levels and encodes them).
    pub(super) fn spawn(&self, batch: RecordBatch) -> Group {
        let (factory, schema) = (self.factory.clone(), self.schema.clone());
        Group(std::thread::spawn(move || {
            let mut writers = factory.create_column_writers(0)?.into_iter();
            // Each field's column writers (a field has one leaf per primitive column under it).
            let mut even = Vec::new();
            let mut odd = Vec::new();
            for (i, (array, field)) in batch.columns().iter().zip(schema.fields()).enumerate() {
                let own: Vec<ArrowColumnWriter> =
                    writers.by_ref().take(leaves(field.data_type())).collect();
                let job = (own, field.clone(), array.clone());
                if i % 2 == 0 {
                    even.push(job);
                } else {
                    odd.push(job);
                }
            }
            if writers.next().is_some() {
                return Err(ParquetError::General(
                    "more column writers than the schema's leaves".into(),
                ));
            }
            let (even, odd) = std::thread::scope(|scope| {
                let helper = scope.spawn(|| write(odd));
                let even = write(even);
                let odd = helper
                    .join()
                    .map_err(|_| ParquetError::General("a column encoder panicked".into()))?;
                Ok::<_, ParquetError>((even?, odd?))
            })?;
            // Back in schema order: even and odd fields alternate.
            let mut chunks = Vec::new();
            let (mut even, mut odd) = (even.into_iter(), odd.into_iter());
            for i in 0..schema.fields().len() {
                let next = if i % 2 == 0 { even.next() } else { odd.next() };
                chunks.extend(next.into_iter().flatten());
            }
            Ok(chunks)
        }))
    }
}

/// How many Parquet leaf columns a field of type `data_type` has.
fn leaves(data_type: &DataType) -> usize {
    match data_type {
        DataType::List(child) | DataType::LargeList(child) | DataType::FixedSizeList(child, _) => {
            leaves(child.data_type())
        }
        DataType::Map(entries, _) => leaves(entries.data_type()),
        DataType::Struct(fields) => fields.iter().map(|f| leaves(f.data_type())).sum(),
        _ => 1,
    }
}

type Job = (Vec<ArrowColumnWriter>, FieldRef, ArrayRef);

/// Encodes each field's array with its writers; returns each field's column chunks.
fn write(jobs: Vec<Job>) -> Result<Vec<Vec<ArrowColumnChunk>>, ParquetError> {
    jobs.into_iter()
        .map(|(mut writers, field, array)| {
            let leaves = compute_leaves(&field, &array)?;
            if leaves.len() != writers.len() {
                return Err(ParquetError::General(format!(
                    "column {}: {} leaves for {} column writers",
                    field.name(),
                    leaves.len(),
                    writers.len()
                )));
            }
            for (writer, leaf) in writers.iter_mut().zip(leaves) {
                writer.write(&leaf)?;
            }
            writers.into_iter().map(ArrowColumnWriter::close).collect()
        })
        .collect()
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
