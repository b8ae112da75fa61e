//! The flip to enforce driven by the data, on the real node: the Go example controller's pod of
//! `deploy/overlays/sidecar` (`tests/system/node_deploy.rs`), its `ingest` sidecar the rollout
//! driver as docs/rollout.md ("For the `ingest` sidecar") says, with `deploy/rollout`'s kind and
//! Role, and its data on a node-local volume (the overlay's advice for one replica: a volume that
//! outlives the pod), over the `missing-secrets` population.
//!
//! Two rollouts. `gated-components` (50%, then 100%) is the good group: it must complete with no
//! manual step. `critical-core` is the planted regression: its plan lets its members run after
//! `CPOImageAndNamespace` failed, so where a `HostedCluster`'s pull secret is missing, enforcing
//! writes into a control-plane namespace that was never created, where the legacy loop stopped.
//! Its gates must roll it back on their own. Mid-step, a person pauses `gated-components`, the
//! pod is deleted (SIGTERM, as an eviction or a node drain does), and the rollout is resumed
//! once its replacement is Ready: the new driver takes the step on from the status and judges its
//! gates again before it moves.
//!
//! Checked from the records and the audit log, not from timing: the rollback rule (no reconcile
//! under the rollback's flag version or a later one enforced `critical-core`; those after the
//! decision counted); the enforced writes in the audit end with the last reconcile that enforced
//! the group, while the controller goes on reconciling; each pod's `ingest` accepted and wrote
//! every record (its closing line), all of them in the dataset; the driver's requests refused:
//! none.

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use shadow_reconciler::flag::rollout::{ACTION_ANNOTATION, Phase, RolloutStatus, ShadowRollout};

use crate::common;
use crate::common::node::Node;
use crate::common::wait::{wait_for, wait_until};
use crate::go_controller::GO_DRY_RUN;
use crate::node_deploy::{apply_stdin, describe_in, eventually, parquet_summary, repo};

/// The controller's namespace, where the rollouts, the flag and the Lease live too.
const NS: &str = "hypershift";
/// The controller's (and its sidecar's) identity.
const OPERATOR: &str = "system:serviceaccount:hypershift:operator";
/// A bound for a broken run, not a speed target.
const PATIENCE: Duration = Duration::from_mins(12);

/// The two rollouts. `critical-core` requires a `ready` verdict, as `simulate --scenario
/// rollout` does: its steps wait while the evidence builds, so its fate does not depend on how
/// fast the objects come. `gated-components` tolerates 25 points: on this population the
/// objects it enforced failed more often than the others by a margin near the 95% bound (77%
/// of 74 against 60% of 73, bound +1.7 points, in 2 of 7 runs), a difference of the phased
/// reconcile's failures from the legacy loop's, not chance; a user sets the tolerance the same
/// way once the figures in the status say the difference is expected.
const ROLLOUTS: &str = "apiVersion: shadow-reconciler.io/v1alpha1
kind: ShadowRollout
metadata: {name: gated-components, namespace: hypershift}
spec:
  group: hostedcluster/gated-components
  steps:
    - {ramp: 50, minObjects: 10}
    - {ramp: 100, minObjects: 10}
  gates: {tolerancePoints: 25}
---
apiVersion: shadow-reconciler.io/v1alpha1
kind: ShadowRollout
metadata: {name: critical-core, namespace: hypershift}
spec:
  group: hostedcluster/critical-core
  steps:
    - {ramp: 50, minObjects: 10}
    - {ramp: 100, minObjects: 10}
  gates: {readiness: RequireReady}
";

