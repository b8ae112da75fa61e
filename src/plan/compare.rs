//! Validation of the write comparison's parts of a plan: an operation's `intendedDifferences`
//! and `compare.volatile`.

use serde_saphyr::{Location, Spanned};

use super::raw::{RawIntended, RawOperation};
use super::{FieldPath, IntendedDifference};
use crate::vocab::{CodePath, WriteAction};

/// Reports one problem: where, the operation it concerns, what is wrong.
pub(super) type Error<'e> = dyn FnMut(Location, Option<&str>, String) + 'e;

/// `intendedDifferences`: each entry names a kind and says how the write differs.
pub(super) fn intended(
    op: &RawOperation,
    only: Option<CodePath>,
    error: &mut Error<'_>,
) -> Vec<IntendedDifference> {
    let name = op.name.value.as_str();
    let Some(entries) = &op.intended_differences else {
        return Vec::new();
    };
    if let Some(only) = only {
        error(
            entries.referenced,
            Some(name),
            format!(
                "an operation with `only: {only}` exists in one code path, so every write of it is a difference the plan already declares; remove intendedDifferences"
            ),
        );
        return Vec::new();
    }
    let mut out = Vec::with_capacity(entries.value.len());
    for entry in &entries.value {
        if let Some(intended) = intended_entry(name, entry, error) {
            out.push(intended);
        }
    }
    out
}

fn intended_entry(
    op: &str,
    entry: &Spanned<RawIntended>,
    error: &mut Error<'_>,
) -> Option<IntendedDifference> {
    let raw = &entry.value;
    let mut ok = true;
    if raw.kind.value.trim().is_empty() {
        error(
            raw.kind.referenced,
            Some(op),
            "an intended difference needs the kind of the object it concerns (e.g. Secret)".into(),
        );
        ok = false;
    }
    let control = raw.control.as_ref().map(|c| c.value);
    let candidate = raw.candidate.as_ref().map(|c| c.value);
    let given_fields = raw.fields.as_ref().is_some_and(|f| !f.is_empty());
    if control.is_none() && candidate.is_none() && !given_fields {
        error(
                entry.referenced,
                Some(op),
                "an intended difference says what differs: `control` and `candidate` (none, write, delete) or `fields`".into(),
            );
        ok = false;
    }
    if control == candidate && control.is_some() && !given_fields {
        error(
            entry.referenced,
            Some(op),
            format!(
                "`control` and `candidate` are both {}: that is no difference; give `fields` for a write whose content differs",
                control.map_or("", WriteAction::as_str)
            ),
        );
        ok = false;
    }
    if given_fields
        && [control, candidate]
            .into_iter()
            .flatten()
            .any(|a| a != WriteAction::Write)
    {
        error(
                entry.referenced,
                Some(op),
                "`fields` differ only where both sides write the object; with `fields`, `control` and `candidate` may only be write".into(),
            );
        ok = false;
    }
    let mut fields = Vec::new();
    for field in raw.fields.iter().flatten() {
        match FieldPath::parse(&field.value) {
            Ok(path) => fields.push(path),
            Err(problem) => {
                error(
                    field.referenced,
                    Some(op),
                    format!(
                        "field path {:?}: {} (at character {})",
                        field.value,
                        problem.message,
                        problem.offset + 1
                    ),
                );
                ok = false;
            }
        }
    }
    ok.then(|| IntendedDifference {
        kind: raw.kind.value.clone(),
        name: raw.name.as_ref().map(|n| n.value.clone()),
        subresource: raw.subresource.as_ref().map(|s| s.value.clone()),
        control,
        candidate,
        fields,
        reason: raw.reason.clone(),
    })
}

/// `compare.volatile`: field paths the write comparison ignores, sorted, each once.
pub(super) fn volatile(entries: Vec<Spanned<String>>, error: &mut Error<'_>) -> Vec<FieldPath> {
    let mut paths = Vec::with_capacity(entries.len());
    for entry in entries {
        match FieldPath::parse(&entry.value) {
            Ok(path) => paths.push(path),
            Err(problem) => error(
                entry.referenced,
                None,
                format!(
                    "compare.volatile: field path {:?}: {} (at character {})",
                    entry.value,
                    problem.message,
                    problem.offset + 1
                ),
            ),
        }
    }
    paths.sort_by_cached_key(ToString::to_string);
    paths.dedup();
    paths
}
