//! A real OpenTelemetry Collector, built from the Go module proxy (`scripts/otelcol.sh`), runs the
//! shipped configuration (`exporters/otel-collector/config.yaml`): the engine's spans (`simulate`
//! exporting its traces) and a controller's spans (the official Python SDK) go through it to
//! `ingest` and, over TLS, to a stand-in for the tracing backend (`tests/python/otlp_backend.py`).
//! The only overrides (`--set`) are the loopback ports and the Collector's own metrics, so that
//! tests can run side by side.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::wait::wait_until;
use common::{Process, free_port, http_get};
use serde_json::Value;

/// How long a component may take to start, and spans to arrive: only a hung one reaches it.
const START: Duration = Duration::from_mins(2);
const DELIVERY: Duration = Duration::from_mins(5);

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The Collector (`SHADOW_RECONCILER_OTELCOL`, else built by `scripts/otelcol.sh`).
fn collector() -> PathBuf {
    common::built_tool("SHADOW_RECONCILER_OTELCOL", "otelcol.sh")
}

/// Waits for `done` (checked every 200 ms), failing with `what` and `context()` (the state then)
/// after `limit`. The limit is generous: only a hung component reaches it, not a slow machine.
fn wait_for(
    what: &str,
    limit: Duration,
    mut done: impl FnMut() -> bool,
    context: impl Fn() -> String,
) {
    let waited = wait_until(what, limit, Duration::from_millis(200), || {
        if done() { Ok(()) } else { Err(String::new()) }
    });
    if let Err(e) = waited {
        panic!("{e}\n{}", context());
    }
}

