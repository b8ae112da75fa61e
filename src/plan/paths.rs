//! The code paths of a plan's operations: which fields an operation needs or may not have for
//! its path (`only:`), its classification with the defaults filled in, and the phased order.

use serde_saphyr::Location;

use super::compare::Error;
use super::raw::RawOperation;
use crate::vocab::{Category, CodePath, Gate, OpId, ShadowPolicy};

/// The operation's classification with the defaults filled in, checking which fields its
/// code path allows and needs: an operation of the phased path needs a phase, a category
/// and a shadow policy; one with `only: legacy` is scheduled by the legacy loop alone and
/// takes none of the phased model's fields.
pub(super) fn resolve(op: &RawOperation, error: &mut Error<'_>) -> Resolved {
    let name = op.name.value.as_str();
    let only = op.only.as_ref().map(|o| o.value);
    if only == Some(CodePath::Legacy) {
        let mut given: Vec<(&str, Location)> = Vec::new();
        if let Some(v) = &op.phase {
            given.push(("phase", v.referenced));
        }
        if let Some(v) = &op.category {
            given.push(("category", v.referenced));
        }
        if let Some(v) = &op.gate {
            given.push(("gate", v.referenced));
        }
        if let Some(v) = &op.depends_on {
            given.push(("dependsOn", v.referenced));
        }
        if let Some(v) = &op.shadow {
            given.push(("shadow", v.referenced));
        }
        if let Some(v) = &op.retry_on_conflict {
            given.push(("retryOnConflict", v.referenced));
        }
        for (field, at) in given {
            error(
                at,
                Some(name),
                format!(
                    "`{field}` is a field of the phased model, and an operation with `only: legacy` runs in the legacy loop alone (fail-fast, in legacy.order); remove it"
                ),
            );
        }
        return Resolved {
            only,
            phase: 0,
            category: Category::Critical,
            gate: Gate::NoCriticalFailure,
            shadow: ShadowPolicy::Skip,
            retry_on_conflict: false,
        };
    }
    let at = op.name.referenced;
    let mut missing = |field: &str| {
        error(
            at,
            Some(name),
            format!(
                "the required field `{field}` is missing (every operation of the phased path needs one; only an operation with `only: legacy` goes without)"
            ),
        );
    };
    let phase = op.phase.as_ref().map(|p| p.value);
    if phase.is_none() {
        missing("phase");
    }
    let category = op.category.as_ref().map(|c| c.value);
    if category.is_none() {
        missing("category");
    }
    let shadow = op.shadow.as_ref().map(|s| s.value);
    if shadow.is_none() {
        missing("shadow");
    }
    Resolved {
        only,
        phase: phase.unwrap_or_default(),
        category: category.unwrap_or(Category::Critical),
        gate: op.gate.as_ref().map_or(Gate::None, |g| g.value),
        shadow: shadow.unwrap_or(ShadowPolicy::DryRun),
        retry_on_conflict: op.retry_on_conflict.as_ref().is_some_and(|r| r.value),
    }
}

/// An operation's classification after defaults.
pub(super) struct Resolved {
    pub(super) only: Option<CodePath>,
    pub(super) phase: u32,
    pub(super) category: Category,
    pub(super) gate: Gate,
    pub(super) shadow: ShadowPolicy,
    pub(super) retry_on_conflict: bool,
}

/// The operations of the phased path by phase, then by listing order (a stable sort).
pub(super) fn phased_order(resolved: &[Resolved]) -> Vec<OpId> {
    let mut order: Vec<OpId> = (0..resolved.len())
        .filter(|&i| resolved[i].only != Some(CodePath::Legacy))
        .map(OpId::from_index)
        .collect();
    order.sort_by_key(|id| resolved[id.index()].phase);
    order
}
