//! Load test of `ingest` over loopback: the release binary pinned to one core (`taskset -c 0`),
//! fed pre-encoded OTLP/HTTP requests (HyperShift's legacy loop, a third failing at `SSHKeySync`)
//! over keep-alive connections, for a bounded number of spans and time. Reports spans per second
//! and the ingest's peak resident memory (`VmHWM`), and checks every span was accepted.
//!
//! `cargo bench --bench ingest_load` runs 2,000,000 spans; `cargo test --benches` a short smoke
//! run of 20,000. Results: docs/performance.md.

#[path = "common/otlp.rs"]
mod otlp;

use std::io::BufReader;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use otlp::{Attributes, Load, Process, metric, peak_kib, post};
use shadow_reconciler::plan::embedded;

/// Reconciles per request (each with its operation spans).
const RECONCILES_PER_REQUEST: u64 = 40;
/// The longest the load runs.
const MAX_DURATION: Duration = Duration::from_mins(2);

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let target_spans: u64 = if full { 2_000_000 } else { 20_000 };
    let plan = embedded::load("hostedcluster").unwrap();
    let load = Load {
        plan: &plan,
        reconciles_per_request: RECONCILES_PER_REQUEST,
        attributes: Attributes::Lean,
    };
    // Three distinct ports, held until all are chosen (a released port can be handed out again).
    let held: Vec<std::net::TcpListener> = (0..3)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let port = |i: usize| held[i].local_addr().unwrap().port();
    let (http, listen, grpc) = (port(0), port(1), port(2));
    drop(held);
    let listen_addr = format!("127.0.0.1:{listen}");
    let stderr_file = tempfile::NamedTempFile::new().expect("a temp file for ingest's stderr");
    let max_buffered = 100_000;
    let mut ingest = Process(
        Command::new("taskset")
            .args(["-c", "0", env!("CARGO_BIN_EXE_shadow-reconciler"), "ingest"])
            .args(["--plan", "hostedcluster", "--log-format", "json"])
            .args(["--otlp-http", &format!("127.0.0.1:{http}")])
            .args(["--otlp-grpc", &format!("127.0.0.1:{grpc}")])
            .args(["--listen", &listen_addr])
            .args(["--max-buffered-spans", &max_buffered.to_string()])
            .stdout(Stdio::null())
            .stderr(stderr_file.reopen().expect("reopen the stderr file"))
            .spawn()
            .expect("taskset (util-linux) and the ingest binary"),
    );
    // Started means serving its metrics; waited for as long as the process lives (a loaded
    // machine is slow, not wrong), and an exit is reported with what it said.
    while metric(&listen_addr, "shadow_reconciler_ingest_buffered_spans").is_none() {
        if let Some(status) = ingest.0.try_wait().expect("wait for ingest") {
            let said = std::fs::read_to_string(stderr_file.path()).unwrap_or_default();
            panic!("ingest exited before serving ({status}):\n{said}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let idle_kib = peak_kib(ingest.0.id());
    // Every request encoded before the clock starts, each with its own ids (real traffic never
    // repeats a span id; a repeated reconcile span id would make its children `late`).
    let mut bodies: Vec<(Vec<u8>, u64)> = Vec::new();
    let mut planned = 0;
    while planned < target_spans {
        let (body, count) = load.request(bodies.len() as u64, true);
        planned += count;
        bodies.push((body, count));
    }
    let connections = 2;
    let begin = Instant::now();
    let sent: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..connections)
            .map(|c| {
                let bodies = &bodies;
                let addr = format!("127.0.0.1:{http}");
                scope.spawn(move || {
                    let mut reader = BufReader::new(TcpStream::connect(addr).unwrap());
                    let mut spans = 0u64;
                    for (body, count) in bodies.iter().skip(c).step_by(connections) {
                        if begin.elapsed() > MAX_DURATION {
                            break;
                        }
                        post(&mut reader, body);
                        spans += count;
                    }
                    spans
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let elapsed = begin.elapsed();
    let accepted = metric(
        &listen_addr,
        "shadow_reconciler_ingest_spans_total{result=\"accepted\"}",
    )
    .unwrap_or_default();
    let peak_kib = peak_kib(ingest.0.id());
    #[allow(clippy::cast_precision_loss)] // span counts far below 2^52
    let rate = sent as f64 / elapsed.as_secs_f64();
    println!(
        "ingest load: {sent} spans in {:.2} s over {connections} loopback connections = {rate:.0} spans/s on one core; accepted {accepted:.0}; peak RSS {} MiB (idle {} MiB; --max-buffered-spans {max_buffered})",
        elapsed.as_secs_f64(),
        peak_kib / 1024,
        idle_kib / 1024,
    );
    #[allow(clippy::cast_precision_loss)]
    let all = sent as f64;
    assert!(
        (accepted - all).abs() < 0.5,
        "every span accepted: {accepted} of {sent}"
    );

    orphan_phase(
        http,
        &listen_addr,
        ingest.0.id(),
        bodies.len() as u64,
        target_spans,
        max_buffered,
        &load,
    );
}

/// Orphans only (reconcile spans that never come): the buffer fills to its cap and evicts;
/// memory stays bounded however many are sent.
fn orphan_phase(
    http: u16,
    listen_addr: &str,
    pid: u32,
    first: u64,
    target_spans: u64,
    max_buffered: usize,
    load: &Load<'_>,
) {
    let orphans: Vec<(Vec<u8>, u64)> = (0..(target_spans / 2 / 500).max(4))
        .map(|s| load.request(first + s, false))
        .collect();
    let mut reader = BufReader::new(TcpStream::connect(format!("127.0.0.1:{http}")).unwrap());
    let mut orphan_spans = 0;
    for (body, count) in &orphans {
        post(&mut reader, body);
        orphan_spans += count;
    }
    let buffered = metric(listen_addr, "shadow_reconciler_ingest_buffered_spans").unwrap_or(-1.0);
    let evicted = metric(
        listen_addr,
        "shadow_reconciler_ingest_spans_total{result=\"evicted\"}",
    )
    .unwrap_or_default();
    let peak_after = peak_kib(pid);
    println!(
        "ingest orphans: {orphan_spans} operation spans without their reconcile span: {buffered:.0} buffered (cap {max_buffered}), {evicted:.0} evicted; peak RSS {} MiB",
        peak_after / 1024
    );
    #[allow(clippy::cast_precision_loss)]
    let cap = max_buffered as f64;
    assert!(buffered <= cap, "the buffer stays within its cap");
    #[allow(clippy::cast_precision_loss)]
    let expected_evicted = (orphan_spans as f64 - cap).max(0.0);
    assert!(
        evicted >= expected_evicted,
        "{evicted} evicted, expected at least {expected_evicted}"
    );
}
