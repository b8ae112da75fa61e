//! The standalone overlay's two replicas on the real node (run from `node_deploy`'s standalone
//! scenario, on its deployment): one leads by the Lease and the other stands by (the real
//! Prometheus sees `shadow_reconciler_leader` 1 and 0); the leader's pod deleted (SIGTERM) gives
//! the Lease up, with every record it accepted committed, and the standby takes it; the next
//! leader's process killed (SIGKILL, no goodbye) hands over once the Lease has gone unrenewed for
//! its duration; the audit log shows the leaders' writes one after the other, never interleaved.
//! The times are printed; only a broken run exceeds their bounds, however loaded the node.

use std::process::{Child, Stdio};
use std::time::Duration;

use crate::common;
use crate::node_deploy::{NAMESPACE, Prometheus, SERVICE_ACCOUNT, eventually, read_followed};
use common::node::Node;

/// The overlay's Lease and timing (`run`'s defaults).
const LEASE: &str = "shadow-reconciler";
const LEASE_DURATION: Duration = Duration::from_secs(15);
const RETRY_PERIOD: Duration = Duration::from_secs(2);

/// The Lease's holder as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Holder {
    /// `POD_NAME` and the process's random suffix.
    pub identity: String,
    /// The pod's name.
    pub pod: String,
    /// `acquireTime` and `renewTime`, µs since the Unix epoch.
    pub acquired_us: i64,
    pub renewed_us: i64,
}

