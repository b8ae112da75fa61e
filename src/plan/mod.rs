//! The `ReconcilePlan`: the classification hypothesis under test, loaded from YAML and validated.
//!
//! A plan lists every operation of a reconcile with its phase, category, gate, dependencies, shadow
//! policy and conflict policy; the legacy (sequential) order; and the rollout groups that enforce
//! moves through. See `docs/plan.md` for the format.
//!
//! Layer 1 of the crate (docs/design.md, "Layers"): builds on [`util`](crate::util),
//! [`vocab`](crate::vocab); nothing here may use a module of its layer or above.

mod compare;
mod diagnostic;
pub mod fields;
mod hash;
mod paths;
mod raw;
mod summary;
mod validate;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub use diagnostic::Diagnostic;
pub use fields::FieldPath;
pub use hash::PlanHash;
pub use summary::Summary;

use crate::vocab::{Category, CodePath, Gate, OpId, OpSet, ShadowPolicy, WriteAction};

/// The `apiVersion` every plan must declare.
pub const API_VERSION: &str = "shadow-reconciler.io/v1alpha1";
/// The `kind` every plan must declare.
pub const KIND: &str = "ReconcilePlan";
/// The name of the implicit rollout group of a plan that declares none.
pub const IMPLICIT_GROUP: &str = "all";

/// Errors from loading a plan.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The plan file could not be read.
    #[error("cannot read plan file {}", path.display())]
    Read {
        /// The file that was asked for.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// The plan was read but is not a valid `ReconcilePlan`; every problem found is listed.
    #[error("{}", Diagnostic::render_all(diagnostics))]
    Invalid {
        /// One entry per problem, each with its file, line and column.
        diagnostics: Vec<Diagnostic>,
    },
}

/// Errors from naming rollout groups or operations that the plan does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// No rollout group of this name.
    #[error("plan {plan:?} has no rollout group {name:?}; its groups are: {known}")]
    UnknownGroup {
        /// The plan's name.
        plan: String,
        /// The name asked for.
        name: String,
        /// The plan's group names, comma-separated.
        known: String,
    },
}

/// One operation of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    id: OpId,
    name: String,
    description: Option<String>,
    phase: u32,
    category: Category,
    gate: Gate,
    depends_on: OpSet,
    shadow: ShadowPolicy,
    retry_on_conflict: bool,
    only: Option<CodePath>,
    intended: Vec<IntendedDifference>,
}

impl Operation {
    /// The operation's id in its plan.
    #[must_use]
    pub const fn id(&self) -> OpId {
        self.id
    }
    /// The operation's name, as in code, metrics and Parquet.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Free text for humans.
    #[must_use]
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }
    /// The phase; the phased model runs phases in increasing order.
    #[must_use]
    pub const fn phase(&self) -> u32 {
        self.phase
    }
    /// `critical` or `non-critical`, as the plan classifies it.
    #[must_use]
    pub const fn category(&self) -> Category {
        self.category
    }
    /// The gate, as the plan classifies it.
    #[must_use]
    pub const fn gate(&self) -> Gate {
        self.gate
    }
    /// The operations whose failure (or block) blocks this one.
    #[must_use]
    pub const fn depends_on(&self) -> &OpSet {
        &self.depends_on
    }
    /// How the candidate treats the operation when the control did not run it.
    #[must_use]
    pub const fn shadow(&self) -> ShadowPolicy {
        self.shadow
    }
    /// Whether the candidate retries a status write on 409 Conflict.
    #[must_use]
    pub const fn retry_on_conflict(&self) -> bool {
        self.retry_on_conflict
    }
    /// The one code path the operation exists in (`only:`), `None` when it is in both.
    ///
    /// An operation with `only: legacy` has no phase, category or gate of its own: it reads as
    /// phase 0, critical, gated (fail-fast, as every step of the legacy loop), shadow `skip`.
    #[must_use]
    pub const fn only(&self) -> Option<CodePath> {
        self.only
    }
    /// Whether the operation exists in this code path.
    #[must_use]
    pub fn in_path(&self, path: CodePath) -> bool {
        self.only.is_none_or(|only| only == path)
    }
    /// The write differences the phased code of this operation is meant to make.
    #[must_use]
    pub fn intended_differences(&self) -> &[IntendedDifference] {
        &self.intended
    }
}

/// A write difference the plan declares intended (`intendedDifferences`): the phased code
/// writes differently from the legacy code on purpose (a fix), so the difference does not hold
/// back the operation's rollout group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntendedDifference {
    kind: String,
    name: Option<String>,
    subresource: Option<String>,
    control: Option<WriteAction>,
    candidate: Option<WriteAction>,
    fields: Vec<FieldPath>,
    reason: Option<String>,
}

