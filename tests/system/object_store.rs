//! The dataset on an S3-compatible object store: SeaweedFS, built from the Go module proxy
//! (`scripts/seaweedfs.sh`), started on loopback by the tests. `ingest` writes to `s3://` and
//! `analyze` reads it back with the same numbers as a local dataset of the same spans; the
//! server killed in the middle of uploads leaves no visible partial file, and once it is back
//! every accepted record is there.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use common::wait::{wait_for, wait_until};
use common::{Process, free_port, http_get};
use serde_json::Value;
use shadow_reconciler::dataset::upload::UploadConfig;
use shadow_reconciler::dataset::{Location, ParquetSink, ShutdownError, SinkConfig, reader};
use shadow_reconciler::engine::{ObjectKey, ReconcileRecord, Sink, StepRecord};
use shadow_reconciler::plan::PlanHash;
use shadow_reconciler::vocab::{Category, ErrorClass, Execution, Mode};

const ACCESS_KEY: &str = "shadowtest";
const SECRET_KEY: &str = "shadowtest-secret-key";
pub(crate) const BUCKET: &str = "shadow";
/// How long the server may take to start or come back: only a hung one reaches it.
const START: Duration = Duration::from_mins(3);

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// SeaweedFS's `weed` (`SHADOW_RECONCILER_WEED`, else built by `scripts/seaweedfs.sh`).
fn weed() -> PathBuf {
    common::built_tool("SHADOW_RECONCILER_WEED", "seaweedfs.sh")
}

/// A SeaweedFS server (master, volume, filer and S3 gateway in one process) on loopback ports,
/// its data in `dir`; restartable on the same ports and data.
pub(crate) struct S3 {
    dir: PathBuf,
    ports: [u16; 8],
    process: Option<Process>,
}

impl S3 {
    pub(crate) fn start(dir: &Path) -> Self {
        // gRPC ports are given too: SeaweedFS would otherwise take the HTTP port + 10000.
        let mut server = Self {
            dir: dir.to_owned(),
            ports: std::array::from_fn(|_| free_port()),
            process: None,
        };
        std::fs::create_dir_all(dir.join("data")).unwrap();
        std::fs::write(
            dir.join("s3.json"),
            serde_json::json!({"identities": [{
                "name": "shadow",
                "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                "actions": ["Admin", "Read", "List", "Write", "Tagging"],
            }]})
            .to_string(),
        )
        .unwrap();
        server.up();
        server
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports[6])
    }

    /// Starts the process and waits until the bucket answers a listing.
    fn up(&mut self) {
        let [
            master,
            master_grpc,
            volume,
            volume_grpc,
            filer,
            filer_grpc,
            s3,
            s3_grpc,
        ] = self.ports;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("weed.log"))
            .unwrap();
        self.process = Some(Process(
            Command::new(weed())
                .arg("mini")
                .arg(format!("-dir={}", self.dir.join("data").display()))
                .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1"])
                .arg(format!("-master.port={master}"))
                .arg(format!("-master.port.grpc={master_grpc}"))
                .arg(format!("-volume.port={volume}"))
                .arg(format!("-volume.port.grpc={volume_grpc}"))
                .arg(format!("-filer.port={filer}"))
                .arg(format!("-filer.port.grpc={filer_grpc}"))
                .arg(format!("-s3.port={s3}"))
                .arg(format!("-s3.port.grpc={s3_grpc}"))
                .args(["-s3.port.iceberg=0", "-s3.port.lance=0"])
                .args([
                    "-webdav=false",
                    "-admin.ui=false",
                    "-master.telemetry=false",
                ])
                .arg(format!("-s3.config={}", self.dir.join("s3.json").display()))
                .arg(format!("-bucket={BUCKET}"))
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap(),
        ));
        let location = self.location("probe");
        let Location::Remote(remote) = &location else {
            unreachable!()
        };
        let served = wait_until(
            "SeaweedFS serving the bucket",
            START,
            Duration::from_millis(250),
            || remote.list("").map(|_| ()).map_err(|e| e.to_string()),
        );
        if let Err(e) = served {
            panic!(
                "{e}\n{}",
                std::fs::read_to_string(self.dir.join("weed.log")).unwrap_or_default()
            );
        }
    }

    /// SIGKILL: no shutdown of any kind.
    fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.0.kill().unwrap();
            process.0.wait().unwrap();
        }
    }

    /// The object store settings a client needs (what `AWS_*` variables give the CLI).
    fn options(&self) -> Vec<(&'static str, String)> {
        vec![
            ("aws_endpoint", self.endpoint()),
            ("aws_allow_http", "true".into()),
            ("aws_region", "us-east-1".into()),
            ("aws_access_key_id", ACCESS_KEY.into()),
            ("aws_secret_access_key", SECRET_KEY.into()),
        ]
    }

    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
        ]
    }

    pub(crate) fn location(&self, prefix: &str) -> Location {
        let options = self.options();
        let options: Vec<(&str, &str)> = options.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Location::parse_with(&format!("s3://{BUCKET}/{prefix}"), &options).unwrap()
    }
}

