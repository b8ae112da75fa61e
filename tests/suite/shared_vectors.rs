//! The shared test vectors of the models: cases (a plan, the enforced rollout groups, each
//! operation's result) with what the sequential control and the phased candidate decide, their
//! aggregate error text and condition, and the diff. The Rust models generate them; any other
//! implementation of the models (the Go package of issue 15, `sdk/go`) must reproduce every case
//! from the same file.
//!
//! The file, `tests/data/model-vectors.json`, is committed. This test regenerates the cases and
//! fails when the file differs, so a change of the models' behaviour is a visible change of the
//! vectors, and an edited expectation fails here. `SHADOW_RECONCILER_WRITE_VECTORS=1` rewrites it.

use crate::common;

use std::sync::Arc;

use serde_json::{Value, json};
use shadow_reconciler::model::{Diff, Policy, Report, StepResult, candidate_execution, drive};
use shadow_reconciler::plan::ReconcilePlan;
use shadow_reconciler::util::Rng;
use shadow_reconciler::vocab::{ErrorClass, Execution, OpSet, Outcome};

const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/model-vectors.json");

/// The plans the vectors use, by their path in the repository.
const PLANS: [&str; 3] = [
    "deploy/plans/hostedcluster.yaml",
    "deploy/plans/addon-install-progression.yaml",
    "tests/data/hostedcluster-corrected.yaml",
];

/// Failure rates drawn per case: from the happy path to most operations failing.
const RATES: [f64; 5] = [0.0, 0.05, 0.15, 0.35, 0.7];

/// Result draws per plan, group setting and rate.
const DRAWS: u64 = 8;

fn load(path: &str) -> Arc<ReconcilePlan> {
    let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    Arc::new(ReconcilePlan::load(&full).unwrap_or_else(|e| panic!("{path}: {e}")))
}

fn names(plan: &ReconcilePlan, ops: &OpSet) -> Vec<String> {
    ops.as_slice()
        .iter()
        .map(|op| plan.name_of(*op).to_owned())
        .collect()
}

fn report_json(report: &Report) -> Value {
    let plan = report.plan();
    let steps: Vec<Value> = report
        .steps()
        .iter()
        .map(|s| {
            let mut step = json!({
                "op": plan.name_of(s.op),
                "outcome": s.outcome.as_str(),
                "executed": s.executed,
                "critical": s.critical,
            });
            match &s.outcome {
                Outcome::Failed { class } => {
                    step["class"] = json!(class.as_str());
                    step["message"] = json!(s.message);
                }
                Outcome::Blocked { by } => step["by"] = json!(names(plan, by)),
                Outcome::Skipped { after } => step["after"] = json!(plan.name_of(*after)),
                Outcome::Unknown { on } => step["on"] = json!(names(plan, on)),
                Outcome::Succeeded | Outcome::Idle => {}
            }
            step
        })
        .collect();
    let condition = report.condition();
    json!({
        "steps": steps,
        "aggregate": report.aggregate(),
        "log_summary": report.log_summary(),
        "condition": {
            "type": condition.type_,
            "status": condition.status.as_str(),
            "reason": condition.reason,
            "message": condition.message,
        },
    })
}

/// One case: every operation's real result drawn at `rate`; with `distinct` a share of the
/// operations of both paths get legacy code of their own, whose result is drawn apart
/// (`legacy_failures`); the candidate takes each result as the engine does
/// (`model::candidate_execution`: reused, its own dry run, or not simulated for the operations its
/// plan marks `shadow: skip`).
/// Of the operations that do not fail, those that have nothing to do (in both paths), each drawn
/// at `rate` (none, and no draw, at 0).
fn draw_idle(
    plan: &ReconcilePlan,
    rate: f64,
    rng: &mut Rng,
) -> std::collections::HashSet<shadow_reconciler::vocab::OpId> {
    let mut idle = std::collections::HashSet::new();
    if rate > 0.0 {
        for op in plan.operations() {
            #[allow(clippy::cast_precision_loss)] // a uniform draw in [0, 1)
            let draw = rng.below(1_000_000) as f64 / 1_000_000.0;
            if draw < rate {
                idle.insert(op.id());
            }
        }
    }
    idle
}

