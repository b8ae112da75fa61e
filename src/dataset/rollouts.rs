//! The Parquet record of each rollout step's evaluation: one row per rollout per driver round,
//! in the dataset beside the reconciles (`table=rollouts/cluster=C/date=D/hour=H/`), one file per
//! round. `analyze` reads them back into its report (docs/parquet.md, "rollouts").

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{Float64Builder, StringBuilder, UInt32Builder, UInt64Builder};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, UInt32Type, UInt64Type};
use arrow_array::{Array, RecordBatch, TimestampMicrosecondArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;

use super::{Location, reader};

/// The table's directory name, `table=rollouts`.
pub const TABLE: &str = "rollouts";

/// One evaluation of one rollout.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Row {
    /// When (µs since the Unix epoch).
    pub time_us: i64,
    /// The cluster the driver runs in (`--cluster`).
    pub cluster: String,
    /// The `ShadowRollout`'s name.
    pub rollout: String,
    /// Its group (`PLAN/GROUP` or `GROUP`).
    pub group: String,
    /// The phase after the round.
    pub phase: String,
    /// The step after the round (1 first).
    pub step: u32,
    /// Its ramp in percent (0: the group in shadow).
    pub ramp: f64,
    /// The gates' result (`Passed`, `Waiting`, `Failed`), or empty when they were not evaluated.
    pub result: String,
    /// The decisions of the round, comma-separated (`Advanced`, `RolledBack`, ...); empty: none.
    pub decision: String,
    /// The status's message: what was decided, or what the step waits for.
    pub message: String,
    /// Objects reconciled with the group enforced since the step began.
    pub enforced_objects: u64,
    /// Each gate: `{"name", "result", "message", "figures"}`, as JSON.
    pub gates: String,
    /// The flag ConfigMap's resourceVersion after the round.
    pub flag_version: Option<String>,
}

/// Every column, as the reader names them.
const COLUMNS: [&str; 13] = [
    "time",
    "cluster",
    "rollout",
    "group",
    "phase",
    "step",
    "ramp",
    "result",
    "decision",
    "message",
    "enforced_objects",
    "gates",
    "flag_version",
];

/// The table's schema.
#[must_use]
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(
            "time",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("cluster", DataType::Utf8, false),
        Field::new("rollout", DataType::Utf8, false),
        Field::new("group", DataType::Utf8, false),
        Field::new("phase", DataType::Utf8, false),
        Field::new("step", DataType::UInt32, false),
        Field::new("ramp", DataType::Float64, false),
        Field::new("result", DataType::Utf8, false),
        Field::new("decision", DataType::Utf8, false),
        Field::new("message", DataType::Utf8, false),
        Field::new("enforced_objects", DataType::UInt64, false),
        Field::new("gates", DataType::Utf8, false),
        Field::new("flag_version", DataType::Utf8, true),
    ]))
}

fn batch(rows: &[Row]) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let strings = |f: &dyn Fn(&Row) -> &str| {
        let mut b = StringBuilder::new();
        for r in rows {
            b.append_value(f(r));
        }
        Arc::new(b.finish()) as Arc<dyn Array>
    };
    let mut step = UInt32Builder::new();
    let mut ramp = Float64Builder::new();
    let mut objects = UInt64Builder::new();
    let mut version = StringBuilder::new();
    for r in rows {
        step.append_value(r.step);
        ramp.append_value(r.ramp);
        objects.append_value(r.enforced_objects);
        version.append_option(r.flag_version.as_deref());
    }
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(
                TimestampMicrosecondArray::from(rows.iter().map(|r| r.time_us).collect::<Vec<_>>())
                    .with_timezone("UTC"),
            ),
            strings(&|r| &r.cluster),
            strings(&|r| &r.rollout),
            strings(&|r| &r.group),
            strings(&|r| &r.phase),
            Arc::new(step.finish()),
            Arc::new(ramp.finish()),
            strings(&|r| &r.result),
            strings(&|r| &r.decision),
            strings(&|r| &r.message),
            Arc::new(objects.finish()),
            strings(&|r| &r.gates),
            Arc::new(version.finish()),
        ],
    )
}

/// Writes one round's rows as one file at `location`, whole or not at all (a temporary name,
/// then a rename, or one upload). Returns its path under the dataset.
///
/// # Errors
/// The file could not be encoded, written or uploaded.
pub fn write(location: &Location, identity: &str, rows: &[Row]) -> Result<PathBuf, String> {
    let Some(first) = rows.first() else {
        return Err("no rows".to_owned());
    };
    let relative = format!(
        "table={TABLE}/cluster={}/{}/rollout-{}-{}.parquet",
        first.cluster,
        super::schema::partition_of(first.time_us),
        first.time_us,
        identity.replace(['/', '\\'], "_")
    );
    let batch = batch(rows).map_err(|e| format!("cannot encode the rollout rows: {e}"))?;
    let mut bytes = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut bytes, schema(), None)
        .map_err(|e| format!("cannot encode the rollout rows: {e}"))?;
    writer
        .write(&batch)
        .and_then(|()| writer.close().map(|_| ()))
        .map_err(|e| format!("cannot encode the rollout rows: {e}"))?;
    match location {
        Location::Local(dir) => {
            let path = dir.join(&relative);
            let parent = path.parent().unwrap_or(dir);
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            let temporary = parent.join(format!(
                ".{}.tmp",
                path.file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("rollout")
            ));
            std::fs::write(&temporary, &bytes)
                .and_then(|()| std::fs::rename(&temporary, &path))
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok(path)
        }
        Location::Remote(remote) => {
            let temporary = std::env::temp_dir().join(format!(
                "shadow-reconciler-rollout-{}-{}.parquet",
                std::process::id(),
                first.time_us
            ));
            std::fs::write(&temporary, &bytes)
                .map_err(|e| format!("cannot write {}: {e}", temporary.display()))?;
            let uploaded = remote.upload(&temporary, &relative, 8 << 20);
            let _ = std::fs::remove_file(&temporary);
            uploaded.map_err(|e| e.to_string())?;
            Ok(PathBuf::from(relative))
        }
    }
}