/// `ingest` for the hostedcluster plan writing to `dataset` with `env`; returns it and its OTLP
/// HTTP endpoint, once it serves.
fn ingest(dir: &Path, name: &str, dataset: &str, env: &[(&str, String)]) -> (Process, String) {
    let (grpc, http, listen) = (free_port(), free_port(), free_port());
    let listen = format!("127.0.0.1:{listen}");
    let mut command = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"));
    command
        .args(["ingest", "--plan", "hostedcluster", "--log-format", "json"])
        .args(["--otlp-grpc", &format!("127.0.0.1:{grpc}")])
        .args(["--otlp-http", &format!("127.0.0.1:{http}")])
        .args(["--listen", &listen, "--cluster", "mgmt-s3-1"])
        .args(["--parquet-dir", dataset])
        .args(dataset.starts_with("s3://").then(|| {
            format!(
                "--parquet-spool={}",
                dir.join(format!("{name}-spool")).display()
            )
        }))
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("{name}.log"))).unwrap());
    let process = Process(command.spawn().unwrap());
    let serving = wait_until(
        &format!("ingest {name} serving its metrics"),
        START,
        Duration::from_millis(100),
        || {
            let answer = http_get(&listen, "/metrics");
            if answer.contains("shadow_reconciler_ingest_requests_total") {
                Ok(())
            } else {
                Err(answer.lines().next().unwrap_or("no answer").to_owned())
            }
        },
    );
    if let Err(e) = serving {
        panic!(
            "{e}\n{}",
            std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default()
        );
    }
    (process, format!("http://127.0.0.1:{http}/v1/traces"))
}

