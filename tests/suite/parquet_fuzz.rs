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
    }
    std::fs::write(path, bytes).expect("write the damaged file");
}

/// Damages file `steps` (or `reconciles`) of part `part` in a copy of the base, runs analyze and
/// checks what it says.
fn check(part: usize, steps: bool, damage: &Damage) {
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
        return;
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