/// The sidecar drives both rollouts; see the module's documentation.
pub(crate) fn sidecar_drives_rollouts(node: &Node) {
    let data = sidecar_as_driver(node);
    let mut logs = vec![follow_sidecar(node, &operator_pod(node))];
    apply_stdin(node, ROLLOUTS);
    let (ended, restarted_us, step) = drive(node, &mut logs);
    // Touched once more: the controller reconciles on after both decisions (in shadow, with
    // dry runs, for critical-core's objects), which the audit shows before the pod stops.
    let touched = now_us();
    touch(node, "after");
    eventually(
        "the controller reconciling after the rollouts ended",
        || {
            node.audit()
                .iter()
                .any(|e| e.user_agent == GO_DRY_RUN && e.time_us > touched)
        },
        || describe_in(node, NS, "deploy/operator"),
    );
    // Every record committed: the pod stopped, each sidecar's closing line read.
    node.kubectl(&["scale", "deploy/operator", "-n", NS, "--replicas=0"]);
    let mut written = 0;
    for (i, log) in logs.into_iter().enumerate() {
        let [accepted, w, dropped, errors, lost] = parquet_summary(log);
        assert_eq!(
            (w, dropped, errors, lost),
            (accepted, 0, 0, 0),
            "pod {}: the sidecar's closing line",
            i + 1
        );
        written += w;
    }
    let records = common::records::records(&data);
    assert_eq!(
        u64::try_from(records.len()).expect("a count"),
        written,
        "records in the dataset against records written by the two pods"
    );
    let (decisions, bad) = check_statuses(&ended, restarted_us, step);
    let ramp = crate::go_rollout::widest_ramp(&bad);
    let (enforced, late) = crate::go_rollout::check_records(&data, "critical-core", ramp);
    let (writes, writes_late) = check_enforced_writes(node, &records, &bad);
    let requests = check_driver_refused_nothing(node);
    eprintln!(
        "node rollouts: gated-components {decisions:?}, its pod deleted at step {} and the step resumed; critical-core rolled back from {ramp}%: {enforced} reconciles enforced it, {late} after the decision (each under the flag before it); {writes} enforced writes in the audit, {writes_late} after the decision, none after the last reconcile that enforced it; ingest: {written} records written by the two pods, all in the dataset; the driver: {requests} requests, 0 refused",
        step + 1
    );
}

/// `deploy/rollout` for the sidecar: the kind, the Role in the controller's namespace bound to
/// its `ServiceAccount`, a flag ConfigMap there in mode `enforce`; `--rollout` added to the
/// sidecar and `--flag-namespace` to both containers; the data on a node-local volume and the
/// Deployment's strategy `Recreate` (one writer of the volume at a time). Returns the volume's
/// directory on the node, once the new pod is Ready.
fn sidecar_as_driver(node: &Node) -> PathBuf {
    let rollout_dir = repo().join("deploy/rollout");
    node.kubectl(&[
        "apply",
        "-f",
        &rollout_dir
            .join("shadowrollouts.shadow-reconciler.io.yaml")
            .display()
            .to_string(),
    ]);
    let role = std::fs::read_to_string(rollout_dir.join("rbac-rollout.yaml"))
        .expect("read the rollout Role")
        .replace("namespace: shadow-reconciler", "namespace: hypershift")
        .replace(
            "    name: shadow-reconciler\n    namespace: hypershift",
            "    name: operator\n    namespace: hypershift",
        );
    assert!(role.contains("name: operator"), "the Role's subject moved");
    apply_stdin(node, &role);
    apply_stdin(
        node,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shadow-reconciler-flag, namespace: hypershift}\ndata: {mode: enforce}\n",
    );
    let data = crate::node_deploy::node_volume_dir(node, "sidecar-data");
    // The sidecar is a native one (an init container that keeps running).
    let index = |list: &str, name: &str| {
        let names = node.kubectl(&[
            "get",
            "deploy/operator",
            "-n",
            NS,
            "-o",
            &format!("jsonpath={{.spec.template.spec.{list}[*].name}}"),
        ]);
        names
            .split_whitespace()
            .position(|n| n == name)
            .unwrap_or_else(|| panic!("no {list} {name} in {names}"))
    };
    let add = |list: &str, container: usize, arg: &str| {
        format!(
            r#"{{"op":"add","path":"/spec/template/spec/{list}/{container}/args/-","value":"{arg}"}}"#
        )
    };
    let (operator, sidecar, volume) = (
        index("containers", "operator"),
        index("initContainers", "shadow-reconciler"),
        index("volumes", "shadow-reconciler-data"),
    );
    let ops = [
        add("containers", operator, "--flag-namespace"),
        add("containers", operator, NS),
        // Every reconcile compared, as before the shadow had a budget: the gates' figures and
        // their bounds were measured on whole runs of this population.
        add("containers", operator, "--shadow-qps"),
        add("containers", operator, "unlimited"),
        add("initContainers", sidecar, "--rollout"),
        add("initContainers", sidecar, "--rollout-interval"),
        add("initContainers", sidecar, "5"),
        add("initContainers", sidecar, "--flag-namespace"),
        add("initContainers", sidecar, NS),
        format!(
            r#"{{"op":"replace","path":"/spec/template/spec/volumes/{volume}","value":{{"name":"shadow-reconciler-data","hostPath":{{"path":"{}","type":"Directory"}}}}}}"#,
            data.display()
        ),
        r#"{"op":"replace","path":"/spec/strategy","value":{"type":"Recreate"}}"#.to_owned(),
    ];
    node.kubectl(&[
        "patch",
        "deploy/operator",
        "-n",
        NS,
        "--type",
        "json",
        "-p",
        &format!("[{}]", ops.join(",")),
    ]);
    let status = node.kubectl_output(&[
        "rollout",
        "status",
        "-n",
        NS,
        "deploy/operator",
        "--timeout=300s",
    ]);
    assert!(
        status.status.success(),
        "the patched pod did not become Ready:\n{}",
        describe_in(node, NS, "deploy/operator")
    );
    data
}

