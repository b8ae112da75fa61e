//! The `ReconcilePlan` YAML document as written, with the source location of every value.
//!
//! These types only describe the syntax; `validate` turns them into a [`super::ReconcilePlan`].

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_saphyr::Spanned;

use crate::vocab::{Category, CodePath, Gate, ShadowPolicy, WriteAction};

/// The whole document.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawPlan {
    pub api_version: Spanned<String>,
    pub kind: Spanned<String>,
    pub metadata: RawMetadata,
    pub spec: RawSpec,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetadata {
    pub name: Spanned<String>,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSpec {
    pub operations: Spanned<Vec<Spanned<RawOperation>>>,
    pub legacy: RawLegacy,
    #[serde(default)]
    pub rollout: Option<RawRollout>,
    #[serde(default)]
    pub compare: Option<RawCompare>,
}

/// How the candidate's writes are compared with the control's.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCompare {
    #[serde(default)]
    pub volatile: Vec<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawOperation {
    pub name: Spanned<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub only: Option<Spanned<CodePath>>,
    #[serde(default)]
    pub phase: Option<Spanned<u32>>,
    #[serde(default)]
    pub category: Option<Spanned<Category>>,
    #[serde(default)]
    pub gate: Option<Spanned<Gate>>,
    #[serde(default)]
    pub depends_on: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    pub shadow: Option<Spanned<ShadowPolicy>>,
    #[serde(default)]
    pub retry_on_conflict: Option<Spanned<bool>>,
    #[serde(default)]
    pub intended_differences: Option<Spanned<Vec<Spanned<RawIntended>>>>,
}

/// A write difference the phased code is meant to make (`intendedDifferences`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIntended {
    pub kind: Spanned<String>,
    #[serde(default)]
    pub name: Option<Spanned<String>>,
    #[serde(default)]
    pub subresource: Option<Spanned<String>>,
    #[serde(default)]
    pub control: Option<Spanned<WriteAction>>,
    #[serde(default)]
    pub candidate: Option<Spanned<WriteAction>>,
    #[serde(default)]
    pub fields: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLegacy {
    pub order: Spanned<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRollout {
    pub groups: Vec<Spanned<RawGroup>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGroup {
    pub name: Spanned<String>,
    #[serde(default)]
    pub description: Option<String>,
    pub operations: Spanned<Vec<Spanned<String>>>,
}

/// A lenient reading of the same document that only locates operations, so that a syntax or
/// type error inside an operation can name the operation it is in.
#[derive(Debug, Deserialize)]
pub(super) struct LooseDoc {
    #[serde(default)]
    pub spec: Option<LooseSpec>,
}

#[derive(Debug, Deserialize)]
pub(super) struct LooseSpec {
    #[serde(default)]
    pub operations: Option<Vec<Spanned<LooseOperation>>>,
    /// Where the siblings of `operations` start, to tell where the last operation ends.
    #[serde(default)]
    pub legacy: Option<Spanned<IgnoredAny>>,
    #[serde(default)]
    pub rollout: Option<Spanned<IgnoredAny>>,
    #[serde(default)]
    pub compare: Option<Spanned<IgnoredAny>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct LooseOperation {
    #[serde(default)]
    pub name: Option<LooseName>,
}

/// An operation name if it is a string; anything else is ignored.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum LooseName {
    Name(String),
    Other(IgnoredAny),
}
