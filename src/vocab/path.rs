//! Which code path of a reconciler an operation belongs to.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The two code paths a reconciler may keep side by side: the legacy sequential loop and the
/// phased reconcile. An operation exists in both unless its plan says `only: legacy` or
/// `only: phased`; the `sequential` model schedules the legacy path, `phased` the phased one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CodePath {
    /// The legacy loop (`legacy.order`, the `sequential` model).
    Legacy,
    /// The phased reconcile (phases, gates, dependencies; the `phased` model).
    Phased,
}

impl CodePath {
    /// The label used in plans, metrics, Parquet and docs.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Legacy => "legacy",
            Self::Phased => "phased",
        }
    }
}

impl fmt::Display for CodePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