fn case(
    plan: &Arc<ReconcilePlan>,
    groups: &[String],
    (rate, distinct, idle_rate): (f64, bool, f64),
    rng: &mut Rng,
) -> Value {
    let draw = |rng: &mut Rng, op: &shadow_reconciler::plan::Operation| {
        #[allow(clippy::cast_precision_loss)] // a uniform draw in [0, 1)
        let draw = rng.below(1_000_000) as f64 / 1_000_000.0;
        (draw < rate).then(|| {
            let class = ErrorClass::ALL[rng.below(ErrorClass::ALL.len())];
            (class, format!("{} failed: {}", op.name(), class.as_str()))
        })
    };
    // The failing operations; every other one succeeds.
    let mut results = serde_json::Map::new();
    let mut failing = std::collections::HashMap::new();
    for op in plan.operations() {
        if let Some((class, message)) = draw(rng, op) {
            results.insert(
                op.name().to_owned(),
                json!({"class": class.as_str(), "message": message}),
            );
            failing.insert(op.id(), (class, message));
        }
    }
    // Legacy code of its own, and its results.
    let mut own_legacy = std::collections::HashSet::new();
    let mut legacy_results = serde_json::Map::new();
    let mut legacy_failing = std::collections::HashMap::new();
    if distinct {
        for op in plan.operations().iter().filter(|o| o.only().is_none()) {
            if rng.below(4) == 0 {
                own_legacy.insert(op.id());
                if let Some((class, message)) = draw(rng, op) {
                    let message = format!("legacy {message}");
                    legacy_results.insert(
                        op.name().to_owned(),
                        json!({"class": class.as_str(), "message": message}),
                    );
                    legacy_failing.insert(op.id(), (class, message));
                }
            }
        }
    }
    let idle = draw_idle(plan, idle_rate, rng);
    let result = |failing: &std::collections::HashMap<_, (ErrorClass, String)>,
                  op: shadow_reconciler::vocab::OpId| match failing.get(&op) {
        Some((class, message)) => StepResult::failed(*class, message.clone()),
        None if idle.contains(&op) => StepResult::idle(),
        None => StepResult::succeeded(),
    };
    let control = drive(&Policy::sequential(plan.clone()), |o| {
        if own_legacy.contains(&o.id()) {
            result(&legacy_failing, o.id())
        } else {
            result(&failing, o.id())
        }
    });
    let candidate_policy = Policy::phased(plan.clone(), groups).expect("declared groups");
    let mut executions = serde_json::Map::new();
    let candidate = drive(&candidate_policy, |o| {
        let execution = candidate_execution(o, &control, own_legacy.contains(&o.id()));
        executions.insert(o.name().to_owned(), json!(execution.as_str()));
        match execution {
            Execution::NotSimulated => StepResult::not_simulated(),
            // Reused: the control ran the same code, so its result is this one too.
            _ => result(&failing, o.id()),
        }
    });
    let diff = Diff::between(&control, &candidate).expect("same plan");
    let op_names = |ops: &[shadow_reconciler::vocab::OpId]| -> Vec<String> {
        ops.iter().map(|op| plan.name_of(*op).to_owned()).collect()
    };
    let reordered: Vec<Value> = diff
        .reordered()
        .iter()
        .map(|(a, b)| json!([plan.name_of(*a), plan.name_of(*b)]))
        .collect();
    let mut distinct_names: Vec<&str> = own_legacy.iter().map(|op| plan.name_of(*op)).collect();
    distinct_names.sort_unstable();
    let mut idle_names: Vec<&str> = idle.iter().map(|op| plan.name_of(*op)).collect();
    idle_names.sort_unstable();
    let mut case = json!({
        "failures": results,
        "distinct": distinct_names,
        "legacy_failures": legacy_results,
        "control": report_json(&control),
        "candidate": report_json(&candidate),
        "candidate_executions": executions,
        "diff": {
            "unblocked": op_names(diff.unblocked()),
            "newly_blocked": op_names(diff.newly_blocked()),
            "changed": op_names(diff.changed()),
            "reordered": reordered,
        },
    });
    if idle_rate > 0.0 {
        case["idle"] = json!(idle_names);
    }
    case
}

fn generate() -> Value {
    let mut cases = Vec::new();
    let mut rng = Rng::new(20_261_201);
    for path in PLANS {
        let plan = load(path);
        // No group enforced, each group alone, every group.
        let mut settings: Vec<Vec<String>> = vec![Vec::new()];
        settings.extend(plan.groups().iter().map(|g| vec![g.name().to_owned()]));
        settings.push(plan.groups().iter().map(|g| g.name().to_owned()).collect());
        for groups in &settings {
            for rate in RATES {
                for draw in 0..DRAWS {
                    // Every other draw gives some operations legacy code of their own.
                    let mut c = case(&plan, groups, (rate, draw % 2 == 1, 0.0), &mut rng);
                    c["name"] = json!(format!(
                        "{}/groups=[{}]/rate={rate}/draw={draw}",
                        plan.name(),
                        groups.join(",")
                    ));
                    c["plan"] = json!(path);
                    c["plan_hash"] = json!(plan.hash().to_hex());
                    c["enforced_groups"] = json!(groups);
                    cases.push(c);
                }
            }
        }
    }
    // Operations that have nothing to do (a branch not taken): their success is no evidence, so a
    // candidate step that had nothing to do is never unblocked, and it is no change from a
    // success.
    for path in PLANS {
        let plan = load(path);
        let all: Vec<String> = plan.groups().iter().map(|g| g.name().to_owned()).collect();
        for groups in [Vec::new(), all] {
            for rate in [0.15, 0.35] {
                for draw in 0..DRAWS / 2 {
                    let mut c = case(&plan, &groups, (rate, draw % 2 == 1, 0.4), &mut rng);
                    c["name"] = json!(format!(
                        "{}/groups=[{}]/rate={rate}/draw={draw}/idle",
                        plan.name(),
                        groups.join(",")
                    ));
                    c["plan"] = json!(path);
                    c["plan_hash"] = json!(plan.hash().to_hex());
                    c["enforced_groups"] = json!(groups);
                    cases.push(c);
                }
            }
        }
    }
    json!({
        "schema": "shadow-reconciler.io/model-vectors/v1",
        "about": "Generated by tests/suite/shared_vectors.rs from the Rust models: the control is the sequential model, the candidate the phased model with enforced_groups; failures are the operations whose real result is an error (the others succeed, or, in the cases that give idle, say they had nothing to do); the operations in distinct have legacy code of their own, whose failures are legacy_failures (the control runs it, the candidate its phased code); candidate_executions is how the candidate takes each result it was asked for (model::candidate_execution: reused where the control ran the same code, dry-run where it runs its own code, not-simulated for shadow: skip). Do not edit: rerun with SHADOW_RECONCILER_WRITE_VECTORS=1.",
        "cases": cases,
    })
}

