//! Leader election by a Lease (`util::election`, `run --leader-elect`) on the simulator: one
//! leader at a time, a first sight never taken for an expiry, a given-up Lease taken at once, and
//! a holder that stops leading when another holds the Lease or when it cannot renew in time.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use shadow_reconciler::sim::SimConfig;
use shadow_reconciler::util::election::{Config, Elector, Lost};

use crate::common;
use crate::common::wait::wait_until_async;

const NAMESPACE: &str = "ops";

fn config(identity: &str, lease_duration: Duration) -> Config {
    Config {
        lease_duration,
        renew_deadline: Duration::from_millis(600),
        retry_period: Duration::from_millis(100),
        ..Config::new(NAMESPACE, "leader", identity)
    }
}

/// A holder whose renew deadline no loaded machine reaches.
fn patient(identity: &str) -> Config {
    Config {
        lease_duration: Duration::from_mins(2),
        renew_deadline: Duration::from_mins(1),
        ..config(identity, Duration::from_mins(2))
    }
}

/// The Lease taken by `intruder` behind its holder's back.
async fn take_the_lease(client: &kube::Client) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let taken = serde_json::json!({"spec": {"holderIdentity": "intruder"}});
    leases
        .patch("leader", &PatchParams::default(), &Patch::Merge(&taken))
        .await
        .expect("take the Lease");
}

/// How the holder `hold` runs stopped leading (bounded for a broken run only).
async fn lost(hold: tokio::task::JoinHandle<Lost>) -> Lost {
    tokio::time::timeout(Duration::from_mins(1), hold)
        .await
        .expect("the holder did not notice")
        .expect("hold() panicked")
}

async fn namespace(client: &kube::Client) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}}))
            .expect("a namespace");
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("create the namespace");
}

