//! The plan's content hash: same plan, same hash, whatever the YAML formatting.
//!
//! The hash covers everything that changes what a model decides, how a step is executed or what
//! is recorded: the plan name, each operation's name, phase, category, gate, dependencies, shadow
//! and conflict policies and code path (`only`) in listing order (listing order breaks ties
//! within a phase), the legacy order, the rollout groups (as sets) and the volatile fields of the
//! write comparison and the intended write differences (recorded with every difference).
//! Descriptions, comments, key order, quoting, the order of `dependsOn` entries, of groups, of
//! intended differences and of volatile fields, and an intended difference's `reason` are not
//! covered.

use std::fmt;

use sha2::{Digest, Sha256};

use super::ReconcilePlan;

/// A SHA-256 over the plan's canonical encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PlanHash(pub(super) [u8; 32]);

impl PlanHash {
    /// The full hash, 64 lowercase hex digits.
    #[must_use]
    pub fn to_hex(&self) -> String {
        use fmt::Write;
        self.0.iter().fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    }

    /// The first 12 hex digits, for labels and summaries.
    #[must_use]
    pub fn short(&self) -> String {
        self.to_hex()[..12].to_owned()
    }

    pub(super) fn of(plan: &ReconcilePlan) -> Self {
        let mut canonical = Canonical(Sha256::new());
        canonical.field(super::API_VERSION);
        canonical.field(&plan.name);
        canonical.count(plan.operations.len());
        for op in &plan.operations {
            canonical.field(&op.name);
            canonical.field(&op.phase.to_string());
            canonical.field(op.category.as_str());
            canonical.field(op.gate.as_str());
            canonical.names(plan, op.depends_on.as_slice().iter().copied());
            canonical.field(op.shadow.as_str());
            canonical.field(if op.retry_on_conflict {
                "retry"
            } else {
                "no-retry"
            });
            // Only when set, so that the hash of a plan without `only:` stays what it was; the
            // marker cannot be an operation name (':' is not allowed in one).
            if let Some(only) = op.only {
                canonical.field(&format!("only:{only}"));
            }
            // Only when declared; the marker cannot be an operation name either.
            if !op.intended.is_empty() {
                canonical.field("intended:");
                let mut entries: Vec<Vec<String>> =
                    op.intended.iter().map(canonical_intended).collect();
                entries.sort();
                canonical.count(entries.len());
                for entry in entries {
                    canonical.count(entry.len());
                    for part in entry {
                        canonical.field(&part);
                    }
                }
            }
        }
        canonical.count(plan.legacy_order.len());
        for &op in &plan.legacy_order {
            canonical.field(plan.name_of(op));
        }
        let mut groups: Vec<_> = plan.groups.iter().collect();
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        canonical.field(if plan.groups_declared {
            "declared"
        } else {
            "implicit"
        });
        canonical.count(groups.len());
        for group in groups {
            canonical.field(&group.name);
            canonical.names(plan, group.operations.as_slice().iter().copied());
        }
        // Volatile fields change which write differences are recorded; only when declared (the
        // hash of a plan without them stays what it was).
        if !plan.volatile.is_empty() {
            canonical.field("volatile");
            canonical.count(plan.volatile.len());
            for path in &plan.volatile {
                canonical.field(&path.to_string());
            }
        }
        Self(canonical.0.finalize().into())
    }
}

/// An intended difference as strings: what matches, `*` for a part it leaves open (no object
/// kind, name or subresource is `*`), fields sorted.
fn canonical_intended(i: &super::IntendedDifference) -> Vec<String> {
    let open = |v: Option<&str>| v.unwrap_or("*").to_owned();
    let mut fields: Vec<String> = i.fields.iter().map(ToString::to_string).collect();
    fields.sort();
    fields.dedup();
    let mut out = vec![
        i.kind.clone(),
        open(i.name.as_deref()),
        open(i.subresource.as_deref()),
        open(i.control.map(crate::vocab::WriteAction::as_str)),
        open(i.candidate.map(crate::vocab::WriteAction::as_str)),
    ];
    out.extend(fields);
    out
}

impl fmt::Display for PlanHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// Length-prefixed fields, so that no two different plans encode to the same bytes.
struct Canonical(Sha256);

impl Canonical {
    fn count(&mut self, n: usize) {
        self.0.update((n as u64).to_le_bytes());
    }

    fn field(&mut self, s: &str) {
        self.count(s.len());
        self.0.update(s.as_bytes());
    }

    /// A set of operations, by sorted name.
    fn names(&mut self, plan: &ReconcilePlan, ops: impl IntoIterator<Item = crate::vocab::OpId>) {
        let names = plan.sorted_names(ops);
        self.count(names.len());
        for name in names {
            self.field(name);
        }
    }
}