/// The document with one case per line: compact, and a diff names the cases that changed.
fn render(doc: &Value) -> String {
    let mut text = format!(
        "{{\"schema\": {},\n\"about\": {},\n\"cases\": [\n",
        doc["schema"], doc["about"]
    );
    let cases = doc["cases"].as_array().expect("cases");
    for (i, case) in cases.iter().enumerate() {
        text.push_str(&case.to_string());
        text.push_str(if i + 1 < cases.len() { ",\n" } else { "\n" });
    }
    text.push_str("]}\n");
    text
}

#[test]
fn the_committed_vectors_are_what_the_models_decide() {
    let generated = generate();
    let cases = generated["cases"].as_array().expect("cases").len();
    assert!(cases >= 500, "only {cases} cases");
    let text = render(&generated);
    if std::env::var_os("SHADOW_RECONCILER_WRITE_VECTORS").is_some() {
        std::fs::write(FILE, &text).expect("write the vectors");
        return;
    }
    let committed = std::fs::read_to_string(FILE).unwrap_or_else(|e| {
        panic!("{FILE}: {e}; generate it with SHADOW_RECONCILER_WRITE_VECTORS=1")
    });
    if committed != text {
        let committed: Value = serde_json::from_str(&committed).expect("committed JSON");
        let first = committed["cases"]
            .as_array()
            .into_iter()
            .flatten()
            .zip(generated["cases"].as_array().into_iter().flatten())
            .find(|(a, b)| a != b)
            .map(|(a, _)| a["name"].clone());
        panic!(
            "{FILE} differs from what the models decide (first differing case: {first:?}); if the change of behaviour is intended, regenerate it with SHADOW_RECONCILER_WRITE_VECTORS=1 and review the diff"
        );
    }
}

const FLAG_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/flag-vectors.json");

/// The flag's deterministic parts: an object's ramp bucket (from its UID), the ramp a
/// `rampPercent` value gives (or its refusal), and the mode an object gets from the flag's mode
/// and ramp. Any other implementation of the flag must bucket objects the same, or one object
/// would be inside a ramp for one reader and outside it for another.
fn generate_flag() -> Value {
    use shadow_reconciler::flag::{Ramp, below, bucket};
    use shadow_reconciler::vocab::Mode;
    let mut rng = Rng::new(7_001);
    let hex = |rng: &mut Rng, n: usize| -> String {
        (0..n)
            .map(|_| char::from(b"0123456789abcdef"[rng.below(16)]))
            .collect()
    };
    let mut buckets = Vec::new();
    for i in 0..300 {
        let uid = if i % 10 == 0 {
            format!("uid-{i}")
        } else {
            format!(
                "{}-{}-4{}-a{}-{}",
                hex(&mut rng, 8),
                hex(&mut rng, 4),
                hex(&mut rng, 3),
                hex(&mut rng, 3),
                hex(&mut rng, 12)
            )
        };
        buckets.push(json!({"uid": uid, "bucket": bucket(&uid)}));
    }
    let mut ramps = Vec::new();
    for percent in [
        0.0,
        0.01,
        0.5,
        1.0,
        5.0,
        12.34,
        33.33,
        50.0,
        99.99,
        100.0,
        -1.0,
        100.01,
        12.345,
        0.001,
        f64::NAN,
    ] {
        // A ramp's percent is a whole number of basis points, 0 to 10,000.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let basis = Ramp::from_percent(percent).map(|r| (r.percent() * 100.0).round() as u32);
        ramps.push(json!({"percent": if percent.is_nan() { json!("NaN") } else { json!(percent) }, "basis_points": basis}));
    }
    let mut modes = Vec::new();
    for (i, b) in buckets.iter().enumerate().take(120) {
        let uid = b["uid"].as_str().unwrap_or_default();
        let mode = [Mode::Off, Mode::Shadow, Mode::Enforce, Mode::Calibrate][i % 4];
        let percent = [0.0, 5.0, 25.0, 50.0, 99.5, 100.0][i % 6];
        let ramp = Ramp::from_percent(percent).expect("valid ramp");
        let inside = ramp == Ramp::ALL || ramp.includes(bucket(uid));
        let chosen = if inside { mode } else { below(mode) };
        modes.push(json!({
            "uid": uid, "mode": mode.as_str(), "ramp_percent": percent, "expected": chosen.as_str(),
        }));
    }
    let uids: Vec<String> = buckets
        .iter()
        .take(40)
        .map(|b| b["uid"].as_str().unwrap_or_default().to_owned())
        .collect();
    json!({
        "schema": "shadow-reconciler.io/flag-vectors/v1",
        "about": "Generated by tests/suite/shared_vectors.rs from src/flag: bucket = first 8 bytes of SHA-256 of the UID, big-endian, modulo 10,000; a ramp of p% (two decimals at most) holds the buckets below 100 p; outside the ramp an object gets the mode below (enforce -> shadow -> off; calibrate -> off). configMaps: a flag ConfigMap's data over the default flag, with the shipped plans (deploy/plans/hostedcluster.yaml, deploy/plans/addon-install-progression.yaml): its refusal, or its summary and, per plan and object, the mode, reason and enforced groups. Do not edit: rerun with SHADOW_RECONCILER_WRITE_VECTORS=1.",
        "buckets": buckets,
        "ramps": ramps,
        "modes": modes,
        "configMaps": config_map_cases(&uids),
    })
}

