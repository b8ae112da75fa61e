//! Metrics: the exposition agrees with the records, with the docs, and with promtool.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use shadow_reconciler::flag::FlagSpec;
use shadow_reconciler::scenario::{Scenario, Settings, run};
use shadow_reconciler::telemetry::http::{Server, Telemetry};
use shadow_reconciler::vocab::Mode;

use crate::common::wait::wait_for_async;

/// Sample lines `name{labels} value` of one family, as (labels, value).
fn samples(exposition: &str, family: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (name, labels) = series
                .split_once('{')
                .map_or((series, ""), |(n, rest)| (n, rest.trim_end_matches('}')));
            (name == family).then(|| {
                let labels = labels
                    .split("\",")
                    .filter(|kv| !kv.is_empty())
                    .filter_map(|kv| kv.split_once("=\""))
                    .map(|(k, v)| (k.to_owned(), v.trim_end_matches('"').to_owned()))
                    .collect();
                (labels, value.parse().unwrap())
            })
        })
        .collect()
}

fn sum_by(
    exposition: &str,
    family: &str,
    keep: &dyn Fn(&BTreeMap<String, String>) -> bool,
    key: &[&str],
) -> BTreeMap<Vec<String>, u64> {
    let mut sums = BTreeMap::new();
    for (labels, value) in samples(exposition, family) {
        if keep(&labels) {
            let k = key
                .iter()
                .map(|k| labels.get(*k).cloned().unwrap_or_default())
                .collect();
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            // counters are whole numbers
            let n = value as u64;
            *sums.entry(k).or_default() += n;
        }
    }
    sums
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_agree_with_the_records_and_are_served_over_http() {
    let telemetry = Arc::new(Telemetry::new());
    let server = Server::start("127.0.0.1:0".parse().unwrap(), telemetry.clone())
        .await
        .unwrap();
    let url = format!("http://{}", server.addr());
    let settings = Settings {
        hosted_clusters: 30,
        addons: 8,
        scenario: Scenario::Mixed,
        flag: FlagSpec {
            mode: Mode::Shadow,
            ..FlagSpec::default()
        },
        seed: 5,
        duration: Duration::from_mins(10),
        progress: false,
        telemetry: Some(telemetry.clone()),
        ..Settings::default()
    };
    let summary = run(&settings).await.unwrap();
    let exposition = http_get(&format!("{url}/metrics")).await;

    let reconciles = sum_by(
        &exposition,
        "shadow_reconciler_reconciles_total",
        &|_| true,
        &["plan"],
    );
    for (plan, n) in &summary.reconciles {
        assert_eq!(
            reconciles.get(&vec![plan.clone()]),
            Some(n),
            "reconciles of {plan}"
        );
    }
    let unblocked = sum_by(
        &exposition,
        "shadow_reconciler_unblocked_operations_total",
        &|_| true,
        &["plan", "operation"],
    );
    let failed = sum_by(
        &exposition,
        "shadow_reconciler_operations_total",
        &|l| l["policy"] == "control" && l["outcome"] == "failed",
        &["plan", "operation"],
    );
    let newly = sum_by(
        &exposition,
        "shadow_reconciler_newly_blocked_operations_total",
        &|_| true,
        &["plan", "operation"],
    );
    for ((plan, op), counts) in &summary.operations {
        let key = vec![plan.clone(), op.clone()];
        assert_eq!(
            unblocked.get(&key).copied().unwrap_or(0),
            counts.unblocked,
            "unblocked {plan}/{op}"
        );
        assert_eq!(
            failed.get(&key).copied().unwrap_or(0),
            counts.control_failures,
            "control failures {plan}/{op}"
        );
        assert_eq!(
            newly.get(&key).copied().unwrap_or(0),
            counts.newly_blocked,
            "newly blocked {plan}/{op}"
        );
    }
    assert!(
        summary.unblocked() > 0,
        "the scenario unblocks something: {summary}"
    );
    let refusals = samples(&exposition, "shadow_reconciler_shadow_guard_refusals_total");
    assert_eq!(refusals.len(), 1);
    assert!(refusals[0].1.abs() < f64::EPSILON);
    let dry_runs = samples(&exposition, "shadow_reconciler_dry_run_requests_total");
    assert!(dry_runs[0].1 > 0.0);
    assert_eq!(http_get(&format!("{url}/healthz")).await, "ok\n");
    assert_eq!(http_get(&format!("{url}/readyz")).await, "ready\n");

    promtool_check(&exposition);
    server.shutdown().await.unwrap();
}

/// `promtool check metrics` must report no problem. The test command installs promtool (Debian's
/// `prometheus` package); without it this test fails and says so.
fn promtool_check(exposition: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "promtool is needed (Debian package `prometheus`; scripts/test.sh installs it): {e}"
            )
        });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && report.trim().is_empty(),
        "promtool check metrics:\n{report}"
    );
}

/// A plain HTTP GET on loopback, without another client library.
async fn http_get(url: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8(response).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    }
}

fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&tail[..n]);
        rest = &tail[n + 2..];
    }
    out
}

#[test]
fn the_metrics_reference_lists_exactly_the_registered_families() {
    let telemetry = Telemetry::new();
    let registered: BTreeSet<String> = telemetry.family_names().into_iter().collect();
    // Every family that has series is among them.
    for family in telemetry.registry().gather() {
        assert!(
            registered.contains(family.name()),
            "{} is registered but not listed",
            family.name()
        );
    }
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/metrics.md")).unwrap();
    // The process's families; the Go package's own are listed after them, under their heading.
    let process = docs
        .split_once("## The Go package's own")
        .map_or(docs.as_str(), |(before, _)| before);
    let documented: BTreeSet<String> = process
        .lines()
        .filter_map(|l| l.strip_prefix("| `shadow_reconciler_"))
        .filter_map(|l| l.split_once('`'))
        .map(|(name, _)| format!("shadow_reconciler_{name}"))
        .collect();
    assert!(registered.len() >= 10, "{registered:?}");
    assert_eq!(
        documented, registered,
        "docs/metrics.md and the registry disagree"
    );
}

#[test]
fn the_docs_comparison_can_fail() {
    let telemetry = Telemetry::new();
    let registered: BTreeSet<String> = telemetry.family_names().into_iter().collect();
    let mut fewer = registered.clone();
    fewer.pop_last();
    assert_ne!(fewer, registered, "removing a documented family is noticed");
}

/// A free loopback port (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Kills a child process when dropped, so a failing test leaves nothing running.
struct Reaper(std::process::Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_real_prometheus_server_scrapes_simulate_and_answers_queries() {
    use std::process::{Command, Stdio};

    let dir = tempfile::tempdir().unwrap();
    let (metrics_port, prometheus_port) = (free_port(), free_port());
    let _simulate = Reaper(
        Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
            // In the test's directory: simulate writes ./shadow-data and its report beside it.
            .current_dir(dir.path())
            .args([
                "simulate",
                "--hosted-clusters",
                "20",
                "--addons",
                "5",
                "--seed",
                "9",
                "--serve",
                "--listen",
            ])
            .arg(format!("127.0.0.1:{metrics_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: shadow-reconciler\n    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"),
    )
    .unwrap();
    let _prometheus = Reaper(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{prometheus_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("the Prometheus server is needed (Debian package `prometheus`; scripts/test.sh installs it): {e}")),
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let query = "/api/v1/query?query=sum%20by%20(operation)%20(shadow_reconciler_unblocked_operations_total)";
    let answer = runtime.block_on(async {
        // A bound for a broken run only (5 minutes), however loaded the machine.
        wait_for_async(
            "Prometheus returning the unblocked-operations series",
            Duration::from_mins(5),
            Duration::from_millis(500),
            async || match try_get(&format!("127.0.0.1:{prometheus_port}"), query).await {
                Some(body) if body.contains("\"operation\":\"CoreHCPChain\"") => Ok(body),
                Some(body) => Err(body),
                None => Err("no answer".to_owned()),
            },
        )
        .await
    });
    assert!(answer.contains("\"status\":\"success\""), "{answer}");
}

/// GET `path` from `host`, `None` while the server is not up or answers an error.
async fn try_get(host: &str, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(host).await.ok()?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.ok()?;
    let text = String::from_utf8(response).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| {
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(body)
        } else {
            body.to_owned()
        }
    })
}

#[test]
fn ready_once_every_controller_cache_synced() {
    let telemetry = Arc::new(Telemetry::new());
    let mut synced =
        telemetry.ready_when_listed(&["hostedclusters.x".to_owned(), "addons.x".to_owned()]);
    assert!(!telemetry.is_ready());
    synced.remove(0)();
    assert!(!telemetry.is_ready(), "one of two caches synced");
    synced.remove(0)();
    assert!(telemetry.is_ready());
}

/// `/readyz` follows the sinks: not ready, saying why, while a sink cannot write; ready again
/// once it writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_says_when_a_sink_cannot_write() {
    let telemetry = Arc::new(Telemetry::new());
    let server = Server::start("127.0.0.1:0".parse().unwrap(), telemetry.clone())
        .await
        .unwrap();
    let url = format!("http://{}/readyz", server.addr());
    telemetry.set_ready(true);
    let failing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let check = failing.clone();
    telemetry.add_sink_check(move || {
        check
            .load(std::sync::atomic::Ordering::Relaxed)
            .then(|| "cannot write /data/x.parquet: No space left on device".to_owned())
    });
    let answer = raw_get(server.addr(), "/readyz").await;
    assert!(
        answer.starts_with("HTTP/1.1 503")
            && answer.contains("not ready: a sink cannot write")
            && answer.contains("No space left"),
        "{answer}"
    );
    assert!(!telemetry.is_ready());
    failing.store(false, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(http_get(&url).await, "ready\n");
    server.shutdown().await.unwrap();
}

/// The whole answer to a GET, whatever its status.
async fn raw_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    String::from_utf8_lossy(&response).into_owned()
}
