//! The flip to enforce driven by the data, for a Go controller: the HostedCluster example of
//! `sdk/go/examples` on a real kube-apiserver reads the flag ConfigMap, and its `ingest` sidecar
//! runs with `--rollout`, under the `ServiceAccount` and Role of `deploy/rollout`, driving the two
//! `ShadowRollout`s of `simulate --scenario rollout` from the records it writes. Every
//! HostedCluster is touched between checks, as a resync would. `gated-components` advances
//! through every step to 100% with no manual step; `critical-core` (whose members the plan lets
//! run after `CPOImageAndNamespace` failed: enforced, they run and fail where the legacy loop
//! stopped) is rolled back by its gates. The sidecar is stopped (SIGTERM, as a deleted pod) in
//! the middle of one of the good group's steps and a new one resumes it from the status: its
//! gates judge the step again, no step is skipped. Checked from the data, not from timing: no reconcile
//! that ran under the rollback's flag version or a later one enforced `critical-core` (those after
//! the decision are counted: the documented bound is the flag's propagation), nothing recorded is
//! lost, the driver's `ServiceAccount` was refused nothing, no dry run persisted.

use crate::common;
use crate::go_controller::{
    GO_CONTROL, GO_DRY_RUN, PATIENCE, Shadowed, client, populate, runtime, start_shadowed_with,
};

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::apiserver::ControlPlane;
use common::records::records;
use common::wait::{wait_for_async, wait_until_async};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use shadow_reconciler::dataset::Location;
use shadow_reconciler::flag::bucket;
use shadow_reconciler::flag::rollout::{
    ACTION_ANNOTATION, Phase, RolloutStatus, ShadowRollout, Verdict,
};
use shadow_reconciler::reconcilers::hostedcluster::HostedCluster;

/// The namespace of the flag, the rollouts and the Lease (`scenario::rollout::prepare`).
const NAMESPACE: &str = "shadow-reconciler";

