//! What the candidate's code would have written differently: the `writes` table counted per
//! operation and kind of difference, in objects, and the findings it makes (an unexpected
//! difference stops the operation's rollout group; an intended one, or the writes of an
//! operation that exists in one code path only, is a notice of what enforcing changes).

use std::collections::BTreeMap;
use std::path::Path;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use serde::Serialize;

use super::counts::{MAX_FIELDS, MAX_NAMES, WriteCounts, WriteKey, add_bounded};
use crate::dataset::{Location, reader};
use crate::plan::ReconcilePlan;
use crate::vocab::CodePath;

/// Columns of `writes` the analysis reads.
pub const WRITE_COLUMNS: [&str; 17] = [
    "time",
    "plan",
    "mode",
    "object_namespace",
    "plan_hash",
    "kind",
    "namespace",
    "name",
    "operation",
    "object_kind",
    "object_name",
    "object_subresource",
    "control_action",
    "candidate_action",
    "fields",
    "fields_total",
    "intended",
];

/// Whether two nullable string columns hold the same value (or both null) at row `i`.
fn col_eq(a: &arrow_array::StringArray, b: &arrow_array::StringArray, i: usize) -> bool {
    match (a.is_valid(i), b.is_valid(i)) {
        (true, true) => a.value(i) == b.value(i),
        (false, false) => true,
        _ => false,
    }
}

/// The index of the analysed plan a row's plan name and hash belong to, if any.
pub type Resolve<'r> = dyn Fn(&str, &str) -> Option<usize> + 'r;

