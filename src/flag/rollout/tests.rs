use k8s_openapi::jiff::Timestamp;

use super::*;

fn spec(steps: &[(f64, u64, Option<&str>)]) -> ShadowRolloutSpec {
    ShadowRolloutSpec {
        group: "hostedcluster/gated-components".to_owned(),
        steps: steps
            .iter()
            .map(|(ramp, objects, d)| RolloutStep {
                ramp: *ramp,
                min_objects: Some(*objects),
                min_duration: d.map(str::to_owned),
            })
            .collect(),
        gates: Gates::default(),
    }
}

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

fn gate(result: Verdict) -> Observation {
    Observation {
        enforced_objects: 40,
        gates: vec![GateResult {
            name: "failure-rate".to_owned(),
            result,
            message: "m".to_owned(),
            figures: BTreeMap::new(),
        }],
        decisive: Vec::new(),
    }
}

/// Gates that pass at an interim look, the comparison judged `decisive` at the decisive one.
fn looks(enforced_objects: u64, decisive: Verdict) -> Observation {
    let mut o = gate(Verdict::Passed);
    o.enforced_objects = enforced_objects;
    o.decisive = vec![GateResult {
        result: decisive,
        message: "decisive".to_owned(),
        ..o.gates[0].clone()
    }];
    o
}

#[test]
fn the_comparison_is_judged_at_its_stated_confidence_once_per_step() {
    let policy = Policy::of(&spec(&[(10.0, 30, None), (100.0, 30, None)])).unwrap();
    let (status, _) = start(&policy, at(0));
    // Before the step's objects are met, only the interim verdict counts.
    let (waiting, ds) = evolve(
        &policy,
        &status,
        None,
        Some(&looks(12, Verdict::Failed)),
        at(1),
    );
    assert!(ds.is_empty(), "{ds:?}");
    assert_eq!(waiting.phase, Phase::Progressing);
    assert_eq!(waiting.last_gate.as_ref().unwrap().gates[0].message, "m");
    // Paused: the step does not advance, so no look is decisive.
    let (paused, _) = evolve(&policy, &status, Some(Action::Pause), None, at(1));
    let (still, ds) = evolve(
        &policy,
        &paused,
        None,
        Some(&looks(40, Verdict::Failed)),
        at(2),
    );
    assert!(ds.is_empty(), "{ds:?}");
    assert_eq!(still.phase, Phase::Paused);
    // The look at which the step would advance is decisive: its verdict stands.
    let (rolled, ds) = evolve(
        &policy,
        &waiting,
        None,
        Some(&looks(40, Verdict::Failed)),
        at(2),
    );
    assert_eq!(rolled.phase, Phase::RolledBack);
    assert_eq!(ds[0].kind, "RolledBack");
    assert!(ds[0].message.contains("decisive"), "{}", ds[0].message);
    let (advanced, ds) = evolve(
        &policy,
        &waiting,
        None,
        Some(&looks(40, Verdict::Passed)),
        at(2),
    );
    assert_eq!((advanced.step, ds[0].kind.as_str()), (1, "Advanced"));
    assert_eq!(advanced.last_gate.unwrap().gates[0].message, "decisive");
}

#[test]
fn passing_gates_advance_step_by_step_to_completed() {
    let policy = Policy::of(&spec(&[
        (5.0, 30, None),
        (50.0, 30, None),
        (100.0, 30, None),
    ]))
    .unwrap();
    let (mut status, d) = start(&policy, at(0));
    assert_eq!((d.kind.as_str(), status.ramp), ("Started", 5.0));
    assert_eq!(
        policy.entry(&status).to_string(),
        "hostedcluster/gated-components: enforce 5%"
    );
    let mut kinds = Vec::new();
    for i in 1..=3 {
        let (next, ds) = evolve(&policy, &status, None, Some(&gate(Verdict::Passed)), at(i));
        kinds.extend(ds.into_iter().map(|d| (d.kind, d.ramp)));
        status = next;
    }
    assert_eq!(
        kinds,
        [
            ("Advanced".to_owned(), 50.0),
            ("Advanced".to_owned(), 100.0),
            ("Completed".to_owned(), 100.0)
        ]
    );
    assert_eq!(status.phase, Phase::Completed);
    // Completed: the gates no longer move it.
    let (after, ds) = evolve(&policy, &status, None, Some(&gate(Verdict::Failed)), at(9));
    assert!(ds.is_empty());
    assert_eq!(after.phase, Phase::Completed);
}

#[test]
fn a_step_waits_for_its_objects_and_its_time() {
    let policy = Policy::of(&spec(&[(5.0, 30, Some("10m")), (100.0, 30, None)])).unwrap();
    let (status, _) = start(&policy, at(0));
    let few = Observation {
        enforced_objects: 12,
        ..gate(Verdict::Passed)
    };
    let (next, ds) = evolve(&policy, &status, None, Some(&few), at(700));
    assert!(ds.is_empty());
    assert_eq!(next.last_gate.as_ref().unwrap().result, Verdict::Waiting);
    assert!(
        next.message.contains("12 of 30 objects enforced"),
        "{}",
        next.message
    );
    let (next, ds) = evolve(
        &policy,
        &status,
        None,
        Some(&gate(Verdict::Passed)),
        at(300),
    );
    assert!(ds.is_empty());
    assert!(next.message.contains("300s of 600s"), "{}", next.message);
    let (next, ds) = evolve(
        &policy,
        &status,
        None,
        Some(&gate(Verdict::Passed)),
        at(600),
    );
    assert_eq!(ds.len(), 1);
    assert_eq!((next.step, next.ramp), (1, 100.0));
}

