//! Records to Arrow batches: one `reconciles` row and one `steps` row per operation per policy,
//! with every error message bounded and redacted on the way (the `writes` rows are built in
//! [`super::writes`]).

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use arrow_array::builder::{
    ArrayBuilder as _, BooleanBuilder, Int64Builder, ListBuilder, StringBuilder,
    TimestampMicrosecondBuilder, UInt32Builder,
};
use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Int32Array, RecordBatch, StringArray};
use arrow_schema::ArrowError;

use super::schema::{Table, policy};
use crate::engine::{ReconcileRecord, StepRecord};

/// The cluster of rows written without one being set ([`ReconcileRows::with_cluster`]).
pub const DEFAULT_CLUSTER: &str = "default";

/// Checks a cluster name: it names a hive partition directory (`cluster=NAME`) and an object
/// key's segment, so 1 to 128 letters, digits, `.`, `_` or `-`, starting and ending with a letter
/// or digit.
pub fn check_cluster(name: &str) -> Result<(), String> {
    let ok = (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a cluster name: 1 to 128 letters, digits, '.', '_' or '-', starting and ending with a letter or digit (it names the partition directory cluster=NAME)"
        ))
    }
}

/// The longest error message kept, in bytes; longer ones are cut at a character boundary.
pub const MAX_MESSAGE_BYTES: usize = 512;

/// What replaces a value that may be secret.
const REDACTED: &str = "[redacted]";

/// Bounds and redacts an error message before it leaves the process.
///
/// Kubernetes echoes field values in `Invalid value: "..."` errors (a Secret's data among them), so
/// those values are replaced; so is every long token that looks like key material (base64 or hex
/// with digits, 32 characters or more). The result is at most [`MAX_MESSAGE_BYTES`] bytes.
#[must_use]
pub fn redact(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_MESSAGE_BYTES + 8));
    let mut rest = message;
    while let Some(at) = rest.find("Invalid value: \"") {
        let (head, tail) = rest.split_at(at + "Invalid value: \"".len());
        out.push_str(head);
        out.push_str(REDACTED);
        // Skip to the closing quote (escaped quotes included), or to the end.
        let mut escaped = false;
        let end = tail
            .char_indices()
            .find(|&(_, c)| {
                let close = c == '"' && !escaped;
                escaped = c == '\\' && !escaped;
                close
            })
            .map_or(tail.len(), |(i, _)| i);
        rest = &tail[end..];
    }
    out.push_str(rest);
    let out = redact_tokens(&out);
    truncate(out, MAX_MESSAGE_BYTES)
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '_' | '-')
}

