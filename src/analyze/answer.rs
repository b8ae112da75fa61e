//! The answer first: one line per rollout group (ready, not ready, inconclusive, and why), then
//! the plan edits that fix what is not ready with the evidence for each edit, then what would make
//! an inconclusive group conclusive. Every format (table, Markdown, HTML, JSON) starts with it, so
//! the order and the words are the same in each.
//!
//! A finding that applies to several groups (an operation is in its own group and in `all`) is
//! said once here, with the groups it concerns.

use serde::Serialize;

use super::{Finding, FindingCode, PlanReport, Readiness};

/// The answer of an analysis.
#[derive(Clone, Debug, Serialize)]
pub struct Answer {
    /// The worst readiness over every group.
    pub readiness: Readiness,
    /// One line per plan and rollout group, in the plans' order.
    pub groups: Vec<GroupLine>,
    /// Per plan that has any: the plan edits that fix its not-ready groups.
    pub plan_edits: Vec<PlanEdits>,
    /// The next steps: the evidence still missing (for inconclusive findings), each step once.
    pub next_steps: Vec<NextStep>,
}

/// A rollout group's readiness in one line.
#[derive(Clone, Debug, Serialize)]
pub struct GroupLine {
    /// The plan.
    pub plan: String,
    /// The group.
    pub group: String,
    /// Its readiness.
    pub readiness: Readiness,
    /// Why, in one sentence (the group's summary without the readiness word).
    pub why: String,
    /// Whether the plan edits of [`Answer::plan_edits`] fix (part of) what stops it.
    pub fixed_by_plan_edit: bool,
}

/// The edits to one plan.
#[derive(Clone, Debug, Serialize)]
pub struct PlanEdits {
    /// The plan.
    pub plan: String,
    /// The edits as a unified-style diff of the plan file (`analyze --suggest` writes the whole
    /// plan); absent when the plan's text was not at hand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Each change, once, with its evidence.
    pub changes: Vec<Change>,
}

/// One change to a plan and the evidence behind it.
#[derive(Clone, Debug, Serialize)]
pub struct Change {
    /// The finding that asks for it.
    pub code: FindingCode,
    /// The change, in words ("add A to B's dependsOn").
    pub change: String,
    /// The operations it concerns.
    pub operations: Vec<String>,
    /// The numbers behind it, in one sentence.
    pub evidence: String,
    /// The groups it stops.
    pub groups: Vec<String>,
}

/// A next step shared by one or more findings of a plan.
#[derive(Clone, Debug, Serialize)]
pub struct NextStep {
    /// The plan.
    pub plan: String,
    /// What to do.
    pub step: String,
    /// The operations it concerns.
    pub operations: Vec<String>,
    /// The groups it concerns.
    pub groups: Vec<String>,
}

fn push_unique(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|x| x == item) {
        list.push(item.to_owned());
    }
}

/// The group's summary without its leading readiness word and without the `--suggest` hint
/// (the answer shows the edits themselves).
fn why(summary: &str) -> String {
    let rest = ["ready: ", "not ready: ", "inconclusive: "]
        .iter()
        .find_map(|p| summary.strip_prefix(p))
        .unwrap_or(summary);
    rest.replace(super::readiness::SUGGEST_HINT, "")
}

/// The distinct findings of a plan (a finding of a group is repeated in `all`), each with the
/// groups it concerns, in the order they first appear.
#[must_use]
pub fn distinct_findings(plan: &PlanReport) -> Vec<(&Finding, Vec<&str>)> {
    let mut found: Vec<(&Finding, Vec<&str>)> = Vec::new();
    for g in &plan.readiness {
        for f in &g.findings {
            match found
                .iter_mut()
                .find(|(x, _)| x.code == f.code && x.operations == f.operations)
            {
                Some((_, groups)) => groups.push(&g.group),
                None => found.push((f, vec![&g.group])),
            }
        }
    }
    found
}

