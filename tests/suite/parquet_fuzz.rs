//! Fuzzing `analyze` with damaged Parquet files: a `simulate` dataset of several parts, one file
//! of one part damaged per case (truncated, bytes flipped anywhere or in the footer, the footer
//! length overwritten, garbage appended, replaced by random bytes, by the other table's file or by
//! a Parquet file whose columns have the wrong types), then `analyze --format json` on it.
//!
//! Whatever the damage: `analyze` never panics or aborts (exit 0, 2 or 3, never 101 or a
//! signal), says what it skipped and why with the file's path, and a damaged part counts whole or
//! not at all: when the damaged file is skipped, its sibling is skipped too and every other part
//! is counted exactly as before. Fixed cases below keep the damage kinds that matter most as
//! regression cases; proptest draws the rest.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use arrow_array::{Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use proptest::prelude::*;
use shadow_reconciler::dataset::reader;

/// The undamaged dataset and what each part holds.
struct Base {
    _dir: tempfile::TempDir,
    root: PathBuf,
    /// (reconciles file, steps file, reconciles in the part), relative to `root`.
    parts: Vec<(PathBuf, PathBuf, u64)>,
}

fn base() -> &'static Base {
    static BASE: OnceLock<Base> = OnceLock::new();
    BASE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("data");
        let out = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
            .args(["simulate", "--hosted-clusters", "12", "--addons", "4"])
            .args(["--seed", "5", "--parquet-max-rows", "400"])
            .arg("--parquet-dir")
            .arg(&root)
            .output()
            .expect("run simulate");
        assert!(
            out.status.success(),
            "simulate: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let found = reader::parts(&root).expect("list the dataset");
        assert!(found.orphans.is_empty(), "{:?}", found.orphans);
        let parts: Vec<_> = found
            .pairs
            .iter()
            .map(|(r, s)| {
                (
                    r.strip_prefix(&root).unwrap().to_owned(),
                    s.strip_prefix(&root).unwrap().to_owned(),
                    common::reconcile_ids(r).len() as u64,
                )
            })
            .collect();
        assert!(
            parts.len() >= 3,
            "the base dataset has {} parts; the fuzz needs several",
            parts.len()
        );
        Base {
            _dir: dir,
            root,
            parts,
        }
    })
}

/// A damage done to one file.
#[derive(Clone, Debug)]
enum Damage {
    /// Keep this fraction (per mille) of the file.
    Truncate(u16),
    /// XOR these (position per mille, byte) pairs anywhere.
    Flip(Vec<(u16, u8)>),
    /// XOR these (offset from the end, byte) pairs in the last 256 bytes: the footer.
    FlipFooter(Vec<(u8, u8)>),
    /// Overwrite the footer's metadata length (the 4 bytes before `PAR1`).
    FooterLength(u32),
    /// Append these bytes.
    Append(Vec<u8>),
    /// Replace the whole file with these bytes.
    Replace(Vec<u8>),
    /// Replace the file with its sibling of the other table.
    OtherTable,
    /// Replace the file with a Parquet file of the right column names and wrong types.
    WrongTypes,
    /// XOR the first bit of this column's chunk, in file order, whose flip leaves the file
    /// readable and changes the column's values as said: the part's two files then disagree.
    Disagree(&'static str, Effect),
}

/// What a [`Damage::Disagree`] flip does to its column's values.
#[derive(Clone, Copy, Debug)]
enum Effect {
    /// More runs of equal consecutive values: one reconcile's steps rows under several ids, as a
    /// flipped byte of a Snappy back-reference in the plain `reconcile_id` chunk does (the case
    /// proptest found: `Flip([(68, 9)])` on a steps file, 80 reconciles counted of 78).
    SplitsRun,
    /// As many rows, each value one the column had, some value on more rows: rows moved to
    /// another plan.
    MovesRows,
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (0u16..1000).prop_map(Damage::Truncate),
        prop::collection::vec((0u16..1000, 1u8..=255), 1..8).prop_map(Damage::Flip),
        prop::collection::vec((1u8..=255, 1u8..=255), 1..6).prop_map(Damage::FlipFooter),
        any::<u32>().prop_map(Damage::FooterLength),
        prop::collection::vec(any::<u8>(), 1..512).prop_map(Damage::Append),
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..2048),
            // Magic at both ends, garbage between.
            prop::collection::vec(any::<u8>(), 0..256).prop_map(|mut v| {
                let mut bytes = b"PAR1".to_vec();
                bytes.append(&mut v);
                bytes.extend_from_slice(b"PAR1");
                bytes
            }),
        ]
        .prop_map(Damage::Replace),
        Just(Damage::OtherTable),
        Just(Damage::WrongTypes),
    ]
}