/// The spans the backend received.
fn backend_spans(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Trace ids of the backend's `hostedcluster` reconcile spans, by service.
fn reconcile_traces(spans: &[Value], service: &str) -> BTreeSet<String> {
    spans
        .iter()
        .filter(|s| s["service"] == service && s["name"] == "reconcile")
        .filter(|s| {
            s["attributes"]["shadow_reconciler.plan"] == "hostedcluster"
                || s["resource"]["shadow_reconciler.plan"] == "hostedcluster"
        })
        .map(|s| s["trace_id"].as_str().unwrap().to_owned())
        .collect()
}

fn log(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The backend stand-in, listening over TLS with a certificate for 127.0.0.1 written to
/// `dir/cert.pem` (the Collector trusts it through `SSL_CERT_FILE`); returns it and its port.
fn start_backend(dir: &Path) -> (Process, String) {
    let openssl = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .output()
        .expect("openssl (scripts/test.sh installs it)");
    assert!(
        openssl.status.success(),
        "{}",
        String::from_utf8_lossy(&openssl.stderr)
    );
    let backend = Process(
        Command::new(common::python())
            .arg(root().join("tests/python/otlp_backend.py"))
            .arg("--cert")
            .arg(dir.join("cert.pem"))
            .arg("--key")
            .arg(dir.join("key.pem"))
            .arg("--port-file")
            .arg(dir.join("backend.port"))
            .arg("--out")
            .arg(dir.join("backend.jsonl"))
            .stderr(std::fs::File::create(dir.join("backend.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for(
        "the backend listens",
        START,
        || dir.join("backend.port").exists(),
        || log(&dir.join("backend.log")),
    );
    let port = std::fs::read_to_string(dir.join("backend.port")).unwrap();
    (backend, port)
}

/// `ingest` for the hostedcluster plan, writing Parquet to `dir/data`; returns it, its
/// `/metrics` address and its OTLP/HTTP port.
fn start_ingest(dir: &Path) -> (Process, String, u16) {
    let (grpc, http, listen) = (free_port(), free_port(), free_port());
    let listen = format!("127.0.0.1:{listen}");
    let ingest = Process(
        Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
            .args(["ingest", "--plan", "hostedcluster", "--log-format", "json"])
            .args(["--otlp-grpc", &format!("127.0.0.1:{grpc}")])
            .args(["--otlp-http", &format!("127.0.0.1:{http}")])
            .args(["--listen", &listen, "--parquet-dir"])
            .arg(dir.join("data"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("ingest.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for(
        "ingest serves /metrics",
        START,
        || http_get(&listen, "/metrics").contains("shadow_reconciler_ingest_requests_total"),
        || log(&dir.join("ingest.log")),
    );
    (ingest, listen, http)
}

/// The Collector with the shipped configuration, its ports moved to free loopback ones; returns
/// it and its OTLP gRPC and HTTP ports.
fn start_collector(dir: &Path, backend_port: &str, ingest_http: u16) -> (Process, u16, u16) {
    let (otlp_grpc, otlp_http, health) = (free_port(), free_port(), free_port());
    let process = Process(
        Command::new(collector())
            .arg("--config")
            .arg(root().join("exporters/otel-collector/config.yaml"))
            .arg(format!(
                "--set=receivers.otlp.protocols.grpc.endpoint=127.0.0.1:{otlp_grpc}"
            ))
            .arg(format!(
                "--set=receivers.otlp.protocols.http.endpoint=127.0.0.1:{otlp_http}"
            ))
            .arg(format!(
                "--set=extensions.health_check.endpoint=127.0.0.1:{health}"
            ))
            .arg("--set=service.telemetry.metrics.level=none")
            .env(
                "TRACE_BACKEND_ENDPOINT",
                format!("127.0.0.1:{backend_port}"),
            )
            .env(
                "SHADOW_INGEST_ENDPOINT",
                format!("http://127.0.0.1:{ingest_http}"),
            )
            .env("K8S_CLUSTER_NAME", "mgmt-test-1")
            .env("SSL_CERT_FILE", dir.join("cert.pem"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("collector.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let health = format!("127.0.0.1:{health}");
    wait_for(
        "the Collector is healthy",
        START,
        || {
            let response = http_get(&health, "/");
            response.starts_with("HTTP/1.0 200") || response.starts_with("HTTP/1.1 200")
        },
        || log(&dir.join("collector.log")),
    );
    (process, otlp_grpc, otlp_http)
}

/// A controller on the Python SDK over both OTLP transports (20 reconciles), then the engine's
/// own traces (`simulate`, OTLP/HTTP, the SDK's default protocol); returns how many
/// `hostedcluster` reconciles `simulate` says it ran (each one trace).
fn send_spans(otlp_grpc: u16, otlp_http: u16) -> usize {
    for (protocol, endpoint) in [
        ("grpc", format!("http://127.0.0.1:{otlp_grpc}")),
        ("http", format!("http://127.0.0.1:{otlp_http}/v1/traces")),
    ] {
        let out = Command::new(common::python())
            .arg(root().join("tests/python/send_otlp.py"))
            .arg("--plan")
            .arg(root().join("deploy/plans/hostedcluster.yaml"))
            .args(["--protocol", protocol, "--endpoint", &endpoint])
            .args(["--objects", "10", "--fail-ssh", "3"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "send_otlp.py over {protocol}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let simulate = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args(["simulate", "--quiet", "--no-parquet", "--seed", "1"])
        .args(["--hosted-clusters", "12", "--addons", "4"])
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{otlp_http}"),
        )
        // The SDK's batch queue (2,048 spans by default) drops spans when the exporter falls
        // behind a burst (some 45 spans a reconcile): on a loaded machine the backend would then
        // miss reconciles the test waits for. Room for every span of this small run.
        .env("OTEL_BSP_MAX_QUEUE_SIZE", "65536")
        .output()
        .unwrap();
    assert!(
        simulate.status.success(),
        "{}",
        String::from_utf8_lossy(&simulate.stderr)
    );
    // The summary's line "  hostedcluster: N reconciles of M objects, ...".
    let summary = String::from_utf8_lossy(&simulate.stdout);
    summary
        .lines()
        .find_map(|l| {
            l.trim_start()
                .strip_prefix("hostedcluster: ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| {
            panic!("no hostedcluster reconcile count in simulate's summary:\n{summary}")
        })
}

/// The trace ids of the reconciles in `ingest`'s Parquet (read with DuckDB).
fn recorded_traces(data: &Path) -> BTreeSet<String> {
    let out = Command::new(common::python())
        .args([
            "-c",
            "import duckdb, json, sys; print(json.dumps(sorted(r[0] for r in duckdb.sql(\
             f\"select trace_id from read_parquet('{sys.argv[1]}/table=reconciles/**/*.parquet')\").fetchall())))",
        ])
        .arg(data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_shipped_collector_configuration_carries_engine_and_sdk_spans_to_ingest_and_the_backend() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (_backend, backend_port) = start_backend(dir);
    let (mut ingest, listen, ingest_http) = start_ingest(dir);
    let (_collector, otlp_grpc, otlp_http) = start_collector(dir, &backend_port, ingest_http);
    let simulated = send_spans(otlp_grpc, otlp_http);

    // Every reconcile reaches the backend (the SDK's 20, and every one `simulate` ran; the
    // Collector may deliver them in several batches, so the test waits for all of them), each
    // span with the cluster's name from the backend pipeline's resource processor ...
    let spans_path = dir.join("backend.jsonl");
    wait_for(
        &format!("the backend receives the SDK's 20 reconciles and the engine's {simulated}"),
        DELIVERY,
        || {
            let spans = backend_spans(&spans_path);
            reconcile_traces(&spans, "hypershift-operator").len() == 20
                && reconcile_traces(&spans, "shadow-reconciler").len() == simulated
        },
        || {
            let spans = backend_spans(&spans_path);
            format!(
                "at the backend: {} SDK and {} engine reconciles\n{}",
                reconcile_traces(&spans, "hypershift-operator").len(),
                reconcile_traces(&spans, "shadow-reconciler").len(),
                log(&dir.join("collector.log"))
            )
        },
    );
    let spans = backend_spans(&spans_path);
    let engine = reconcile_traces(&spans, "shadow-reconciler");
    assert!(simulated > 0, "simulate ran no hostedcluster reconcile");
    assert!(
        spans
            .iter()
            .all(|s| s["resource"]["k8s.cluster.name"] == "mgmt-test-1"),
        "every span at the backend carries k8s.cluster.name"
    );
    // ... and to ingest, which records exactly those reconciles.
    let expected: BTreeSet<String> = reconcile_traces(&spans, "hypershift-operator")
        .union(&engine)
        .cloned()
        .collect();
    wait_for(
        "ingest records every hostedcluster reconcile",
        DELIVERY,
        || {
            // Summed over the family's other labels (mode, results).
            let recorded: f64 = http_get(&listen, "/metrics")
                .lines()
                .filter(|l| {
                    l.starts_with("shadow_reconciler_reconciles_total{")
                        && l.contains("plan=\"hostedcluster\"")
                })
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum();
            recorded >= f64::from(u32::try_from(expected.len()).unwrap())
        },
        || {
            let metrics = http_get(&listen, "/metrics");
            let relevant: Vec<&str> = metrics
                .lines()
                .filter(|l| l.contains("reconciles_total") || l.contains("ingest_spans"))
                .collect();
            format!("{}\n{}", relevant.join("\n"), log(&dir.join("ingest.log")))
        },
    );
    assert!(
        Command::new("kill")
            .args(["-TERM", &ingest.0.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(
        ingest.0.wait().unwrap().code(),
        Some(0),
        "{}",
        log(&dir.join("ingest.log"))
    );
    assert_eq!(
        recorded_traces(&dir.join("data")),
        expected,
        "ingest's Parquet holds exactly the hostedcluster reconciles the backend saw"
    );
}