/// Flag ConfigMaps of the vectors: the current keys, per-group ramps, rollbacks and refusals.
const CONFIG_MAPS: &[&[(&str, &str)]] = &[
    &[],
    &[("mode", "enforce")],
    &[
        ("mode", "enforce"),
        ("enforcedGroups", "non-critical-syncs"),
        ("rampPercent", "25"),
    ],
    &[("mode", "shadow"), ("rampPercent", "50")],
    &[("mode", "calibrate"), ("rampPercent", "10")],
    &[
        ("mode", "enforce"),
        (
            "groups",
            "non-critical-syncs: enforce 100\nhostedcluster/gated-components: enforce 5%",
        ),
    ],
    &[
        ("mode", "enforce"),
        (
            "groups",
            "non-critical-syncs: enforce, gated-components: enforce 50, critical-core: enforce 12.5",
        ),
    ],
    &[
        ("mode", "enforce"),
        ("enforcedGroups", "non-critical-syncs status-patches"),
        ("groups", "gated-components: enforce 30"),
    ],
    &[
        ("mode", "enforce"),
        ("enforcedGroups", "non-critical-syncs gated-components"),
        ("groups", "gated-components: shadow"),
    ],
    &[
        ("mode", "enforce"),
        (
            "groups",
            "non-critical-syncs: shadow, gated-components: shadow",
        ),
    ],
    &[
        ("mode", "enforce"),
        ("rampPercent", "50"),
        (
            "groups",
            "non-critical-syncs: enforce 20, addon-install-progression/status-patches: enforce 70",
        ),
    ],
    &[
        ("mode", "enforce"),
        (
            "groups",
            "gated-components: shadow, hostedcluster/gated-components: enforce 40",
        ),
    ],
    &[
        ("mode", "enforce"),
        ("allowObjectOverride", "true"),
        (
            "groups",
            "non-critical-syncs: enforce 0, critical-core: enforce 3",
        ),
    ],
    &[
        ("mode", "shadow"),
        ("groups", "non-critical-syncs: enforce 100"),
    ],
    &[("groups", "non-critical-syncs: enforce 5 10")],
    &[("groups", "non-critical-syncs: shadow 5")],
    &[("groups", "non-critical-syncs: enforce 100.5")],
    &[("groups", "non-critical-syncs")],
    &[(
        "groups",
        "gated-components: enforce, gated-components: shadow",
    )],
    &[("groups", "no-such-group: enforce 5")],
    &[("groups", "a/b/c: shadow")],
    &[("group", "non-critical-syncs: enforce")],
];

/// The ConfigMaps of [`CONFIG_MAPS`] and what each object of each shipped plan gets from them.
fn config_map_cases(uids: &[String]) -> Vec<Value> {
    use k8s_openapi::api::core::v1::ConfigMap;
    use shadow_reconciler::flag::{FlagSpec, LiveFlag};
    let plans: Vec<Arc<ReconcilePlan>> = PLANS[..2].iter().map(|p| load(p)).collect();
    let mut out = Vec::new();
    for data in CONFIG_MAPS {
        let mut cm = ConfigMap::default();
        cm.metadata.namespace = Some("shadow-reconciler".into());
        cm.metadata.name = Some("shadow-reconciler-flag".into());
        cm.metadata.resource_version = Some("42".into());
        cm.data = Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        let flag = LiveFlag::new(FlagSpec::default(), plans.clone()).expect("default flag");
        let data_json: serde_json::Map<String, Value> = data
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(v)))
            .collect();
        if let Err(error) = flag.apply(Some(&cm)) {
            out.push(json!({
                "data": data_json,
                "error": {"field": error.field().as_str(), "text": error.to_string()},
            }));
            continue;
        }
        let state = flag.current();
        out.push(json!({
            "data": data_json,
            "summary": state.spec.summary(),
            "objects": flag_objects(&state, &plans, uids),
        }));
    }
    out
}

/// Each object's mode, reason and enforced groups under `state`, the annotations cycling through
/// none, two modes and a bad value.
fn flag_objects(
    state: &shadow_reconciler::flag::FlagState,
    plans: &[Arc<ReconcilePlan>],
    uids: &[String],
) -> Vec<Value> {
    let annotations = [None, Some("enforce"), Some("off"), Some("bogus")];
    let mut objects = Vec::new();
    for plan in plans {
        let plan_flag = state.spec.for_plan(plan);
        for (i, uid) in uids.iter().enumerate() {
            let annotation = annotations[i % annotations.len()];
            let e = state.evaluate(&plan_flag, uid, annotation);
            objects.push(json!({
                "plan": plan.name(),
                "uid": uid,
                "annotation": annotation,
                "mode": e.mode.as_str(),
                "reason": e.decision.reason.as_str(),
                "enforced_groups": e.decision.enforced_groups,
            }));
        }
    }
    objects
}

