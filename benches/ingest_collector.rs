//! `ingest` beside the OpenTelemetry Collector, on the same load and the same core: the Go
//! package's reconcile spans (every attribute it sets, 50 reconciles a request, HyperShift's
//! legacy order, a third failing at `SSHKeySync`), sent over 4 connections by this process
//! (pinned to core 1) to a receiver pinned to core 0 (`taskset -c 0`), over OTLP/HTTP and over
//! OTLP/gRPC. `ingest` writes Parquet (`--parquet-dir`); the Collector (scripts/otelcol.sh, the
//! shipped configuration's components) batches and forwards over OTLP/HTTP, as the shipped
//! configuration does, to a second Collector on core 1 that counts what arrives. The figure is
//! spans per CPU-second of the receiving process (user + system, from its start of the load to
//! everything written: ingest's last Parquet commit at shutdown, the Collector's last forward
//! received downstream), with peak resident memory; the downstream Collector's CPU is shown
//! apart. Every span sent must be accepted, and every reconcile written.
//!
//! `cargo bench --bench ingest_collector` runs three rounds of 1,000,000 spans per case;
//! `cargo test --benches` one round of 20,000. Results: docs/performance.md.

#[path = "common/cpu.rs"]
mod cpu;
#[path = "common/otlp.rs"]
mod otlp;
#[path = "../tests/common/wait.rs"]
mod wait;

use std::io::BufReader;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use otlp::{Attributes, Load, Process, metric, peak_kib, post};
use prost::Message;
use shadow_reconciler::plan::embedded;
use wait::wait_until;

