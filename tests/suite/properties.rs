//! Property tests over random plans and random outcomes.

use std::fmt::Write;
use std::sync::Arc;

use proptest::prelude::*;
use shadow_reconciler::model::{Diff, Policy, Report, StepResult, drive};
use shadow_reconciler::plan::ReconcilePlan;
use shadow_reconciler::vocab::{ErrorClass, OpSet, Outcome};

/// What a random operation returns.
#[derive(Clone, Copy, Debug)]
enum Result_ {
    Ok,
    Fail,
    NotSimulated,
}

#[derive(Clone, Debug)]
struct RandomPlan {
    phases: Vec<u32>,
    critical: Vec<bool>,
    gated: Vec<bool>,
    /// Per operation, a bit mask over phased positions; only earlier positions are used.
    deps: Vec<u16>,
    /// Per operation, its group (0..3) or none (3).
    group: Vec<u8>,
    /// A permutation of 0..n used as legacy order when it is not the phased order.
    shuffled: Vec<usize>,
    results: Vec<Result_>,
}

fn random_plan() -> impl Strategy<Value = RandomPlan> {
    (1usize..=12).prop_flat_map(|n| {
        (
            prop::collection::vec(0u32..4, n),
            prop::collection::vec(any::<bool>(), n),
            prop::collection::vec(any::<bool>(), n),
            prop::collection::vec(any::<u16>(), n),
            prop::collection::vec(0u8..4, n),
            Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
            prop::collection::vec(
                prop_oneof![6 => Just(Result_::Ok), 3 => Just(Result_::Fail), 1 => Just(Result_::NotSimulated)],
                n,
            ),
        )
            .prop_map(|(phases, critical, gated, deps, group, shuffled, results)| RandomPlan {
                phases,
                critical,
                gated,
                deps,
                group,
                shuffled,
                results,
            })
    })
}

impl RandomPlan {
    fn phased_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.phases.len()).collect();
        order.sort_by_key(|&i| self.phases[i]);
        order
    }

    /// Renders the plan as YAML; `legacy_is_phased` makes the legacy order the phased order.
    fn yaml(&self, legacy_is_phased: bool) -> String {
        let n = self.phases.len();
        let phased = self.phased_order();
        let mut y = String::from(
            "apiVersion: shadow-reconciler.io/v1alpha1\nkind: ReconcilePlan\nmetadata: {name: random}\nspec:\n  operations:\n",
        );
        for i in 0..n {
            let position = phased.iter().position(|&j| j == i).unwrap();
            let deps: Vec<String> = (0..position)
                .filter(|p| self.deps[i] & (1 << p) != 0)
                .map(|p| format!("Op{}", phased[p]))
                .collect();
            writeln!(
                y,
                "    - {{name: Op{i}, phase: {}, category: {}, gate: {}, dependsOn: [{}], shadow: dry-run}}",
                self.phases[i],
                if self.critical[i] { "critical" } else { "non-critical" },
                if self.gated[i] { "no-critical-failure" } else { "none" },
                deps.join(", ")
            )
            .unwrap();
        }
        let legacy = if legacy_is_phased {
            phased
        } else {
            self.shuffled.clone()
        };
        let legacy: Vec<String> = legacy.iter().map(|i| format!("Op{i}")).collect();
        writeln!(y, "  legacy: {{order: [{}]}}", legacy.join(", ")).unwrap();
        let groups: Vec<String> = (0..3u8)
            .filter_map(|g| {
                let members: Vec<String> = (0..n)
                    .filter(|&i| self.group[i] == g)
                    .map(|i| format!("Op{i}"))
                    .collect();
                (!members.is_empty()).then(|| {
                    format!(
                        "      - {{name: g{g}, operations: [{}]}}",
                        members.join(", ")
                    )
                })
            })
            .collect();
        if !groups.is_empty() {
            writeln!(y, "  rollout:\n    groups:\n{}", groups.join("\n")).unwrap();
        }
        y
    }

    fn plan(&self, legacy_is_phased: bool) -> Arc<ReconcilePlan> {
        let yaml = self.yaml(legacy_is_phased);
        Arc::new(
            ReconcilePlan::from_yaml("random.yaml", &yaml)
                .unwrap_or_else(|e| panic!("{e}\n{yaml}")),
        )
    }

    /// Runs `policy` over this plan's results; returns the report and the ops called, in order.
    fn run(&self, policy: &Policy) -> (Report, Vec<usize>) {
        let mut called = Vec::new();
        let report = drive(policy, |op| {
            let i = op.id().index();
            called.push(i);
            match self.results[i] {
                Result_::Ok => StepResult::succeeded(),
                Result_::Fail => StepResult::failed(ErrorClass::Server, format!("Op{i} failed")),
                Result_::NotSimulated => StepResult::not_simulated(),
            }
        });
        (report, called)
    }
}

/// A random selection of the plan's groups to enforce.
fn enforced(plan: &ReconcilePlan, mask: u8) -> Vec<String> {
    plan.groups()
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, g)| g.name().to_owned())
        .collect()
}