#[test]
fn the_committed_flag_vectors_are_what_the_flag_decides() {
    check_or_write(
        FLAG_FILE,
        &(serde_json::to_string_pretty(&generate_flag()).expect("JSON") + "\n"),
        "src/flag",
    );
}

/// Writes `text` to `path` with `SHADOW_RECONCILER_WRITE_VECTORS` set; else fails when the
/// committed file differs from it.
fn check_or_write(path: &str, text: &str, decider: &str) {
    if std::env::var_os("SHADOW_RECONCILER_WRITE_VECTORS").is_some() {
        std::fs::write(path, text).unwrap_or_else(|e| panic!("write {path}: {e}"));
        return;
    }
    let committed = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!("{path}: {e}; generate it with SHADOW_RECONCILER_WRITE_VECTORS=1")
    });
    assert!(
        committed == text,
        "{path} differs from what {decider} decides; if intended, regenerate it with SHADOW_RECONCILER_WRITE_VECTORS=1 and review the diff"
    );
}

const PLAN_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/plan-vectors.json");

/// The plan of the validation cases (the one `tests/suite/plan_validation.rs` breaks line by line);
/// each case edits it.
const BASE_PLAN: &str = common::CHECKS_PLAN;

/// A validation case: a name, what kind of problem (`valid`; `rule`: the plan's own rules, every
/// diagnostic compared; `schema`: the document's structure, where the first problem stops the
/// reading; `syntax`: not YAML), and the edits of `BASE_PLAN` (text replaced once, in order).
type PlanCase = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