fn redact_tokens(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut start = None;
    let flush = |out: &mut String, token: &str| {
        let secret_like = token.len() >= 32
            && token.bytes().any(|b| b.is_ascii_digit())
            && token.bytes().any(|b| b.is_ascii_alphabetic());
        out.push_str(if secret_like { REDACTED } else { token });
    };
    for (i, c) in text.char_indices() {
        match (is_token_char(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                flush(&mut out, &text[s..i]);
                start = None;
                out.push(c);
            }
            (false, None) => out.push(c),
            (true, Some(_)) => {}
        }
    }
    if let Some(s) = start {
        flush(&mut out, &text[s..]);
    }
    out
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut cut = max - '…'.len_utf8();
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push('…');
    text
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// The reconcile's start in microseconds since the Unix epoch (negative before it).
#[must_use]
pub fn time_micros(record: &ReconcileRecord) -> i64 {
    match record.started_at.duration_since(UNIX_EPOCH) {
        Ok(d) => micros(d),
        Err(e) => -micros(e.duration()),
    }
}

/// The string columns both tables take from a reconcile: `reconcile_id`, then from `plan` to
/// `name` (the schema's order), one value per [`append`](Self::append).
pub(super) struct ReconcileStrings {
    reconcile_id: StringBuilder,
    plan: StringBuilder,
    plan_hash: StringBuilder,
    mode: StringBuilder,
    kind: StringBuilder,
    namespace: StringBuilder,
    name: StringBuilder,
}

impl ReconcileStrings {
    pub(super) fn new(reconciles: usize) -> Self {
        Self {
            reconcile_id: strings(reconciles, 32),
            plan: strings(reconciles, 16),
            plan_hash: strings(reconciles, 64),
            mode: strings(reconciles, 8),
            kind: strings(reconciles, 16),
            namespace: strings(reconciles, 16),
            name: strings(reconciles, 16),
        }
    }

    /// Values appended since the last [`finish`](Self::finish).
    pub(super) fn len(&self) -> usize {
        self.plan.len()
    }

    pub(super) fn append(&mut self, r: &ReconcileRecord, id: &str) {
        self.reconcile_id.append_value(id);
        self.plan.append_value(&r.plan);
        self.plan_hash
            .append_value(std::str::from_utf8(&r.plan_hash.hex_digits()).unwrap_or_default());
        self.mode.append_value(r.mode.as_str());
        self.kind.append_value(&r.object.kind);
        self.namespace.append_option(r.object.namespace.as_deref());
        self.name.append_value(&r.object.name);
    }

    /// `reconcile_id`, and the columns from `plan` to `name`.
    pub(super) fn finish(&mut self) -> (StringArray, [StringArray; 6]) {
        (
            self.reconcile_id.finish(),
            [
                self.plan.finish(),
                self.plan_hash.finish(),
                self.mode.finish(),
                self.kind.finish(),
                self.namespace.finish(),
                self.name.finish(),
            ],
        )
    }
}

/// The columns a `reconciles` row starts with.
struct Common {
    /// The writer's cluster: the same on every row (written once per batch).
    cluster: Arc<str>,
    time: TimestampMicrosecondBuilder,
    trace_id: StringBuilder,
    strings: ReconcileStrings,
}

impl Common {
    fn new(rows: usize) -> Self {
        Self {
            cluster: DEFAULT_CLUSTER.into(),
            time: TimestampMicrosecondBuilder::with_capacity(rows).with_timezone("UTC"),
            trace_id: strings(rows, 32),
            strings: ReconcileStrings::new(rows),
        }
    }

    fn append(&mut self, r: &ReconcileRecord, id: &str) {
        self.time.append_value(time_micros(r));
        self.trace_id.append_option(r.trace_id.as_deref());
        self.strings.append(r, id);
    }

    fn finish(&mut self) -> Vec<ArrayRef> {
        let rows = self.strings.len();
        let (reconcile_id, rest) = self.strings.finish();
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(self.time.finish()),
            Arc::new(reconcile_id),
            Arc::new(self.trace_id.finish()),
            Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
                &*self.cluster,
                rows,
            ))),
        ];
        columns.extend(rest.map(|column| Arc::new(column) as ArrayRef));
        columns
    }
}

/// The columns a `steps` row starts with: its reconcile's time and the string columns of
/// [`PER_RECONCILE`](super::schema::PER_RECONCILE), which every step of a reconcile repeats. Those
/// are built once per reconcile, as dictionary arrays: their values hold one entry per reconcile
/// and share one key array, each row's reconcile. A step row costs one key instead of eight
/// string copies (about 200 bytes); the Parquet writer reads through the keys and the file's
/// columns are plain strings as before.
struct PerReconcile {
    cluster: Arc<str>,
    time: TimestampMicrosecondBuilder,
    /// Per row: the index of its reconcile in the values below.
    keys: Vec<i32>,
    strings: ReconcileStrings,
}

impl PerReconcile {
    /// Sized for `rows` rows of about 32 rows per reconcile.
    fn new(rows: usize) -> Self {
        Self {
            cluster: DEFAULT_CLUSTER.into(),
            time: TimestampMicrosecondBuilder::with_capacity(rows).with_timezone("UTC"),
            keys: Vec::with_capacity(rows),
            strings: ReconcileStrings::new(rows / 32 + 1),
        }
    }

