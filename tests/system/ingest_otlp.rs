//! `ingest` with the official OpenTelemetry Python SDK as the client, over gRPC and HTTP: a
//! HyperShift-like legacy loop failing at `SSHKeySync`. The metrics and the Parquet then show the
//! control failure and the operations the candidate would have unblocked.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::wait::wait_for;
use common::{Process, free_port};

fn metrics(addr: &str) -> String {
    common::http_get(addr, "/metrics")
}

/// The value of the series whose line starts with `prefix` (labels included), summed.
fn value(exposition: &str, family: &str, labels: &[&str]) -> f64 {
    exposition
        .lines()
        .filter(|l| l.starts_with(family) && labels.iter().all(|label| l.contains(label)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn send(protocol: &str, endpoint: &str, objects: u32, failing: u32, extra: &[&str]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(common::python())
        .arg(root.join("tests/python/send_otlp.py"))
        .arg("--plan")
        .arg(root.join("deploy/plans/hostedcluster.yaml"))
        .args(["--protocol", protocol, "--endpoint", endpoint])
        .args([
            "--objects",
            &objects.to_string(),
            "--fail-ssh",
            &failing.to_string(),
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "send_otlp.py over {protocol}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

const DUCKDB_SUMMARY: &str = r#"
import duckdb, json, sys
d = sys.argv[1]
con = duckdb.connect()
r = f"read_parquet('{d}/table=reconciles/**/*.parquet', hive_partitioning=true)"
s = f"read_parquet('{d}/table=steps/**/*.parquet', hive_partitioning=true)"
print(json.dumps({
  'reconciles': con.execute(f'select count(*) from {r}').fetchone()[0],
  'failed_at_ssh': con.execute(f"select count(*) from {r} where control_first_failure = 'SSHKeySync'").fetchone()[0],
  'core_unblocked': con.execute(f"select count(*) from {r} where list_contains(unblocked, 'CoreHCPChain')").fetchone()[0],
  'unknown_candidate_steps': con.execute(f"select count(*) from {s} where policy = 'candidate' and execution = 'not-simulated' and outcome = 'unknown'").fetchone()[0],
  'ssh_real_failures': con.execute(f"select count(*) from {s} where policy = 'control' and operation = 'SSHKeySync' and execution = 'real' and outcome = 'failed' and error_class = 'not-found'").fetchone()[0],
  'reused': con.execute(f"select count(*) from {s} where policy = 'candidate' and execution = 'reused'").fetchone()[0],
}))
"#;

/// The metrics after 20 reconciles, 6 failing at `SSHKeySync`, and one unknown operation span.
fn check_metrics(exposition: &str) {
    let reconciles = value(
        exposition,
        "shadow_reconciler_reconciles_total{",
        &["plan=\"hostedcluster\""],
    );
    assert!(
        (reconciles - 20.0).abs() < f64::EPSILON,
        "20 reconciles:\n{exposition}"
    );
    let ssh = value(
        exposition,
        "shadow_reconciler_operations_total{",
        &[
            "operation=\"SSHKeySync\"",
            "policy=\"control\"",
            "outcome=\"failed\"",
            "error_class=\"not-found\"",
        ],
    );
    assert!(
        (ssh - 6.0).abs() < f64::EPSILON,
        "6 control failures at SSHKeySync:\n{exposition}"
    );
    let unblocked = value(
        exposition,
        "shadow_reconciler_unblocked_operations_total{",
        &[
            "operation=\"CoreHCPChain\"",
            "first_failure=\"SSHKeySync\"",
            "candidate_outcome=\"unknown\"",
        ],
    );
    assert!(
        (unblocked - 6.0).abs() < f64::EPSILON,
        "CoreHCPChain unblocked 6 times:\n{exposition}"
    );
    for (label, expected) in [("grpc", 1.0), ("http", 1.0)] {
        let ok = value(
            exposition,
            "shadow_reconciler_ingest_requests_total{",
            &[&format!("transport=\"{label}\""), "result=\"ok\""],
        );
        assert!(ok >= expected, "{label} requests:\n{exposition}");
    }
    let unknown = value(
        exposition,
        "shadow_reconciler_ingest_spans_total{",
        &["result=\"unknown_operation\""],
    );
    assert!(
        (unknown - 1.0).abs() < f64::EPSILON,
        "one unknown operation span:\n{exposition}"
    );
}

#[test]
fn the_python_sdk_over_grpc_and_http_shows_the_failure_and_what_would_be_unblocked() {
    let dir = tempfile::tempdir().unwrap();
    let (grpc, http, listen) = (free_port(), free_port(), free_port());
    let listen_addr = format!("127.0.0.1:{listen}");
    let log = std::fs::File::create(dir.path().join("ingest.log")).unwrap();
    let mut ingest = Process(
        Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
            .args(["ingest", "--plan", "hostedcluster", "--log-format", "json"])
            .args(["--otlp-grpc", &format!("127.0.0.1:{grpc}")])
            .args(["--otlp-http", &format!("127.0.0.1:{http}")])
            .args(["--listen", &listen_addr, "--parquet-dir"])
            .arg(dir.path().join("data"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    wait_for(
        "ingest serving its metrics",
        Duration::from_mins(2),
        Duration::from_millis(100),
        || {
            let answer = metrics(&listen_addr);
            if answer.contains("shadow_reconciler_ingest_requests_total") {
                Ok(())
            } else {
                Err(answer.lines().next().unwrap_or("no answer").to_owned())
            }
        },
    );
    send(
        "grpc",
        &format!("http://127.0.0.1:{grpc}"),
        10,
        3,
        &["--unknown-operation"],
    );
    send(
        "http",
        &format!("http://127.0.0.1:{http}/v1/traces"),
        10,
        3,
        &[],
    );

    check_metrics(&metrics(&listen_addr));

    // SIGTERM: the Parquet sink drains, then the dataset says the same.
    let pid = ingest.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let code = ingest.0.wait().unwrap().code();
    let log = std::fs::read_to_string(dir.path().join("ingest.log")).unwrap();
    assert_eq!(code, Some(0), "{log}");
    let out = Command::new(common::python())
        .args(["-c", DUCKDB_SUMMARY])
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["reconciles"], 20, "{summary}");
    assert_eq!(summary["failed_at_ssh"], 6, "{summary}");
    assert_eq!(summary["core_unblocked"], 6, "{summary}");
    assert_eq!(summary["ssh_real_failures"], 6, "{summary}");
    assert!(
        summary["unknown_candidate_steps"].as_u64().unwrap() >= 6,
        "{summary}"
    );
    assert!(summary["reused"].as_u64().unwrap() >= 20 * 8, "{summary}");
}
