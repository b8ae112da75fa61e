//! Operation ids and sets: an operation is named by its index in its plan.

use std::fmt;

/// The index of an operation in its plan (listing order). Cheap to copy and compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(u32);

impl OpId {
    /// The operation's position in the plan's listing.
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    pub(crate) fn from_index(index: usize) -> Self {
        Self(u32::try_from(index).expect("plans hold far fewer than 2^32 operations"))
    }
}

/// A set of operations, kept sorted by [`OpId`] without duplicates.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct OpSet(Vec<OpId>);

impl OpSet {
    /// The empty set.
    #[must_use]
    pub const fn new() -> Self {
        Self(Vec::new())
    }

    /// Adds an operation; adding one already present changes nothing.
    pub fn insert(&mut self, op: OpId) {
        if let Err(at) = self.0.binary_search(&op) {
            self.0.insert(at, op);
        }
    }

    /// Adds every operation of `other`.
    pub fn extend(&mut self, other: &OpSet) {
        for &op in &other.0 {
            self.insert(op);
        }
    }

    /// Whether `op` is in the set.
    #[must_use]
    pub fn contains(&self, op: OpId) -> bool {
        self.0.binary_search(&op).is_ok()
    }

    /// The operations, in plan listing order.
    #[must_use]
    pub fn as_slice(&self) -> &[OpId] {
        &self.0
    }

    /// Whether the set is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many operations the set holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl FromIterator<OpId> for OpSet {
    fn from_iter<I: IntoIterator<Item = OpId>>(iter: I) -> Self {
        let mut ops: Vec<OpId> = iter.into_iter().collect();
        ops.sort_unstable();
        ops.dedup();
        Self(ops)
    }
}

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}
