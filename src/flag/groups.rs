//! Rollout groups by name: `GROUP` (in every plan that has it) or `PLAN/GROUP`. Text becomes a
//! [`GroupRef`] in one parser, and names become the groups of the plans at hand in one resolver,
//! [`resolve`]: the command line's options, the flag's check of its ConfigMap and `ingest` all
//! use them, with one wording for a name that names no group.

use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;

use crate::plan::ReconcilePlan;

/// A rollout group named by the flag: `group` (every plan that has it) or `plan/group`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupRef {
    pub(super) plan: Option<String>,
    pub(super) group: String,
}

impl GroupRef {
    /// `group` or `plan/group`; `None` for an empty name or part.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        match s.split_once('/') {
            Some((plan, group))
                if !plan.is_empty() && !group.is_empty() && !group.contains('/') =>
            {
                Some(Self {
                    plan: Some(plan.to_owned()),
                    group: group.to_owned(),
                })
            }
            Some(_) => None,
            None if s.is_empty() => None,
            None => Some(Self {
                plan: None,
                group: s.to_owned(),
            }),
        }
    }

    /// A group of one plan.
    #[must_use]
    pub fn qualified(plan: &str, group: &str) -> Self {
        Self {
            plan: Some(plan.to_owned()),
            group: group.to_owned(),
        }
    }

    /// A group of every plan that has one of this name.
    #[must_use]
    pub fn any_plan(group: &str) -> Self {
        Self {
            plan: None,
            group: group.to_owned(),
        }
    }

    /// The plan it names, if it names one (`PLAN/GROUP`).
    #[must_use]
    pub fn plan(&self) -> Option<&str> {
        self.plan.as_deref()
    }

    /// The group's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.group
    }

    /// Whether the two references can name the same group: the same name, and the same plan or
    /// one of them of any plan.
    #[must_use]
    pub fn overlaps(&self, other: &Self) -> bool {
        self.group == other.group
            && (self.plan.is_none() || other.plan.is_none() || self.plan == other.plan)
    }

    /// The group's name in `plan`, if this reference names a group of it.
    #[must_use]
    pub fn in_plan<'a>(&'a self, plan: &ReconcilePlan) -> Option<&'a str> {
        let ours = self.plan.as_deref().is_none_or(|p| p == plan.name());
        (ours && plan.group(&self.group).is_ok()).then_some(self.group.as_str())
    }
}

impl fmt::Display for GroupRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.plan {
            Some(plan) => write!(f, "{plan}/{}", self.group),
            None => f.write_str(&self.group),
        }
    }
}

impl FromStr for GroupRef {
    type Err = GroupSyntax;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or(GroupSyntax)
    }
}

/// Text that is not `GROUP` or `PLAN/GROUP`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "expected GROUP or PLAN/GROUP, e.g. non-critical-syncs or hostedcluster/non-critical-syncs"
)]
pub struct GroupSyntax;

/// A name that names no rollout group of the plans at hand. It reads why (no such plan, no such
/// group in the plan, no plan with such a group), then every group of the plans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownGroup {
    group: GroupRef,
    plans: Vec<String>,
    known: Vec<String>,
}

impl UnknownGroup {
    /// The name.
    #[must_use]
    pub const fn group(&self) -> &GroupRef {
        &self.group
    }

    /// Every group of the plans, `PLAN/GROUP`, separated by commas.
    #[must_use]
    pub fn known(&self) -> String {
        self.known.join(", ")
    }
}

impl fmt::Display for UnknownGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = &self.group.group;
        match &self.group.plan {
            Some(plan) if !self.plans.contains(plan) => write!(
                f,
                "no plan {plan:?} here (the plans: {})",
                self.plans.join(", ")
            )?,
            Some(plan) => write!(f, "plan {plan:?} has no rollout group {group:?}")?,
            None => write!(f, "no plan here has a rollout group {group:?}")?,
        }
        write!(f, "; the groups: {}", self.known())
    }
}

impl std::error::Error for UnknownGroup {}

/// The groups `names` name in `plans`, each as `PLAN/GROUP`, once, in the order named: `GROUP`
/// names the group of that name in every plan that has one. The one resolver of group names.
///
/// # Errors
/// The first name that names no group of `plans`.
///
/// ```
/// use shadow_reconciler::flag::{GroupRef, resolve};
/// use shadow_reconciler::plan::embedded;
///
/// let plans = [embedded::load("hostedcluster").unwrap()];
/// let named: Vec<GroupRef> = vec!["non-critical-syncs".parse().unwrap()];
/// let groups = resolve(&named, &plans).unwrap();
/// assert_eq!(groups[0].to_string(), "hostedcluster/non-critical-syncs");
/// let typo: Vec<GroupRef> = vec!["hostedcluster/nope".parse().unwrap()];
/// assert!(resolve(&typo, &plans).unwrap_err().to_string()
///     .starts_with("plan \"hostedcluster\" has no rollout group \"nope\"; the groups: "));
/// ```
pub fn resolve<'a, P: Borrow<ReconcilePlan>>(
    names: impl IntoIterator<Item = &'a GroupRef>,
    plans: &[P],
) -> Result<Vec<GroupRef>, UnknownGroup> {
    let mut out: Vec<GroupRef> = Vec::new();
    for name in names {
        let mut found = false;
        for plan in plans.iter().map(Borrow::borrow) {
            if let Some(group) = name.in_plan(plan) {
                found = true;
                let resolved = GroupRef::qualified(plan.name(), group);
                if !out.contains(&resolved) {
                    out.push(resolved);
                }
            }
        }
        if !found {
            return Err(UnknownGroup {
                group: name.clone(),
                plans: plans.iter().map(|p| p.borrow().name().to_owned()).collect(),
                known: plans
                    .iter()
                    .flat_map(|p| {
                        let plan: &ReconcilePlan = p.borrow();
                        plan.groups()
                            .iter()
                            .map(move |g| format!("{}/{}", plan.name(), g.name()))
                    })
                    .collect(),
            });
        }
    }
    Ok(out)
}
