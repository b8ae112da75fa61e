//! The comparison's noise: what the control's code wrote differently from itself in mode
//! `calibrate` (each operation's own code in dry-run, then for real, on the same world). Code
//! against itself makes no difference but what varies from one run to the next (a timestamp, a
//! random token, an order) or what the server sets differently each time beyond what the
//! comparison already sets aside: those fields would make the candidate's comparison report
//! differences whatever its code does. Fields both runs wrote go to `compare.volatile` (the plan
//! edit `--suggest` writes); an object written in one run and not in the other cannot be declared
//! away and is said as such.

use std::collections::BTreeMap;

use serde::Serialize;

use super::counts::{WriteCounts, WriteKey};
use crate::plan::ReconcilePlan;

/// One kind of difference an operation's code made against itself.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct NoiseReport {
    /// The operation.
    pub operation: String,
    /// The written objects' kind.
    pub kind: String,
    /// The subresource written, if any.
    pub subresource: Option<String>,
    /// What the real run did: `none`, `write` or `delete`.
    pub control: String,
    /// What the dry run did.
    pub candidate: String,
    /// Reconciled objects it appeared in.
    pub objects: u64,
    /// Rows (one per written object per reconcile).
    pub rows: u64,
    /// Differing fields with their rows (at most 16; `other_fields` counts the rest).
    pub fields: BTreeMap<String, u64>,
    /// Field rows not listed.
    pub other_fields: u64,
    /// Where both runs wrote: the field patterns to declare in `compare.volatile` (list
    /// elements made `*`); `None` where one run wrote and the other did not.
    pub volatile: Option<Vec<String>>,
    /// One sentence.
    pub text: String,
}

/// The noise reports of a plan's calibration differences, by operation and kind.
#[must_use]
pub fn reports(plan: &ReconcilePlan, noise: &BTreeMap<WriteKey, WriteCounts>) -> Vec<NoiseReport> {
    noise
        .iter()
        .map(|(key, c)| {
            let op = plan.operations()[key.op].name();
            let (subject, which) = super::writes::written(key, c);
            let objects = c.objects.len() as u64;
            let both = key.control == key.candidate;
            let fields: Vec<&str> = c.fields.keys().map(String::as_str).collect();
            let text = if both {
                format!(
                    "{op}: its own code writes {subject}{which} with other values from one run to the next ({}{}), in {objects} objects: noise the comparison reports whatever the candidate's code does",
                    fields.join(", "),
                    if c.other_fields > 0 { ", ..." } else { "" },
                )
            } else {
                format!(
                    "{op}: its own code does not do the same to {subject}{which} from one run to the next (the real run: {}, the dry run: {}), in {objects} objects: the comparison cannot be trusted for it",
                    key.control, key.candidate
                )
            };
            NoiseReport {
                operation: op.to_owned(),
                kind: key.kind.clone(),
                subresource: key.subresource.clone(),
                control: key.control.clone(),
                candidate: key.candidate.clone(),
                objects,
                rows: c.rows,
                fields: c.fields.clone(),
                other_fields: c.other_fields,
                volatile: both.then(|| c.patterns.iter().cloned().collect()),
                text,
            }
        })
        .collect()
}

/// The field patterns every noise report asks `compare.volatile` to hold, once each, sorted.
#[must_use]
pub fn volatile(reports: &[NoiseReport]) -> Vec<String> {
    let mut out: Vec<String> = reports
        .iter()
        .filter_map(|r| r.volatile.as_ref())
        .flatten()
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}
