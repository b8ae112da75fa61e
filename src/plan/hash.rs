//! The plan's content hash: same plan, same hash, whatever the YAML formatting.
//!
//! The hash covers everything that changes what a model decides or how a step is executed: the
//! plan name, each operation's name, phase, category, gate, dependencies, shadow and conflict
//! policies in listing order (listing order breaks ties within a phase), the legacy order, and the
//! rollout groups (as sets). Descriptions, comments, key order, quoting and the order of
//! `dependsOn` entries and of groups are not covered.

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
        Self(canonical.0.finalize().into())
    }
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