#[test]
fn a_failed_gate_rolls_back_and_only_a_person_goes_on() {
    let policy = Policy::of(&spec(&[(5.0, 1, None), (25.0, 1, None), (100.0, 1, None)])).unwrap();
    let (status, _) = start(&policy, at(0));
    let (status, _) = evolve(&policy, &status, None, Some(&gate(Verdict::Passed)), at(1));
    let (status, ds) = evolve(&policy, &status, None, Some(&gate(Verdict::Failed)), at(2));
    assert_eq!(ds[0].kind, "RolledBack");
    assert!(ds[0].ramp.abs() < f64::EPSILON);
    assert!(ds[0].message.contains("step 2 (25%)"), "{}", ds[0].message);
    assert_eq!((status.phase, status.rollbacks), (Phase::RolledBack, 1));
    assert_eq!(
        policy.entry(&status).to_string(),
        "hostedcluster/gated-components: shadow"
    );
    // Passing gates do not re-advance it.
    let (same, ds) = evolve(&policy, &status, None, Some(&gate(Verdict::Passed)), at(3));
    assert!(ds.is_empty());
    assert_eq!(same.phase, Phase::RolledBack);
    // A promotion re-enters the step that failed, its clock from now.
    let (status, ds) = evolve(&policy, &status, Some(Action::Promote), None, at(4));
    assert_eq!(ds[0].kind, "Promoted");
    assert_eq!(
        (status.phase, status.step, status.ramp),
        (Phase::Progressing, 1, 25.0)
    );
    assert_eq!(
        status.step_started_at.as_deref(),
        Some(at(4).to_string().as_str())
    );
}

#[test]
fn pause_holds_but_still_rolls_back_abort_and_restart() {
    let policy = Policy::of(&spec(&[(5.0, 1, None), (100.0, 1, None)])).unwrap();
    let (status, _) = start(&policy, at(0));
    let (paused, ds) = evolve(
        &policy,
        &status,
        Some(Action::Pause),
        Some(&gate(Verdict::Passed)),
        at(1),
    );
    assert_eq!(ds.len(), 1);
    assert_eq!((paused.phase, paused.step), (Phase::Paused, 0));
    let (resumed, ds) = evolve(
        &policy,
        &paused,
        Some(Action::Resume),
        Some(&gate(Verdict::Passed)),
        at(2),
    );
    assert_eq!(
        ds.iter().map(|d| d.kind.as_str()).collect::<Vec<_>>(),
        ["Resumed", "Advanced"]
    );
    assert_eq!(resumed.step, 1);
    let (rolled, _) = evolve(&policy, &paused, None, Some(&gate(Verdict::Failed)), at(3));
    assert_eq!(rolled.phase, Phase::RolledBack);
    let (aborted, _) = evolve(&policy, &resumed, Some(Action::Abort), None, at(4));
    assert_eq!(aborted.phase, Phase::Aborted);
    assert!(!aborted.phase.enforces());
    let (again, ds) = evolve(&policy, &aborted, Some(Action::Promote), None, at(5));
    assert!(ds.is_empty());
    assert_eq!(again.phase, Phase::Aborted);
    let (restarted, ds) = evolve(&policy, &aborted, Some(Action::Restart), None, at(6));
    assert_eq!(ds[0].kind, "Restarted");
    assert_eq!(
        (restarted.phase, restarted.step, restarted.ramp),
        (Phase::Progressing, 0, 5.0)
    );
}

#[test]
fn a_bad_spec_names_its_field() {
    let cases: &[(ShadowRolloutSpec, &str)] = &[
        (spec(&[]), "spec.steps: at least one step"),
        (
            spec(&[(50.0, 1, None), (25.0, 1, None)]),
            "spec.steps[1].ramp: 25 does not rise",
        ),
        (
            spec(&[(150.0, 1, None)]),
            "spec.steps[0].ramp: 150 is not a percentage",
        ),
        (
            spec(&[(5.0, 1, Some("ten minutes"))]),
            "spec.steps[0].minDuration: \"ten minutes\"",
        ),
        (
            ShadowRolloutSpec {
                group: "a/b/c".to_owned(),
                ..spec(&[(5.0, 1, None)])
            },
            "spec.group: \"a/b/c\"",
        ),
    ];
    for (s, want) in cases {
        let err = Policy::of(s).unwrap_err();
        assert!(err.starts_with(want), "{err} (wanted {want})");
    }
    assert!(Action::parse("promote").is_ok());
    assert!(
        Action::parse("promot")
            .unwrap_err()
            .contains("known: promote, pause, resume, abort, restart")
    );
}

#[test]
fn the_history_keeps_the_newest() {
    let policy = Policy::of(&spec(&[(5.0, 1, None), (100.0, 1, None)])).unwrap();
    let (mut status, _) = start(&policy, at(0));
    for i in 0..30 {
        let action = if i % 2 == 0 {
            Action::Pause
        } else {
            Action::Resume
        };
        status = evolve(&policy, &status, Some(action), None, at(i + 1)).0;
    }
    assert_eq!(status.history.len(), HISTORY);
    assert_eq!(status.history.last().unwrap().time, at(30).to_string());
}