/// The validation cases.
const PLAN_CASES: &[PlanCase] = &[
    ("base", "valid", &[]),
    (
        "no-rollout-groups",
        "valid",
        &[(
            "  rollout:\n    groups:\n      - name: core\n        operations: [Namespace, PullSecret]\n      - name: rest\n        operations: [Deploy]\n",
            "",
        )],
    ),
    (
        "empty-rollout-groups",
        "valid",
        &[(
            "    groups:\n      - name: core\n        operations: [Namespace, PullSecret]\n      - name: rest\n        operations: [Deploy]\n",
            "    groups: []\n",
        )],
    ),
    (
        "names-with-underscore-and-dot",
        "valid",
        &[
            ("Deploy", "Deploy_v2.1"),
            ("Deploy]", "Deploy_v2.1]"),
            ("Deploy]", "Deploy_v2.1]"),
        ],
    ),
    (
        "descriptions-and-retry",
        "valid",
        &[
            (
                "  name: checks\n",
                "  name: checks\n  description: a plan\n",
            ),
            (
                "      shadow: skip\n",
                "      shadow: skip\n      retryOnConflict: true\n      description: deploys\n",
            ),
        ],
    ),
    (
        "same-phase-listed-first",
        "valid",
        &[("      phase: 2\n", "      phase: 1\n")],
    ),
    (
        "anchor-and-alias",
        "valid",
        &[
            (
                "      category: critical\n      shadow: dry-run\n    - name: PullSecret",
                "      category: &crit critical\n      shadow: dry-run\n    - name: PullSecret",
            ),
            (
                "      category: critical\n      dependsOn",
                "      category: *crit\n      dependsOn",
            ),
        ],
    ),
    (
        "phase-quoted",
        "valid",
        &[("      phase: 3\n", "      phase: \"3\"\n")],
    ),
    (
        "phase-hex",
        "valid",
        &[("      phase: 3\n", "      phase: 0x3\n")],
    ),
    (
        "phase-plus",
        "valid",
        &[("      phase: 3\n", "      phase: +3\n")],
    ),
    (
        "retry-yes",
        "valid",
        &[(
            "      shadow: skip\n",
            "      shadow: skip\n      retryOnConflict: yes\n",
        )],
    ),
    (
        "retry-quoted",
        "valid",
        &[(
            "      shadow: skip\n",
            "      shadow: skip\n      retryOnConflict: \"true\"\n",
        )],
    ),
    (
        "retry-on",
        "valid",
        &[(
            "      shadow: skip\n",
            "      shadow: skip\n      retryOnConflict: on\n",
        )],
    ),
    (
        "name-number",
        "rule",
        &[
            ("- name: Deploy", "- name: 123"),
            ("Deploy]", "123]"),
            ("Deploy]", "123]"),
        ],
    ),
    (
        "retry-y",
        "valid",
        &[(
            "      shadow: skip\n",
            "      shadow: skip\n      retryOnConflict: y\n",
        )],
    ),
    (
        "retry-off-upper",
        "valid",
        &[(
            "      shadow: skip\n",
            "      shadow: skip\n      retryOnConflict: OFF\n",
        )],
    ),
    (
        "retry-number",
        "schema",
        &[(
            "      shadow: skip\n",
            "      shadow: skip\n      retryOnConflict: 1\n",
        )],
    ),
    (
        "phase-float",
        "schema",
        &[("      phase: 3\n", "      phase: 3.0\n")],
    ),
    (
        "phase-quoted-hex",
        "valid",
        &[("      phase: 3\n", "      phase: '0x3'\n")],
    ),
    (
        "phase-octal",
        "valid",
        &[("      phase: 3\n", "      phase: 0o3\n")],
    ),
    (
        "phase-underscore",
        "valid",
        &[("      phase: 3\n", "      phase: 1_0\n")],
    ),
    (
        "phase-too-big",
        "schema",
        &[("      phase: 3\n", "      phase: 4294967296\n")],
    ),
    ("name-null", "schema", &[("- name: Deploy", "- name: ~")]),
    ("name-bool", "rule", &[("- name: Deploy", "- name: true")]),
    (
        "description-number",
        "valid",
        &[("  name: checks\n", "  name: checks\n  description: 42\n")],
    ),
    (
        "long-name-bounded",
        "rule",
        &[(
            "- name: Deploy",
            "- name: Dxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        )],
    ),
    (
        "wrong-api-version-and-kind",
        "rule",
        &[
            ("shadow-reconciler.io/v1alpha1", "v1"),
            ("kind: ReconcilePlan", "kind: ConfigMap"),
        ],
    ),
    (
        "invalid-plan-name",
        "rule",
        &[("name: checks", "name: Checks_Plan")],
    ),
    (
        "plan-name-ending-in-dash",
        "rule",
        &[("name: checks", "name: checks-")],
    ),
    (
        "invalid-operation-name",
        "rule",
        &[
            ("- name: Namespace", "- name: \"Name space\""),
            ("[Namespace]", "[\"Name space\"]"),
            ("order: [Namespace", "order: [\"Name space\""),
            ("operations: [Namespace", "operations: [\"Name space\""),
        ],
    ),
    (
        "operation-name-too-long",
        "rule",
        &[(
            "- name: Deploy",
            "- name: D123456789012345678901234567890123456789012345678901234567890123",
        )],
    ),
    (
        "duplicate-operation",
        "rule",
        &[("- name: Deploy", "- name: PullSecret")],
    ),
    (
        "unknown-dependency",
        "rule",
        &[("dependsOn: [Namespace]", "dependsOn: [Namespac]")],
    ),
    (
        "dependency-listed-twice",
        "rule",
        &[(
            "dependsOn: [Namespace]",
            "dependsOn: [Namespace, Namespace]",
        )],
    ),
    (
        "dependency-cycle",
        "rule",
        &[(
            "      shadow: dry-run\n    - name: PullSecret",
            "      dependsOn: [PullSecret]\n      shadow: dry-run\n    - name: PullSecret",
        )],
    ),
    (
        "self-dependency",
        "rule",
        &[("dependsOn: [Namespace]", "dependsOn: [PullSecret]")],
    ),
    (
        "dependency-not-earlier",
        "rule",
        &[("dependsOn: [Namespace]", "dependsOn: [Namespace, Deploy]")],
    ),
    (
        "dependency-same-phase-listed-after",
        "rule",
        &[
            ("      phase: 1\n", "      phase: 2\n"),
            (
                "    - name: Namespace\n      phase: 2\n      category: critical\n      shadow: dry-run\n    - name: PullSecret\n      phase: 2\n      category: critical\n      dependsOn: [Namespace]\n      shadow: dry-run\n",
                "    - name: PullSecret\n      phase: 2\n      category: critical\n      dependsOn: [Namespace]\n      shadow: dry-run\n    - name: Namespace\n      phase: 2\n      category: critical\n      shadow: dry-run\n",
            ),
        ],
    ),
    (
        "legacy-unknown-operation",
        "rule",
        &[(
            "order: [Namespace, PullSecret, Deploy]",
            "order: [Namespace, PullSecret, Deploy, Extra]",
        )],
    ),
    (
        "legacy-duplicate",
        "rule",
        &[(
            "order: [Namespace, PullSecret, Deploy]",
            "order: [Namespace, PullSecret, PullSecret]",
        )],
    ),
    (
        "legacy-missing",
        "rule",
        &[(
            "order: [Namespace, PullSecret, Deploy]",
            "order: [Namespace, Deploy]",
        )],
    ),
    (
        "groups-overlap",
        "rule",
        &[("operations: [Deploy]", "operations: [Deploy, PullSecret]")],
    ),
    (
        "group-unknown-operation",
        "rule",
        &[("operations: [Deploy]", "operations: [Deploy, Nothing]")],
    ),
    (
        "group-lists-twice",
        "rule",
        &[("operations: [Deploy]", "operations: [Deploy, Deploy]")],
    ),
    (
        "group-empty-and-duplicate",
        "rule",
        &[
            ("- name: rest", "- name: core"),
            ("operations: [Deploy]", "operations: []"),
        ],
    ),
    (
        "group-invalid-name",
        "rule",
        &[("- name: rest", "- name: 9rest")],
    ),
    (
        "no-operations",
        "rule",
        &[
            (
                "  operations:\n    - name: Namespace\n      phase: 1\n      category: critical\n      shadow: dry-run\n    - name: PullSecret\n      phase: 2\n      category: critical\n      dependsOn: [Namespace]\n      shadow: dry-run\n    - name: Deploy\n      phase: 3\n      category: non-critical\n      gate: no-critical-failure\n      shadow: skip\n",
                "  operations: []\n",
            ),
            ("order: [Namespace, PullSecret, Deploy]", "order: []"),
            (
                "        operations: [Namespace, PullSecret]\n",
                "        operations: [x]\n",
            ),
        ],
    ),
    (
        "every-problem-at-once",
        "rule",
        &[
            ("name: checks", "name: Bad"),
            ("dependsOn: [Namespace]", "dependsOn: [Nope]"),
            (
                "order: [Namespace, PullSecret, Deploy]",
                "order: [Namespace, Deploy, Deploy]",
            ),
            ("operations: [Deploy]", "operations: [Deploy, Namespace]"),
        ],
    ),
    (
        "unknown-operation-field",
        "schema",
        &[(
            "      category: critical\n      dependsOn",
            "      categroy: critical\n      dependsOn",
        )],
    ),
    (
        "unknown-top-level-field",
        "schema",
        &[("kind: ReconcilePlan\n", "kind: ReconcilePlan\nkinds: x\n")],
    ),
    (
        "unknown-legacy-field",
        "schema",
        &[("    order: [", "    ordr: [")],
    ),
    (
        "bad-category",
        "schema",
        &[("category: non-critical", "category: non-critcal")],
    ),
    (
        "bad-gate",
        "schema",
        &[("gate: no-critical-failure", "gate: sometimes")],
    ),
    (
        "bad-shadow-policy",
        "schema",
        &[("shadow: skip", "shadow: maybe")],
    ),
    (
        "missing-shadow",
        "rule",
        &[(
            "      category: critical\n      shadow: dry-run\n",
            "      category: critical\n",
        )],
    ),
    (
        "negative-phase",
        "schema",
        &[("      phase: 2\n", "      phase: -2\n")],
    ),
    (
        "phase-not-a-number",
        "schema",
        &[("      phase: 3\n", "      phase: three\n")],
    ),
    (
        "missing-legacy",
        "schema",
        &[(
            "  legacy:\n    order: [Namespace, PullSecret, Deploy]\n",
            "",
        )],
    ),
    (
        "operations-not-a-list",
        "schema",
        &[(
            "  operations:\n    - name: Namespace",
            "  operations: 3\n  x:\n    - name: Namespace",
        )],
    ),
    (
        "unclosed-flow-sequence",
        "syntax",
        &[("dependsOn: [Namespace]", "dependsOn: [Namespace")],
    ),
    ("empty-file", "schema", &[("*", "")]),
    (
        "comments-only",
        "schema",
        &[("*", "# a plan, to be written\n")],
    ),
    (
        "bad-indentation",
        "syntax",
        &[("      phase: 2\n", "     phase: 2\n")],
    ),
    (
        "legacy-only-operation",
        "valid",
        &[
            (
                "    - name: Deploy\n",
                "    - name: Inline\n      description: the legacy loop's inline step\n      only: legacy\n    - name: Deploy\n",
            ),
            (
                "order: [Namespace, PullSecret, Deploy]",
                "order: [Namespace, Inline, PullSecret, Deploy]",
            ),
        ],
    ),
    (
        "phased-only-operation",
        "valid",
        &[
            (
                "      shadow: skip\n",
                "      shadow: skip\n      only: phased\n",
            ),
            (
                "order: [Namespace, PullSecret, Deploy]",
                "order: [Namespace, PullSecret]",
            ),
        ],
    ),
    (
        "only-both-ways",
        "valid",
        &[
            (
                "      shadow: skip\n",
                "      shadow: skip\n      only: phased\n",
            ),
            (
                "  legacy:\n",
                "    - name: Inline\n      only: legacy\n  legacy:\n",
            ),
            (
                "order: [Namespace, PullSecret, Deploy]",
                "order: [Inline, Namespace, PullSecret]",
            ),
        ],
    ),
    (
        "legacy-only-with-phased-fields",
        "rule",
        &[
            (
                "      phase: 3\n      category: non-critical\n      gate: no-critical-failure\n      shadow: skip\n",
                "      only: legacy\n      phase: 3\n      category: non-critical\n      gate: no-critical-failure\n      shadow: skip\n      retryOnConflict: true\n",
            ),
            ("operations: [Deploy]", "operations: [Deploy, PullSecret]"),
        ],
    ),
    (
        "legacy-only-in-group-and-dependency",
        "rule",
        &[
            (
                "      phase: 3\n      category: non-critical\n      gate: no-critical-failure\n      shadow: skip\n",
                "      only: legacy\n",
            ),
            (
                "    - name: Namespace\n      phase: 1\n",
                "    - name: Namespace\n      phase: 4\n      dependsOn: [Deploy]\n",
            ),
        ],
    ),
    (
        "phased-only-in-legacy-order",
        "rule",
        &[(
            "      shadow: skip\n",
            "      shadow: skip\n      only: phased\n",
        )],
    ),
    (
        "legacy-only-missing-from-order",
        "rule",
        &[
            (
                "      phase: 3\n      category: non-critical\n      gate: no-critical-failure\n      shadow: skip\n",
                "      only: legacy\n",
            ),
            (
                "order: [Namespace, PullSecret, Deploy]",
                "order: [Namespace, PullSecret]",
            ),
            ("operations: [Deploy]", "operations: [PullSecret]"),
            (
                "operations: [Namespace, PullSecret]",
                "operations: [Namespace]",
            ),
        ],
    ),
    (
        "missing-phase-and-category",
        "rule",
        &[("      phase: 1\n      category: critical\n", "")],
    ),
    (
        "only-unknown",
        "schema",
        &[(
            "      shadow: skip\n",
            "      shadow: skip\n      only: sometimes\n",
        )],
    ),
    (
        "intended-differences",
        "valid",
        &[(
            "      shadow: skip\n",
            "      shadow: skip\n      intendedDifferences:\n        - kind: Secret\n          name: ssh-key\n          control: none\n          candidate: delete\n          reason: a fix of the phased path\n        - kind: ConfigMap\n          fields: [data.retention, \"metadata.labels[\\\"app.kubernetes.io/name\\\"]\"]\n        - kind: HostedCluster\n          subresource: status\n          control: write\n          candidate: write\n          fields: [\"status.conditions[type=Ready]\"]\n",
        )],
    ),
    (
        "intended-differences-reordered",
        "valid",
        &[(
            "      shadow: skip\n",
            "      shadow: skip\n      intendedDifferences:\n        - kind: HostedCluster\n          candidate: write\n          control: write\n          subresource: status\n          fields: [\"status.conditions[type=Ready]\"]\n        - kind: ConfigMap\n          fields: [\"metadata.labels[\\\"app.kubernetes.io/name\\\"]\", data.retention]\n        - {kind: Secret, name: ssh-key, control: none, candidate: delete}\n",
        )],
    ),
    (
        "intended-differences-that-say-nothing",
        "rule",
        &[(
            "      shadow: skip\n",
            "      shadow: skip\n      intendedDifferences:\n        - kind: Secret\n        - kind: \"\"\n          control: write\n          candidate: write\n        - kind: Secret\n          control: delete\n          fields: [data.a]\n        - kind: ConfigMap\n          fields: [\"data.a/b\", \"data[\\\"x\"]\n",
        )],
    ),
    (
        "intended-differences-on-one-sided",
        "rule",
        &[
            (
                "      shadow: skip\n",
                "      shadow: skip\n      only: phased\n      intendedDifferences:\n        - kind: Secret\n          candidate: write\n",
            ),
            (
                "order: [Namespace, PullSecret, Deploy]",
                "order: [Namespace, PullSecret]",
            ),
        ],
    ),
    (
        "intended-bad-action",
        "schema",
        &[(
            "      shadow: skip\n",
            "      shadow: skip\n      intendedDifferences:\n        - kind: Secret\n          candidate: remove\n",
        )],
    ),
    (
        "volatile-fields",
        "valid",
        &[(
            "  legacy:\n",
            "  compare:\n    volatile: [status.observedGeneration, \"metadata.annotations[\\\"example.com/synced-at\\\"]\", \"status.conditions[*].reason\"]\n  legacy:\n",
        )],
    ),
    (
        "volatile-fields-reordered",
        "valid",
        &[(
            "  legacy:\n",
            "  compare:\n    volatile:\n      - status.conditions.*.reason\n      - status.observedGeneration\n      - \"metadata.annotations[\\\"example.com/synced-at\\\"]\"\n      - status.observedGeneration\n  legacy:\n",
        )],
    ),
    (
        "volatile-bad-paths",
        "rule",
        &[(
            "  legacy:\n",
            "  compare:\n    volatile: [\".status\", \"data.tls.crt[\", \"spec[x y]\"]\n  legacy:\n",
        )],
    ),
    (
        "compare-unknown-field",
        "schema",
        &[("  legacy:\n", "  compare:\n    volatle: [a]\n  legacy:\n")],
    ),
];

fn generate_plans() -> Value {
    let mut cases = Vec::new();
    for (name, kind, edits) in PLAN_CASES {
        let mut yaml = BASE_PLAN.to_owned();
        for (from, to) in *edits {
            if *from == "*" {
                (*to).clone_into(&mut yaml); // the whole text
                continue;
            }
            assert!(
                yaml.contains(from),
                "case {name}: {from:?} is not in the plan"
            );
            yaml = yaml.replacen(from, to, 1);
        }
        let outcome = match ReconcilePlan::from_yaml("plans/checks.yaml", &yaml) {
            Ok(plan) => {
                assert_eq!(*kind, "valid", "case {name} is valid");
                json!({"valid": true, "plan": plan.name(), "hash": plan.hash().to_hex()})
            }
            Err(shadow_reconciler::plan::PlanError::Invalid { diagnostics }) => {
                assert_ne!(*kind, "valid", "case {name} is invalid: {diagnostics:?}");
                json!({"valid": false, "diagnostics": diagnostics.iter().map(|d| json!({
                    "line": d.line, "column": d.column,
                    "operation": d.operation.clone().unwrap_or_default(),
                    "message": d.message,
                })).collect::<Vec<_>>()})
            }
            Err(other) => panic!("case {name}: {other}"),
        };
        cases.push(json!({"name": name, "kind": kind, "yaml": yaml, "expected": outcome}));
    }
    json!({
        "schema": "shadow-reconciler.io/plan-vectors/v1",
        "about": "Generated by tests/suite/shared_vectors.rs from src/plan: each case is a plan text (source plans/checks.yaml) and what validation says: valid with its content hash, or every diagnostic. kind rule: the plan's own rules, every diagnostic must be equal (line, column, operation, message); kind schema: the document's structure, where reading stops at the first problem: one diagnostic, equal; kind syntax: not YAML: one diagnostic (each YAML library words and places syntax errors its own way). Do not edit: rerun with SHADOW_RECONCILER_WRITE_VECTORS=1.",
        "cases": cases,
    })
}

#[test]
fn the_committed_plan_vectors_are_what_validation_decides() {
    check_or_write(
        PLAN_FILE,
        &(serde_json::to_string_pretty(&generate_plans()).expect("JSON") + "\n"),
        "src/plan",
    );
}
