//! Row groups encoded ahead: the writer seals the `steps` rows in pieces (an eighth of a row
//! group) and hands each piece to the open row group's encoder, a background thread that keeps
//! the group's column writers and encodes the piece (dictionaries, pages, Snappy) while the writer
//! builds the next one. Building the Arrow data and encoding it overlap instead of adding up, and a
//! rotation only has the last piece left to encode before it assembles the file.
//!
//! The Arrow pieces stay with the part until its file is committed: a rotation that fails (a full
//! disk) is retried from them, encoding again, exactly as without encoding ahead.

use std::fs::File;
use std::sync::Arc;
use std::sync::mpsc;
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

/// One row group being encoded: its pieces go to `pieces`; the thread returns its chunks.
pub(super) struct Group {
    pieces: Option<mpsc::Sender<RecordBatch>>,
    rows: usize,
    encoder: JoinHandle<Result<Vec<ArrowColumnChunk>, ParquetError>>,
}

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

    /// Opens a row group: a thread that encodes each piece it is sent, its columns shared
    /// between itself and a helper, and closes the group's columns when the sender goes.
    pub(super) fn open(&self) -> Group {
        let (factory, schema) = (self.factory.clone(), self.schema.clone());
        let (pieces, received) = mpsc::channel::<RecordBatch>();
        let encoder = std::thread::spawn(move || {
            let mut writers: Vec<Option<ArrowColumnWriter>> = factory
                .create_column_writers(0)?
                .into_iter()
                .map(Some)
                .collect();
            for piece in received {
                let mut leaves = Vec::with_capacity(writers.len());
                for (array, field) in piece.columns().iter().zip(schema.fields()) {
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
                for (i, (writer, leaf)) in writers.iter_mut().zip(leaves).enumerate() {
                    let writer = writer
                        .as_mut()
                        .expect("writers stay until the group closes");
                    if i % 2 == 0 {
                        even.push((writer, leaf));
                    } else {
                        odd.push((writer, leaf));
                    }
                }
                std::thread::scope(|scope| {
                    let helper = scope.spawn(|| write(odd));
                    write(even)?;
                    helper
                        .join()
                        .map_err(|_| ParquetError::General("a column encoder panicked".into()))?
                })?;
            }
            writers
                .into_iter()
                .map(|w| w.expect("every writer is closed once").close())
                .collect()
        });
        Group {
            pieces: Some(pieces),
            rows: 0,
            encoder,
        }
    }
}

fn write(jobs: Vec<(&mut ArrowColumnWriter, ArrowLeafColumn)>) -> Result<(), ParquetError> {
    jobs.into_iter()
        .try_for_each(|(writer, leaf)| writer.write(&leaf))
}

impl Group {
    /// Rows sent so far.
    pub(super) const fn rows(&self) -> usize {
        self.rows
    }

    /// Sends a piece; false when the encoder has stopped (its error comes at [`write`]).
    pub(super) fn send(&mut self, piece: RecordBatch) -> bool {
        self.rows += piece.num_rows();
        self.pieces
            .as_ref()
            .is_some_and(|pieces| pieces.send(piece).is_ok())
    }

    /// No more pieces: the encoder closes the group's columns.
    pub(super) fn close(&mut self) {
        self.pieces = None;
    }
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
    for mut group in groups {
        group.close();
        let chunks = group
            .encoder
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
