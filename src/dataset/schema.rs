//! The Arrow schemas of the three Parquet tables, `reconciles`, `steps` and `writes` (documented
//! column by column in `docs/parquet.md`, checked against it by a test).

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

/// The tables of the dataset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Table {
    /// One row per reconcile.
    Reconciles,
    /// One row per operation per policy per reconcile.
    Steps,
    /// One row per object an operation wrote differently in the candidate's code and the
    /// control's (`ReconcileRecord::write_differences`).
    Writes,
}

impl Table {
    /// Every table, in the order a rotation commits them last to first: `reconciles`, the
    /// commit point, is renamed into place last.
    pub const ALL: [Self; 3] = [Self::Reconciles, Self::Steps, Self::Writes];

    /// The table's name, as in its partition directory `table=<name>`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Reconciles => "reconciles",
            Self::Steps => "steps",
            Self::Writes => "writes",
        }
    }

    /// The table's Arrow schema.
    #[must_use]
    pub fn schema(self) -> SchemaRef {
        match self {
            Self::Reconciles => reconciles(),
            Self::Steps => steps(),
            Self::Writes => writes(),
        }
    }

    /// The schema of the Arrow batches the writer builds for this table: [`schema`](Self::schema),
    /// except that in `steps` the columns of [`PER_RECONCILE`] are dictionary arrays (`Int32`
    /// keys, `Utf8` values) whose keys are the row's reconcile. The Parquet writer reads through
    /// the keys: the files have the plain [`schema`](Self::schema).
    #[must_use]
    pub fn batch_schema(self) -> SchemaRef {
        match self {
            Self::Reconciles => reconciles(),
            Self::Writes => writes(),
            Self::Steps => {
                let fields: Vec<Field> = steps()
                    .fields()
                    .iter()
                    .map(|field| {
                        if PER_RECONCILE.contains(&field.name().as_str()) {
                            Field::new(
                                field.name(),
                                DataType::Dictionary(
                                    Box::new(DataType::Int32),
                                    Box::new(DataType::Utf8),
                                ),
                                field.is_nullable(),
                            )
                        } else {
                            field.as_ref().clone()
                        }
                    })
                    .collect();
                Arc::new(Schema::new(fields))
            }
        }
    }

    /// Columns whose values repeat (plan, operation, outcome...): dictionary-encoded in Parquet.
    /// The others (ids, names, messages) are written plain.
    #[must_use]
    pub const fn plain_columns(self) -> &'static [&'static str] {
        match self {
            Self::Reconciles => &[
                "reconcile_id",
                "trace_id",
                "uid",
                "control_error",
                "candidate_error",
            ],
            Self::Steps => &["reconcile_id", "message"],
            Self::Writes => &["reconcile_id", "object_name"],
        }
    }
}

/// The string columns each `steps` row repeats from its reconcile, in schema order.
pub const PER_RECONCILE: [&str; 8] = [
    "reconcile_id",
    "cluster",
    "plan",
    "plan_hash",
    "mode",
    "kind",
    "namespace",
    "name",
];

fn utc_micros() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

fn names() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
}