impl IntendedDifference {
    /// The object kind it concerns (`Secret`).
    #[must_use]
    pub fn kind(&self) -> &str {
        &self.kind
    }
    /// The object name, when it names one.
    #[must_use]
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
    /// Free text: why the difference is intended.
    #[must_use]
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// Whether a difference on an object of `kind`, `name` (the declared name may hold `*`:
    /// [`name_matches`]) and `subresource` (empty for the object itself), where the control did `control` and the candidate `candidate`, with
    /// these differing `fields`, is this declared one. Every given part must match; declared
    /// fields are patterns that must cover every differing field, and match only a difference
    /// of fields (both sides wrote the object).
    #[must_use]
    pub fn matches(
        &self,
        kind: &str,
        name: &str,
        subresource: &str,
        (control, candidate): (WriteAction, WriteAction),
        fields: &[FieldPath],
    ) -> bool {
        self.kind == kind
            && self.name.as_deref().is_none_or(|n| name_matches(n, name))
            && self.subresource.as_deref().is_none_or(|s| s == subresource)
            && self.control.is_none_or(|c| c == control)
            && self.candidate.is_none_or(|c| c == candidate)
            && (self.fields.is_empty()
                || (!fields.is_empty()
                    && fields
                        .iter()
                        .all(|f| self.fields.iter().any(|pattern| pattern.covers(f)))))
    }
}

/// Whether a declared name matches an object's name: equal, or, with `*` in it, each `*`
/// matching any run of characters (`monitoring-*`; a name the server generated from
/// `generateName: root-ca-` is recorded as `root-ca-*`).
#[must_use]
pub fn name_matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return pattern == name;
    };
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    for part in middle {
        let Some(at) = rest.find(part) else {
            return false;
        };
        rest = &rest[at + part.len()..];
    }
    rest.ends_with(last)
}

/// A named set of operations that enforce moves through together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RolloutGroup {
    name: String,
    description: Option<String>,
    operations: OpSet,
}

impl RolloutGroup {
    /// The group's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Free text for humans.
    #[must_use]
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }
    /// The operations in the group.
    #[must_use]
    pub const fn operations(&self) -> &OpSet {
        &self.operations
    }
}

/// A validated `ReconcilePlan`.
#[derive(Clone, Debug)]
pub struct ReconcilePlan {
    source: String,
    name: String,
    description: Option<String>,
    operations: Vec<Operation>,
    by_name: HashMap<String, OpId>,
    phased_order: Vec<OpId>,
    legacy_order: Vec<OpId>,
    groups: Vec<RolloutGroup>,
    groups_declared: bool,
    volatile: Vec<FieldPath>,
    hash: PlanHash,
}

