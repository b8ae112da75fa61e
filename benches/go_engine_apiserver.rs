//! The Go package's cost in a Go controller on a real kube-apiserver: the HostedCluster example
//! controller (`sdk/go/examples/hostedcluster`: controller-runtime, informers, its legacy code
//! per operation beside the phased code) reconciling a population of HostedClusters, with
//! `--mode off` and with `--mode shadow`, in interleaved pairs, each run on a fresh control
//! plane (etcd and kube-apiserver on loopback, as `tests/system/go_controller.rs`) with `ingest`
//! as the sidecar its spans go to. The population never settles on a bare kube-apiserver (no
//! controller gives the public endpoint's Service an address, so `PublicEndpointExposed` asks to
//! be requeued): the controller reconciles every HostedCluster again and again, its steady
//! state, which is what is measured.
//!
//! The shadow's settings: every reconcile compared (`--shadow-qps unlimited`, so the budget skips
//! none and the figure is the comparison's whole cost) and the legacy code paired with the
//! phased code for the default share of objects (`--paired-sample-percent 20`, the default with a
//! rate). Measured over a window of the steady state (from when the controller has reconciled
//! twice as many times as there are objects, past the creation's burst), per reconcile: the
//! controller process's CPU (user + system of every thread, from `/proc/PID/stat`; etcd,
//! kube-apiserver and `ingest` are not counted) and its API requests
//! (`rest_client_requests_total` on its `/metrics`, the control's and the candidate's).
//!
//! `cargo bench --bench go_engine_apiserver`: five pairs of 200 HostedClusters, a window of 60
//! seconds (longer if it has not seen as many reconciles as objects). Run as a test
//! (`cargo test --benches`), one pair of 20 and 10 seconds. Needs Go (the example is built by `go build`), the
//! kube-apiserver build of `scripts/kube-apiserver.sh` (`SHADOW_RECONCILER_KUBE_BIN_DIR`).

#[path = "../tests/common/apiserver.rs"]
mod apiserver;
#[path = "common/cpu.rs"]
mod cpu;
#[path = "../tests/common/go_example.rs"]
mod go_example;
#[path = "../tests/common/wait.rs"]
mod wait;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use apiserver::{ControlPlane, http_exchange, readyz, tail};
use wait::wait_until;

/// The controller's reconciles on its `/metrics` (every result).
const RECONCILES: &str = "controller_runtime_reconcile_total{";
/// A bound for a broken run, not a speed target.
const PATIENCE: Duration = Duration::from_mins(10);

/// A child killed when dropped (a failed run leaves no process behind).
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One run's figures.
struct Run {
    reconciles: f64,
    cpu: Duration,
    requests: f64,
}

impl Run {
    fn cpu_per_reconcile(&self) -> f64 {
        self.cpu.as_secs_f64() / self.reconciles
    }
}

