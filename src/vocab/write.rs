//! What a write did to an object: the vocabulary of write differences.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

/// The mutating verb of an accepted write, as the API server's audit log names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WriteVerb {
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH (merge, JSON, strategic or server-side apply).
    Patch,
    /// DELETE.
    Delete,
}

impl WriteVerb {
    /// Every verb, in documentation order.
    pub const ALL: [Self; 4] = [Self::Create, Self::Update, Self::Patch, Self::Delete];

    /// The label used in Parquet, traces and docs.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
        }
    }

    /// What the verb leaves behind: the object written, or gone.
    #[must_use]
    pub const fn action(self) -> WriteAction {
        match self {
            Self::Create | Self::Update | Self::Patch => WriteAction::Write,
            Self::Delete => WriteAction::Delete,
        }
    }
}

impl fmt::Display for WriteVerb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for WriteVerb {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| {
                format!("unknown write verb {s:?}; expected create, update, patch or delete")
            })
    }
}

/// What one side of a comparison did to an object: nothing, wrote it, or deleted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteAction {
    /// No accepted write.
    None,
    /// Created, updated or patched it.
    Write,
    /// Deleted it.
    Delete,
}

impl WriteAction {
    /// The label used in plans, metrics and docs.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Write => "write",
            Self::Delete => "delete",
        }
    }

    /// The action of a side's last verb on an object (`None`: it wrote nothing).
    #[must_use]
    pub fn of(verb: Option<WriteVerb>) -> Self {
        verb.map_or(Self::None, WriteVerb::action)
    }
}

impl fmt::Display for WriteAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