/// The files of the table at `location`.
/// The table's files at `location`, sorted (a local directory's by path).
pub(crate) fn files(location: &Location) -> Result<Vec<PathBuf>, reader::ReadError> {
    match location {
        Location::Local(dir) => {
            let mut out = Vec::new();
            walk(&dir.join(format!("table={TABLE}")), &mut out);
            out.sort();
            Ok(out)
        }
        Location::Remote(remote) => {
            let under = format!("table={TABLE}");
            let objects = remote
                .list(&under)
                .map_err(|e| reader::ReadError::Invalid {
                    path: PathBuf::from(format!("{}/{under}", remote.url())),
                    message: format!("cannot list: {e}"),
                })?;
            Ok(objects
                .into_iter()
                .map(|o| o.path)
                .filter(|p| is_part(p))
                .collect())
        }
    }
}

fn is_part(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".parquet") && !n.starts_with(['.', '_']))
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out);
        } else if is_part(&path) {
            out.push(path);
        }
    }
}

/// Every row of the table at `location`, oldest first; a file that cannot be read is skipped
/// with a warning.
///
/// # Errors
/// The table cannot be listed (an object store that refuses).
pub fn read(location: &Location) -> Result<Vec<Row>, reader::ReadError> {
    let mut rows = Vec::new();
    for path in files(location)? {
        let read = (|| -> Result<(), reader::ReadError> {
            for batch in reader::open_at(location, &path, &COLUMNS)? {
                rows.extend(decode(&batch?, &path)?);
            }
            Ok(())
        })();
        if let Err(e) = read {
            tracing::warn!(path = %path.display(), error = %e, "skipped a rollouts file that cannot be read");
        }
    }
    rows.sort_by(|a, b| (a.time_us, &a.rollout).cmp(&(b.time_us, &b.rollout)));
    Ok(rows)
}

fn decode(batch: &RecordBatch, path: &Path) -> Result<Vec<Row>, reader::ReadError> {
    let invalid = |name: &str| reader::ReadError::Invalid {
        path: path.to_owned(),
        message: format!("column {name} is missing or of another type"),
    };
    let string = |name: &str| {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_string_opt::<i32>())
            .ok_or_else(|| invalid(name))
    };
    let time = reader::time_column(batch, path)?;
    let step = batch
        .column_by_name("step")
        .and_then(|c| c.as_primitive_opt::<UInt32Type>())
        .ok_or_else(|| invalid("step"))?;
    let ramp = batch
        .column_by_name("ramp")
        .and_then(|c| c.as_primitive_opt::<Float64Type>())
        .ok_or_else(|| invalid("ramp"))?;
    let objects = batch
        .column_by_name("enforced_objects")
        .and_then(|c| c.as_primitive_opt::<UInt64Type>())
        .ok_or_else(|| invalid("enforced_objects"))?;
    let (cluster, rollout, group, phase) = (
        string("cluster")?,
        string("rollout")?,
        string("group")?,
        string("phase")?,
    );
    let (result, decision, message, gates, version) = (
        string("result")?,
        string("decision")?,
        string("message")?,
        string("gates")?,
        string("flag_version")?,
    );
    Ok((0..batch.num_rows())
        .map(|i| Row {
            time_us: time.value(i),
            cluster: cluster.value(i).to_owned(),
            rollout: rollout.value(i).to_owned(),
            group: group.value(i).to_owned(),
            phase: phase.value(i).to_owned(),
            step: step.value(i),
            ramp: ramp.value(i),
            result: result.value(i).to_owned(),
            decision: decision.value(i).to_owned(),
            message: message.value(i).to_owned(),
            enforced_objects: objects.value(i),
            gates: gates.value(i).to_owned(),
            flag_version: version.is_valid(i).then(|| version.value(i).to_owned()),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_written_is_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let location = Location::Local(dir.path().to_owned());
        let row = |rollout: &str, step| Row {
            time_us: 1_800_000_000_000_000,
            cluster: "default".into(),
            rollout: rollout.into(),
            group: format!("hostedcluster/{rollout}"),
            phase: "Progressing".into(),
            step,
            ramp: 25.0,
            result: "Passed".into(),
            decision: "Advanced".into(),
            message: "m".into(),
            enforced_objects: 21,
            gates: "[]".into(),
            flag_version: Some("42".into()),
        };
        let rows = vec![row("a", 2), row("b", 1)];
        let path = write(&location, "pod/0", &rows).unwrap();
        let relative = path
            .strip_prefix(dir.path())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(
            relative.starts_with("table=rollouts/cluster=default/date=2027-01-15/hour=08/rollout-"),
            "{relative}"
        );
        assert_eq!(read(&location).unwrap(), rows);
        // The reconciles' reader does not see the table.
        assert!(reader::parts_at(&location).unwrap().pairs.is_empty());
    }
}
