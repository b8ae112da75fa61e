//! `run` as deployed, on a real kube-apiserver: deploy/ applied (CRDs, namespace, service account,
//! the flag ConfigMap, RBAC), the process authenticated as the deployment's service account with a
//! token of its own, under RBAC. Checked from the API server's audit log and the process's
//! metrics:
//! - no request of the service account is refused (the shipped RBAC is sufficient);
//! - the flag, flipped with kubectl (shadow -> enforce of a group -> shadow), is followed by the
//!   next reconciles;
//! - a verb removed from the `ClusterRole` makes the operation that needs it fail `forbidden`, in
//!   the control (a real write) and in the shadow (its dry-run write needs the same verb);
//! - the shadow's requests go under their own identity and flow (`--shadow-as`,
//!   `deploy/components/shadow-flow`): every dry run impersonates the shadow's `ServiceAccount`, no
//!   control request does, and the API server's Priority and Fairness dispatched exactly the
//!   shadow's requests through the shadow's `FlowSchema`.
//!
//! Also prints the grants of the shipped `ClusterRole`s the scenario never used.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::apiserver::{ControlPlane, free_port, http_exchange, tail};
use common::wait::wait_until;
use shadow_reconciler::scenario::population;
use shadow_reconciler::util::Rng;

const NAMESPACE: &str = "shadow-reconciler";
const SERVICE_ACCOUNT: &str = "system:serviceaccount:shadow-reconciler:shadow-reconciler";
/// The identity the shadow's requests impersonate (deploy/components/shadow-flow).
const SHADOW_IDENTITY: &str = "system:serviceaccount:shadow-reconciler:shadow-reconciler-shadow";
const HOSTED_CLUSTERS: usize = 40;
const ADDONS: usize = 10;
/// A bound for a broken run, not a speed target.
const PATIENCE: Duration = Duration::from_mins(5);