/// The answer of `plans` (whose worst readiness is `readiness`); diffs are added by
/// [`Answer::set_diff`].
#[must_use]
pub fn answer(plans: &[PlanReport], readiness: Readiness) -> Answer {
    let mut answer = Answer {
        readiness,
        groups: Vec::new(),
        plan_edits: Vec::new(),
        next_steps: Vec::new(),
    };
    for plan in plans {
        answer.groups.extend(plan.readiness.iter().map(|g| {
            GroupLine {
                plan: plan.plan.clone(),
                group: g.group.clone(),
                readiness: g.readiness,
                why: why(&g.summary),
                fixed_by_plan_edit: g
                    .findings
                    .iter()
                    .any(|f| f.fix.is_some() && f.code.edits_plan()),
            }
        }));
        let findings = distinct_findings(plan);
        let owned = |groups: &[&str]| groups.iter().map(|g| (*g).to_owned()).collect();
        // The plan edits: what `--suggest` writes, nothing else.
        let changes: Vec<Change> = findings
            .iter()
            .filter(|(f, _)| f.code.edits_plan())
            .filter_map(|(f, groups)| {
                Some(Change {
                    code: f.code,
                    change: f.fix.clone()?,
                    operations: f.operations.clone(),
                    evidence: f.evidence.clone(),
                    groups: owned(groups),
                })
            })
            .collect();
        let mut steps: Vec<NextStep> = Vec::new();
        for (f, groups) in &findings {
            let Some(step) = &f.next_step else { continue };
            let at = if let Some(i) = steps.iter().position(|s| s.step == *step) {
                i
            } else {
                steps.push(NextStep {
                    plan: plan.plan.clone(),
                    step: step.clone(),
                    operations: Vec::new(),
                    groups: Vec::new(),
                });
                steps.len() - 1
            };
            for op in &f.operations {
                push_unique(&mut steps[at].operations, op);
            }
            for g in groups {
                push_unique(&mut steps[at].groups, g);
            }
        }
        // Groups in the plan's order, whatever finding named them first.
        let order = |g: &String| plan.readiness.iter().position(|r| r.group == *g);
        for s in &mut steps {
            s.groups.sort_by_key(order);
        }
        answer.next_steps.extend(steps);
        if !changes.is_empty() {
            answer.plan_edits.push(PlanEdits {
                plan: plan.plan.clone(),
                diff: None,
                changes,
            });
        }
    }
    answer
}

impl Answer {
    /// Sets the diff of `plan`'s edits (from [`super::suggest::edits`]).
    pub fn set_diff(&mut self, plan: &str, diff: String) {
        if let Some(edits) = self.plan_edits.iter_mut().find(|e| e.plan == plan) {
            edits.diff = Some(diff);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Finding, FindingCode, GroupReport, PlanReport, Readiness};

    fn finding(code: FindingCode, ops: &[&str], fix: Option<&str>, step: Option<&str>) -> Finding {
        Finding {
            code,
            operations: ops.iter().map(|s| (*s).to_owned()).collect(),
            evidence: format!("evidence of {ops:?}"),
            fix: fix.map(str::to_owned),
            next_step: step.map(str::to_owned),
            objects_needed: None,
        }
    }

    fn group(
        name: &str,
        readiness: Readiness,
        summary: &str,
        findings: Vec<Finding>,
    ) -> GroupReport {
        GroupReport {
            group: name.to_owned(),
            operations: Vec::new(),
            readiness,
            summary: summary.to_owned(),
            findings,
        }
    }

    #[test]
    fn each_change_and_step_is_said_once_with_the_groups_it_concerns() {
        let dep = || {
            finding(
                FindingCode::UndeclaredDependency,
                &["A", "B"],
                Some("add A to B's dependsOn"),
                None,
            )
        };
        let quiet =
            |op: &str| finding(FindingCode::NotExercised, &[op], None, Some("make it fail"));
        let hint = super::super::readiness::SUGGEST_HINT;
        let plan = PlanReport {
            readiness: vec![
                group(
                    "syncs",
                    Readiness::NotReady,
                    &format!("not ready: 1 undeclared dependencies{hint}"),
                    vec![dep(), quiet("C")],
                ),
                group(
                    "gated",
                    Readiness::Inconclusive,
                    "inconclusive: 1 member never exercised",
                    vec![quiet("D")],
                ),
                group(
                    "all",
                    Readiness::NotReady,
                    &format!("not ready: 1 undeclared dependencies{hint}"),
                    vec![dep(), quiet("C"), quiet("D")],
                ),
            ],
            plan: "p".to_owned(),
            ..PlanReport::default()
        };
        let a = super::answer(&[plan], Readiness::NotReady);
        assert_eq!(a.groups.len(), 3);
        assert_eq!(a.groups[0].why, "1 undeclared dependencies");
        assert!(a.groups[0].fixed_by_plan_edit && !a.groups[1].fixed_by_plan_edit);
        assert_eq!(a.plan_edits.len(), 1);
        let changes = &a.plan_edits[0].changes;
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].groups, ["syncs", "all"]);
        assert_eq!(a.next_steps.len(), 1, "{:?}", a.next_steps);
        assert_eq!(a.next_steps[0].operations, ["C", "D"]);
        assert_eq!(a.next_steps[0].groups, ["syncs", "gated", "all"]);
    }
}