async fn holder(client: &kube::Client) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    leases
        .get("leader")
        .await
        .expect("the Lease")
        .spec
        .and_then(|s| s.holder_identity)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leads_a_first_sight_is_no_expiry_and_a_released_lease_is_taken_at_once() {
    let (_sim, client) = common::start_sim(SimConfig::default()).await;
    namespace(&client).await;
    let hour = Duration::from_hours(1);
    let a = Elector::new(client.clone(), config("a", hour));
    let b = Elector::new(client.clone(), config("b", hour));
    assert!(a.try_acquire_or_renew().await.unwrap(), "the Lease created");
    assert!(!b.try_acquire_or_renew().await.unwrap(), "two leaders");
    assert!(a.try_acquire_or_renew().await.unwrap(), "not renewed");
    assert!(!b.try_acquire_or_renew().await.unwrap(), "two leaders");
    assert_eq!(holder(&client).await.as_deref(), Some("a"));

    // Given up: the other takes it at its next try, without waiting for the duration.
    assert!(a.release().await.unwrap());
    assert!(!a.release().await.unwrap(), "released twice");
    assert!(
        b.try_acquire_or_renew().await.unwrap(),
        "a given-up Lease not taken"
    );
    assert_eq!(holder(&client).await.as_deref(), Some("b"));

    // Expiry by the candidate's own clock: a record seen for the first time is not expired,
    // whatever its renewTime says; unchanged for the duration, it is.
    let short = Duration::from_millis(300);
    let c = Elector::new(client.clone(), config("c", short));
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let stale = serde_json::json!({"spec": {
        "holderIdentity": "gone", "leaseDurationSeconds": 1,
        "renewTime": "2000-01-01T00:00:00.000000Z"}});
    leases
        .patch("leader", &PatchParams::default(), &Patch::Merge(&stale))
        .await
        .unwrap();
    assert!(
        !c.try_acquire_or_renew().await.unwrap(),
        "taken at first sight"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(
        c.try_acquire_or_renew().await.unwrap(),
        "an expired Lease not taken"
    );
    let lease = leases.get("leader").await.unwrap().spec.unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some("c"));
    assert_eq!(
        lease.lease_transitions,
        Some(2),
        "a then b then c: two transitions"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holder_stops_leading_when_another_holds_the_lease_or_it_cannot_renew() {
    let (sim, client) = common::start_sim(SimConfig::default()).await;
    namespace(&client).await;
    // A renew deadline no loaded machine reaches: the holder must see the intruder.
    let a = Elector::new(client.clone(), patient("a"));
    a.acquire().await;
    // Taken behind its back (as after a partition longer than the duration).
    take_the_lease(&client).await;
    let hold = tokio::spawn(async move { a.hold().await });
    assert_eq!(lost(hold).await, Lost::TakenBy("intruder".into()));

    // The API server gone: the holder stops leading once its renew deadline has passed.
    let b = Elector::new(
        common::client_for(&sim, |_| {}),
        config("b", Duration::from_secs(5)),
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    leases
        .patch(
            "leader",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"spec": {"holderIdentity": null}})),
        )
        .await
        .unwrap();
    b.acquire().await;
    let started = std::time::Instant::now();
    drop(sim);
    let stopped = tokio::time::timeout(Duration::from_mins(1), b.hold())
        .await
        .expect("the holder did not notice");
    assert!(
        matches!(stopped, Lost::NotRenewed(_)),
        "{stopped:?}: expected a renewal failure"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "stopped leading before the renew deadline: {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_refused_with_409_is_retried_and_the_holder_keeps_leading() {
    let (sim, client) = common::start_sim(SimConfig::default()).await;
    namespace(&client).await;
    let a = Elector::new(client.clone(), patient("a"));
    a.acquire().await;
    // Another writer changes the Lease after each of the holder's next two reads: both
    // renewals built on them are refused with 409 (as when someone annotates the Lease).
    sim.conflict_storm("leases.coordination.k8s.io", Some(NAMESPACE), "leader", 2);
    let hold = tokio::spawn(async move { a.hold().await });
    let codes = common::wait::wait_for_async(
        "two renewals refused with 409, then one that holds",
        Duration::from_mins(1),
        Duration::from_millis(20),
        async || {
            let codes: Vec<u16> = sim.audit(|audit| {
                audit
                    .records()
                    .filter(|r| r.verb == "update" && r.name.as_deref() == Some("leader"))
                    .map(|r| r.code)
                    .collect()
            });
            let refused = codes.iter().filter(|c| **c == 409).count();
            let held_after = codes.iter().skip_while(|c| **c != 409).any(|c| *c == 200);
            if refused >= 2 && held_after {
                Ok(codes)
            } else {
                Err(format!("the Lease's updates answered {codes:?}"))
            }
        },
    )
    .await;
    assert!(
        !hold.is_finished(),
        "the holder stopped leading on a conflict ({codes:?}): {:?}",
        hold.await
    );
    assert_eq!(holder(&client).await.as_deref(), Some("a"));

    // Then the Lease is taken: the holder names who holds it, not itself.
    take_the_lease(&client).await;
    assert_eq!(lost(hold).await, Lost::TakenBy("intruder".into()));
}

#[test]
fn the_timing_must_let_the_holder_stop_before_another_may_take_over() {
    let base = Config::new(NAMESPACE, "leader", "a");
    assert_eq!(base.validate(), Ok(()));
    for (duration, deadline, retry) in [(10, 10, 2), (15, 10, 10), (15, 20, 2), (15, 10, 0)] {
        let config = Config {
            lease_duration: Duration::from_secs(duration),
            renew_deadline: Duration::from_secs(deadline),
            retry_period: Duration::from_secs(retry),
            ..base.clone()
        };
        let problem = config.validate().unwrap_err();
        assert!(problem.contains("must be shorter than"), "{problem}");
    }
    let unnamed = Config::new(NAMESPACE, "", "a");
    assert!(unnamed.validate().is_err());
}

/// A `run --leader-elect` replica on the simulator of `kubeconfig`, serving on `port`, as pod
/// `pod`, writing the dataset `data` (shared, as the overlay's volume), retrying every second.
/// Nothing here waits for the Lease to expire (a leader gives it up, or an intruder takes it),
/// so its duration and the renew deadline are long: a leader on a loaded machine whose renewals
/// stall for a few seconds keeps it.
fn replica(
    kubeconfig: &std::path::Path,
    port: u16,
    pod: &str,
    data: &std::path::Path,
) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args([
            "run",
            "--reconciler",
            "hostedcluster",
            "--no-flag-watch",
            "--leader-elect",
            "--leader-elect-namespace",
            "default",
            "--leader-elect-lease-duration",
            "30s",
            "--leader-elect-renew-deadline",
            "20s",
            "--leader-elect-retry-period",
            "1s",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--parquet-dir",
            data.to_str().expect("a UTF-8 path"),
        ])
        .env("KUBECONFIG", kubeconfig)
        .env("POD_NAME", pod)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start run")
}

/// The Lease `run` leads by, in `default`: its holder and transitions.
async fn run_lease(client: &kube::Client) -> (String, i32) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    match leases
        .get_opt("shadow-reconciler")
        .await
        .expect("read the Lease")
    {
        Some(Lease {
            spec: Some(spec), ..
        }) => (
            spec.holder_identity.unwrap_or_default(),
            spec.lease_transitions.unwrap_or(0),
        ),
        _ => (String::new(), 0),
    }
}

/// Polls `done` every 100 ms for a minute at most.
async fn within_a_minute(
    what: &str,
    done: impl AsyncFnMut() -> Result<(), String>,
) -> Result<(), String> {
    wait_until_async(
        what,
        Duration::from_mins(1),
        Duration::from_millis(100),
        done,
    )
    .await
}