    /// Adds the reconcile's values; returns its key.
    fn reconcile(&mut self, r: &ReconcileRecord, id: &str) -> i32 {
        let key = self.strings.len();
        self.strings.append(r, id);
        // A batch holds at most a row group (65,536 rows by default): far from 2^31 reconciles.
        i32::try_from(key).unwrap_or(i32::MAX)
    }

    fn row(&mut self, time: i64, key: i32) {
        self.time.append_value(time);
        self.keys.push(key);
    }

    fn finish(&mut self) -> Result<Vec<ArrayRef>, ArrowError> {
        let keys = Int32Array::from(std::mem::take(&mut self.keys));
        let (reconcile_id, rest) = self.strings.finish();
        let first = DictionaryArray::<Int32Type>::try_new(keys, Arc::new(reconcile_id))?;
        let cluster = DictionaryArray::<Int32Type>::try_new(
            Int32Array::from(vec![0; first.len()]),
            Arc::new(StringArray::from_iter_values([&*self.cluster])),
        )?;
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(self.time.finish()),
            Arc::new(first.clone()),
            Arc::new(cluster),
        ];
        // The other columns share the first one's keys, checked once above.
        columns
            .extend(rest.map(|values| Arc::new(first.with_values(Arc::new(values))) as ArrayRef));
        Ok(columns)
    }
}

/// A string builder sized for `rows` values of about `bytes` bytes: the builders are filled to a
/// row group each time, and growing them by doubling would copy every value again.
pub(super) fn strings(rows: usize, bytes: usize) -> StringBuilder {
    StringBuilder::with_capacity(rows, rows * bytes)
}

pub(super) fn append_names(builder: &mut ListBuilder<StringBuilder>, names: &[String]) {
    for name in names {
        builder.values().append_value(name);
    }
    builder.append(true);
}

/// Builds the `reconciles` table.
pub struct ReconcileRows {
    common: Common,
    uid: StringBuilder,
    duration_us: Int64Builder,
    control_first_failure: StringBuilder,
    control_error: StringBuilder,
    candidate_error: StringBuilder,
    unblocked: ListBuilder<StringBuilder>,
    newly_blocked: ListBuilder<StringBuilder>,
    changed: ListBuilder<StringBuilder>,
    guard_refusals: UInt32Builder,
    dry_run_requests: UInt32Builder,
    cancelled: BooleanBuilder,
    enforced_groups: ListBuilder<StringBuilder>,
    flag_version: StringBuilder,
    comparison_skipped: StringBuilder,
    rows: usize,
}

impl Default for ReconcileRows {
    fn default() -> Self {
        Self::with_capacity(1024)
    }
}

impl ReconcileRows {
    /// Builders sized for `rows` rows.
    #[must_use]
    pub fn with_capacity(rows: usize) -> Self {
        Self {
            common: Common::new(rows),
            uid: strings(rows, 36),
            duration_us: Int64Builder::with_capacity(rows),
            control_first_failure: strings(rows, 8),
            control_error: strings(rows, 16),
            candidate_error: strings(rows, 16),
            unblocked: ListBuilder::new(strings(rows, 64)),
            newly_blocked: ListBuilder::new(StringBuilder::new()),
            changed: ListBuilder::new(StringBuilder::new()),
            guard_refusals: UInt32Builder::with_capacity(rows),
            dry_run_requests: UInt32Builder::with_capacity(rows),
            cancelled: BooleanBuilder::with_capacity(rows),
            enforced_groups: ListBuilder::new(StringBuilder::new()),
            flag_version: strings(rows, 8),
            comparison_skipped: strings(rows, 0),
            rows: 0,
        }
    }

    /// The rows' cluster (default [`DEFAULT_CLUSTER`]); the name is assumed checked
    /// ([`check_cluster`]).
    #[must_use]
    pub fn with_cluster(mut self, cluster: Arc<str>) -> Self {
        self.common.cluster = cluster;
        self
    }

