//! The shadow under load on a real kube-apiserver: does turning it on cost the control anything?
//!
//! Each case runs on a fresh etcd and kube-apiserver (v1.37.2, `scripts/kube-apiserver.sh`) whose
//! concurrency is small (`--max-requests-inflight=10 --max-mutating-requests-inflight=5`: 15 seats
//! that API Priority and Fairness shares between its priority levels), with `deploy/` applied as
//! `tests/system/e2e_run.rs` does (the RBAC, and `components/shadow-flow`: the shadow's own
//! identity, flow schema and rejecting priority level). `run --reconciler hostedcluster` is
//! authenticated as the deployment's service account (not an exempt admin: its requests go through
//! Priority and Fairness), with `--shadow-as`, its default budget (10 requests a second, burst
//! 20) and every object in the paired sample (`--paired-sample-percent 100`: the most the shadow
//! sends under its rate, where the default would compare a fifth), over a `missing-secrets`
//! population in which every object is touched (annotated) again and again while it runs, so its
//! ten workers always have work: the server's seats, not the population, bound the control's
//! throughput. `run`'s kube client has no client-side rate
//! limiter (kube-rs has none), so the saturated budget is the server's.
//!
//! Cases, interleaved in rounds: `off` (no shadow), `shadow`, and `shadow, 429s forced` (the
//! shadow's priority level given no seat: its requests are rejected with 429s, but one at a time
//! when none of them is executing, the server's guard against starvation; the shadow must meet
//! 429s, pause and leave the control alone). Measured from `run`'s Parquet dataset over the
//! window after a warm-up: control reconciles per second, the p50 and p99 of the control's latency
//! (its steps' wall time in a reconcile) and of the whole reconcile (what a worker is held: the
//! candidate's inline work included); from its metrics: pauses, comparisons skipped by budget
//! and by pause; from the API server: the shadow's requests dispatched and rejected, and any
//! control request rejected. Nothing recorded lost: after SIGTERM, `run`'s `parquet:` line must
//! say 0 dropped, 0 write errors, 0 lost, every record accepted written, and the dataset must hold
//! them all, at least as many as `run`'s metrics counted before the SIGTERM.
//!
//! `cargo bench --bench load_apiserver`: three rounds of 300 HostedClusters, 60 s each after a 10 s
//! warm-up. As a test (`cargo test --benches`), one round of 20 for 4 s, to keep it working.
//! `docs/performance.md` ("Under load") records the results.

// Figures: counts far below 2^52, durations in µs far below i64's range.
#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

#[path = "../tests/common/apiserver.rs"]
mod apiserver;
#[path = "../tests/common/wait.rs"]
mod wait;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use apiserver::ControlPlane;
use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMicrosecondType};
use shadow_reconciler::dataset::{Location, reader};

const NAMESPACE: &str = "shadow-reconciler";
const SHADOW_IDENTITY: &str = "system:serviceaccount:shadow-reconciler:shadow-reconciler-shadow";
/// The server's seats: small, so the control saturates them.
const SEATS: [&str; 2] = [
    "--max-requests-inflight=10",
    "--max-mutating-requests-inflight=5",
];
/// A bound for a broken run, not a speed target.
const PATIENCE: Duration = Duration::from_mins(3);

#[derive(Clone, Copy, PartialEq)]
enum Case {
    Off,
    Shadow,
    Forced,
}

impl Case {
    fn label(self) -> &'static str {
        match self {
            Case::Off => "off",
            Case::Shadow => "shadow",
            Case::Forced => "shadow, 429s forced",
        }
    }
}

/// One case's figures.
#[derive(Default)]
struct Figures {
    /// Control reconciles per second in the window.
    throughput: f64,
    /// In the window, µs: the control's latency p50, p99; the whole reconcile's p50, p99.
    control: (i64, i64),
    whole: (i64, i64),
    reconciles: usize,
    compared: usize,
    /// From `run`'s metrics at the end: pauses, comparisons skipped for budget, for a pause.
    pauses: u64,
    skipped_budget: u64,
    skipped_paused: u64,
    /// From the API server: the shadow's flow dispatched, rejected; control requests rejected.
    shadow_dispatched: u64,
    shadow_rejected: u64,
    control_rejected: u64,
    /// The shadow's priority level's seats at the end: nominal, current.
    shadow_seats: (u64, u64),
}

