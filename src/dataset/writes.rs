//! The `writes` table's rows: one per object an operation wrote differently in the candidate's
//! code and the control's (`ReconcileRecord::write_differences`).

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, ListBuilder, StringBuilder, TimestampMicrosecondBuilder, UInt32Builder,
};
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::ArrowError;

use super::encode::{DEFAULT_CLUSTER, ReconcileStrings, append_names, strings, time_micros};
use super::schema::Table;
use crate::engine::ReconcileRecord;

/// Builds the `writes` table.
pub struct WriteRows {
    cluster: Arc<str>,
    time: TimestampMicrosecondBuilder,
    reconcile: ReconcileStrings,
    operation: StringBuilder,
    only: StringBuilder,
    object_group: StringBuilder,
    object_kind: StringBuilder,
    object_namespace: StringBuilder,
    object_name: StringBuilder,
    object_subresource: StringBuilder,
    control_verb: StringBuilder,
    candidate_verb: StringBuilder,
    control_action: StringBuilder,
    candidate_action: StringBuilder,
    fields: ListBuilder<StringBuilder>,
    fields_total: UInt32Builder,
    intended: BooleanBuilder,
}

impl Default for WriteRows {
    fn default() -> Self {
        Self::with_capacity(64)
    }
}

impl WriteRows {
    /// Builders sized for `rows` rows.
    #[must_use]
    pub fn with_capacity(rows: usize) -> Self {
        Self {
            cluster: DEFAULT_CLUSTER.into(),
            time: TimestampMicrosecondBuilder::with_capacity(rows).with_timezone("UTC"),
            reconcile: ReconcileStrings::new(rows),
            operation: strings(rows, 16),
            only: strings(rows, 6),
            object_group: strings(rows, 16),
            object_kind: strings(rows, 12),
            object_namespace: strings(rows, 16),
            object_name: strings(rows, 16),
            object_subresource: strings(rows, 6),
            control_verb: strings(rows, 6),
            candidate_verb: strings(rows, 6),
            control_action: strings(rows, 6),
            candidate_action: strings(rows, 6),
            fields: ListBuilder::new(strings(rows, 32)),
            fields_total: UInt32Builder::with_capacity(rows),
            intended: BooleanBuilder::with_capacity(rows),
        }
    }

    /// The rows' cluster (default [`DEFAULT_CLUSTER`]); the name is assumed checked.
    #[must_use]
    pub fn with_cluster(mut self, cluster: Arc<str>) -> Self {
        self.cluster = cluster;
        self
    }

    /// Appends a row per write difference of the record; `id` is its reconcile id.
    pub fn append(&mut self, r: &ReconcileRecord, id: &str) {
        let time = time_micros(r);
        for d in &r.write_differences {
            self.time.append_value(time);
            self.reconcile.append(r, id);
            self.operation.append_value(&d.operation);
            self.only
                .append_option(d.only.map(crate::vocab::CodePath::as_str));
            self.object_group.append_value(&d.group);
            self.object_kind.append_value(&d.kind);
            self.object_namespace.append_option(d.namespace.as_deref());
            self.object_name.append_value(&d.name);
            self.object_subresource
                .append_option(d.subresource.as_deref());
            self.control_verb
                .append_option(d.control.map(crate::vocab::WriteVerb::as_str));
            self.candidate_verb
                .append_option(d.candidate.map(crate::vocab::WriteVerb::as_str));
            self.control_action
                .append_value(d.control_action().as_str());
            self.candidate_action
                .append_value(d.candidate_action().as_str());
            append_names(&mut self.fields, &d.fields);
            self.fields_total.append_value(d.fields_total);
            self.intended.append_value(d.intended);
        }
    }

    /// Rows appended since the last batch.
    #[must_use]
    pub fn rows(&self) -> usize {
        self.reconcile.len()
    }

    /// The rows so far as one batch; the builder starts over.
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        let rows = self.reconcile.len();
        let (reconcile_id, rest) = self.reconcile.finish();
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(self.time.finish()),
            Arc::new(reconcile_id),
            Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
                &*self.cluster,
                rows,
            ))),
        ];
        columns.extend(rest.map(|column| Arc::new(column) as ArrayRef));
        columns.extend([
            Arc::new(self.operation.finish()) as ArrayRef,
            Arc::new(self.only.finish()),
            Arc::new(self.object_group.finish()),
            Arc::new(self.object_kind.finish()),
            Arc::new(self.object_namespace.finish()),
            Arc::new(self.object_name.finish()),
            Arc::new(self.object_subresource.finish()),
            Arc::new(self.control_verb.finish()),
            Arc::new(self.candidate_verb.finish()),
            Arc::new(self.control_action.finish()),
            Arc::new(self.candidate_action.finish()),
            Arc::new(self.fields.finish()),
            Arc::new(self.fields_total.finish()),
            Arc::new(self.intended.finish()),
        ]);
        RecordBatch::try_new(Table::Writes.schema(), columns)
    }
}