/// A person's action on `gated-components` (docs/rollout.md, "Acting on a rollout").
async fn act(kube: &kube::Client, action: &str) {
    let api: Api<ShadowRollout> = Api::namespaced(kube.clone(), NAMESPACE);
    let patch = serde_json::json!({"metadata": {"annotations": {ACTION_ANNOTATION: action}}});
    api.patch(
        "gated-components",
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .expect("annotate the rollout");
}

/// Each rollout's name and status.
async fn statuses(kube: &kube::Client) -> Vec<(String, RolloutStatus)> {
    let api: Api<ShadowRollout> = Api::namespaced(kube.clone(), NAMESPACE);
    api.list(&ListParams::default())
        .await
        .expect("list the rollouts")
        .items
        .into_iter()
        .filter_map(|r| Some((r.name_any(), r.status?)))
        .collect()
}

/// When the sidecar was restarted, and the step `gated-components` was in.
type Restart = (k8s_openapi::jiff::Timestamp, u32);

/// Touches every HostedCluster (an annotation) until both rollouts have ended (no longer
/// progressing or paused); returns their statuses and the restart. The first time
/// `gated-components` is seen progressing, a person pauses it (`kubectl annotate ...
/// action=pause`); once the status says `Paused` the sidecar is stopped with SIGTERM, as a
/// deleted pod is, a new one started, and the rollout resumed: the new driver must take the
/// step on from the status, and no decision can slip in between.
async fn drive(
    kube: &kube::Client,
    shadowed: &mut Shadowed,
) -> (Vec<(String, RolloutStatus)>, Restart) {
    let started = Instant::now();
    let hcs: Api<HostedCluster> = Api::all(kube.clone());
    let mut restarted = None;
    let mut round = 0_u64;
    let ended = wait_until_async(
        "the rollouts ended",
        PATIENCE,
        Duration::from_secs(2),
        async || {
            let now = statuses(kube).await;
            let progressing = now
                .iter()
                .find(|(n, s)| n == "gated-components" && s.phase == Phase::Progressing);
            if let (None, Some(_)) = (restarted, progressing) {
                act(kube, "pause").await;
                // Within the same patience as the whole drive.
                let step = wait_for_async(
                    "gated-components paused",
                    PATIENCE.saturating_sub(started.elapsed()),
                    Duration::from_millis(200),
                    async || {
                        let now = statuses(kube).await;
                        match now.iter().find(|(n, _)| n == "gated-components") {
                            Some((_, s)) if s.phase == Phase::Paused => Ok(s.step),
                            Some((_, s)) => {
                                assert!(
                                    s.phase == Phase::Progressing,
                                    "pausing gated-components: {s:#?}"
                                );
                                Err(format!("{s:#?}"))
                            }
                            None => Err("no status of gated-components".to_owned()),
                        }
                    },
                )
                .await;
                shadowed.restart_ingest(1);
                restarted = Some((k8s_openapi::jiff::Timestamp::now(), step));
                act(kube, "resume").await;
            }
            if now.len() == 2
                && now
                    .iter()
                    .all(|(_, s)| !matches!(s.phase, Phase::Progressing | Phase::Paused))
            {
                return Ok((
                    now,
                    restarted.expect("the sidecar was restarted mid-rollout"),
                ));
            }
            for hc in hcs.list(&ListParams::default()).await.expect("list").items {
                let (Some(ns), Some(name)) = (hc.metadata.namespace, hc.metadata.name) else {
                    continue;
                };
                let patch = serde_json::json!({"metadata": {"annotations": {
                    "test.shadow-reconciler.io/resync": round.to_string(),
                }}});
                let _ = Api::<HostedCluster>::namespaced(kube.clone(), &ns)
                    .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await;
            }
            round += 1;
            Err(format!("{now:#?}"))
        },
    )
    .await;
    ended.unwrap_or_else(|e| panic!("{e}\n{}", shadowed.log("ingest.log")))
}

/// The figures of ingest's closing line `parquet: N records accepted, M written to DIR in F
/// files (D dropped, E write errors, L lost)`: (accepted, written, the parenthesis).
fn closing_line(log: &Path) -> (u64, u64, String) {
    let text = std::fs::read_to_string(log).expect("ingest.log");
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains("records accepted"))
        .unwrap_or_else(|| panic!("no closing line of the Parquet writer:\n{text}"));
    let number = |after: &str| -> u64 {
        line.split(after)
            .next()
            .and_then(|head| head.split_whitespace().last())
            .and_then(|n| n.trim_matches(|c: char| !c.is_ascii_digit()).parse().ok())
            .unwrap_or_else(|| panic!("{after:?} in {line}"))
    };
    let paren = line
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map_or_else(String::new, |(inside, _)| inside.to_owned());
    (number(" records accepted"), number(" written"), paren)
}

/// Both rollouts ended as they must: `gated-components` completed through every step, with no
/// rollback; `critical-core` rolled back once by a failed gate. Returns the good one's decisions
/// and the bad one's status.
fn check_statuses(ended: &[(String, RolloutStatus)]) -> (Vec<String>, RolloutStatus) {
    let (good, bad, advanced) = good_and_bad(ended);
    let steps = [
        "Started 10",
        "Advanced 25",
        "Advanced 50",
        "Advanced 100",
        "Completed 100",
    ];
    assert_eq!(
        (good.phase, good.step_of.as_str(), good.rollbacks),
        (Phase::Completed, "4/4", 0),
        "{good:#?}"
    );
    assert_eq!(advanced, steps, "{good:#?}");
    assert_eq!(
        (bad.phase, bad.rollbacks),
        (Phase::RolledBack, 1),
        "{bad:#?}"
    );
    assert!(
        bad.last_gate
            .as_ref()
            .is_some_and(|g| g.gates.iter().any(|r| r.result == Verdict::Failed)),
        "{bad:#?}"
    );

    (advanced, bad)
}