    /// Appends the record's row; `id` is its reconcile id.
    pub fn append(&mut self, r: &ReconcileRecord, id: &str) {
        self.common.append(r, id);
        self.uid.append_option(r.object.uid.as_deref());
        self.duration_us.append_value(micros(r.duration));
        self.control_first_failure
            .append_option(r.control_first_failure.as_deref());
        self.control_error
            .append_option(r.control_error.as_deref().map(redact));
        self.candidate_error
            .append_option(r.candidate_error.as_deref().map(redact));
        append_names(&mut self.unblocked, &r.unblocked);
        append_names(&mut self.newly_blocked, &r.newly_blocked);
        append_names(&mut self.changed, &r.changed);
        self.guard_refusals.append_value(r.guard_refusals);
        self.dry_run_requests.append_value(r.dry_run_requests);
        self.cancelled.append_value(r.cancelled);
        append_names(
            &mut self.enforced_groups,
            r.flag
                .as_ref()
                .map_or(&[][..], |f| f.enforced_groups.as_slice()),
        );
        self.flag_version
            .append_option(r.flag.as_ref().and_then(|f| f.version.as_deref()));
        self.comparison_skipped.append_option(
            r.comparison_skipped
                .map(crate::vocab::ComparisonSkip::as_str),
        );
        self.rows += 1;
    }

    /// Rows appended since the last batch.
    #[must_use]
    pub const fn rows(&self) -> usize {
        self.rows
    }

    /// The rows so far as one batch; the builder starts over.
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        let mut columns = self.common.finish();
        columns.extend([
            Arc::new(self.uid.finish()) as ArrayRef,
            Arc::new(self.duration_us.finish()),
            Arc::new(self.control_first_failure.finish()),
            Arc::new(self.control_error.finish()),
            Arc::new(self.candidate_error.finish()),
            Arc::new(self.unblocked.finish()),
            Arc::new(self.newly_blocked.finish()),
            Arc::new(self.changed.finish()),
            Arc::new(self.guard_refusals.finish()),
            Arc::new(self.dry_run_requests.finish()),
            Arc::new(self.cancelled.finish()),
            Arc::new(self.enforced_groups.finish()),
            Arc::new(self.flag_version.finish()),
            Arc::new(self.comparison_skipped.finish()),
        ]);
        self.rows = 0;
        RecordBatch::try_new(Table::Reconciles.schema(), columns)
    }
}

/// Builds the `steps` table.
pub struct StepRows {
    common: PerReconcile,
    policy: StringBuilder,
    seq: UInt32Builder,
    operation: StringBuilder,
    phase: UInt32Builder,
    category: StringBuilder,
    execution: StringBuilder,
    outcome: StringBuilder,
    error_class: StringBuilder,
    message: StringBuilder,
    blocked_by: ListBuilder<StringBuilder>,
    offset_us: Int64Builder,
    duration_us: Int64Builder,
    conflicts: UInt32Builder,
    conflict_resolution: StringBuilder,
    rows: usize,
}

impl Default for StepRows {
    fn default() -> Self {
        Self::with_capacity(1024)
    }
}

impl StepRows {
    /// Builders sized for `rows` rows.
    #[must_use]
    pub fn with_capacity(rows: usize) -> Self {
        Self {
            common: PerReconcile::new(rows),
            policy: strings(rows, 9),
            seq: UInt32Builder::with_capacity(rows),
            operation: strings(rows, 20),
            phase: UInt32Builder::with_capacity(rows),
            category: strings(rows, 12),
            execution: strings(rows, 7),
            outcome: strings(rows, 9),
            error_class: strings(rows, 2),
            message: strings(rows, 4),
            blocked_by: ListBuilder::with_capacity(strings(rows / 2, 20), rows),
            offset_us: Int64Builder::with_capacity(rows),
            duration_us: Int64Builder::with_capacity(rows),
            conflicts: UInt32Builder::with_capacity(rows),
            conflict_resolution: strings(rows, 1),
            rows: 0,
        }
    }