fn send(endpoint: &str) {
    let out = Command::new(common::python())
        .arg(root().join("tests/python/send_otlp.py"))
        .arg("--plan")
        .arg(root().join("deploy/plans/hostedcluster.yaml"))
        .args(["--protocol", "http", "--endpoint", endpoint])
        .args(["--objects", "40", "--fail-ssh", "12"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "send_otlp.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn stop(mut process: Process, log: &Path) -> String {
    assert!(
        Command::new("kill")
            .args(["-TERM", &process.0.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let code = process.0.wait().unwrap().code();
    let log = std::fs::read_to_string(log).unwrap_or_default();
    assert_eq!(code, Some(0), "{log}");
    log
}

pub(crate) fn analyze(dataset: &str, env: &[(&str, String)]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args(["analyze", dataset, "--format", "json"])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1 | 3)),
        "analyze {dataset}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `ingest --parquet-dir s3://...` and `analyze s3://...`: the same spans give the same analysis
/// as a local dataset, nothing is left in the spool, and the dataset has no half part.
#[test]
fn ingest_writes_to_s3_and_analyze_reads_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let s3 = S3::start(&dir.join("s3"));
    let env = s3.env();
    let dataset = format!("s3://{BUCKET}/fleet");
    let (remote, remote_endpoint) = ingest(dir, "remote", &dataset, &env);
    let local_dir = dir.join("local");
    let (local, local_endpoint) = ingest(dir, "local", local_dir.to_str().unwrap(), &[]);
    send(&remote_endpoint);
    send(&local_endpoint);
    let log = stop(remote, &dir.join("remote.log"));
    stop(local, &dir.join("local.log"));
    assert!(
        log.contains("records uploaded") && log.contains("0 parts (0 bytes) left in the spool"),
        "{log}"
    );
    let remote = analyze(&dataset, &env);
    let local = analyze(local_dir.to_str().unwrap(), &[]);
    assert_eq!(remote["plans"][0]["reconciles"], 40, "{remote}");
    assert_eq!(remote["files_skipped"], serde_json::json!([]), "{remote}");
    assert_eq!(remote["clusters"][0]["cluster"], "mgmt-s3-1");
    assert_eq!(
        remote["plans"], local["plans"],
        "the same numbers from S3 and from disk"
    );
    let objects = match s3.location("fleet") {
        Location::Remote(r) => r.list("").unwrap(),
        Location::Local(_) => unreachable!(),
    };
    assert!(
        objects.iter().all(|o| {
            let name = o.path.to_string_lossy();
            name.ends_with(".parquet") && name.contains("/cluster=mgmt-s3-1/")
        }),
        "only the dataset's Parquet files: {objects:?}"
    );
}

/// A record whose identifiers do not compress (so files span several upload parts).
fn record(i: usize) -> ReconcileRecord {
    let step = |operation: &str, outcome: &'static str, execution| StepRecord {
        operation: operation.into(),
        phase: 1,
        category: Category::Critical,
        execution,
        outcome,
        error_class: (outcome == "failed").then_some(ErrorClass::Server),
        message: (outcome == "failed").then(|| format!("the server failed on object {i}")),
        blocked_by: Vec::new(),
        offset: Duration::from_micros(1),
        duration: Duration::from_micros(2),
        conflicts: 0,
        conflict: None,
    };
    let noise = |salt: u64| {
        let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt;
        x ^= x >> 31;
        format!("{:016x}{:016x}", x, x.wrapping_mul(0xBF58_476D_1CE4_E5B9))
    };
    ReconcileRecord {
        object: ObjectKey {
            kind: "HostedCluster".into(),
            namespace: Some("clusters".into()),
            name: format!("hc-{i}"),
            uid: Some(noise(1)),
        },
        plan: "hostedcluster".into(),
        plan_hash: PlanHash::from_hex(&"cd".repeat(32)).unwrap(),
        mode: Mode::Shadow,
        flag: None,
        started_at: SystemTime::now(),
        duration: Duration::from_millis(1),
        control: vec![step("PullSecretSync", "failed", Execution::Real)],
        candidate: vec![step("PullSecretSync", "failed", Execution::Reused)],
        unblocked: Vec::new(),
        newly_blocked: Vec::new(),
        changed: Vec::new(),
        control_first_failure: Some("PullSecretSync".into()),
        control_error: Some(noise(2)),
        candidate_error: None,
        trace_id: Some(noise(3)),
        guard_refusals: 0,
        dry_run_requests: 0,
        write_differences: Vec::new(),
        cancelled: false,
        comparison_skipped: None,
    }
}

/// The records in the remote dataset's whole parts, and its files without a sibling.
pub(crate) fn remote_records(location: &Location) -> (u64, usize) {
    let parts = reader::parts_at(location).unwrap();
    let mut records = 0;
    for (reconciles, steps) in &parts.pairs {
        for (path, columns) in [(reconciles, ["reconcile_id"]), (steps, ["reconcile_id"])] {
            // Every file reads to its end: none is partial.
            let rows: usize = reader::open_at(location, path, &columns)
                .unwrap_or_else(|e| panic!("{e}"))
                .map(|b| b.unwrap_or_else(|e| panic!("{e}")).num_rows())
                .sum();
            if path == reconciles {
                records += rows as u64;
            }
        }
    }
    (records, parts.orphans.len())
}

/// SIGKILL of the server while parts are being uploaded (each file in several parts of a
/// multipart upload): no partial file is ever listed, the uploads fail and are retried, the
/// sink keeps accepting into its spool, and once the server is back every accepted record is in
/// the bucket.
#[test]
fn a_server_killed_mid_upload_loses_nothing_and_shows_no_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let mut s3 = S3::start(&dir.join("s3"));
    let location = s3.location("killed");
    let Location::Remote(remote) = location.clone() else {
        unreachable!()
    };
    let mut config = SinkConfig::new(dir.join("spool"));
    config.options.cluster = "mgmt-kill".into();
    // Files of about 10 MB: two parts of a multipart upload each.
    config.options.max_file_rows = 300_000;
    config.options.max_file_bytes = 1 << 30;
    config.backoff = Duration::from_millis(100);
    config.max_backoff = Duration::from_millis(500);
    config.upload = Some(UploadConfig {
        remote,
        max_spool_bytes: 1 << 30,
        // The smallest part S3 takes, so a file takes several requests.
        part_bytes: 5 << 20,
    });
    let sink = ParquetSink::start_with_upload(config, None, None);
    let mut accepted: u64 = 0;
    // In steps the channel holds (a full channel drops, by design), without committing: the
    // writer rotates at its row limit.
    let batch = |sink: &ParquetSink, from: usize, n: usize| {
        for chunk in (from..from + n).collect::<Vec<_>>().chunks(5_000) {
            for &i in chunk {
                sink.record(&record(i));
            }
            wait_for(
                "the writer to take the records",
                START,
                Duration::from_millis(10),
                || match sink.stats() {
                    stats if stats.queued == 0 => Ok(()),
                    stats => Err(format!("{} queued", stats.queued)),
                },
            );
        }
    };
    batch(&sink, 0, 450_000);
    accepted += 450_000;
    // Killed as soon as the first file is up, with more parts waiting in the spool.
    wait_for(
        "a file uploaded",
        START,
        Duration::from_millis(20),
        || match sink.upload_stats().unwrap() {
            stats if stats.files > 0 => Ok(()),
            stats => Err(format!("{stats:?}: {:?}", sink.failing())),
        },
    );
    s3.kill();
    let at_kill = sink.upload_stats().unwrap();
    // While the server is down: more records, into the spool; uploads fail and are counted.
    batch(&sink, 450_000, 150_000);
    accepted += 150_000;
    wait_for(
        "a failed upload while the server is down",
        START,
        Duration::from_millis(50),
        || match sink.upload_stats().unwrap() {
            stats if stats.errors > 0 => Ok(()),
            stats => Err(format!("{stats:?}")),
        },
    );
    assert!(
        sink.upload_stats().unwrap().spool_parts > 0,
        "parts wait in the spool: {:?} (at the kill: {at_kill:?})",
        sink.upload_stats()
    );
    s3.up();
    // Whatever was in flight at the kill is not visible as a file: every listed file reads to
    // its end (a half part, one table's file between a part's two uploads, may be listed:
    // readers skip it).
    remote_records(&location);
    let stats = sink
        .shutdown(Duration::from_mins(3))
        .expect("every part uploaded");
    assert_eq!(stats.accepted, accepted);
    assert_eq!(stats.dropped + stats.lost, 0);
    let upload = sink.upload_stats().unwrap();
    assert_eq!(upload.spool_parts, 0, "{upload:?}");
    assert_eq!(upload.records, accepted, "{upload:?}");
    assert!(upload.errors > 0, "{upload:?}");
    let (records, orphans) = remote_records(&location);
    assert_eq!(records, accepted, "every accepted record is in the bucket");
    assert_eq!(orphans, 0, "no half part once the uploads are done");
    let reconciles = reader::parts_at(&location)
        .unwrap()
        .pairs
        .iter()
        .filter(|(r, _)| {
            r.to_string_lossy()
                .contains("table=reconciles/cluster=mgmt-kill/")
        })
        .count();
    assert!(reconciles >= 3, "several parts: {reconciles}");
}

/// With the store down at shutdown, what was accepted stays in the spool and the shutdown says
/// so; the next sink started on the same spool uploads it once the store is back.
#[test]
fn what_the_grace_leaves_in_the_spool_the_next_start_uploads() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let mut s3 = S3::start(&dir.join("s3"));
    let location = s3.location("restart");
    let Location::Remote(remote) = location.clone() else {
        unreachable!()
    };
    let config = || {
        let mut config = SinkConfig::new(dir.join("spool"));
        config.options.cluster = "mgmt-restart".into();
        config.backoff = Duration::from_millis(100);
        config.max_backoff = Duration::from_millis(500);
        config.upload = Some(UploadConfig {
            remote: remote.clone(),
            max_spool_bytes: 1 << 30,
            part_bytes: 5 << 20,
        });
        config
    };
    s3.kill();
    let sink = ParquetSink::start_with_upload(config(), None, None);
    for i in 0..1_000 {
        sink.record(&record(i));
    }
    // Everything committed to the spool first, so that the short grace below is the uploads'
    // alone, however long the writer takes on a loaded machine.
    assert!(
        sink.flush(Duration::from_mins(2)),
        "the writer did not commit 1,000 records to the spool"
    );
    match sink.shutdown(Duration::from_secs(2)) {
        Err(ShutdownError::UploadIncomplete { parts, .. }) => assert!(parts >= 1),
        other => panic!("the store is down: {other:?}"),
    }
    assert_eq!(sink.stats().accepted, 1_000);
    s3.up();
    let next = ParquetSink::start_with_upload(config(), None, None);
    next.shutdown(Duration::from_mins(2))
        .expect("the next start uploads what was left");
    assert_eq!(next.upload_stats().unwrap().records, 1_000);
    let (records, orphans) = remote_records(&location);
    assert_eq!((records, orphans), (1_000, 0));
}