/// The invariants every run satisfies.
fn check_run(report: &Report, called: &[usize], n: usize) -> Result<(), TestCaseError> {
    prop_assert_eq!(report.steps().len(), n, "every operation decided once");
    let mut seen = vec![false; n];
    for step in report.steps() {
        prop_assert!(!seen[step.op.index()], "decided twice");
        seen[step.op.index()] = true;
        let was_called = called.contains(&step.op.index());
        prop_assert_eq!(was_called, step.executed);
        if matches!(
            step.outcome,
            Outcome::Blocked { .. } | Outcome::Skipped { .. }
        ) {
            prop_assert!(!was_called, "blocked or skipped operation executed");
        }
        if let Outcome::Blocked { by } = &step.outcome {
            for &root in by.as_slice() {
                prop_assert!(
                    matches!(report.outcome(root), Outcome::Failed { .. }),
                    "blocked by a non-failure"
                );
            }
        }
    }
    let mut sorted = called.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    prop_assert_eq!(sorted.len(), called.len(), "an operation executed twice");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn phased_without_groups_and_legacy_order_is_sequential(p in random_plan()) {
        let plan = p.plan(true);
        let sequential = Policy::sequential(plan.clone());
        let phased = Policy::phased_enforcing(plan.clone(), OpSet::new());
        let (s, s_called) = p.run(&sequential);
        let (f, f_called) = p.run(&phased);
        prop_assert_eq!(&s_called, &f_called);
        for (a, b) in s.steps().iter().zip(f.steps()) {
            prop_assert_eq!(a.op, b.op);
            prop_assert_eq!(a.executed, b.executed);
            prop_assert_eq!(&a.message, &b.message);
            match (&a.outcome, &b.outcome) {
                (Outcome::Skipped { after }, Outcome::Blocked { by }) => {
                    prop_assert_eq!(by.as_slice(), &[*after][..], "blocked by the one failure the loop stopped at");
                }
                (x, y) => prop_assert_eq!(x, y),
            }
        }
        prop_assert_eq!(s.first_failure(), f.first_failure());
        prop_assert_eq!(s.has_critical_failure(), f.has_critical_failure());
        prop_assert_eq!(s.succeeded(), f.succeeded());
    }

    #[test]
    fn with_every_operation_succeeding_both_models_run_everything(p in random_plan(), mask in any::<u8>(), same_order in any::<bool>()) {
        let plan = p.plan(same_order);
        let all_ok = RandomPlan { results: vec![Result_::Ok; p.phases.len()], ..p.clone() };
        let groups = enforced(&plan, mask);
        for policy in [Policy::sequential(plan.clone()), Policy::phased(plan.clone(), &groups).unwrap()] {
            let (report, called) = all_ok.run(&policy);
            prop_assert_eq!(called.len(), plan.len());
            prop_assert!(report.succeeded());
            prop_assert_eq!(report.aggregate(), None);
            let order: Vec<usize> = policy.order().iter().map(|op| op.index()).collect();
            prop_assert_eq!(called, order);
        }
    }

    #[test]
    fn no_blocked_or_skipped_operation_is_executed(p in random_plan(), mask in any::<u8>(), same_order in any::<bool>()) {
        let plan = p.plan(same_order);
        let groups = enforced(&plan, mask);
        for policy in [Policy::sequential(plan.clone()), Policy::phased(plan.clone(), &groups).unwrap()] {
            let (report, called) = p.run(&policy);
            check_run(&report, &called, plan.len())?;
        }
    }

    #[test]
    fn diff_is_consistent_with_both_runs(p in random_plan(), mask in any::<u8>(), same_order in any::<bool>()) {
        let plan = p.plan(same_order);
        let groups = enforced(&plan, mask);
        let (control, _) = p.run(&Policy::sequential(plan.clone()));
        let (candidate, _) = p.run(&Policy::phased(plan.clone(), &groups).unwrap());
        let diff = Diff::between(&control, &candidate).unwrap();
        for &op in diff.unblocked() {
            prop_assert!(!diff.newly_blocked().contains(&op), "unblocked and newly blocked");
        }
        for op in plan.operations().iter().map(shadow_reconciler::plan::Operation::id) {
            let (c, k) = (control.step(op), candidate.step(op));
            prop_assert_eq!(diff.unblocked().contains(&op), k.executed && !c.executed);
            prop_assert_eq!(
                diff.newly_blocked().contains(&op),
                c.executed && matches!(k.outcome, Outcome::Blocked { .. } | Outcome::Skipped { .. })
            );
            prop_assert_eq!(
                diff.changed().contains(&op),
                c.outcome.ran() && k.outcome.ran() && c.outcome != k.outcome
            );
        }
        for &(a, b) in diff.reordered() {
            let pos = |r: &Report, op| r.steps().iter().position(|s| s.op == op).unwrap();
            prop_assert!(pos(&control, a) < pos(&control, b));
            prop_assert!(pos(&candidate, a) > pos(&candidate, b));
        }
        // The same world in the same order: the runs agree wherever both ran.
        let same = Diff::between(&control, &control).unwrap();
        prop_assert!(same.is_empty());
    }
}