fn wrong_types() -> Vec<u8> {
    let columns = [
        "time",
        "reconcile_id",
        "plan",
        "plan_hash",
        "guard_refusals",
        "seq",
        "operation",
    ];
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| Field::new(*c, DataType::Int64, true))
            .collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(
        schema.clone(),
        columns
            .iter()
            .map(|_| Arc::new(Int64Array::from(vec![1, 2, 3])) as Arc<dyn Array>)
            .collect(),
    )
    .expect("a batch");
    let mut bytes = Vec::new();
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(&mut bytes, schema, None).expect("a writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
    bytes
}

/// The values of the string column `column` of the Parquet file `bytes`, `None` when it cannot
/// be read (a panic of the Parquet library is an error here too).
fn strings(bytes: &[u8], column: &str) -> Option<Vec<String>> {
    use arrow_array::cast::AsArray;
    let bytes = bytes::Bytes::copy_from_slice(bytes);
    let invalid = |message: String| reader::ReadError::Invalid {
        path: PathBuf::from(column),
        message,
    };
    reader::guarded(Path::new(column), || {
        let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
            .map_err(|e| invalid(e.to_string()))?;
        let mask = parquet::arrow::ProjectionMask::columns(builder.parquet_schema(), [column]);
        let mut values = Vec::new();
        for batch in builder
            .with_projection(mask)
            .build()
            .map_err(|e| invalid(e.to_string()))?
        {
            let batch = batch.map_err(|e| invalid(e.to_string()))?;
            let strings = batch
                .column(0)
                .as_string_opt::<i32>()
                .ok_or_else(|| invalid("not strings".into()))?;
            values.extend((0..strings.len()).map(|i| strings.value(i).to_owned()));
        }
        Ok(values)
    })
    .ok()
}

/// The first (byte, bit) of `column`'s chunks in the Parquet file `bytes` whose flip leaves the
/// column readable and does `effect` to its values; tried in file order, so that the damage is
/// the same on every run although the dataset's bytes are not (part names, ids and times vary).
fn disagreeing_flip(bytes: &[u8], column: &str, effect: Effect) -> Option<(usize, u8)> {
    let before = strings(bytes, column)?;
    let metadata = parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(&bytes::Bytes::copy_from_slice(bytes))
        .ok()?;
    let runs = |v: &[String]| (0..v.len()).filter(|&i| i == 0 || v[i] != v[i - 1]).count();
    let tally = |v: &[String]| {
        let mut t = std::collections::BTreeMap::<String, usize>::new();
        for x in v {
            *t.entry(x.clone()).or_default() += 1;
        }
        t
    };
    let does = |after: &[String]| match effect {
        Effect::SplitsRun => runs(after) > runs(&before),
        Effect::MovesRows => {
            let (a, b) = (tally(after), tally(&before));
            after.len() == before.len() && a.keys().all(|k| b.contains_key(k)) && a != b
        }
    };
    let mut damaged = bytes.to_vec();
    for group in metadata.row_groups() {
        let chunk = group
            .columns()
            .iter()
            .find(|c| c.column_path().string() == column)?;
        let (start, length) = chunk.byte_range();
        for i in usize::try_from(start).ok()?..usize::try_from(start + length).ok()? {
            for bit in (0..8).map(|b| 1u8 << b) {
                damaged[i] ^= bit;
                let found = strings(&damaged, column).is_some_and(|after| does(&after));
                damaged[i] ^= bit;
                if found {
                    return Some((i, bit));
                }
            }
        }
    }
    None
}

