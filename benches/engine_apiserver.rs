//! The shadow's cost on a real kube-apiserver: `simulate --scenario healthy --kubeconfig` against
//! etcd and kube-apiserver on loopback (the control plane of `tests/system/e2e_engine.rs`), in
//! `--mode off` and in `--mode shadow`, in interleaved pairs, each run on a fresh control plane
//! (`simulate` refuses a cluster that holds a population already).
//!
//! Measured per reconcile: the CPU of the `simulate` process (user + system of every thread: the
//! controllers, the engine, its kube clients, the metrics and the Parquet writer, and the
//! creation of the population, the same in both modes; etcd and kube-apiserver are not counted),
//! and the run's wall time as `simulate` reports it (from the controllers' start until it
//! settled, its quiet window included). The bench prints each pair and the median ratios;
//! `docs/performance.md` records the results.
//!
//! `cargo bench --bench engine_apiserver`: five pairs of 200 HostedClusters and 60 add-ons. Run
//! as a test (`cargo test --benches`), one pair of 20 and 6, to keep the harness working. The
//! kube-apiserver build comes from `scripts/kube-apiserver.sh` (`SHADOW_RECONCILER_KUBE_BIN_DIR`).

#[path = "../tests/common/apiserver.rs"]
mod apiserver;
#[path = "common/cpu.rs"]
mod cpu;
#[path = "../tests/common/wait.rs"]
mod wait;

use std::process::Command;
use std::time::Duration;

use apiserver::ControlPlane;

/// One run's figures.
struct Run {
    reconciles: u64,
    cpu: Duration,
    wall: Duration,
}

impl Run {
    #[allow(clippy::cast_precision_loss)] // reconcile counts far below 2^52
    fn cpu_per_reconcile(&self) -> f64 {
        self.cpu.as_secs_f64() / self.reconciles as f64
    }

    #[allow(clippy::cast_precision_loss)]
    fn wall_per_reconcile(&self) -> f64 {
        self.wall.as_secs_f64() / self.reconciles as f64
    }
}

/// The run's seconds on `simulate`'s first line (`...; 3.6 s, settled`).
fn run_seconds(stdout: &str) -> Option<f64> {
    let first = stdout.lines().next()?;
    let (head, _) = first.rsplit_once(" s, ")?;
    head.rsplit(' ').next()?.parse().ok()
}

/// The reconciles `simulate` reports: the sum of its summary's plan lines, `N reconciles of M
/// objects` (the summary ends at the first blank line; the analysis after it repeats the figure).
fn reconciles(stdout: &str) -> u64 {
    stdout
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .filter_map(|line| {
            let (head, _) = line.split_once(" reconciles of ")?;
            head.rsplit(' ').next()?.parse::<u64>().ok()
        })
        .sum()
}

/// `simulate` in `mode` on a fresh control plane.
fn run(mode: &str, hosted_clusters: &str, addons: &str) -> Run {
    let plane = ControlPlane::start();
    let work = tempfile::tempdir().expect("tempdir");
    let mut command = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"));
    command
        .current_dir(work.path())
        .args(["simulate", "-q", "--scenario", "healthy", "--seed", "1"])
        .args(["--mode", mode, "--hosted-clusters", hosted_clusters])
        .args(["--addons", addons, "--duration", "900", "--kubeconfig"])
        .arg(plane.kubeconfig())
        .arg("--parquet-dir")
        .arg(work.path().join("data"));
    let before = cpu::children_cpu();
    let out = command.output().expect("run simulate");
    let cpu = cpu::children_cpu().saturating_sub(before);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "simulate --mode {mode} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout
            .lines()
            .next()
            .is_some_and(|l| l.ends_with("settled")),
        "simulate --mode {mode} did not settle:\n{stdout}"
    );
    let reconciles = reconciles(&stdout);
    assert!(reconciles > 0, "no reconciles in:\n{stdout}");
    let wall = run_seconds(&stdout).map_or_else(
        || panic!("no run time on the first line of:\n{stdout}"),
        Duration::from_secs_f64,
    );
    drop(plane); // stopped (and its processes reaped) outside the next run's window
    Run {
        reconciles,
        cpu,
        wall,
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (pairs, hosted_clusters, addons) = if full {
        (5, "200", "60")
    } else {
        (1, "20", "6")
    };
    println!(
        "simulate --scenario healthy on kube-apiserver {}, {hosted_clusters} HostedClusters and {addons} add-ons, {pairs} interleaved pairs",
        apiserver::KUBE_VERSION
    );
    let (mut cpu, mut wall) = (Vec::new(), Vec::new());
    for pair in 1..=pairs {
        let off = run("off", hosted_clusters, addons);
        let shadow = run("shadow", hosted_clusters, addons);
        for (mode, r) in [("off", &off), ("shadow", &shadow)] {
            println!(
                "pair {pair}, {mode}: {} reconciles, CPU {:.2} s ({:.2} ms per reconcile), wall {:.2} s ({:.2} ms per reconcile)",
                r.reconciles,
                r.cpu.as_secs_f64(),
                r.cpu_per_reconcile() * 1e3,
                r.wall.as_secs_f64(),
                r.wall_per_reconcile() * 1e3,
            );
        }
        cpu.push(shadow.cpu_per_reconcile() / off.cpu_per_reconcile());
        wall.push(shadow.wall_per_reconcile() / off.wall_per_reconcile());
    }
    println!(
        "on kube-apiserver, shadow/off per reconcile, median of {pairs} pairs: CPU {:.2}, wall {:.2}",
        median(cpu),
        median(wall)
    );
}