/// Counts a `writes` file into `plans` (per plan, by [`WriteKey`]); `resolve` gives the index of
/// the analysed plan a row's plan name and hash belong to. With `cluster`, objects are named
/// `CLUSTER/...`.
pub fn count_writes(
    path: &Path,
    location: &Location,
    (plans, resolve): (&[ReconcilePlan], &Resolve<'_>),
    (cluster, since_us): (Option<&str>, i64),
    into: &mut [super::counts::PlanCounts],
) -> Result<(), reader::ReadError> {
    let invalid = |message: String| reader::ReadError::Invalid {
        path: path.to_owned(),
        message,
    };
    for batch in reader::open_at(location, path, &WRITE_COLUMNS)? {
        let batch = batch?;
        let col = |name: &str| {
            batch
                .column_by_name(name)
                .and_then(|c| c.as_string_opt::<i32>())
                .ok_or_else(|| invalid(format!("column {name} is not a string column")))
        };
        let (plan, hash, kind, namespace, name) = (
            col("plan")?,
            col("plan_hash")?,
            col("kind")?,
            col("namespace")?,
            col("name")?,
        );
        let (operation, object_kind, object_name, subresource) = (
            col("operation")?,
            col("object_kind")?,
            col("object_name")?,
            col("object_subresource")?,
        );
        let (control, candidate) = (col("control_action")?, col("candidate_action")?);
        let (object_namespace, mode) = (col("object_namespace")?, col("mode")?);
        let fields = batch
            .column_by_name("fields")
            .and_then(|c| c.as_list_opt::<i32>())
            .ok_or_else(|| invalid("column fields is not a list".into()))?;
        let field_names = fields
            .values()
            .as_string_opt::<i32>()
            .ok_or_else(|| invalid("column fields is not a list of strings".into()))?;
        let intended = batch
            .column_by_name("intended")
            .and_then(|c| c.as_boolean_opt())
            .ok_or_else(|| invalid("column intended is not a boolean column".into()))?;
        let fields_total = batch
            .column_by_name("fields_total")
            .and_then(|c| c.as_primitive_opt::<arrow_array::types::UInt32Type>())
            .ok_or_else(|| invalid("column fields_total is not uint32".into()))?;
        let time = reader::time_column(&batch, path)?;
        for i in (0..batch.num_rows()).filter(|&i| time.value(i) >= since_us) {
            let Some(p) = resolve(plan.value(i), hash.value(i)) else {
                continue;
            };
            let Some(op) = plans[p].lookup(operation.value(i)) else {
                continue;
            };
            let key = WriteKey {
                op: op.index(),
                kind: object_kind.value(i).to_owned(),
                subresource: subresource
                    .is_valid(i)
                    .then(|| subresource.value(i).to_owned()),
                control: control.value(i).to_owned(),
                candidate: candidate.value(i).to_owned(),
                intended: intended.value(i),
            };
            let itself = object_kind.value(i) == kind.value(i)
                && object_name.value(i) == name.value(i)
                && col_eq(object_namespace, namespace, i);
            // Mode calibrate: the control's code against itself, every difference noise.
            let table = if mode.value(i) == crate::vocab::Mode::Calibrate.as_str() {
                &mut into[p].noise
            } else {
                &mut into[p].writes
            };
            let counts = table.entry(key).or_default();
            counts.rows += 1;
            counts.itself += u64::from(itself);
            let object = format!(
                "{}{}/{}/{}",
                cluster.map(|c| format!("{c}/")).unwrap_or_default(),
                kind.value(i),
                if namespace.is_valid(i) {
                    namespace.value(i)
                } else {
                    ""
                },
                name.value(i)
            );
            if !counts.objects.contains(object.as_str()) {
                counts.objects.insert(object.into());
            }
            add_bounded(
                &mut counts.names,
                &mut counts.other_names,
                object_name.value(i),
                1,
                MAX_NAMES,
            );
            let offsets = fields.value_offsets();
            let listed = usize::try_from(offsets[i]).unwrap_or(0)
                ..usize::try_from(offsets[i + 1]).unwrap_or(0);
            count_fields(counts, field_names, listed, fields_total.value(i));
        }
    }
    Ok(())
}

/// Counts the differing fields a row lists (`listed`, of `total`): each name (bounded) and its
/// pattern (a row that lists fewer than it had leaves the patterns incomplete).
fn count_fields(
    counts: &mut WriteCounts,
    names: &arrow_array::StringArray,
    listed: std::ops::Range<usize>,
    total: u32,
) {
    if u64::from(total) > listed.len() as u64 {
        counts.patterns_incomplete = true;
    }
    for j in listed {
        add_bounded(
            &mut counts.fields,
            &mut counts.other_fields,
            names.value(j),
            1,
            MAX_FIELDS,
        );
        match crate::plan::FieldPath::parse(names.value(j)) {
            Ok(path) => counts.add_pattern(path.generalized().to_string()),
            Err(_) => counts.patterns_incomplete = true,
        }
    }
}

/// One kind of write difference of one operation, as the analysis reports it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct WriteReport {
    /// The operation.
    pub operation: String,
    /// `legacy` or `phased` when the operation exists in that code path only.
    pub only: Option<CodePath>,
    /// The written objects' kind.
    pub kind: String,
    /// The subresource written, if any.
    pub subresource: Option<String>,
    /// What the control's code did: `none`, `write` or `delete`.
    pub control: String,
    /// What the candidate's code did.
    pub candidate: String,
    /// Whether the plan declares it (`intendedDifferences`, or `only`).
    pub intended: bool,
    /// Reconciled objects it appeared in: the unit of evidence.
    pub objects: u64,
    /// Rows (one per written object per reconcile).
    pub rows: u64,
    /// Written object names with their rows (at most 8; `other_names` counts the rest).
    pub names: BTreeMap<String, u64>,
    /// Rows of names not listed.
    pub other_names: u64,
    /// Differing fields with their rows (at most 16; `other_fields` counts the rest).
    pub fields: BTreeMap<String, u64>,
    /// Field rows not listed.
    pub other_fields: u64,
    /// One sentence.
    pub text: String,
    /// For a difference the plan does not declare (of an operation of both paths): the entry of
    /// the operation's `intendedDifferences` that declares it (a YAML flow mapping), which
    /// `--suggest` adds when the phased code means to write so.
    pub declaration: Option<String>,
}

/// A YAML scalar as a plan writes it: plain when it can be, else single-quoted.
fn scalar(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '/' | '_'));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "''"))
    }
}

/// The `intendedDifferences` entry that declares the difference `key` counted as `c`: its kind,
/// its name when one name was written, its subresource, and what each side did or, where both
/// wrote, every differing field as a pattern (`*`: every field, when the data does not hold them
/// all).
fn declaration(key: &WriteKey, c: &WriteCounts) -> String {
    let mut parts = vec![format!("kind: {}", scalar(&key.kind))];
    if c.other_names == 0
        && let [name] = c.names.keys().collect::<Vec<_>>().as_slice()
    {
        parts.push(format!("name: {}", scalar(name)));
    }
    if let Some(sub) = &key.subresource {
        parts.push(format!("subresource: {}", scalar(sub)));
    }
    if key.control == key.candidate {
        let fields: Vec<String> = if c.patterns_incomplete || c.patterns.is_empty() {
            vec!["'*'".to_owned()]
        } else {
            c.patterns
                .iter()
                .map(|p| format!("'{}'", p.replace('\'', "''")))
                .collect()
        };
        parts.push(format!("fields: [{}]", fields.join(", ")));
    } else {
        parts.push(format!("control: {}", key.control));
        parts.push(format!("candidate: {}", key.candidate));
    }
    format!("{{{}}}", parts.join(", "))
}

