//! The `ReconcilePlan` YAML document as written, with the source location of every value.
//!
//! These types only describe the syntax; `validate` turns them into a [`super::ReconcilePlan`].

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_saphyr::Spanned;

use crate::vocab::{Category, Gate, ShadowPolicy};

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
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawOperation {
    pub name: Spanned<String>,
    #[serde(default)]
    pub description: Option<String>,
    pub phase: Spanned<u32>,
    pub category: Spanned<Category>,
    #[serde(default)]
    pub gate: Gate,
    #[serde(default)]
    pub depends_on: Vec<Spanned<String>>,
    pub shadow: ShadowPolicy,
    #[serde(default)]
    pub retry_on_conflict: bool,
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