/// `run`, killed when dropped.
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
    fn metrics(&self) -> String {
        apiserver::http_exchange(&format!("127.0.0.1:{}", self.port), "GET", "/metrics", "")
            .map(|(_, body)| body)
            .unwrap_or_default()
    }
}

/// The samples of `name` whose labels hold every one of `labels`, summed.
fn sum(text: &str, name: &str, labels: &[&str]) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

fn start_run(plane: &ControlPlane, mode: &str, data: &Path) -> Run {
    let token = plane.service_account_token(NAMESPACE, "shadow-reconciler");
    let kubeconfig = plane.kubeconfig_for("service-account", &token);
    let port = apiserver::free_port();
    let log = plane.dir().join("run.log");
    let child = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args(["run", "--reconciler", "hostedcluster", "--mode", mode])
        .args(["--no-flag-watch", "--log-format", "json", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--parquet-dir")
        .arg(data)
        .args(["--shadow-as", SHADOW_IDENTITY])
        .args(["--paired-sample-percent", "100"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("start run");
    let run = Run { child, port, log };
    let ready = wait::wait_until("run ready", PATIENCE, Duration::from_millis(100), || {
        apiserver::readyz(&format!("127.0.0.1:{port}"))
    });
    if let Err(e) = ready {
        panic!("{e}\nrun: {}", apiserver::tail(&run.log, 20));
    }
    run
}

/// Annotates every HostedCluster, round after round, until `stop`: each object is queued again.
fn touch_until(plane: &ControlPlane, stop: &AtomicBool) {
    let mut round = 0;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        plane.kubectl(&[
            "annotate",
            "hostedclusters.example.shadow-reconciler.io",
            "--all",
            "-A",
            "--overwrite",
            &format!("load.shadow-reconciler.io/round={round}"),
        ]);
    }
}

/// Stops `run` with SIGTERM and returns its `parquet:` line's figures: records accepted, written,
/// dropped, write errors, lost.
fn stop(mut run: Run) -> [u64; 5] {
    let pid = run.child.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status();
    assert!(killed.is_ok_and(|s| s.success()), "kill -TERM {pid}");
    let status = run.child.wait().expect("wait for run");
    let log = std::fs::read_to_string(&run.log).unwrap_or_default();
    assert!(
        status.success(),
        "run exited {status}:\n{}",
        apiserver::tail(&run.log, 30)
    );
    // `parquet: A records accepted, W written to DIR in F files (D dropped, E write errors, L lost)`
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("records accepted"))
        .unwrap_or_else(|| panic!("no parquet summary in run's log:\n{log}"));
    let figure = |word: &str| -> u64 {
        let (head, _) = line
            .split_once(&format!(" {word}"))
            .unwrap_or_else(|| panic!("no {word:?} in {line:?}"));
        head.rsplit([' ', '('])
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no figure before {word:?} in {line:?}"))
    };
    [
        figure("records accepted"),
        figure("written"),
        figure("dropped"),
        figure("write errors"),
        figure("lost"),
    ]
}

/// The reconciles of the dataset: (start µs, whole duration µs, `comparison_skipped`, control µs).
fn reconciles(dir: &Path) -> Vec<(i64, i64, Option<String>, i64)> {
    let parts = reader::parts_at(&Location::Local(dir.to_owned())).expect("the dataset's parts");
    assert!(parts.orphans.is_empty(), "orphans: {:?}", parts.orphans);
    let mut out = Vec::new();
    for (reconciles, steps) in &parts.pairs {
        let mut control: HashMap<String, i64> = HashMap::new();
        for batch in reader::open(steps, &["reconcile_id", "policy", "duration_us"]).expect("steps")
        {
            let batch = batch.expect("a steps batch");
            let id = batch
                .column_by_name("reconcile_id")
                .expect("id")
                .as_string::<i32>();
            let policy = batch
                .column_by_name("policy")
                .expect("policy")
                .as_string::<i32>();
            let us = batch
                .column_by_name("duration_us")
                .expect("us")
                .as_primitive::<Int64Type>();
            for i in (0..batch.num_rows()).filter(|&i| policy.value(i) == "control") {
                *control.entry(id.value(i).to_owned()).or_default() += us.value(i);
            }
        }
        let columns = ["time", "reconcile_id", "duration_us", "comparison_skipped"];
        for batch in reader::open(reconciles, &columns).expect("reconciles") {
            let batch = batch.expect("a reconciles batch");
            let time = batch
                .column_by_name("time")
                .expect("time")
                .as_primitive::<TimestampMicrosecondType>();
            let id = batch
                .column_by_name("reconcile_id")
                .expect("id")
                .as_string::<i32>();
            let us = batch
                .column_by_name("duration_us")
                .expect("us")
                .as_primitive::<Int64Type>();
            let skipped = batch
                .column_by_name("comparison_skipped")
                .expect("skipped")
                .as_string::<i32>();
            for i in 0..batch.num_rows() {
                out.push((
                    time.value(i),
                    us.value(i),
                    skipped.is_valid(i).then(|| skipped.value(i).to_owned()),
                    control.get(id.value(i)).copied().unwrap_or_default(),
                ));
            }
        }
    }
    out
}

fn percentiles(mut values: Vec<i64>) -> (i64, i64) {
    values.sort_unstable();
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

/// A fresh control plane with `deploy/` applied and the population created; in case `Forced`,
/// the shadow's priority level without a seat.
fn prepare(case: Case, hosted_clusters: usize) -> ControlPlane {
    let plane = ControlPlane::start_with(&SEATS);
    plane.apply_deploy();
    if case == Case::Forced {
        plane.kubectl(&[
            "patch",
            "prioritylevelconfiguration",
            "shadow-reconciler",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"limited":{"nominalConcurrencyShares":0,"lendablePercent":0}}}"#,
        ]);
    }
    let populate = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args([
            "sim",
            "populate",
            "--scenario",
            "missing-secrets",
            "--seed",
            "1",
        ])
        .args([
            "--hosted-clusters",
            &hosted_clusters.to_string(),
            "--kubeconfig",
        ])
        .arg(plane.kubeconfig())
        .output()
        .expect("sim populate");
    assert!(
        populate.status.success(),
        "sim populate: {}",
        String::from_utf8_lossy(&populate.stderr)
    );
    plane
}

fn case(case: Case, hosted_clusters: usize, (warm_up, window): (Duration, Duration)) -> Figures {
    let plane = prepare(case, hosted_clusters);
    let data = tempfile::tempdir().expect("tempdir");
    let mode = if case == Case::Off { "off" } else { "shadow" };
    let run = start_run(&plane, mode, data.path());
    let stop_touching = AtomicBool::new(false);
    let from = std::thread::scope(|scope| {
        let handle = scope.spawn(|| touch_until(&plane, &stop_touching));
        std::thread::sleep(warm_up);
        let from = SystemTime::now();
        std::thread::sleep(window);
        stop_touching.store(true, Ordering::Relaxed);
        handle.join().expect("the touching thread");
        from
    });
    let metrics = run.metrics();
    let apf = plane.kubectl(&["get", "--raw", "/metrics"]);
    let counted = sum(&metrics, "shadow_reconciler_reconciles_total", &[]);
    let [accepted, written, dropped, errors, lost] = stop(run);
    let records = reconciles(data.path());
    assert!(
        (dropped, errors, lost) == (0, 0, 0)
            && records.len() as u64 == written
            && written == accepted
            && accepted >= counted,
        "records lost ({}): {accepted} accepted, {written} written, {dropped} dropped, {errors} write errors, {lost} lost; {} in the dataset; {counted} counted before SIGTERM",
        case.label(),
        records.len()
    );
    // The window, in µs since the epoch (the records' `time`: when a reconcile started).
    let us = |at: SystemTime| {
        at.duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
    };
    let (start_us, end_us) = (us(from), us(from + window));
    let inside: Vec<_> = records
        .iter()
        .filter(|r| (start_us..end_us).contains(&r.0))
        .collect();
    assert!(
        !inside.is_empty(),
        "no reconcile in the window ({})",
        case.label()
    );
    Figures {
        throughput: inside.len() as f64 / window.as_secs_f64(),
        control: percentiles(inside.iter().map(|r| r.3).collect()),
        whole: percentiles(inside.iter().map(|r| r.1).collect()),
        reconciles: inside.len(),
        compared: if case == Case::Off {
            0
        } else {
            inside.iter().filter(|r| r.2.is_none()).count()
        },
        pauses: sum(&metrics, "shadow_reconciler_shadow_pauses_total", &[]),
        skipped_budget: sum(
            &metrics,
            "shadow_reconciler_comparisons_skipped_total",
            &["reason=\"budget\""],
        ),
        skipped_paused: sum(
            &metrics,
            "shadow_reconciler_comparisons_skipped_total",
            &["reason=\"paused\""],
        ),
        shadow_dispatched: sum(
            &apf,
            "apiserver_flowcontrol_dispatched_requests_total",
            &["flow_schema=\"shadow-reconciler\""],
        ),
        shadow_rejected: sum(
            &apf,
            "apiserver_flowcontrol_rejected_requests_total",
            &["flow_schema=\"shadow-reconciler\""],
        ),
        shadow_seats: (
            sum(
                &apf,
                "apiserver_flowcontrol_nominal_limit_seats",
                &["priority_level=\"shadow-reconciler\""],
            ),
            sum(
                &apf,
                "apiserver_flowcontrol_current_limit_seats",
                &["priority_level=\"shadow-reconciler\""],
            ),
        ),
        control_rejected: sum(
            &apf,
            "apiserver_flowcontrol_rejected_requests_total",
            &["flow_schema=\"service-accounts\""],
        ),
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (rounds, hosted_clusters, times) = if full {
        (3, 300, (Duration::from_secs(10), Duration::from_mins(1)))
    } else {
        (1, 20, (Duration::from_secs(2), Duration::from_secs(4)))
    };
    println!(
        "run --reconciler hostedcluster under load on kube-apiserver {} ({}), {hosted_clusters} HostedClusters touched without pause, {rounds} rounds of {} s after {} s",
        apiserver::KUBE_VERSION,
        SEATS.join(" "),
        times.1.as_secs(),
        times.0.as_secs()
    );
    let cases = [Case::Off, Case::Shadow, Case::Forced];
    let mut ratios: HashMap<&str, Vec<(f64, f64)>> = HashMap::new();
    for round in 1..=rounds {
        let figures: Vec<Figures> = cases
            .iter()
            .map(|&c| case(c, hosted_clusters, times))
            .collect();
        for (c, f) in cases.iter().zip(&figures) {
            println!(
                "round {round}, {}: {} reconciles ({:.1}/s), {} compared; control p50 {:.1} ms p99 {:.1} ms; whole reconcile p50 {:.1} ms p99 {:.1} ms; pauses {}, skipped: budget {} paused {}; shadow flow dispatched {} rejected {} (seats: {} nominal, {} at the end); control rejected {}",
                c.label(),
                f.reconciles,
                f.throughput,
                f.compared,
                f.control.0 as f64 / 1e3,
                f.control.1 as f64 / 1e3,
                f.whole.0 as f64 / 1e3,
                f.whole.1 as f64 / 1e3,
                f.pauses,
                f.skipped_budget,
                f.skipped_paused,
                f.shadow_dispatched,
                f.shadow_rejected,
                f.shadow_seats.0,
                f.shadow_seats.1,
                f.control_rejected,
            );
        }
        let off = &figures[0];
        for (c, f) in cases.iter().zip(&figures).skip(1) {
            ratios.entry(c.label()).or_default().push((
                f.throughput / off.throughput,
                f.control.1 as f64 / off.control.1 as f64,
            ));
        }
        let forced = &figures[2];
        assert!(
            forced.shadow_rejected > 0 && forced.pauses > 0 && forced.control_rejected == 0,
            "with the shadow's seats taken away: {} shadow requests rejected, {} pauses, {} control requests rejected",
            forced.shadow_rejected,
            forced.pauses,
            forced.control_rejected
        );
    }
    for c in &cases[1..] {
        let r = &ratios[c.label()];
        println!(
            "{} / off, median of {rounds} rounds: throughput {:.3}, control p99 {:.3}",
            c.label(),
            median(r.iter().map(|x| x.0).collect()),
            median(r.iter().map(|x| x.1).collect()),
        );
    }
}