impl ReconcilePlan {
    /// Reads and validates the plan in `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, PlanError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| PlanError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_yaml(&path.display().to_string(), &text)
    }

    /// Parses and validates a plan; `source` names it in error messages (usually its path).
    pub fn from_yaml(source: &str, text: &str) -> Result<Self, PlanError> {
        validate::parse(source, text).map_err(|diagnostics| PlanError::Invalid { diagnostics })
    }

    /// Where the plan was loaded from.
    #[must_use]
    pub fn source(&self) -> &str {
        &self.source
    }
    /// `metadata.name`.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
    /// `metadata.description`.
    #[must_use]
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }
    /// The content hash: equal for equal plans, whatever their YAML formatting.
    #[must_use]
    pub const fn hash(&self) -> &PlanHash {
        &self.hash
    }
    /// Every operation, in listing order (indexable by [`OpId::index`]).
    #[must_use]
    pub fn operations(&self) -> &[Operation] {
        &self.operations
    }
    /// The operation with this id.
    ///
    /// # Panics
    /// If `id` belongs to another plan with more operations.
    #[must_use]
    pub fn operation(&self, id: OpId) -> &Operation {
        &self.operations[id.index()]
    }
    /// The name of the operation with this id.
    #[must_use]
    pub fn name_of(&self, id: OpId) -> &str {
        &self.operations[id.index()].name
    }
    /// The operation of this name.
    #[must_use]
    pub fn lookup(&self, name: &str) -> Option<OpId> {
        self.by_name.get(name).copied()
    }
    /// How many operations the plan has.
    #[must_use]
    pub fn len(&self) -> usize {
        self.operations.len()
    }
    /// Always false: validation rejects empty plans.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }
    /// The phased order: by phase, then by listing order; the operations of the phased code
    /// path (every one but those with `only: legacy`).
    #[must_use]
    pub fn phased_order(&self) -> &[OpId] {
        &self.phased_order
    }
    /// The order in which `path`'s model considers its operations.
    #[must_use]
    pub fn order(&self, path: CodePath) -> &[OpId] {
        match path {
            CodePath::Legacy => &self.legacy_order,
            CodePath::Phased => &self.phased_order,
        }
    }
    /// Whether some operation exists in one code path only.
    #[must_use]
    pub fn has_one_sided(&self) -> bool {
        self.operations.iter().any(|op| op.only.is_some())
    }
    /// Field paths the write comparison ignores besides the built-in ones (`compare.volatile`).
    #[must_use]
    pub fn volatile(&self) -> &[FieldPath] {
        &self.volatile
    }
    /// The legacy sequential order (`legacy.order`): the operations of the legacy code path
    /// (every one but those with `only: phased`).
    #[must_use]
    pub fn legacy_order(&self) -> &[OpId] {
        &self.legacy_order
    }
    /// The rollout groups; a plan that declares none has one implicit group, [`IMPLICIT_GROUP`],
    /// holding every operation.
    #[must_use]
    pub fn groups(&self) -> &[RolloutGroup] {
        &self.groups
    }
    /// Whether the groups were declared in the plan (rather than the implicit one).
    #[must_use]
    pub const fn groups_declared(&self) -> bool {
        self.groups_declared
    }
    /// The rollout group of this name.
    pub fn group(&self, name: &str) -> Result<&RolloutGroup, LookupError> {
        self.groups
            .iter()
            .find(|g| g.name == name)
            .ok_or_else(|| LookupError::UnknownGroup {
                plan: self.name.clone(),
                name: name.to_owned(),
                known: self
                    .groups
                    .iter()
                    .map(|g| g.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
    /// The operations of the named groups together.
    pub fn group_members<S: AsRef<str>>(&self, names: &[S]) -> Result<OpSet, LookupError> {
        let mut ops = OpSet::new();
        for name in names {
            ops.extend(self.group(name.as_ref())?.operations());
        }
        Ok(ops)
    }
    /// The names of these operations, sorted and de-duplicated.
    #[must_use]
    pub fn sorted_names(&self, ops: impl IntoIterator<Item = OpId>) -> Vec<&str> {
        let mut names: Vec<&str> = ops.into_iter().map(|op| self.name_of(op)).collect();
        names.sort_unstable();
        names.dedup();
        names
    }
    /// The summary `plan check` prints.
    #[must_use]
    pub fn summary(&self) -> Summary<'_> {
        Summary::new(self)
    }
}

/// The plans shipped in `deploy/plans/`, compiled into the binary.
pub mod embedded {
    /// HyperShift's HostedCluster reconcile (`deploy/plans/hostedcluster.yaml`).
    pub const HOSTEDCLUSTER: &str = include_str!("../../deploy/plans/hostedcluster.yaml");
    /// Open Cluster Management's install progression (`deploy/plans/addon-install-progression.yaml`).
    pub const ADDON_INSTALL_PROGRESSION: &str =
        include_str!("../../deploy/plans/addon-install-progression.yaml");

    /// The names of the shipped plans.
    pub const NAMES: [&str; 2] = ["hostedcluster", "addon-install-progression"];

    /// A shipped plan's file name and text, by name.
    #[must_use]
    pub fn text(name: &str) -> Option<(&'static str, &'static str)> {
        match name {
            "hostedcluster" => Some(("deploy/plans/hostedcluster.yaml", HOSTEDCLUSTER)),
            "addon-install-progression" => Some((
                "deploy/plans/addon-install-progression.yaml",
                ADDON_INSTALL_PROGRESSION,
            )),
            _ => None,
        }
    }

    /// Loads a shipped plan by name (`hostedcluster` or `addon-install-progression`): a copy of
    /// [`shared`]'s.
    ///
    /// # Panics
    /// If a shipped plan is invalid, which the test suite rules out.
    pub fn load(name: &str) -> Option<super::ReconcilePlan> {
        shared(name).map(|plan| (*plan).clone())
    }

    /// A shipped plan by name, parsed once per process and shared by every caller after.
    ///
    /// # Panics
    /// If a shipped plan is invalid, which the test suite rules out.
    pub fn shared(name: &str) -> Option<std::sync::Arc<super::ReconcilePlan>> {
        static PLANS: [std::sync::OnceLock<std::sync::Arc<super::ReconcilePlan>>; NAMES.len()] =
            [const { std::sync::OnceLock::new() }; NAMES.len()];
        let index = NAMES.iter().position(|n| *n == name)?;
        let plan = PLANS[index].get_or_init(|| {
            let (file, text) = text(name).expect("every name has a text");
            std::sync::Arc::new(
                super::ReconcilePlan::from_yaml(file, text)
                    .expect("shipped plans are valid (tested)"),
            )
        });
        Some(plan.clone())
    }
}