/// The statuses of `gated-components` and `critical-core` among `ended`, and the good one's
/// decisions but a person's pauses and resumes (`Advanced 25`).
pub(crate) fn good_and_bad(
    ended: &[(String, RolloutStatus)],
) -> (RolloutStatus, RolloutStatus, Vec<String>) {
    let status = |name: &str| {
        ended.iter().find(|(n, _)| n == name).map_or_else(
            || panic!("no status of {name}: {ended:#?}"),
            |(_, s)| s.clone(),
        )
    };
    let (good, bad) = (status("gated-components"), status("critical-core"));
    let decisions = good
        .history
        .iter()
        .filter(|d| !matches!(d.kind.as_str(), "Paused" | "Resumed"))
        .map(|d| format!("{} {}", d.kind, d.ramp))
        .collect();
    (good, bad, decisions)
}

/// The widest ramp a rollout reached (its start and advances), in percent: no object outside
/// it ever enforced its group.
pub(crate) fn widest_ramp(status: &RolloutStatus) -> f64 {
    status
        .history
        .iter()
        .filter(|d| matches!(d.kind.as_str(), "Started" | "Advanced"))
        .map(|d| d.ramp)
        .fold(0.0, f64::max)
}

/// From the records (which flag version each reconcile ran under, which groups it enforced) and
/// the driver's: no reconcile under the rollback's flag version or a later one enforced
/// `critical-core`, none outside the widest ramp it reached (`ramp`, percent); `gated-components`
/// reached objects beyond 50%. Returns the reconciles that enforced `critical-core`, and how many
/// of them came after the decision.
pub(crate) fn check_records(data: &Path, name: &str, ramp: f64) -> (usize, usize) {
    let reconciles = records(data);
    let rows = shadow_reconciler::dataset::rollouts::read(&Location::Local(data.to_owned()))
        .expect("the driver's Parquet record");
    let rollback = rows
        .iter()
        .find(|r| r.rollout == name && r.decision.contains("RolledBack"))
        .unwrap_or_else(|| panic!("no rollback in the driver's record"));
    let written = rollback
        .flag_version
        .clone()
        .expect("the rollback's flag version");
    let after: BTreeSet<&String> = rows
        .iter()
        .filter(|r| r.time_us >= rollback.time_us)
        .filter_map(|r| r.flag_version.as_ref())
        .chain([&written])
        .collect();
    common::records::check_rollback(&reconciles, name, ramp, &after, rollback.time_us)
}

/// Nothing recorded lost (ingest's closing line), nothing of the driver's `ServiceAccount`
/// refused, no dry run persisted. Returns the records accepted and the driver's requests.
fn check_nothing_lost_or_refused(plane: &ControlPlane, dir: &Path) -> (u64, usize) {
    let mut accepted = 0;
    for log in ["ingest-1.log", "ingest.log"] {
        let (n, written_records, paren) = closing_line(&dir.join(log));
        assert_eq!(
            (written_records, paren.as_str()),
            (n, "0 dropped, 0 write errors, 0 lost"),
            "{log}: the closing line"
        );
        accepted += n;
    }
    let audit = plane.audit();
    let driver_user = format!("system:serviceaccount:{NAMESPACE}:shadow-reconciler");
    let mine: Vec<_> = audit.iter().filter(|e| e.user == driver_user).collect();
    let refused: Vec<_> = mine.iter().filter(|e| e.code == 403).collect();
    assert!(
        !mine.is_empty() && refused.is_empty(),
        "{} requests of the driver's ServiceAccount, {} refused, e.g. {:?}",
        mine.len(),
        refused.len(),
        refused.first()
    );
    common::apiserver::assert_shadow_persisted_nothing(&audit, GO_DRY_RUN, GO_CONTROL);
    (accepted, mine.len())
}