fn apply(damage: &Damage, path: &Path, sibling: &Path) {
    let mut bytes = std::fs::read(path).expect("read the file");
    let at = |per_mille: u16, len: usize| len * usize::from(per_mille) / 1000;
    match damage {
        Damage::Truncate(keep) => bytes.truncate(at(*keep, bytes.len())),
        Damage::Flip(flips) => {
            for (position, byte) in flips {
                let i = at(*position, bytes.len());
                bytes[i] ^= byte;
            }
        }
        Damage::FlipFooter(flips) => {
            for (back, byte) in flips {
                let back = usize::from(*back).min(bytes.len());
                let i = bytes.len() - back;
                bytes[i] ^= byte;
            }
        }
        Damage::FooterLength(length) => {
            let n = bytes.len();
            bytes[n - 8..n - 4].copy_from_slice(&length.to_le_bytes());
        }
        Damage::Append(more) => bytes.extend_from_slice(more),
        Damage::Replace(new) => bytes.clone_from(new),
        Damage::OtherTable => bytes = std::fs::read(sibling).expect("read the sibling"),
        Damage::WrongTypes => bytes = wrong_types(),
        Damage::Disagree(column, effect) => {
            let (i, bit) = disagreeing_flip(&bytes, column, *effect)
                .unwrap_or_else(|| panic!("{damage:?}: no bit of {} does it", path.display()));
            bytes[i] ^= bit;
        }
    }
    std::fs::write(path, bytes).expect("write the damaged file");
}

