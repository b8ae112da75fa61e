//! Every suggestion passes `plan check` and removes the finding it was made for: over random
//! synthetic worlds (planted dependencies, non-critical operations whose failure harms later
//! ones, and write differences of every kind: a deletion or a write on one side only, fields that
//! differ, in keyed lists, past the 32 a record lists, server allocations), the analysis' plan
//! edits are applied with `suggest`, the suggested plan validates, and the same world recorded
//! under it raises none of those findings again.

use crate::common;

use std::sync::Arc;

use http::Method;
use proptest::prelude::*;
use serde_json::{Value, json};
use shadow_reconciler::analyze::{self, FindingCode};
use shadow_reconciler::engine::allocated::RequestBody;
use shadow_reconciler::engine::writes::{Write, WriteLog};
use shadow_reconciler::plan::{Operation, ReconcilePlan};
use shadow_reconciler::util::Rng;

const PLAN: &str = "apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata:
  name: synthetic
spec:
  operations:
    - name: Namespace
      phase: 1
      category: non-critical
      shadow: dry-run
    - name: Secret
      phase: 2
      category: non-critical
      shadow: dry-run
    - name: Config
      phase: 3
      category: non-critical
      shadow: dry-run
      intendedDifferences:
        - {kind: Secret, name: unrelated, control: none, candidate: delete}
    - name: Deploy
      phase: 4
      category: non-critical
      shadow: dry-run
  legacy:
    order: [Namespace, Secret, Config, Deploy]
  rollout:
    groups:
      - name: everything
        operations: [Namespace, Secret, Config, Deploy]
";

/// What an operation's two codes write differently, per object.
#[derive(Clone, Copy, Debug)]
enum Behaviour {
    /// Both write the same.
    Same,
    /// The candidate deletes an object the control leaves (per-object names or one name).
    CandidateDeletes { per_object: bool },
    /// The control writes an object the candidate does not.
    ControlOnly,
    /// Both write one object, `fields` of its data differing (past 32: the record lists 32).
    FieldsDiffer { fields: usize, per_object: bool },
    /// Both write, an owner reference's UID differing in a list keyed by per-object names.
    KeyedDiffers,
    /// Both create a Service the server allocates an address and a port to: no difference.
    Allocated,
}

fn write(method: &str, path: &str, request: Option<Value>, answer: &Value) -> Write {
    let log = WriteLog::new();
    let method: Method = method.parse().unwrap();
    let request = request.map(|body| RequestBody {
        content_type: Some("application/merge-patch+json".into()),
        bytes: body.to_string().into_bytes(),
    });
    log.accepted(&method, path, request, answer.to_string().as_bytes());
    log.take().pop().expect("a logged write")
}

fn configmap(name: &str, data: &Value) -> Value {
    json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": name, "namespace": "cp"}, "data": data})
}