/// Whether the run Lease is held by a process of `pod`: a wait's probe.
async fn led_by(client: &kube::Client, pod: &str) -> Result<(), String> {
    let (holder, _) = run_lease(client).await;
    if holder.starts_with(&format!("{pod}_")) {
        Ok(())
    } else {
        Err(format!("held by {holder:?}"))
    }
}

fn stderr_of(child: &mut std::process::Child) -> String {
    let mut logs = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("piped"), &mut logs)
        .expect("read stderr");
    logs
}

fn signal(child: &std::process::Child, signal: &str) {
    let sent = std::process::Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
}

/// Two replicas of `run --leader-elect` sharing a dataset directory: one leads (reconciles, gauge
/// 1), the other stands by (ready, gauge 0, reconciles nothing); on SIGTERM the leader gives the
/// Lease up and exits 0, and the other takes over (waiting for the dataset the first commits) and
/// reconciles; a leader whose Lease is taken exits 1, says why, and commits its records. The
/// dataset holds exactly the records both accepted, none twice.
#[test]
fn replicas_of_run_lead_one_at_a_time_hand_over_on_sigterm_and_exit_when_the_lease_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (mut server, _stdout, _) = crate::cli::sim_serve(&kubeconfig);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = runtime.block_on(crate::cli::cluster_with_a_failing_hosted_cluster(
        &kubeconfig,
    ));
    let data = dir.path().join("data");
    let (port_a, port_b) = (common::free_port(), common::free_port());
    let mut a = replica(&kubeconfig, port_a, "pod-a", &data);
    runtime.block_on(async {
        let led = within_a_minute("pod-a to lead", async || led_by(&client, "pod-a").await).await;
        assert!(led.is_ok(), "the first replica did not lead: {led:?}");
        assert!(crate::cli::reconciled(&client, "default", "beta", true).await);
    });
    let mut b = replica(&kubeconfig, port_b, "pod-b", &data);
    let (addr_a, addr_b) = (format!("127.0.0.1:{port_a}"), format!("127.0.0.1:{port_b}"));
    runtime.block_on(async {
        let standing_by = within_a_minute("pod-b standing by", async || {
            let answer = common::http_get(&addr_b, "/readyz");
            if answer.contains("ready: standing by for the leader Lease default/shadow-reconciler")
            {
                Ok(())
            } else {
                Err(answer.lines().last().unwrap_or_default().to_owned())
            }
        })
        .await;
        assert!(
            standing_by.is_ok(),
            "the second replica is not standing by: {standing_by:?}: {}",
            common::http_get(&addr_b, "/readyz")
        );
    });
    assert!(common::http_get(&addr_a, "/metrics").contains("shadow_reconciler_leader 1"));
    assert!(common::http_get(&addr_b, "/metrics").contains("shadow_reconciler_leader 0"));

    signal(&a, "-TERM");
    let code = a.wait().unwrap().code();
    let logs_a = stderr_of(&mut a);
    assert_eq!(code, Some(0), "{logs_a}");
    assert!(logs_a.contains("gave the Lease up"), "{logs_a}");
    runtime.block_on(async {
        let took_over =
            within_a_minute("pod-b to lead", async || led_by(&client, "pod-b").await).await;
        assert!(
            took_over.is_ok(),
            "the second replica did not take over: {took_over:?}"
        );
        assert_eq!(run_lease(&client).await.1, 1, "one transition");
        crate::cli::failing_hosted_cluster(&client, "default", "gamma").await;
        assert!(crate::cli::reconciled(&client, "default", "gamma", true).await);
        // The Lease taken behind the leader's back.
        let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
        let taken = serde_json::json!({"spec": {"holderIdentity": "intruder"}});
        leases
            .patch(
                "shadow-reconciler",
                &PatchParams::default(),
                &Patch::Merge(&taken),
            )
            .await
            .unwrap();
    });
    let code = b.wait().unwrap().code();
    let logs_b = stderr_of(&mut b);
    assert_eq!(code, Some(1), "{logs_b}");
    assert!(
        logs_b.contains("lost the leader Lease (the Lease is held by intruder)"),
        "{logs_b}"
    );
    signal(&server, "-TERM");
    assert_eq!(server.wait().unwrap().code(), Some(0));
    let mut accepted = 0;
    for (pod, logs) in [("a", &logs_a), ("b", &logs_b)] {
        let [taken, written, dropped, errors, lost] = common::parquet_closing_line(logs);
        assert!(taken > 0, "replica {pod} recorded nothing:\n{logs}");
        assert_eq!(
            (written, dropped, errors, lost),
            (taken, 0, 0, 0),
            "replica {pod}:\n{logs}"
        );
        accepted += taken;
    }
    let (rows, distinct) = common::reconciles_in(&data);
    assert_eq!(distinct, rows, "a reconcile recorded twice");
    assert_eq!(
        rows, accepted,
        "the dataset's reconciles are not the ones accepted"
    );
}