#[test]
fn the_go_controllers_rollouts_are_driven_by_its_sidecar_on_kube_apiserver() {
    let plane = ControlPlane::start();
    let dir = tempfile::tempdir().expect("temp dir");
    populate(plane.kubeconfig());
    let rt = runtime();
    let kube = rt.block_on(client(plane.kubeconfig()));
    rt.block_on(shadow_reconciler::scenario::rollout::prepare(&kube))
        .expect("the rollouts, their kind and the flag ConfigMap");
    // The comparisons roll back a group as good as the others by chance in up to about 7.5% of
    // four-step rollouts at the default 95% (docs/rollout.md's limits), and this test requires
    // the good group to complete: it is judged at 99.9%, as those limits advise when a false
    // alarm costs too much. (Seen at 95%: the 10% ramp drew 11 objects, 9 of which failed,
    // against 40 of the 86 others; the lower bound, +4.0 points, rolled it back.)
    rt.block_on(
        Api::<ShadowRollout>::namespaced(kube.clone(), NAMESPACE).patch(
            "gated-components",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"gates": {"confidence": 0.999}}})),
        ),
    )
    .expect("gated-components judged at 99.9%");
    // The driver's identity: a ServiceAccount with the shipped Role, nothing more.
    plane.kubectl(&[
        "-n",
        NAMESPACE,
        "create",
        "serviceaccount",
        "shadow-reconciler",
    ]);
    let rbac = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/rollout/rbac-rollout.yaml");
    plane.kubectl(&["apply", "-f", rbac.to_str().expect("a UTF-8 path")]);
    let token = plane.service_account_token(NAMESPACE, "shadow-reconciler");
    let driver_kubeconfig = plane.kubeconfig_for("rollout-driver", &token);
    let shadowed = start_shadowed_with(
        dir.path(),
        plane.kubeconfig(),
        &["--flag-namespace", NAMESPACE],
        &[
            "--rollout",
            "--rollout-interval",
            "2",
            "--flag-namespace",
            NAMESPACE,
        ],
        &driver_kubeconfig,
    );
    let mut shadowed = shadowed;
    let (ended, restarted) = rt.block_on(drive(&kube, &mut shadowed));
    let data = shadowed.stop();
    let (advanced, bad) = check_statuses(&ended);
    // The new sidecar resumed the step from the status: no second start, its gates judged
    // that step again after the restart, and no step was skipped (the decisions, checked
    // above, are Started, each Advanced, Completed, in order).
    let (restarted, step) = restarted;
    let good = &ended
        .iter()
        .find(|(n, _)| n == "gated-components")
        .expect("good")
        .1;
    let kinds: Vec<&str> = good.history.iter().map(|d| d.kind.as_str()).collect();
    let resumed = kinds
        .iter()
        .position(|k| *k == "Resumed")
        .unwrap_or_else(|| panic!("no Resumed decision: {kinds:?}"));
    assert_eq!(kinds[resumed - 1], "Paused", "{kinds:?}");
    let out_of_it = &good.history[resumed + 1];
    assert!(
        matches!(
            out_of_it.kind.as_str(),
            "Advanced" | "Completed" | "RolledBack"
        ) && out_of_it
            .time
            .parse::<k8s_openapi::jiff::Timestamp>()
            .expect("a time")
            > restarted,
        "step {} was not judged again after the restart at {restarted}: {good:#?}",
        step + 1
    );
    let ramp = widest_ramp(&bad);
    let (enforced, late) = check_records(&data, "critical-core", ramp);
    // Objects outside the first three steps' 50% enforce gated-components only at 100%.
    assert!(
        common::records::records(&data)
            .iter()
            .any(|r| r.mode == "enforce"
                && bucket(&r.uid) >= 5000
                && r.groups.iter().any(|g| g == "gated-components")),
        "no object beyond 50% ever enforced gated-components"
    );
    let why = &bad.message;
    let (accepted, requests) = check_nothing_lost_or_refused(&plane, dir.path());
    println!(
        "gated-components: {advanced:?}; critical-core rolled back from {ramp}%: {why}; {enforced} reconciles enforced critical-core, {late} of them after the rollback was decided (each under the flag before it); ingest: {accepted} records accepted, all written; the driver's ServiceAccount: {requests} requests, 0 refused"
    );
}