/// The sum of a counter's series on a `/metrics` page (every label set whose line starts with
/// `prefix`).
fn counter(page: &str, prefix: &str) -> f64 {
    page.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `ingest` on `grpc`, serving its metrics on `listen`, once it is ready.
fn start_ingest(dir: &Path, grpc: u16, listen: &str) -> Process {
    let log = dir.join("ingest.log");
    let ingest = Process(
        binary()
            .args(["ingest", "--plan", "hostedcluster", "--log-format", "json"])
            .args(["--otlp-grpc", &format!("127.0.0.1:{grpc}")])
            .args(["--otlp-http", "127.0.0.1:0", "--listen", listen])
            .arg("--parquet-dir")
            .arg(dir.join("data"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("ingest.log"))
            .spawn()
            .expect("start ingest"),
    );
    let ready = wait_until("ingest ready", PATIENCE, Duration::from_millis(50), || {
        readyz(listen)
    });
    if let Err(e) = ready {
        panic!("{e}\ningest: {}", tail(&log, 20));
    }
    ingest
}

/// The example controller in `mode` on a fresh control plane's population, over `window` of its
/// steady state.
fn run(mode: &str, hosted_clusters: usize, window: Duration) -> Run {
    let plane = ControlPlane::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let populate = binary()
        .args(["sim", "populate", "--scenario", "healthy", "--seed", "1"])
        .args(["--hosted-clusters", &hosted_clusters.to_string()])
        .arg("--kubeconfig")
        .arg(plane.kubeconfig())
        .output()
        .expect("run sim populate");
    assert!(
        populate.status.success(),
        "sim populate: {}",
        String::from_utf8_lossy(&populate.stderr)
    );
    let (grpc, listen, metrics) = (free_port(), free_port(), free_port());
    let listen = format!("127.0.0.1:{listen}");
    let metrics = format!("127.0.0.1:{metrics}");
    let _ingest = start_ingest(dir.path(), grpc, &listen);
    let plan = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/plans/hostedcluster.yaml");
    let log = dir.path().join("controller.log");
    let controller = Process(
        Command::new(go_example::binary())
            .arg("--kubeconfig")
            .arg(plane.kubeconfig())
            .arg("--plan")
            .arg(plan)
            .args(["--mode", mode, "--metrics-bind-address", &metrics])
            .args(["--shadow-qps", "unlimited", "--paired-sample-percent", "20"])
            .env(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{grpc}"),
            )
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("controller.log"))
            .spawn()
            .expect("start the Go example controller"),
    );
    steady(&metrics, hosted_clusters, &log);
    let pid = controller.0.id();
    let (cpu, page) = (cpu::of(pid), page_of(&metrics));
    let reconciled = counter(&page, RECONCILES);
    std::thread::sleep(window);
    // At least as many reconciles as objects in the window, however slow the machine: a
    // loaded one stretches the window rather than measuring a handful of reconciles.
    #[allow(clippy::cast_precision_loss)] // a few hundred objects
    let objects = hosted_clusters as f64;
    let (end, last) = wait_until(
        &format!("as many reconciles as objects after the window of {window:?}"),
        PATIENCE,
        Duration::from_millis(200),
        || {
            let (end, last) = (cpu::of(pid), page_of(&metrics));
            let in_window = counter(&last, RECONCILES) - reconciled;
            if in_window >= objects {
                Ok((end, last))
            } else {
                Err(format!(
                    "{in_window} reconciles of {hosted_clusters} objects"
                ))
            }
        },
    )
    .unwrap_or_else(|e| {
        panic!(
            "fewer reconciles than objects in the steady state: {e}\n{}",
            tail(&log, 30)
        )
    });
    drop(controller);
    drop(plane); // stopped (and its processes reaped) outside the next run's window
    let delta = |prefix: &str| counter(&last, prefix) - counter(&page, prefix);
    Run {
        reconciles: delta(RECONCILES),
        cpu: end.saturating_sub(cpu),
        requests: delta("rest_client_requests_total{"),
    }
}

fn page_of(metrics: &str) -> String {
    http_exchange(metrics, "GET", "/metrics", "")
        .map(|(_, body)| body)
        .unwrap_or_default()
}

/// Waits until the controller has reconciled twice as many times as there are objects.
fn steady(metrics: &str, objects: usize, log: &Path) {
    #[allow(clippy::cast_precision_loss)] // a few hundred objects
    let twice = 2.0 * objects as f64;
    let steady = wait_until(
        "twice as many reconciles as objects",
        PATIENCE,
        Duration::from_millis(200),
        || {
            let reconciles = counter(&page_of(metrics), RECONCILES);
            if reconciles >= twice {
                Ok(())
            } else {
                Err(format!("{reconciles} reconciles of {objects} objects"))
            }
        },
    );
    if let Err(e) = steady {
        panic!("{e}\n{}", tail(log, 30));
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (pairs, hosted_clusters, window) = if full {
        (5, 200, Duration::from_mins(1))
    } else {
        (1, 20, Duration::from_secs(10))
    };
    println!(
        "the Go example controller on kube-apiserver {}, {hosted_clusters} HostedClusters (healthy), {pairs} interleaved pairs, a window of {} s",
        apiserver::KUBE_VERSION,
        window.as_secs()
    );
    let mut ratios = Vec::new();
    for pair in 1..=pairs {
        // Alternating which mode runs first, so a drift of the machine favours neither.
        let order = if pair % 2 == 1 {
            ["off", "shadow"]
        } else {
            ["shadow", "off"]
        };
        let mut runs = order.map(|mode| (mode, run(mode, hosted_clusters, window)));
        runs.sort_by_key(|(mode, _)| *mode);
        let [(_, off), (_, shadow)] = &runs;
        for (mode, r) in [("off", off), ("shadow", shadow)] {
            println!(
                "pair {pair}, {mode}: {} reconciles, CPU {:.2} s ({:.3} ms per reconcile), {} API requests ({:.1} per reconcile)",
                r.reconciles,
                r.cpu.as_secs_f64(),
                r.cpu_per_reconcile() * 1e3,
                r.requests,
                r.requests / r.reconciles,
            );
        }
        ratios.push(shadow.cpu_per_reconcile() / off.cpu_per_reconcile());
    }
    println!(
        "the Go controller on kube-apiserver, shadow/off CPU per reconcile, median of {pairs} pairs: {:.3}",
        median(ratios)
    );
}
