//! Row groups encoded ahead: as soon as the writer seals a row group of the `steps` table, its
//! columns are encoded (dictionaries, pages, Snappy) into Parquet column chunks on a background
//! thread, shared with a helper, while the writer builds the next row group. Building the Arrow
//! data and encoding it overlap instead of adding up, and a rotation only has the last row group
//! left to encode before it assembles the file. (Handing the encoder smaller pieces of a row group
//! measured slower: each piece costs a synchronisation of the column encoders.)
//!
//! An encoded row group is kept as a small Parquet file in memory, its compressed pages and their
//! metadata, and the Arrow batch it came from is dropped: a part holds its rows compressed (a
//! sixth of the Arrow data or less), not twice. A file is assembled by copying those column
//! chunks (as `parquet-concat` does), which leaves them in place: a rotation that fails (a full
//! disk) is retried from them, nothing encoded again and nothing lost.

use std::fs::File;
use std::sync::Arc;
use std::thread::JoinHandle;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, FieldRef, SchemaRef};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{
    ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory, compute_leaves,
};
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::ParquetError;
use parquet::file::properties::{WriterProperties, WriterPropertiesPtr};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::TypePtr;

/// Makes column writers of one table's schema and properties (they do not depend on the file).
pub(super) struct AheadEncoder {
    factory: Arc<ArrowRowGroupWriterFactory>,
    schema: SchemaRef,
    /// The Parquet schema and properties of the in-memory file each row group is kept in.
    root: TypePtr,
    properties: WriterPropertiesPtr,
}

/// One row group being encoded: the thread returns it encoded.
pub(super) struct Group(JoinHandle<Result<Encoded, ParquetError>>);

/// One row group encoded: a Parquet file in memory holding only it, and its column chunks'
/// metadata (offsets into `bytes`), ready to be copied into a file any number of times.
pub(super) struct Encoded {
    bytes: Bytes,
    columns: Vec<ColumnCloseResult>,
}

/// A sealed row group of a part, from its Arrow batch to its encoded pages.
pub(super) enum Sealed {
    /// Not encoded yet (no encoder, or its encoding failed and is retried at rotation).
    Batch(RecordBatch),
    /// Being encoded; the batch is kept until the encoding succeeds.
    Encoding(RecordBatch, Group),
    /// Encoded: the batch is gone.
    Encoded(Encoded),
}

impl Sealed {
    /// Takes the encoded row group of a finished encoding (and drops its batch); an encoding
    /// still running is left alone, a failed one leaves the batch to be encoded again.
    pub(super) fn harvest(&mut self) {
        if matches!(self, Self::Encoding(_, group) if group.0.is_finished()) {
            // A failure leaves the batch, and the rotation encodes it again and reports.
            let _ = self.wait();
        }
    }

    /// The encoded row group, waiting for its encoding or encoding it now with `encoder`; on
    /// error the batch is kept, so a later call starts over.
    pub(super) fn finish(&mut self, encoder: &AheadEncoder) -> Result<&Encoded, ParquetError> {
        if let Self::Batch(batch) = self {
            *self = Self::Encoding(batch.clone(), encoder.spawn(batch.clone()));
        }
        self.wait()?;
        match self {
            Self::Encoded(group) => Ok(group),
            Self::Batch(_) | Self::Encoding(..) => {
                Err(ParquetError::General("a row group was not encoded".into()))
            }
        }
    }

    /// Waits for a running encoding: the row group is encoded, or (on error) its batch stays.
    fn wait(&mut self) -> Result<(), ParquetError> {
        let Self::Encoding(batch, _) = self else {
            return Ok(());
        };
        let batch = batch.clone();
        if let Self::Encoding(_, group) = std::mem::replace(self, Self::Batch(batch)) {
            *self = Self::Encoded(group.join()?);
        }
        Ok(())
    }
}

impl Group {
    fn join(self) -> Result<Encoded, ParquetError> {
        self.0
            .join()
            .map_err(|_| ParquetError::General("the row group's encoder panicked".into()))?
    }
}

impl AheadEncoder {
    /// An encoder for `schema` written with `properties`.
    pub(super) fn new(
        schema: SchemaRef,
        properties: &WriterProperties,
    ) -> Result<Self, ParquetError> {
        let template =
            ArrowWriter::try_new(std::io::sink(), schema.clone(), Some(properties.clone()))?;
        let (writer, factory) = template.into_serialized_writer()?;
        Ok(Self {
            factory: Arc::new(factory),
            schema,
            root: writer.schema_descr().root_schema_ptr(),
            properties: writer.properties().clone(),
        })
    }

    /// Starts encoding `batch` as one row group, its columns shared between two threads (each
    /// computes its columns' levels and encodes them).
    pub(super) fn spawn(&self, batch: RecordBatch) -> Group {
        let (factory, schema) = (self.factory.clone(), self.schema.clone());
        let (root, properties) = (self.root.clone(), self.properties.clone());
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
            Encoded::new(chunks, root, properties)
        }))
    }
}

impl Encoded {
    /// Writes `chunks` as the only row group of a file in memory and reads back where each
    /// column chunk landed.
    fn new(
        chunks: Vec<ArrowColumnChunk>,
        root: TypePtr,
        properties: WriterPropertiesPtr,
    ) -> Result<Self, ParquetError> {
        let mut buffer = Vec::new();
        let mut writer = SerializedFileWriter::new(&mut buffer, root, properties)?;
        let mut row_group = writer.next_row_group()?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut row_group)?;
        }
        row_group.close()?;
        let metadata = writer.finish()?;
        drop(writer);
        // Kept for the part's life: not the spare capacity of the buffer's doublings.
        buffer.shrink_to_fit();
        let bytes = Bytes::from(buffer);
        let group = metadata.row_group(0);
        let index = metadata.page_index_for_row_group(0);
        let columns = group
            .columns()
            .iter()
            .enumerate()
            .map(|(i, column)| ColumnCloseResult {
                bytes_written: u64::try_from(column.compressed_size()).unwrap_or_default(),
                rows_written: u64::try_from(group.num_rows()).unwrap_or_default(),
                metadata: column.clone(),
                bloom_filter: None,
                column_index: index.column_index(i).cloned(),
                offset_index: index.offset_index(i).cloned(),
            })
            .collect();
        Ok(Self { bytes, columns })
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

/// Writes the encoded `groups` in order as the row groups of a Parquet file of `schema` into
/// `file` (copying their column chunks: they stay for a retry), and returns the file (not yet
/// synced).
pub(super) fn write_file<'a>(
    file: File,
    schema: SchemaRef,
    properties: &WriterProperties,
    groups: impl IntoIterator<Item = &'a Encoded>,
) -> Result<File, ParquetError> {
    let writer = ArrowWriter::try_new(file, schema, Some(properties.clone()))?;
    let (mut writer, _) = writer.into_serialized_writer()?;
    for group in groups {
        let mut row_group = writer.next_row_group()?;
        for column in &group.columns {
            row_group.append_column(&group.bytes, column.clone())?;
        }
        row_group.close()?;
    }
    writer.into_inner()
}
