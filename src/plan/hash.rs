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

/// A SHA-256 over the plan's canonical encoding. It stays this type from the plan to every
/// record, report and renderer; it becomes text only where it is written (a Parquet column, a
/// span attribute, JSON, a label), as the full hex ([`to_hex`](Self::to_hex), `Display`) or the
/// short form of summaries and labels ([`short`](Self::short), the one place it is cut).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PlanHash(pub(super) [u8; 32]);

/// The digits of the short form.
const SHORT: usize = 12;

impl PlanHash {
    /// The full hash, 64 lowercase hex digits.
    #[must_use]
    pub fn to_hex(&self) -> String {
        self.to_string()
    }

    /// The first 12 hex digits, for labels and summaries.
    #[must_use]
    pub fn short(&self) -> String {
        let mut hex = self.to_string();
        hex.truncate(SHORT);
        hex
    }

    /// A hash written as 64 hex digits (either case), as [`to_hex`](Self::to_hex) writes it:
    /// `None` for anything else.
    #[must_use]
    pub fn from_hex(text: &str) -> Option<Self> {
        let digits = text.as_bytes();
        if digits.len() != 64 {
            return None;
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
            let value = |d: u8| char::from(d).to_digit(16);
            *byte = u8::try_from(value(pair[0])? * 16 + value(pair[1])?).ok()?;
        }
        Some(Self(bytes))
    }

    /// The 64 lowercase hex digits, without allocating (the Parquet writer's path).
    #[must_use]
    pub fn hex_digits(&self) -> [u8; 64] {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 64];
        for (i, b) in self.0.iter().enumerate() {
            out[2 * i] = DIGITS[usize::from(b >> 4)];
            out[2 * i + 1] = DIGITS[usize::from(b & 0xf)];
        }
        out
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
        f.write_str(std::str::from_utf8(&self.hex_digits()).map_err(|_| fmt::Error)?)
    }
}

/// As its 64 hex digits (the verdict JSON's `plan_hash`).
impl serde::Serialize for PlanHash {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
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