const RECONCILES_PER_REQUEST: u64 = 50;
const CONNECTIONS: usize = 4;
/// A bound for a broken run, not a speed target.
const PATIENCE: Duration = Duration::from_mins(5);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Transport {
    Http,
    Grpc,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Receiver {
    Ingest,
    Collector,
}

/// One measured run.
struct Figures {
    spans: u64,
    cpu: Duration,
    wall: Duration,
    peak_kib: u64,
    downstream_cpu: Option<Duration>,
    /// The sender's own CPU while it sent (this process, one core): near the wall time, the
    /// sender, not the receiver, set the pace.
    sender_cpu: Duration,
}

/// What `send` sent, and its own CPU over the sending.
struct Sent {
    spans: u64,
    cpu: Duration,
}

impl Figures {
    #[allow(clippy::cast_precision_loss)] // span counts far below 2^52
    fn per_cpu_second(&self) -> f64 {
        self.spans as f64 / self.cpu.as_secs_f64()
    }
}

/// Waits until `done` holds (`Err`: what it saw instead), panicking with the process's log after
/// [`PATIENCE`] or as soon as it exits.
fn wait_for(
    what: &str,
    process: &mut Process,
    log: &Path,
    mut done: impl FnMut() -> Result<(), String>,
) {
    let waited = wait_until(what, PATIENCE, Duration::from_millis(50), || {
        let state = match done() {
            Ok(()) => return Ok(()),
            Err(state) => state,
        };
        if let Some(status) = process.0.try_wait().expect("try_wait") {
            panic!(
                "{what}: the process exited ({status}):\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        Err(state)
    });
    if let Err(e) = waited {
        panic!("{e}:\n{}", std::fs::read_to_string(log).unwrap_or_default());
    }
}

/// Whether the process at `addr` serves the metric `name`: a wait's probe.
fn serves(addr: &str, name: &str) -> Result<(), String> {
    metric(addr, name)
        .map(|_| ())
        .ok_or_else(|| format!("no {name} at {addr}"))
}

/// Free loopback ports, held until all are chosen.
fn ports<const N: usize>() -> [u16; N] {
    let held: Vec<_> = (0..N)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a port"))
        .collect();
    std::array::from_fn(|i| held[i].local_addr().expect("addr").port())
}

/// The Collector (`SHADOW_RECONCILER_OTELCOL`, else built by scripts/otelcol.sh).
fn otelcol() -> PathBuf {
    if let Some(path) = std::env::var_os("SHADOW_RECONCILER_OTELCOL") {
        return path.into();
    }
    let out = Command::new("bash")
        .arg("scripts/otelcol.sh")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/otelcol.sh");
    assert!(out.status.success(), "scripts/otelcol.sh failed");
    PathBuf::from(String::from_utf8(out.stdout).expect("a path").trim())
}

/// Sends every request over `CONNECTIONS` connections to the receiver's port of `transport`
/// (`[http, grpc]`); the spans sent.
fn send(transport: Transport, ports: [u16; 2], bodies: &[(Vec<u8>, u64)]) -> Sent {
    let requests: Vec<(ExportTraceServiceRequest, u64)> = match transport {
        Transport::Http => Vec::new(),
        Transport::Grpc => bodies
            .iter()
            .map(|(body, count)| {
                (
                    ExportTraceServiceRequest::decode(body.as_slice()).unwrap(),
                    *count,
                )
            })
            .collect(),
    };
    let before = cpu::of(std::process::id());
    let spans = send_over(transport, ports, bodies, &requests);
    Sent {
        spans,
        cpu: cpu::of(std::process::id()).saturating_sub(before),
    }
}

fn send_over(
    transport: Transport,
    [http, grpc]: [u16; 2],
    bodies: &[(Vec<u8>, u64)],
    requests: &[(ExportTraceServiceRequest, u64)],
) -> u64 {
    let port = match transport {
        Transport::Http => http,
        Transport::Grpc => grpc,
    };
    match transport {
        Transport::Http => std::thread::scope(|scope| {
            let handles: Vec<_> = (0..CONNECTIONS)
                .map(|c| {
                    scope.spawn(move || {
                        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
                        stream.set_nodelay(true).unwrap();
                        let mut reader = BufReader::new(stream);
                        let mut spans = 0;
                        for (body, count) in bodies.iter().skip(c).step_by(CONNECTIONS) {
                            post(&mut reader, body);
                            spans += count;
                        }
                        spans
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        }),
        Transport::Grpc => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                let mut tasks = Vec::new();
                for c in 0..CONNECTIONS {
                    // One channel, so one HTTP/2 connection, per exporter.
                    let mine: Vec<_> = requests
                        .iter()
                        .skip(c)
                        .step_by(CONNECTIONS)
                        .cloned()
                        .collect();
                    tasks.push(tokio::spawn(async move {
                        let mut client =
                            TraceServiceClient::connect(format!("http://127.0.0.1:{port}"))
                                .await
                                .expect("connect")
                                .max_decoding_message_size(64 << 20);
                        let mut spans = 0;
                        for (request, count) in mine {
                            let answer = client.export(request).await.expect("export");
                            assert!(
                                answer
                                    .get_ref()
                                    .partial_success
                                    .as_ref()
                                    .is_none_or(|p| p.rejected_spans == 0),
                                "rejected spans: {:?}",
                                answer.get_ref()
                            );
                            spans += count;
                        }
                        spans
                    }));
                }
                let mut spans = 0;
                for task in tasks {
                    spans += task.await.expect("a sender");
                }
                spans
            })
        }
    }
}

/// `ingest --parquet-dir` on core 0; the spans and reconciles it must accept and write.
fn measure_ingest(transport: Transport, bodies: &[(Vec<u8>, u64)], reconciles: u64) -> Figures {
    let dir = tempfile::tempdir().expect("temp dir");
    let [http, grpc, listen] = ports();
    let listen = format!("127.0.0.1:{listen}");
    let log = dir.path().join("ingest.log");
    let mut ingest = Process(
        Command::new("taskset")
            .args(["-c", "0", env!("CARGO_BIN_EXE_shadow-reconciler"), "ingest"])
            .args(["--plan", "hostedcluster", "--log-format", "json"])
            .args(["--otlp-http", &format!("127.0.0.1:{http}")])
            .args(["--otlp-grpc", &format!("127.0.0.1:{grpc}")])
            .args(["--listen", &listen])
            .arg("--parquet-dir")
            .arg(dir.path().join("data"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("taskset (util-linux) and the ingest binary"),
    );
    wait_for("ingest serving", &mut ingest, &log, || {
        serves(&listen, "shadow_reconciler_ingest_buffered_spans")
    });
    let pid = ingest.0.id();
    let before = cpu::of(pid);
    let begin = Instant::now();
    let Sent {
        spans: sent,
        cpu: sender_cpu,
    } = send(transport, [http, grpc], bodies);
    let accepted = metric(
        &listen,
        "shadow_reconciler_ingest_spans_total{result=\"accepted\"",
    )
    .unwrap_or_default();
    let peak = peak_kib(pid);
    // Stopped: the Parquet writer commits what it holds; its CPU is the process's until exit.
    let last = cpu::of(pid);
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    assert!(status.is_ok_and(|s| s.success()));
    let mut last_seen = last;
    while ingest.0.try_wait().expect("try_wait").is_none() {
        last_seen = last_seen.max(cpu::of(pid));
        std::thread::sleep(Duration::from_millis(10));
    }
    let wall = begin.elapsed();
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    #[allow(clippy::cast_precision_loss)]
    let all = sent as f64;
    assert!(
        (accepted - all).abs() < 0.5,
        "ingest accepted {accepted} of {sent} spans:\n{said}"
    );
    let closing = format!("parquet: {reconciles} records accepted, {reconciles} written");
    assert!(said.contains(&closing), "expected `{closing}`:\n{said}");
    Figures {
        spans: sent,
        cpu: last_seen.saturating_sub(before),
        wall,
        peak_kib: peak,
        downstream_cpu: None,
        sender_cpu,
    }
}

/// A Collector's configuration: OTLP in on `grpc`/`http`, its own metrics on `metrics`, and
/// `exporter` (YAML under `exporters:`), `processors` in the pipeline.
fn collector_config(
    dir: &Path,
    name: &str,
    [grpc, http, metrics]: [u16; 3],
    exporter: &str,
    processors: &str,
) -> PathBuf {
    let path = dir.join(format!("{name}.yaml"));
    let text = format!(
        "receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
        max_recv_msg_size_mib: 64
      http:
        endpoint: 127.0.0.1:{http}
processors:
  batch:
    send_batch_size: 8192
    timeout: 2s
exporters:
{exporter}
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: basic
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: {metrics}
  pipelines:
    traces:
      receivers: [otlp]
      processors: [{processors}]
      exporters: [{first}]
",
        first = exporter.trim().split(':').next().unwrap_or_default()
    );
    std::fs::write(&path, text).expect("write the configuration");
    path
}

fn start_collector(binary: &Path, config: &Path, core: &str, log: &Path) -> Process {
    Process(
        Command::new("taskset")
            .args(["-c", core])
            .arg(binary)
            .arg("--config")
            .arg(config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).expect("log"))
            .spawn()
            .expect("taskset and the Collector"),
    )
}

/// The Collector on core 0, forwarding to a second one on core 1.
fn measure_collector(binary: &Path, transport: Transport, bodies: &[(Vec<u8>, u64)]) -> Figures {
    let dir = tempfile::tempdir().expect("temp dir");
    let [down_grpc, down_http, down_metrics, grpc, http, metrics] = ports();
    let down_config = collector_config(
        dir.path(),
        "downstream",
        [down_grpc, down_http, down_metrics],
        "  debug:\n    verbosity: basic\n    sampling_initial: 1\n    sampling_thereafter: 1000\n",
        "",
    );
    let down_log = dir.path().join("downstream.log");
    let mut downstream = start_collector(binary, &down_config, "1", &down_log);
    let down_addr = format!("127.0.0.1:{down_metrics}");
    wait_for(
        "the downstream Collector serving",
        &mut downstream,
        &down_log,
        || serves(&down_addr, "otelcol_receiver_accepted_spans"),
    );
    let config = collector_config(
        dir.path(),
        "collector",
        [grpc, http, metrics],
        &format!("  otlphttp:\n    endpoint: http://127.0.0.1:{down_http}\n"),
        "batch",
    );
    let log = dir.path().join("collector.log");
    let mut collector = start_collector(binary, &config, "0", &log);
    let addr = format!("127.0.0.1:{metrics}");
    wait_for("the Collector serving", &mut collector, &log, || {
        serves(&addr, "otelcol_receiver_accepted_spans")
    });
    let (pid, down_pid) = (collector.0.id(), downstream.0.id());
    let (before, down_before) = (cpu::of(pid), cpu::of(down_pid));
    let begin = Instant::now();
    let Sent {
        spans: sent,
        cpu: sender_cpu,
    } = send(transport, [http, grpc], bodies);
    #[allow(clippy::cast_precision_loss)]
    let all = sent as f64;
    wait_for(
        "every span forwarded downstream",
        &mut downstream,
        &down_log,
        || match metric(&down_addr, "otelcol_receiver_accepted_spans") {
            Some(n) if (n - all).abs() < 0.5 => Ok(()),
            n => Err(format!("{n:?} of {all} spans accepted downstream")),
        },
    );
    let wall = begin.elapsed();
    let accepted = metric(&addr, "otelcol_receiver_accepted_spans").unwrap_or_default();
    assert!(
        (accepted - all).abs() < 0.5,
        "the Collector accepted {accepted} of {sent} spans"
    );
    Figures {
        spans: sent,
        cpu: cpu::of(pid).saturating_sub(before),
        wall,
        peak_kib: peak_kib(pid),
        downstream_cpu: Some(cpu::of(down_pid).saturating_sub(down_before)),
        sender_cpu,
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (target_spans, rounds) = if full { (1_000_000, 3) } else { (20_000, 1) };
    // This process (the senders) on core 1, the receivers on core 0.
    let pinned = Command::new("taskset")
        .args(["-a", "-cp", "1", &std::process::id().to_string()])
        .stdout(Stdio::null())
        .status();
    assert!(
        pinned.is_ok_and(|s| s.success()),
        "taskset (util-linux) is needed"
    );
    let plan = embedded::load("hostedcluster").expect("the shipped plan");
    let load = Load {
        plan: &plan,
        reconciles_per_request: RECONCILES_PER_REQUEST,
        attributes: Attributes::Go,
    };
    let mut bodies = Vec::new();
    let mut planned = 0;
    while planned < target_spans {
        let (body, count) = load.request(bodies.len() as u64, true);
        planned += count;
        bodies.push((body, count));
    }
    let reconciles = bodies.len() as u64 * RECONCILES_PER_REQUEST;
    let binary = otelcol();
    let mut ratios: Vec<(Transport, f64, f64)> = Vec::new();
    for round in 1..=rounds {
        for transport in [Transport::Http, Transport::Grpc] {
            let mut pair = Vec::new();
            for receiver in [Receiver::Ingest, Receiver::Collector] {
                let f = match receiver {
                    Receiver::Ingest => measure_ingest(transport, &bodies, reconciles),
                    Receiver::Collector => measure_collector(&binary, transport, &bodies),
                };
                println!(
                    "round {round} {transport:?} {receiver:?}: {} spans, {:.2} CPU-s, {:.0} spans per CPU-second, wall {:.2} s (the sender's CPU {:.2} s), peak RSS {} MiB{}",
                    f.spans,
                    f.cpu.as_secs_f64(),
                    f.per_cpu_second(),
                    f.wall.as_secs_f64(),
                    f.sender_cpu.as_secs_f64(),
                    f.peak_kib / 1024,
                    f.downstream_cpu.map_or(String::new(), |d| format!(
                        ", downstream {:.2} CPU-s",
                        d.as_secs_f64()
                    )),
                );
                pair.push(f);
            }
            let (ingest, collector) = (&pair[0], &pair[1]);
            let with_downstream = collector.cpu + collector.downstream_cpu.unwrap_or_default();
            #[allow(clippy::cast_precision_loss)]
            let counted = collector.spans as f64 / with_downstream.as_secs_f64();
            ratios.push((
                transport,
                ingest.per_cpu_second() / collector.per_cpu_second(),
                ingest.per_cpu_second() / counted,
            ));
            #[allow(clippy::cast_precision_loss)]
            let memory = ingest.peak_kib as f64 / collector.peak_kib as f64;
            println!("round {round} {transport:?}: ingest / Collector peak RSS {memory:.2}");
        }
    }
    for transport in [Transport::Http, Transport::Grpc] {
        let of = |i: usize| {
            median(
                ratios
                    .iter()
                    .filter(|r| r.0 == transport)
                    .map(|r| if i == 0 { r.1 } else { r.2 })
                    .collect(),
            )
        };
        println!(
            "{transport:?}: ingest / Collector spans per CPU-second, median of {rounds}: {:.2} (the Collector with its downstream: {:.2})",
            of(0),
            of(1)
        );
    }
}