    /// The rows' cluster (default [`DEFAULT_CLUSTER`]); the name is assumed checked
    /// ([`check_cluster`]).
    #[must_use]
    pub fn with_cluster(mut self, cluster: Arc<str>) -> Self {
        self.common.cluster = cluster;
        self
    }

    /// Appends one row per control and candidate step of the record.
    pub fn append(&mut self, r: &ReconcileRecord, id: &str) {
        if r.control.is_empty() && r.candidate.is_empty() {
            return;
        }
        let time = time_micros(r);
        let key = self.common.reconcile(r, id);
        for (policy, steps) in [
            (policy::CONTROL, &r.control),
            (policy::CANDIDATE, &r.candidate),
        ] {
            for (seq, step) in steps.iter().enumerate() {
                self.common.row(time, key);
                self.append_step(policy, seq, step);
            }
        }
    }

    fn append_step(&mut self, policy: &str, seq: usize, s: &StepRecord) {
        self.policy.append_value(policy);
        self.seq
            .append_value(u32::try_from(seq).unwrap_or(u32::MAX));
        self.operation.append_value(&s.operation);
        self.phase.append_value(s.phase);
        self.category.append_value(s.category.as_str());
        self.execution.append_value(s.execution.as_str());
        self.outcome.append_value(s.outcome);
        self.error_class
            .append_option(s.error_class.map(crate::vocab::ErrorClass::as_str));
        self.message.append_option(s.message.as_deref().map(redact));
        append_names(&mut self.blocked_by, &s.blocked_by);
        self.offset_us.append_value(micros(s.offset));
        self.duration_us.append_value(micros(s.duration));
        self.conflicts.append_value(s.conflicts);
        self.conflict_resolution
            .append_option(s.conflict.map(crate::engine::ConflictResolution::as_str));
        self.rows += 1;
    }

    /// Rows appended since the last batch.
    #[must_use]
    pub const fn rows(&self) -> usize {
        self.rows
    }

    /// The rows so far as one batch of [`Table::batch_schema`] (the columns each step repeats
    /// from its reconcile are dictionary arrays); the builder starts over.
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        let mut columns = self.common.finish()?;
        columns.extend([
            Arc::new(self.policy.finish()) as ArrayRef,
            Arc::new(self.seq.finish()),
            Arc::new(self.operation.finish()),
            Arc::new(self.phase.finish()),
            Arc::new(self.category.finish()),
            Arc::new(self.execution.finish()),
            Arc::new(self.outcome.finish()),
            Arc::new(self.error_class.finish()),
            Arc::new(self.message.finish()),
            Arc::new(self.blocked_by.finish()),
            Arc::new(self.offset_us.finish()),
            Arc::new(self.duration_us.finish()),
            Arc::new(self.conflicts.finish()),
            Arc::new(self.conflict_resolution.finish()),
        ]);
        self.rows = 0;
        RecordBatch::try_new(Table::Steps.batch_schema(), columns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_values_are_redacted() {
        let m = r#"Secret "pull" is invalid: data[.dockerconfigjson]: Invalid value: "eyJhdXRocyI6e30=": bad, and Invalid value: "x\"y" too"#;
        let r = redact(m);
        assert!(!r.contains("eyJhdXRocyI6e30"), "{r}");
        assert!(!r.contains("x\\\"y"), "{r}");
        assert_eq!(r.matches(REDACTED).count(), 2, "{r}");
        assert!(r.ends_with("too"), "{r}");
    }

    #[test]
    fn key_material_is_redacted_names_are_kept() {
        let r = redact(
            "token c2hhZG93LXJlY29uY2lsZXItdGVzdC1rZXktbWF0ZXJpYWw9 in KubeconfigAndPasswordSync",
        );
        assert_eq!(r, "token [redacted] in KubeconfigAndPasswordSync");
    }

    #[test]
    fn messages_are_bounded_on_a_char_boundary() {
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        let r = redact(&long);
        assert!(r.len() <= MAX_MESSAGE_BYTES, "{}", r.len());
        assert!(r.ends_with('…'));
        assert_eq!(redact("short"), "short");
    }
}