/// The name of the controller's Ready pod (the only one).
fn operator_pod(node: &Node) -> String {
    let mut found = String::new();
    eventually(
        "one Ready pod of the controller",
        || {
            let out = node.kubectl(&[
                "get",
                "pods",
                "-n",
                NS,
                "-l",
                "name=operator",
                "-o",
                r#"jsonpath={range .items[*]}{.metadata.name} {.metadata.deletionTimestamp} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}"#,
            ]);
            let ready: Vec<&str> = out
                .lines()
                .filter_map(|l| {
                    let fields: Vec<&str> = l.split_whitespace().collect();
                    (fields.len() == 2 && fields[1] == "True").then_some(fields[0])
                })
                .collect();
            let pods = out.lines().count();
            if let ([name], 1) = (ready.as_slice(), pods) {
                (*name).clone_into(&mut found);
                true
            } else {
                false
            }
        },
        || describe_in(node, NS, "deploy/operator"),
    );
    found
}

/// Follows the log of `pod`'s sidecar until it exits.
fn follow_sidecar(node: &Node, pod: &str) -> Child {
    node.kubectl_command()
        .args(["logs", "-f", "-n", NS, pod, "-c", "shadow-reconciler"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl logs -f")
}

/// Each rollout's name and status.
fn statuses(node: &Node) -> Vec<(String, RolloutStatus)> {
    let out = node.kubectl(&["get", "shadowrollouts", "-n", NS, "-o", "json"]);
    let list: serde_json::Value = serde_json::from_str(&out).expect("a JSON list");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| {
            let rollout: ShadowRollout =
                serde_json::from_value(item.clone()).expect("a ShadowRollout");
            Some((rollout.name_any(), rollout.status?))
        })
        .collect()
}

/// A person's action on `gated-components` (docs/rollout.md, "Acting on a rollout").
fn act(node: &Node, action: &str) {
    node.kubectl(&[
        "annotate",
        "shadowrollout/gated-components",
        "-n",
        NS,
        "--overwrite",
        &format!("{ACTION_ANNOTATION}={action}"),
    ]);
}

/// Touches every `HostedCluster`, as a resync would: each is reconciled again.
fn touch(node: &Node, value: &str) {
    let _ = node.kubectl_output(&[
        "annotate",
        "hostedclusters",
        "--all",
        "-A",
        "--overwrite",
        &format!("test.shadow-reconciler.io/resync={value}"),
    ]);
}

/// Now, µs since the Unix epoch.
fn now_us() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_microsecond()
}