/// The two write logs of `behaviour` for object `i`.
#[allow(clippy::too_many_lines)] // one arm per kind of difference
fn writes(behaviour: Behaviour, i: usize) -> (Vec<Write>, Vec<Write>) {
    let cms = "/api/v1/namespaces/cp/configmaps";
    match behaviour {
        Behaviour::Same => {
            let cm = configmap("same", &json!({"a": "1"}));
            let w = || {
                write(
                    "PATCH",
                    &format!("{cms}/same"),
                    Some(json!({"data": {"a": "1"}})),
                    &cm,
                )
            };
            (vec![w()], vec![w()])
        }
        Behaviour::CandidateDeletes { per_object } => {
            let name = if per_object {
                format!("old-{i}")
            } else {
                "old".to_owned()
            };
            let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Success"});
            (
                vec![],
                vec![write(
                    "DELETE",
                    &format!("/api/v1/namespaces/cp/secrets/{name}"),
                    None,
                    &status,
                )],
            )
        }
        Behaviour::ControlOnly => {
            let cm = configmap("legacy", &json!({"a": "1"}));
            (
                vec![write(
                    "PATCH",
                    &format!("{cms}/legacy"),
                    Some(json!({"data": {"a": "1"}})),
                    &cm,
                )],
                vec![],
            )
        }
        Behaviour::FieldsDiffer { fields, per_object } => {
            let name = if per_object {
                format!("cfg-{i}")
            } else {
                "cfg".to_owned()
            };
            let data = |v: &str| -> Value {
                (0..fields)
                    .map(|k| (format!("k{k:02}"), json!(v)))
                    .collect::<serde_json::Map<_, _>>()
                    .into()
            };
            let side = |v: &str| {
                write(
                    "PATCH",
                    &format!("{cms}/{name}"),
                    Some(json!({"data": data(v)})),
                    &configmap(&name, &data(v)),
                )
            };
            (vec![side("legacy")], vec![side("phased")])
        }
        Behaviour::KeyedDiffers => {
            let owned = |uid: &str| {
                let owner = json!([{"apiVersion": "v1", "kind": "Widget", "name": format!("w-{i:04}"), "uid": uid}]);
                let answer = json!({"kind": "ConfigMap", "apiVersion": "v1",
                    "metadata": {"name": "owned", "namespace": "cp", "ownerReferences": owner}});
                write(
                    "PATCH",
                    &format!("{cms}/owned"),
                    Some(json!({"metadata": {"ownerReferences": owner}})),
                    &answer,
                )
            };
            (vec![owned("uid-a")], vec![owned("uid-b")])
        }
        Behaviour::Allocated => {
            let request = json!({"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 443}]}});
            let service = |ip: &str, port: u64| {
                json!({"kind": "Service", "apiVersion": "v1", "metadata": {"name": "svc", "namespace": "cp", "uid": format!("uid-{ip}")},
                    "spec": {"clusterIP": ip, "clusterIPs": [ip], "ports": [{"port": 443, "nodePort": port}]}})
            };
            let svc = "/api/v1/namespaces/cp/services";
            (
                vec![write(
                    "POST",
                    svc,
                    Some(request.clone()),
                    &service("10.96.0.17", 30017),
                )],
                vec![write(
                    "POST",
                    svc,
                    Some(request),
                    &service("10.96.3.90", 31090),
                )],
            )
        }
    }
}

fn behaviour(code: u8, size: usize) -> Behaviour {
    match code % 7 {
        0 => Behaviour::Same,
        1 => Behaviour::CandidateDeletes {
            per_object: size.is_multiple_of(2),
        },
        2 => Behaviour::ControlOnly,
        3 => Behaviour::FieldsDiffer {
            fields: 1 + size % 4,
            per_object: size.is_multiple_of(3),
        },
        4 => Behaviour::FieldsDiffer {
            fields: 33 + size % 8,
            per_object: false,
        },
        5 => Behaviour::KeyedDiffers,
        _ => Behaviour::Allocated,
    }
}

fn analyse(dir: &std::path::Path, plan: &ReconcilePlan) -> analyze::PlanReport {
    let settings = analyze::Settings {
        min_samples: 10,
        ..analyze::Settings::default()
    };
    analyze::analyze(dir, std::slice::from_ref(plan), &settings)
        .unwrap()
        .plans
        .remove(0)
}

/// The plan edits a report asks for: (code, operations) of each finding `--suggest` applies.
fn edits(report: &analyze::PlanReport) -> Vec<(FindingCode, Vec<String>)> {
    let mut out: Vec<(FindingCode, Vec<String>)> = Vec::new();
    for g in &report.readiness {
        for f in g.findings.iter().filter(|f| f.code.edits_plan()) {
            assert!(f.fix.is_some(), "a plan edit without its fix: {f:?}");
            let key = (f.code, f.operations.clone());
            if !out.contains(&key) {
                out.push(key);
            }
        }
    }
    out
}

/// Records `objects` with the writes of `behaviours` (per operation) under `plan` and analyses.
fn record_and_analyse(
    plan: &Arc<ReconcilePlan>,
    objects: &[common::Object],
    truth: common::Truth,
    behaviours: &[(&str, Behaviour)],
) -> analyze::PlanReport {
    let dir = tempfile::tempdir().unwrap();
    let by_op = |i: usize, op: &Operation| {
        behaviours
            .iter()
            .find(|(name, _)| *name == op.name())
            .map(|(_, b)| writes(*b, i))
    };
    common::record_world_with_writes(dir.path(), plan, objects, truth, &by_op);
    analyse(dir.path(), plan)
}

fn check(seed: u64, size: usize, codes: [u8; 3], dependency: bool) {
    let plan = Arc::new(ReconcilePlan::from_yaml("synthetic.yaml", PLAN).unwrap());
    let mut rng = Rng::new(seed);
    let objects: Vec<common::Object> = (0..size)
        .map(|_| {
            let mut faults = Vec::new();
            if rng.next_f64() < 0.3 {
                faults.push("Namespace");
            }
            if rng.next_f64() < 0.2 {
                faults.push("Deploy");
            }
            common::Object::new(&faults, 1 + rng.below(3))
        })
        .collect();
    let truth: common::Truth = if dependency {
        &[("Namespace", "Secret")]
    } else {
        &[]
    };
    let behaviours = [
        ("Secret", behaviour(codes[0], size)),
        ("Config", behaviour(codes[1], size)),
        ("Deploy", behaviour(codes[2], size)),
    ];
    let report = record_and_analyse(&plan, &objects, truth, &behaviours);
    let asked = edits(&report);
    for (op, b) in &behaviours {
        let raised = asked.iter().any(|(code, ops)| {
            *code == FindingCode::UnexpectedWrites && ops == &[(*op).to_owned()]
        });
        let expected = !matches!(b, Behaviour::Same | Behaviour::Allocated);
        assert_eq!(raised, expected, "{op} with {b:?}: {asked:?}");
    }
    let suggestion = analyze::suggest::suggest(&plan, PLAN, &report).unwrap();
    assert_eq!(
        suggestion.changes.is_empty(),
        asked.is_empty(),
        "changes {:?} for the edits {asked:?}",
        suggestion.changes
    );
    // `plan check`'s validation.
    let suggested = Arc::new(
        ReconcilePlan::from_yaml("suggested.yaml", &suggestion.text).unwrap_or_else(|e| {
            panic!("the suggestion does not validate: {e}\n{}", suggestion.text)
        }),
    );
    let again = record_and_analyse(&suggested, &objects, truth, &behaviours);
    let left = edits(&again);
    for edit in &asked {
        assert!(
            !left.contains(edit),
            "{edit:?} is raised again under the suggested plan:\n{}\n{:#?}",
            suggestion.text,
            again.readiness
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn every_suggestion_validates_and_removes_its_finding(
        seed in 0u64..1_000_000,
        size in 60usize..160,
        codes in proptest::array::uniform3(0u8..7),
        dependency in any::<bool>(),
    ) {
        check(seed, size, codes, dependency);
    }
}

/// Each kind of difference at least once, whatever proptest draws.
#[test]
fn every_kind_of_finding_is_suggested_away() {
    for (i, codes) in [[1, 2, 3], [4, 5, 6], [3, 0, 1]].into_iter().enumerate() {
        check(7 + i as u64, 120, codes, true);
    }
}

/// The calibration's noise (mode calibrate: each operation's code against itself) is suggested
/// into `compare.volatile`; the same world calibrated again under the suggested plan is quiet,
/// and a shadow run's difference in those fields no longer counts.
#[test]
fn noise_is_suggested_into_compare_volatile() {
    let plan = Arc::new(ReconcilePlan::from_yaml("synthetic.yaml", PLAN).unwrap());
    let objects: Vec<common::Object> = (0..60).map(|_| common::Object::new(&[], 2)).collect();
    // Config stamps a value drawn anew each run, in a keyed list and in an annotation.
    let noisy = |i: usize, op: &Operation| {
        (op.name() == "Config").then(|| {
            let side = |draw: u64| {
                let body = json!({"metadata": {"annotations": {"synced-at": format!("t{i}-{draw}")}},
                    "spec": {"ports": [{"name": "web", "seed": draw}]}});
                let mut answer = body.clone();
                answer["kind"] = json!("Widget");
                answer["metadata"]["name"] = json!("w");
                write("PATCH", "/apis/example.com/v1/namespaces/cp/widgets/w", Some(body), &answer)
            };
            (vec![side(1)], vec![side(2)])
        })
    };
    let calibrate = |plan: &Arc<ReconcilePlan>| {
        let dir = tempfile::tempdir().unwrap();
        common::record_world_in(
            dir.path(),
            plan,
            (&objects, &[]),
            &noisy,
            shadow_reconciler::vocab::Mode::Calibrate,
        );
        analyse(dir.path(), plan)
    };
    let report = calibrate(&plan);
    assert!(
        report.writes.is_empty(),
        "calibration is no candidate: {:?}",
        report.writes
    );
    assert_eq!(report.noise.len(), 1, "{:?}", report.noise);
    assert_eq!(
        report.noise[0].volatile.as_deref(),
        Some(
            &[
                "metadata.annotations.synced-at".to_owned(),
                "spec.ports[*].seed".to_owned()
            ][..]
        )
    );
    assert!(edits(&report).contains(&(FindingCode::NoisyFields, vec!["Config".to_owned()])));
    let suggestion = analyze::suggest::suggest(&plan, PLAN, &report).unwrap();
    let suggested = Arc::new(
        ReconcilePlan::from_yaml("suggested.yaml", &suggestion.text)
            .unwrap_or_else(|e| panic!("{e}\n{}", suggestion.text)),
    );
    let again = calibrate(&suggested);
    assert!(
        again.noise.is_empty(),
        "{:?}\n{}",
        again.noise,
        suggestion.text
    );
    // Recorded in shadow, the same difference is one under the plan, and none under the
    // suggestion.
    let shadow = |plan: &Arc<ReconcilePlan>| {
        let dir = tempfile::tempdir().unwrap();
        common::record_world_with_writes(dir.path(), plan, &objects, &[], &noisy);
        analyse(dir.path(), plan).writes.len()
    };
    assert_eq!((shadow(&plan), shadow(&suggested)), (1, 0));
}