/// The `run` process, killed when dropped.
struct Run {
    child: Child,
    port: u16,
    log: std::path::PathBuf,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Run {
    fn metrics(&mut self) -> String {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "run exited ({status}); its log:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
        // Not serving yet: no samples.
        http_exchange(&format!("127.0.0.1:{}", self.port), "GET", "/metrics", "")
            .map(|(_, body)| body)
            .unwrap_or_default()
    }

    /// The sum of the samples of `name` whose labels contain every one of `labels` (counters
    /// and the flag's info gauge: integers).
    fn sum(&mut self, name: &str, labels: &[&str]) -> u64 {
        self.metrics()
            .lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
            .filter(|l| labels.iter().all(|want| l.contains(want)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    /// Waits until `what` holds, or fails with the process's log after [`PATIENCE`].
    fn wait_for(&mut self, what: &str, mut done: impl FnMut(&mut Self) -> bool) {
        let started = Instant::now();
        let waited = wait_until(what, PATIENCE, Duration::from_millis(200), || {
            if done(self) {
                Ok(())
            } else {
                Err(String::new())
            }
        });
        if let Err(e) = waited {
            panic!("{e}; run's log ends:\n{}", tail(&self.log, 30));
        }
        eprintln!("{what}: after {:.1} s", started.elapsed().as_secs_f64());
    }
}

/// Touches every HostedCluster, so each is reconciled again.
fn touch_hosted_clusters(plane: &ControlPlane, round: usize) {
    plane.kubectl(&[
        "annotate",
        "hostedclusters.example.shadow-reconciler.io",
        "--all",
        "-A",
        "--overwrite",
        &format!("e2e.shadow-reconciler.io/round={round}"),
    ]);
}

fn patch_flag(plane: &ControlPlane, data: &str) {
    plane.kubectl(&[
        "patch",
        "configmap",
        "shadow-reconciler-flag",
        "-n",
        NAMESPACE,
        "--type",
        "merge",
        "-p",
        &format!("{{\"data\": {data}}}"),
    ]);
}

fn refused(plane: &ControlPlane) -> Vec<common::apiserver::AuditEvent> {
    plane
        .audit()
        .into_iter()
        .filter(|e| e.user == SERVICE_ACCOUNT && e.code == 403)
        .collect()
}

/// `run`, authenticated with a token of the deployment's service account.
fn start_run(plane: &ControlPlane, data: &Path) -> Run {
    let token = plane.service_account_token(NAMESPACE, "shadow-reconciler");
    let kubeconfig = plane.kubeconfig_for("service-account", &token);
    let port = free_port();
    let log = plane.dir().join("run.log");
    Run {
        child: Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
            .args(["run", "--log-format", "json", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--parquet-dir")
            .arg(data)
            .args(["--shadow-as", SHADOW_IDENTITY])
            // Every object in the paired sample (the default, a fifth of them by UID, may leave
            // out each object whose dry run of RBACAndPolicies the test waits for); the budget
            // and the pauses as deployed.
            .args(["--paired-sample-percent", "100"])
            .env("POD_NAMESPACE", NAMESPACE)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start run"),
        port,
        log,
    }
}

/// The reconciles `run` has logged so far, in the order they ended: (plan, mode, object). A
/// reconcile of an object never overlaps another of the same object, so per object this is also
/// the order they started in.
fn logged_reconciles(run: &Run) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(&run.log).unwrap_or_default();
    // The last line may still be being written.
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|v| v["target"] == "shadow_reconciler::engine::record")
        .filter_map(|v| {
            let f = &v["fields"];
            Some((
                f["plan"].as_str()?.to_owned(),
                f["mode"].as_str()?.to_owned(),
                f["object"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

/// The HostedClusters with a reconcile in `mode` among the records from `from` on.
fn reconciled_in(
    records: &[(String, String, String)],
    from: usize,
    mode: &str,
) -> BTreeSet<String> {
    records
        .iter()
        .skip(from)
        .filter(|(plan, m, _)| plan == "hostedcluster" && m == mode)
        .map(|(_, _, object)| object.clone())
        .collect()
}

/// The flag, flipped with kubectl: enforce one group, then roll back. Checked per object from
/// `run`'s records: after each flip, every HostedCluster is reconciled in the new mode, and no
/// reconcile of an object runs in the old mode after one of it ran in the new.
fn flip_the_flag(plane: &ControlPlane, run: &mut Run) {
    patch_flag(
        plane,
        r#"{"mode": "enforce", "enforcedGroups": "hostedcluster/non-critical-syncs"}"#,
    );
    run.wait_for("the flag in force is enforce", |r| {
        r.sum("shadow_reconciler_flag_info", &["mode=\"enforce\""]) == 1
    });
    let from = logged_reconciles(run).len();
    touch_hosted_clusters(plane, 1);
    run.wait_for("every HostedCluster reconciled in enforce", |r| {
        reconciled_in(&logged_reconciles(r), from, "enforce").len() >= HOSTED_CLUSTERS
    });
    patch_flag(plane, r#"{"mode": "shadow", "enforcedGroups": ""}"#);
    run.wait_for("the flag in force is shadow again", |r| {
        r.sum("shadow_reconciler_flag_info", &["mode=\"shadow\""]) == 1
    });
    let from = logged_reconciles(run).len();
    for round in [2, 3] {
        let round_from = logged_reconciles(run).len();
        touch_hosted_clusters(plane, round);
        run.wait_for(
            "every HostedCluster reconciled in shadow after the rollback",
            |r| reconciled_in(&logged_reconciles(r), round_from, "shadow").len() >= HOSTED_CLUSTERS,
        );
    }
    let records = logged_reconciles(run);
    let mut back_in_shadow = BTreeSet::new();
    for (plan, mode, object) in records.iter().skip(from) {
        if plan != "hostedcluster" {
            continue;
        }
        assert!(
            !(mode == "enforce" && back_in_shadow.contains(object)),
            "{object} was reconciled in enforce after a reconcile of it in shadow followed the rollback"
        );
        if mode == "shadow" {
            back_in_shadow.insert(object.clone());
        }
    }
}

/// A verb removed: `patch` on network policies, which `RBACAndPolicies` applies.
fn remove_a_verb(plane: &ControlPlane, run: &mut Run) {
    let role = plane.kubectl(&[
        "get",
        "clusterrole",
        "shadow-reconciler-hostedcluster",
        "-o",
        "json",
    ]);
    let role: serde_json::Value = serde_json::from_str(&role).expect("ClusterRole JSON");
    let index = role["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .position(|r| {
            r["resources"]
                .as_array()
                .is_some_and(|rs| rs.iter().any(|x| x == "networkpolicies"))
        })
        .expect("a rule for networkpolicies");
    plane.kubectl(&[
        "patch",
        "clusterrole",
        "shadow-reconciler-hostedcluster",
        "--type",
        "json",
        "-p",
        &format!(r#"[{{"op": "replace", "path": "/rules/{index}/verbs", "value": ["create"]}}]"#),
    ]);
    touch_hosted_clusters(plane, 4);
    let forbidden = |r: &mut Run, policy: &str, execution: &str| {
        r.sum(
            "shadow_reconciler_operations_total",
            &[
                "operation=\"RBACAndPolicies\"",
                &format!("policy=\"{policy}\""),
                &format!("execution=\"{execution}\""),
                "error_class=\"forbidden\"",
            ],
        )
    };
    run.wait_for(
        "RBACAndPolicies forbidden in the control and in the shadow",
        |r| forbidden(r, "control", "real") > 0 && forbidden(r, "candidate", "dry-run") > 0,
    );
    let refused = refused(plane);
    assert!(
        refused.iter().all(|e| e.resource == "networkpolicies"),
        "only the removed verb is refused: {refused:?}"
    );
    assert!(
        refused.iter().any(common::apiserver::AuditEvent::dry_run)
            && refused.iter().any(|e| !e.dry_run()),
        "both the real and the dry-run write are refused: {refused:?}"
    );
}

/// The samples of `apiserver_flowcontrol_dispatched_requests_total` for `flow_schema`, summed.
fn dispatched(plane: &ControlPlane, flow_schema: &str) -> u64 {
    let label = format!("flow_schema=\"{flow_schema}\"");
    plane
        .kubectl(&["get", "--raw", "/metrics"])
        .lines()
        .filter(|l| l.starts_with("apiserver_flowcontrol_dispatched_requests_total{"))
        .filter(|l| l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The service account's requests the audit log shows complete.
fn completed(plane: &ControlPlane) -> Vec<common::apiserver::AuditEvent> {
    plane
        .audit()
        .into_iter()
        .filter(|e| e.user == SERVICE_ACCOUNT && e.stage == "ResponseComplete")
        .collect()
}

/// The requests the audit log shows complete under the shadow's identity, less those Priority
/// and Fairness rejected (429: audited, never dispatched).
fn served_under_shadow(plane: &ControlPlane) -> u64 {
    let served = completed(plane)
        .iter()
        .filter(|e| !e.impersonated.is_empty() && e.code != 429)
        .count();
    u64::try_from(served).expect("small")
}

/// After `run` stopped: the shadow's requests went under the shadow's identity and flow, the
/// control's under the controller's.
fn shadow_flow(plane: &ControlPlane) {
    let events = completed(plane);
    let (shadow, control): (Vec<_>, Vec<_>) =
        events.iter().partition(|e| !e.impersonated.is_empty());
    let write = |e: &&&common::apiserver::AuditEvent| {
        matches!(e.verb.as_str(), "create" | "update" | "patch" | "delete")
    };
    assert!(
        shadow.iter().all(|e| e.impersonated == SHADOW_IDENTITY),
        "a request impersonated another identity: {:?}",
        shadow.iter().find(|e| e.impersonated != SHADOW_IDENTITY)
    );
    assert!(
        shadow.iter().filter(write).all(|e| e.dry_run()),
        "a real write under the shadow's identity: {:?}",
        shadow.iter().filter(write).find(|e| !e.dry_run())
    );
    assert!(
        shadow.iter().any(|e| e.dry_run()),
        "no dry run under the shadow's identity"
    );
    assert!(
        control.iter().all(|e| !e.dry_run()),
        "a dry run under the controller's identity: {:?}",
        control.iter().find(|e| e.dry_run())
    );
    // Rejected by Priority and Fairness (429) a request is audited but not dispatched. The
    // server may still be finishing the last requests of the stopped process: one in flight is
    // counted as dispatched when it starts and audited complete only when it ends, so both
    // counts are read again until they agree.
    let (mut last, mut served) = (0, 0);
    // The assertion below says what it saw.
    let _ = wait_until(
        "the shadow's requests dispatched",
        Duration::from_mins(2),
        Duration::from_millis(200),
        || {
            last = dispatched(plane, "shadow-reconciler");
            served = served_under_shadow(plane);
            if last == served {
                Ok(())
            } else {
                Err(format!("{last} dispatched, {served} audited complete"))
            }
        },
    );
    assert_eq!(
        last, served,
        "the shadow's FlowSchema dispatched {last} requests; the audit log has {served} of the shadow's identity"
    );
    assert!(
        dispatched(plane, "service-accounts") > 0,
        "the controller's requests in the default service-accounts flow"
    );
    eprintln!(
        "the shadow's flow: {served} requests impersonated and dispatched by FlowSchema shadow-reconciler; {} of the controller's own",
        control.len()
    );
}

/// What the service account used, against what the shipped `ClusterRole`s grant.
fn unused_grants(plane: &ControlPlane) -> Vec<String> {
    let used: BTreeSet<(String, String)> = plane
        .audit()
        .into_iter()
        .filter(|e| e.user == SERVICE_ACCOUNT)
        .map(|e| {
            let resource = if e.subresource.is_empty() {
                e.resource.clone()
            } else {
                format!("{}/{}", e.resource, e.subresource)
            };
            (resource, e.verb.clone())
        })
        .collect();
    let mut unused = Vec::new();
    for name in ["shadow-reconciler-hostedcluster", "shadow-reconciler-addon"] {
        let role = plane.kubectl(&["get", "clusterrole", name, "-o", "json"]);
        let role: serde_json::Value = serde_json::from_str(&role).expect("ClusterRole JSON");
        for rule in role["rules"].as_array().into_iter().flatten() {
            for resource in rule["resources"].as_array().into_iter().flatten() {
                for verb in rule["verbs"].as_array().into_iter().flatten() {
                    let key = (
                        resource.as_str().unwrap_or_default().to_owned(),
                        verb.as_str().unwrap_or_default().to_owned(),
                    );
                    if !used.contains(&key) {
                        unused.push(format!("{}:{}", key.0, key.1));
                    }
                }
            }
        }
    }
    unused
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_as_deployed_under_rbac_follows_the_flag_and_reports_forbidden() {
    let plane = ControlPlane::start();
    plane.apply_deploy();
    let admin = plane.client("shadow-reconciler-tests/population").await;
    population::create_crds(&admin)
        .await
        .expect("CRDs established");
    let planted = population::create(
        &admin,
        population::Faults::of(shadow_reconciler::scenario::Scenario::Mixed),
        HOSTED_CLUSTERS,
        ADDONS,
        &mut Rng::new(7),
    )
    .await
    .expect("population");
    assert_eq!(planted.hosted_clusters, HOSTED_CLUSTERS);
    let data = tempfile::tempdir().expect("temp dir");
    let mut run = start_run(&plane, data.path());

    // 1. Shadow: every object reconciled, nothing refused.
    let objects = u64::try_from(HOSTED_CLUSTERS + ADDONS).expect("small");
    run.wait_for("every object reconciled in shadow", |r| {
        r.sum("shadow_reconciler_reconciles_total", &["mode=\"shadow\""]) >= objects
    });
    let refused_now = refused(&plane);
    assert!(
        refused_now.is_empty(),
        "the shipped RBAC refused {} requests of the service account, e.g. {:?}",
        refused_now.len(),
        refused_now.first()
    );
    assert_eq!(
        run.sum("shadow_reconciler_shadow_guard_refusals_total", &[]),
        0
    );

    // 2. and 3.
    flip_the_flag(&plane, &mut run);
    remove_a_verb(&plane, &mut run);
    drop(run);
    shadow_flow(&plane);
    eprintln!(
        "grants the scenario did not use: {:?}",
        unused_grants(&plane)
    );
}