/// Touches every `HostedCluster` (as a resync would) until both rollouts have ended. The first
/// time `gated-components` is seen progressing, it is paused; once `Paused`, the pod is deleted,
/// its replacement awaited (its sidecar's log followed into `logs`), and the rollout resumed.
/// Returns the statuses, when the pod was deleted and the step it was at.
fn drive(node: &Node, logs: &mut Vec<Child>) -> (Vec<(String, RolloutStatus)>, i64, u32) {
    let started = Instant::now();
    let mut restart: Option<(i64, u32)> = None;
    let mut pausing = false;
    let mut round = 0_u64;
    let ended = wait_until(
        "the rollouts ended",
        PATIENCE,
        Duration::from_secs(3),
        || {
            let now = statuses(node);
            let good = now.iter().find(|(n, _)| n == "gated-components");
            if restart.is_none() {
                match good.map(|(_, s)| (s.phase, s.step)) {
                    Some((Phase::Progressing, _)) if !pausing => {
                        act(node, "pause");
                        pausing = true;
                    }
                    Some((Phase::Progressing, _)) | None => {}
                    Some((Phase::Paused, step)) => {
                        let old = operator_pod(node);
                        let deleted = now_us();
                        node.kubectl(&["delete", "pod", "-n", NS, &old, "--wait=false"]);
                        // Within the same patience as the whole drive.
                        let new = wait_for(
                            &format!("a pod replacing {old}"),
                            PATIENCE.saturating_sub(started.elapsed()),
                            Duration::from_millis(500),
                            || match operator_pod(node) {
                                pod if pod != old => Ok(pod),
                                _ => Err(format!("{old} still the operator's pod")),
                            },
                        );
                        logs.push(follow_sidecar(node, &new));
                        act(node, "resume");
                        restart = Some((deleted, step));
                    }
                    Some((phase, _)) => {
                        panic!("gated-components {phase:?} before it could be paused: {now:#?}")
                    }
                }
            }
            let ended = now.len() == 2
                && now
                    .iter()
                    .all(|(_, s)| !matches!(s.phase, Phase::Progressing | Phase::Paused));
            if let (true, Some((deleted, step))) = (ended, restart) {
                return Ok((now, deleted, step));
            }
            if round.is_multiple_of(4) {
                touch(node, &round.to_string());
            }
            round += 1;
            Err(format!("{now:#?}"))
        },
    );
    ended.unwrap_or_else(|e| panic!("{e}\n{}", describe_in(node, NS, "deploy/operator")))
}

/// `gated-components` completed every step with no rollback, one start, and the step the pod
/// was deleted in decided after the restart; `critical-core` rolled back once by a failed gate.
/// Returns the good one's decisions and the bad one's status.
fn check_statuses(
    ended: &[(String, RolloutStatus)],
    restarted_us: i64,
    step: u32,
) -> (Vec<String>, RolloutStatus) {
    let (good, bad, decisions) = crate::go_rollout::good_and_bad(ended);
    assert_eq!(
        (good.phase, good.step_of.as_str(), good.rollbacks),
        (Phase::Completed, "2/2", 0),
        "{good:#?}"
    );
    assert_eq!(
        decisions,
        ["Started 50", "Advanced 100", "Completed 100"],
        "{good:#?}"
    );
    let kinds: Vec<&str> = good.history.iter().map(|d| d.kind.as_str()).collect();
    let resumed = kinds
        .iter()
        .position(|k| *k == "Resumed")
        .unwrap_or_else(|| panic!("no Resumed decision: {kinds:?}"));
    let next = &good.history[resumed + 1];
    let micros = |t: &str| {
        t.parse::<k8s_openapi::jiff::Timestamp>()
            .expect("a time")
            .as_microsecond()
    };
    assert!(
        kinds[resumed - 1] == "Paused"
            && matches!(
                (next.kind.as_str(), next.step),
                ("Advanced" | "Completed", s) if s == step + u32::from(next.kind == "Advanced")
            )
            && micros(&next.time) > restarted_us,
        "step {} was not judged again after the pod's restart: {good:#?}",
        step + 1
    );
    assert!(
        bad.phase == Phase::RolledBack
            && bad.rollbacks == 1
            && bad.last_gate.as_ref().is_some_and(|g| g
                .gates
                .iter()
                .any(|r| r.result == shadow_reconciler::flag::rollout::Verdict::Failed)),
        "{bad:#?}"
    );
    (decisions, bad)
}