fn phrase(action: &str, _: Option<CodePath>) -> &'static str {
    match action {
        "write" => "writes",
        "delete" => "deletes",
        _ => "writes nothing",
    }
}

/// What the differences of `key` wrote, in words: the object's kind (and subresource, or "the
/// reconciled X itself") and which names.
pub(super) fn written(key: &WriteKey, c: &WriteCounts) -> (String, String) {
    let subject = match (&key.subresource, c.itself == c.rows) {
        (Some(sub), true) => format!("the reconciled {}'s {sub}", key.kind),
        (None, true) => format!("the reconciled {} itself", key.kind),
        (Some(sub), false) => format!("{} {sub}", key.kind),
        (None, false) => key.kind.clone(),
    };
    let names: Vec<&str> = c.names.keys().map(String::as_str).collect();
    let which = match (names.as_slice(), c.other_names) {
        _ if c.itself == c.rows => String::new(),
        ([one], 0) => format!(" {one}"),
        (_, 0) => format!(" ({} names: {})", names.len(), names.join(", ")),
        _ => format!(
            " (more than {} names, e.g. {})",
            names.len(),
            names.iter().take(3).copied().collect::<Vec<_>>().join(", ")
        ),
    };
    (subject, which)
}

/// The reports of a plan's counted differences, by operation (phased order, then legacy-only
/// operations) and kind.
#[must_use]
pub fn reports(
    plan: &ReconcilePlan,
    counted: &BTreeMap<WriteKey, WriteCounts>,
) -> Vec<WriteReport> {
    let mut out: Vec<WriteReport> = counted
        .iter()
        .map(|(key, c)| {
            let op = &plan.operations()[key.op];
            let (subject, which) = written(key, c);
            let objects = c.objects.len() as u64;
            let of = |n: u64| if n == 1 { "1 object".to_owned() } else { format!("{n} objects") };
            let text = if key.control == "write" && key.candidate == "write" {
                let fields: Vec<&str> = c.fields.keys().map(String::as_str).collect();
                format!(
                    "{}: the candidate writes {subject}{which} with other values than the legacy code ({}{}), in {}",
                    op.name(),
                    fields.join(", "),
                    if c.other_fields > 0 { ", ..." } else { "" },
                    of(objects)
                )
            } else {
                match op.only() {
                    Some(CodePath::Legacy) => format!(
                        "{}: the legacy loop {} {subject}{which}, which the phased reconcile never does, in {}",
                        op.name(),
                        phrase(&key.control, None),
                        of(objects)
                    ),
                    Some(CodePath::Phased) => format!(
                        "{}: the candidate {} {subject}{which}, which the legacy loop never does, in {}",
                        op.name(),
                        phrase(&key.candidate, None),
                        of(objects)
                    ),
                    // What the legacy code does to the object, where the candidate does nothing.
                    None if key.candidate == "none" => format!(
                        "{}: the legacy code {} {subject}{which} where the candidate writes nothing, in {}",
                        op.name(),
                        phrase(&key.control, None),
                        of(objects)
                    ),
                    None => format!(
                        "{}: the candidate {} {subject}{which} where the legacy code {}, in {}",
                        op.name(),
                        phrase(&key.candidate, None),
                        phrase(&key.control, None),
                        of(objects)
                    ),
                }
            };
            WriteReport {
                operation: op.name().to_owned(),
                only: op.only(),
                kind: key.kind.clone(),
                subresource: key.subresource.clone(),
                control: key.control.clone(),
                candidate: key.candidate.clone(),
                intended: key.intended,
                objects,
                rows: c.rows,
                names: c.names.clone(),
                other_names: c.other_names,
                fields: c.fields.clone(),
                other_fields: c.other_fields,
                text,
                declaration: (!key.intended && op.only().is_none()).then(|| declaration(key, c)),
            }
        })
        .collect();
    let position = |name: &str| {
        plan.lookup(name).map_or(usize::MAX, |op| {
            plan.phased_order()
                .iter()
                .position(|&o| o == op)
                .unwrap_or(plan.len() + op.index())
        })
    };
    out.sort_by_key(|r| (position(&r.operation), !r.intended, r.kind.clone()));
    out
}