/// Damages file `steps` (or `reconciles`) of part `part` in a copy of the base, runs analyze and
/// checks what it says; returns the files it skipped, with why (none when it failed).
fn check(part: usize, steps: bool, damage: &Damage) -> Vec<(String, String)> {
    let base = base();
    let part = part % base.parts.len();
    let (reconciles_file, steps_file, in_part) = &base.parts[part];
    let total: u64 = base.parts.iter().map(|p| p.2).sum();
    let copy = tempfile::tempdir().expect("temp dir");
    let root = copy.path().join("data");
    common::copy_dir(&base.root, &root);
    let (target, sibling) = if steps {
        (root.join(steps_file), root.join(reconciles_file))
    } else {
        (root.join(reconciles_file), root.join(steps_file))
    };
    apply(damage, &target, &sibling);

    let out = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args(["analyze", "--format", "json"])
        .arg(&root)
        .output()
        .expect("run analyze");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 2 | 3)),
        "{damage:?} on {}: analyze ended with {:?}:\n{stderr}",
        target.display(),
        out.status
    );
    assert!(
        !stderr.contains("panicked"),
        "{damage:?}: a panic:\n{stderr}"
    );
    let name = target.to_string_lossy().into_owned();
    if code == Some(2) {
        // An error: it must name the damaged file (nothing else is wrong with the dataset).
        assert!(
            stderr.contains(&name),
            "{damage:?}: the error does not name {name}:\n{stderr}"
        );
        return Vec::new();
    }
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{damage:?}: analyze printed no JSON ({e}):\n{stderr}"));
    let skipped: Vec<(String, String)> = doc["files_skipped"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            (
                s["path"].as_str().unwrap_or_default().to_owned(),
                s["error"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let counted = common::counted_reconciles(&doc);
    let sibling_name = sibling.to_string_lossy().into_owned();
    if skipped.iter().any(|(p, _)| *p == name) {
        assert!(
            skipped.iter().any(|(p, _)| *p == sibling_name),
            "{damage:?}: {name} was skipped but not its sibling: {skipped:?}"
        );
        // The part's files: reconciles, steps, and its writes file when it has one.
        let writes = root
            .join(reconciles_file)
            .to_string_lossy()
            .replace("table=reconciles", "table=writes");
        let files = 2 + usize::from(std::path::Path::new(&writes).exists());
        assert_eq!(
            skipped.len(),
            files,
            "{damage:?}: only the damaged part: {skipped:?}"
        );
        assert!(
            skipped.iter().all(|(_, error)| !error.is_empty()),
            "{damage:?}: a skip without a reason: {skipped:?}"
        );
        assert_eq!(
            counted,
            total - in_part,
            "{damage:?}: every other part counted exactly"
        );
    } else {
        // The damage left a readable file (values may have changed, rows may belong to no
        // plan now): never more reconciles than there are.
        assert!(skipped.is_empty(), "{damage:?}: {skipped:?}");
        assert!(
            counted <= total,
            "{damage:?}: {counted} reconciles counted of {total}"
        );
    }
    skipped
}

#[test]
fn fixed_damages_skip_the_part_whole_and_name_the_file() {
    let cases = [
        Damage::Truncate(0),
        Damage::Truncate(500),
        Damage::Truncate(999),
        Damage::FooterLength(u32::MAX),
        Damage::FooterLength(0),
        Damage::FooterLength(9),
        Damage::Replace(b"PAR1PAR1".to_vec()),
        Damage::Replace(b"not parquet".to_vec()),
        Damage::OtherTable,
        Damage::WrongTypes,
    ];
    for (i, damage) in cases.iter().enumerate() {
        for steps in [true, false] {
            check(i, steps, damage);
        }
    }
}

/// A bit flipped where the file stays readable and its values change so that the part's two
/// files disagree: a steps row under a reconcile id the part does not have (a reconcile's rows
/// split in several runs), steps rows moved to another plan than their reconcile's, a reconcile
/// moved to another plan than its steps rows'. Each would count reconciles the part does not
/// have (the steps rows of a reconcile counted twice, or under two plans): the part is skipped
/// whole instead, the steps file's reason naming its reconciles file.
#[test]
fn files_of_a_part_that_disagree_skip_it_whole() {
    let base = base();
    let cases = [
        (true, "reconcile_id", Effect::SplitsRun),
        (true, "plan", Effect::MovesRows),
        (false, "plan", Effect::MovesRows),
    ];
    for (steps, column, effect) in cases {
        let damage = Damage::Disagree(column, effect);
        // The first part where such a bit exists (a part of one plan has no row to move).
        let part = (0..base.parts.len())
            .find(|&i| {
                let (r, s, _) = &base.parts[i];
                let bytes = std::fs::read(base.root.join(if steps { s } else { r })).unwrap();
                disagreeing_flip(&bytes, column, effect).is_some()
            })
            .unwrap_or_else(|| panic!("{damage:?}: no part of the base has such a bit"));
        let skipped = check(part, steps, &damage);
        let (reconciles_file, steps_file, _) = &base.parts[part];
        let steps_file = steps_file.to_string_lossy();
        let Some((_, why)) = skipped.iter().find(|(p, _)| p.ends_with(&*steps_file)) else {
            panic!("{damage:?}: the part was counted: {skipped:?}");
        };
        assert!(
            why.contains(&*reconciles_file.to_string_lossy()),
            "{damage:?}: the reason does not name the reconciles file: {why}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 400,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
        )),
        ..ProptestConfig::default()
    })]

    #[test]
    fn damaged_files_never_crash_analyze_or_count_half_a_part(
        part in 0usize..64,
        steps in any::<bool>(),
        damage in damage(),
    ) {
        check(part, steps, &damage);
    }
}