/// The Lease's holder, or `None` while it has none.
pub(crate) fn holder(node: &Node) -> Option<Holder> {
    let out = node.kubectl_output(&[
        "get",
        "lease",
        LEASE,
        "-n",
        NAMESPACE,
        "-o",
        "jsonpath={.spec.holderIdentity} {.spec.acquireTime} {.spec.renewTime}",
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut fields = text.split(' ');
    let identity = fields.next().filter(|i| !i.is_empty())?.to_owned();
    let mut time = || {
        fields
            .next()
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
            .map_or(0, k8s_openapi::jiff::Timestamp::as_microsecond)
    };
    let (acquired_us, renewed_us) = (time(), time());
    let pod = identity.rsplit_once('_').map(|(pod, _)| pod.to_owned())?;
    Some(Holder {
        identity,
        pod,
        acquired_us,
        renewed_us,
    })
}

fn now_us() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_microsecond()
}

fn seconds(us: i64) -> f64 {
    Duration::from_micros(us.unsigned_abs()).as_secs_f64() * if us < 0 { -1.0 } else { 1.0 }
}

/// Waits until another process than `previous` holds the Lease; the new holder.
fn next_holder(node: &Node, previous: &Holder) -> Holder {
    let mut found = None;
    eventually(
        &format!(
            "another replica taking the Lease from {}",
            previous.identity
        ),
        || {
            found = holder(node).filter(|h| h.identity != previous.identity);
            found.is_some()
        },
        || pods(node),
    );
    found.expect("found")
}

fn pods(node: &Node) -> String {
    node.kubectl(&["get", "pods", "-n", NAMESPACE, "-o", "wide"])
}

/// Follows the log of `pod`'s container until it exits.
pub(crate) fn follow_pod_log(node: &Node, pod: &str) -> Child {
    node.kubectl_command()
        .args(["logs", "-f", "-n", NAMESPACE, pod])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl logs -f")
}

/// What the hand-overs left: the leaders in order, and the closing line of the one stopped
/// gracefully.
pub(crate) struct HandOvers {
    pub leaders: Vec<Holder>,
    pub graceful: [u64; 5],
}

/// One replica leading, the other standing by; the leader's pod deleted; the next leader's
/// process killed. `reconciled(name)` creates a `HostedCluster` and waits until it is reconciled.
pub(crate) fn hand_over(
    node: &Node,
    prometheus: &Prometheus,
    reconciled: impl Fn(&str),
) -> HandOvers {
    eventually(
        "one replica leading and one standing by, as Prometheus sees them",
        || {
            prometheus.discover(node);
            // Counts: whole numbers, exact in a float.
            (prometheus.sum("count(shadow_reconciler_leader)") - 2.0).abs() < 0.5
                && (prometheus.sum("sum(shadow_reconciler_leader)") - 1.0).abs() < 0.5
        },
        || {
            format!(
                "{:?}\n{}",
                prometheus.query("shadow_reconciler_leader"),
                pods(node)
            )
        },
    );
    let first = holder(node).expect("a leader");

    // A graceful stop: the pod deleted, as a rolling update or a drain does.
    let log = follow_pod_log(node, &first.pod);
    let deleted = now_us();
    node.kubectl(&["delete", "pod", "-n", NAMESPACE, &first.pod, "--wait=false"]);
    let second = next_holder(node, &first);
    let log = read_followed(log);
    let graceful = common::parquet_closing_line(&log);
    let gave_up = seconds(second.acquired_us - deleted);
    eprintln!(
        "hand-over on SIGTERM: {} took the Lease {gave_up:.1} s after {}'s pod was deleted",
        second.identity, first.identity
    );
    // Given up, not expired: the stopped leader says so (the time above includes kubectl, the
    // SIGTERM, the stop of the controllers within their grace and the standby's next try, all
    // of which a loaded node stretches).
    assert!(
        log.contains("gave the Lease up"),
        "the Lease was not given up (taken after {gave_up:.1} s):\n{log}"
    );
    reconciled("after-handover");

    // A crash: the leader's process killed, nothing said.
    let container = node.kubectl(&[
        "get",
        "pod",
        "-n",
        NAMESPACE,
        &second.pod,
        "-o",
        "jsonpath={.status.containerStatuses[0].containerID}",
    ]);
    let id = container.trim().trim_start_matches("containerd://");
    let out = node.ctr(&["tasks", "kill", "--signal", "SIGKILL", id]);
    assert!(
        out.status.success(),
        "ctr tasks kill {id}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Once ctr has answered, the signal is delivered: the process renews no more. (Stamped
    // before ctr, the time ctr takes to start would count against the bound, and a renewal
    // could land after the stamp.)
    let killed = now_us();
    // Read after the kill: the last renewal the killed process made.
    let last_renewal = holder(node).filter(|h| h.identity == second.identity);
    let third = next_holder(node, &second);
    let after_kill = seconds(third.acquired_us - killed);
    eprintln!(
        "hand-over on SIGKILL: {} took the Lease {after_kill:.1} s after {} was killed",
        third.identity, second.identity
    );
    if let Some(renewal) = last_renewal {
        let waited = seconds(third.acquired_us - renewal.renewed_us);
        eprintln!("  {waited:.1} s after the killed leader's last renewal");
        assert!(
            waited >= LEASE_DURATION.as_secs_f64(),
            "taken {waited:.1} s after the last renewal, before the Lease's duration"
        );
    }
    // Expected within the duration and two retry periods of the kill, plus the standby's
    // requests and timer lateness; a bound for a broken run only (a standby that never takes
    // an expired Lease, or one that waits twice), not a measure of a loaded node's speed.
    let bound = 2 * LEASE_DURATION + 2 * RETRY_PERIOD;
    assert!(
        after_kill <= bound.as_secs_f64(),
        "the Lease was taken {after_kill:.1} s after the kill; a standby takes an expired Lease at its next try (bound {bound:?})"
    );
    reconciled("after-crash");
    HandOvers {
        leaders: vec![first, second, third],
        graceful,
    }
}

/// The audit log's persisted writes of the replicas (the Lease aside: it is how they agree),
/// in the order the API server received them: one leader's after another's, in the order the
/// Lease went from pod to pod, and no pod that never led wrote. The leaders the test saw hold
/// the Lease in that order. (The order comes from the Lease's own writes, not from the holders
/// sampled: a standby may lead for a moment between the last leader's release and its own
/// SIGTERM when the deployment scales to zero.)
pub(crate) fn writes_never_interleave(node: &Node, leaders: &[Holder]) {
    let mut persisted: Vec<_> = node
        .audit()
        .into_iter()
        .filter(|e| e.user == SERVICE_ACCOUNT && e.is_write() && e.succeeded() && !e.dry_run())
        .collect();
    persisted.sort_by_key(|e| e.received_us);
    let unnamed = persisted.iter().filter(|e| e.pod.is_empty()).count();
    assert_eq!(
        unnamed, 0,
        "writes without the pod's name: a token not bound to a pod?"
    );
    // A term per block of Lease writes (its acquisition, renewals and release) by one pod.
    let terms = blocks(
        persisted
            .iter()
            .filter(|e| e.resource == "leases" && e.name == LEASE),
    );
    let order = blocks(persisted.iter().filter(|e| e.resource != "leases"));
    let led: Vec<String> = leaders.iter().map(|h| h.pod.clone()).collect();
    let mut seen = led.clone();
    seen.dedup();
    assert!(
        is_subsequence(&seen, &terms),
        "the leaders seen, {led:?}, did not hold the Lease in that order: its writes went {terms:?}"
    );
    assert!(
        is_subsequence(&order, &terms),
        "the pods' persisted writes, in the order received ({order:?}), are not one leader's after another's in the Lease's order ({terms:?})"
    );
    assert!(order.len() >= 2, "fewer than two leaders wrote: {order:?}");
    eprintln!(
        "audit: {} persisted writes of the replicas, by {order:?} one after the other; the Lease went {terms:?}",
        persisted.iter().filter(|e| e.resource != "leases").count()
    );
}

/// The pods of `writes`, in order, each run of one pod's writes once.
fn blocks<'a>(writes: impl Iterator<Item = &'a common::apiserver::AuditEvent>) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    for write in writes {
        if order.last() != Some(&write.pod) {
            order.push(write.pod.clone());
        }
    }
    order
}

/// Whether `part` is `whole` with some of its items left out, the rest in order.
fn is_subsequence(part: &[String], whole: &[String]) -> bool {
    let mut rest = whole.iter();
    part.iter().all(|p| rest.any(|w| w == p))
}