fn common(table: Table) -> Vec<Field> {
    let mut fields = vec![
        Field::new("time", utc_micros(), false),
        Field::new("reconcile_id", DataType::Utf8, false),
    ];
    if table == Table::Reconciles {
        fields.push(Field::new("trace_id", DataType::Utf8, true));
    }
    fields.extend([
        Field::new("cluster", DataType::Utf8, false),
        Field::new("plan", DataType::Utf8, false),
        Field::new("plan_hash", DataType::Utf8, false),
        Field::new("mode", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("namespace", DataType::Utf8, true),
        Field::new("name", DataType::Utf8, false),
    ]);
    fields
}

fn reconciles() -> SchemaRef {
    let mut fields = common(Table::Reconciles);
    fields.extend([
        Field::new("uid", DataType::Utf8, true),
        Field::new("duration_us", DataType::Int64, false),
        Field::new("control_first_failure", DataType::Utf8, true),
        Field::new("control_error", DataType::Utf8, true),
        Field::new("candidate_error", DataType::Utf8, true),
        Field::new("unblocked", names(), false),
        Field::new("newly_blocked", names(), false),
        Field::new("changed", names(), false),
        Field::new("guard_refusals", DataType::UInt32, false),
        Field::new("dry_run_requests", DataType::UInt32, false),
        Field::new("cancelled", DataType::Boolean, false),
        Field::new("enforced_groups", names(), false),
        Field::new("flag_version", DataType::Utf8, true),
        Field::new("comparison_skipped", DataType::Utf8, true),
    ]);
    Arc::new(Schema::new(fields))
}

fn steps() -> SchemaRef {
    let mut fields = common(Table::Steps);
    fields.extend([
        Field::new("policy", DataType::Utf8, false),
        Field::new("seq", DataType::UInt32, false),
        Field::new("operation", DataType::Utf8, false),
        Field::new("phase", DataType::UInt32, false),
        Field::new("category", DataType::Utf8, false),
        Field::new("execution", DataType::Utf8, false),
        Field::new("outcome", DataType::Utf8, false),
        Field::new("error_class", DataType::Utf8, true),
        Field::new("message", DataType::Utf8, true),
        Field::new("blocked_by", names(), false),
        Field::new("offset_us", DataType::Int64, false),
        Field::new("duration_us", DataType::Int64, false),
        Field::new("conflicts", DataType::UInt32, false),
        Field::new("conflict_resolution", DataType::Utf8, true),
    ]);
    Arc::new(Schema::new(fields))
}

fn writes() -> SchemaRef {
    let mut fields = common(Table::Writes);
    fields.extend([
        Field::new("operation", DataType::Utf8, false),
        Field::new("only", DataType::Utf8, true),
        Field::new("object_group", DataType::Utf8, false),
        Field::new("object_kind", DataType::Utf8, false),
        Field::new("object_namespace", DataType::Utf8, true),
        Field::new("object_name", DataType::Utf8, false),
        Field::new("object_subresource", DataType::Utf8, true),
        Field::new("control_verb", DataType::Utf8, true),
        Field::new("candidate_verb", DataType::Utf8, true),
        Field::new("control_action", DataType::Utf8, false),
        Field::new("candidate_action", DataType::Utf8, false),
        Field::new("fields", names(), false),
        Field::new("fields_total", DataType::UInt32, false),
        Field::new("intended", DataType::Boolean, false),
    ]);
    Arc::new(Schema::new(fields))
}

/// The `policy` column's values.
pub mod policy {
    /// The control run's steps.
    pub const CONTROL: &str = "control";
    /// The candidate run's steps.
    pub const CANDIDATE: &str = "candidate";
}

/// `date=YYYY-MM-DD/hour=HH` of a time in microseconds since the Unix epoch (UTC).
#[must_use]
pub fn partition_of(micros: i64) -> String {
    let secs = micros.div_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let hour = secs.rem_euclid(86_400) / 3600;
    let (year, month, day) = crate::util::time::from_days(days);
    format!("date={year:04}-{month:02}-{day:02}/hour={hour:02}")
}

#[cfg(test)]
mod tests {
    use super::partition_of;

    #[test]
    fn partitions_are_utc_dates_and_hours() {
        assert_eq!(partition_of(0), "date=1970-01-01/hour=00");
        // 2026-11-29T18:06:06Z
        assert_eq!(
            partition_of(1_795_975_566_000_000),
            "date=2026-11-29/hour=18"
        );
        // 2024-02-29T23:59:59Z, a leap day
        assert_eq!(
            partition_of(1_709_251_199_000_000),
            "date=2024-02-29/hour=23"
        );
        assert_eq!(partition_of(-1), "date=1969-12-31/hour=23");
    }
}