/// The regression in the audit log: the controller's writes into a namespace that does not
/// exist (404), which only the enforced `critical-core` makes (the legacy loop stops where the
/// namespace's creation failed; the shadow's are dry runs). They end with the last reconcile that
/// enforced it (its start plus its duration, from the records), and the controller reconciled on
/// after them: touched once more, it answers with dry runs of the shadow, and no enforced write.
/// Returns the enforced writes and how many came after the rollback's decision.
fn check_enforced_writes(
    node: &Node,
    records: &[common::records::Record],
    bad: &RolloutStatus,
) -> (usize, usize) {
    let namespaces = node.kubectl(&[
        "get",
        "namespaces",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ]);
    let exists: std::collections::BTreeSet<&str> = namespaces.split_whitespace().collect();
    let audit = node.audit();
    let enforced: Vec<_> = audit
        .iter()
        .filter(|e| {
            e.user == OPERATOR
                && matches!(e.verb.as_str(), "create" | "update" | "patch")
                && e.code == 404
                && !e.dry_run()
                && !e.namespace.is_empty()
                && e.subresource.is_empty()
                && !exists.contains(e.namespace.as_str())
        })
        .collect();
    assert!(
        !enforced.is_empty(),
        "no write of the enforced critical-core in the audit: the regression was not exercised"
    );
    let last_enforcing_end = records
        .iter()
        .filter(|r| r.mode == "enforce" && r.groups.iter().any(|g| g == "critical-core"))
        .map(|r| r.time + r.duration_us)
        .max()
        .expect("reconciles that enforced critical-core");
    let last_write = enforced.iter().map(|e| e.time_us).max().unwrap_or(0);
    assert!(
        last_write <= last_enforcing_end,
        "an enforced write at {last_write} µs, after the last reconcile that enforced critical-core ended ({last_enforcing_end} µs)"
    );
    let shadow_after = audit
        .iter()
        .filter(|e| e.user_agent == GO_DRY_RUN && e.time_us > last_write)
        .count();
    assert!(
        records.iter().any(|r| r.time > last_write) && shadow_after > 0,
        "the controller reconciled nothing after the last enforced write: the stop proves nothing"
    );
    let decided = bad
        .history
        .iter()
        .find(|d| d.kind == "RolledBack")
        .and_then(|d| d.time.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .map_or(i64::MAX, k8s_openapi::jiff::Timestamp::as_microsecond);
    let late = enforced.iter().filter(|e| e.time_us > decided).count();
    (enforced.len(), late)
}

/// The driver's requests (its rollouts, its Lease, the flag it writes): none refused. Returns
/// how many.
fn check_driver_refused_nothing(node: &Node) -> usize {
    let audit = node.audit();
    let driver: Vec<_> = audit
        .iter()
        .filter(|e| e.user == OPERATOR)
        .filter(|e| {
            ["shadowrollouts", "leases", "shadow-reconciler-flag"]
                .iter()
                .any(|r| e.uri.contains(r))
        })
        .collect();
    let refused: Vec<_> = driver.iter().filter(|e| e.code == 403).collect();
    assert!(
        driver
            .iter()
            .any(|e| e.uri.contains("shadowrollouts") && e.succeeded())
            && refused.is_empty(),
        "{} requests of the driver, {} refused, e.g. {:?}",
        driver.len(),
        refused.len(),
        refused.first()
    );
    driver.len()
}
