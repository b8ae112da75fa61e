//! A Go controller with replicas, each with its own `ingest` sidecar (deploy/README.md,
//! "Replicas"): two processes of the example controller electing a leader with
//! controller-runtime's `LeaderElection` on a real kube-apiserver, each sending its spans to a
//! sidecar of its own, both sidecars writing one object-store prefix (SeaweedFS), as replicas
//! spread over nodes would. Only the leader's sidecar receives spans (the standby's counts
//! none); the leader stopped, the standby takes over and its sidecar receives the reconciles;
//! each sidecar writes every record it accepted, the prefix holds the two writers' parts apart
//! (two writer ids, no file without its sibling), and `analyze` over it counts exactly their sum.

use crate::common;
use crate::go_controller::{HOSTED_CLUSTERS, populate, spawn_controller, wait_reconciled};
use crate::node_deploy::eventually;
use crate::object_store::{BUCKET, S3, analyze, remote_records};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::apiserver::{ControlPlane, http_exchange, tail};
use common::{Process, free_port};
use shadow_reconciler::dataset::Location;

/// The controller's Lease (the example's default name) and its namespace.
const LEASE: &str = "hostedcluster-example";
const LEASE_NAMESPACE: &str = "default";

/// One replica: the controller and its sidecar.
struct Replica {
    name: &'static str,
    dir: PathBuf,
    ingest: Process,
    controller: Option<Process>,
    listen: String,
}

impl Replica {
    fn start(dir: &Path, name: &'static str, dataset: &str, s3: &S3, kubeconfig: &Path) -> Self {
        let (grpc, listen) = (free_port(), format!("127.0.0.1:{}", free_port()));
        let ingest = Process(
            Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
                .args(["ingest", "--plan", "hostedcluster", "--log-format", "json"])
                .args(["--otlp-grpc", &format!("127.0.0.1:{grpc}")])
                .args(["--otlp-http", "127.0.0.1:0", "--listen", &listen])
                .args(["--cluster", "mgmt-replicas", "--parquet-dir", dataset])
                .arg(format!(
                    "--parquet-spool={}",
                    dir.join(format!("{name}-spool")).display()
                ))
                .envs(s3.env())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join(format!("{name}-ingest.log"))).unwrap())
                .spawn()
                .expect("start ingest"),
        );
        let mut replica = Self {
            name,
            dir: dir.to_owned(),
            ingest,
            controller: None,
            listen,
        };
        eventually(
            &format!("sidecar {name} serving"),
            || {
                http_exchange(&replica.listen, "GET", "/readyz", "")
                    .is_ok_and(|(head, _)| head.contains(" 200"))
            },
            || replica.log("ingest"),
        );
        replica.controller = Some(spawn_controller(
            kubeconfig,
            grpc,
            &[
                "--leader-elect".into(),
                "--leader-elect-namespace".into(),
                LEASE_NAMESPACE.into(),
            ],
            &dir.join(format!("{name}-controller.log")),
        ));
        replica
    }

    fn log(&self, what: &str) -> String {
        tail(&self.dir.join(format!("{}-{what}.log", self.name)), 30)
    }

    /// The sum of a counter family's samples on the sidecar's `/metrics`.
    fn counter(&self, family: &str) -> u64 {
        let body = http_exchange(&self.listen, "GET", "/metrics", "")
            .map(|(_, body)| body)
            .unwrap_or_default();
        body.lines()
            .filter(|l| {
                l.starts_with(&format!("{family}{{")) || l.starts_with(&format!("{family} "))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    fn reconciles(&self) -> u64 {
        self.counter("shadow_reconciler_reconciles_total")
    }

    fn spans(&self) -> u64 {
        self.counter("shadow_reconciler_ingest_spans_total")
    }

    /// SIGTERM to the controller, which must exit 0: its reconciles ended, its spans flushed,
    /// its Lease given up.
    fn stop_controller(&mut self) {
        let mut controller = self.controller.take().expect("a running controller");
        sigterm(&controller);
        let code = controller.0.wait().expect("wait").code();
        assert_eq!(
            code,
            Some(0),
            "controller {} after SIGTERM:\n{}",
            self.name,
            self.log("controller")
        );
    }

    /// SIGTERM to the sidecar, which must exit 0 with its records uploaded; its closing
    /// Parquet figures (accepted, written, dropped, errors, lost).
    fn stop_ingest(mut self) -> [u64; 5] {
        assert!(self.controller.is_none(), "stop the controller first");
        sigterm(&self.ingest);
        let code = self.ingest.0.wait().expect("wait").code();
        let log = std::fs::read_to_string(self.dir.join(format!("{}-ingest.log", self.name)))
            .unwrap_or_default();
        assert_eq!(code, Some(0), "sidecar {} after SIGTERM:\n{log}", self.name);
        assert!(
            log.contains("0 parts (0 bytes) left in the spool"),
            "sidecar {} left parts in its spool:\n{log}",
            self.name
        );
        common::parquet_closing_line(&log)
    }
}

fn sigterm(process: &Process) {
    let pid = process.0.id().to_string();
    let status = Command::new("kill").args(["-TERM", &pid]).status();
    assert!(status.is_ok_and(|s| s.success()), "kill -TERM {pid}");
}

/// The writers of the prefix's parts: each file is `part-{START}-{WRITER}-{SEQUENCE}.parquet`
/// (docs/parquet.md, "Layout"), the writer a random id per process.
fn writers(location: &Location) -> BTreeSet<String> {
    let Location::Remote(remote) = location else {
        unreachable!("an s3:// location")
    };
    remote
        .list("")
        .expect("list the prefix")
        .iter()
        .filter_map(|o| {
            let name = o.path.file_name()?.to_str()?.strip_suffix(".parquet")?;
            let mut fields = name.strip_prefix("part-")?.split('-');
            let (_start, writer) = (fields.next()?, fields.next()?);
            Some(writer.to_owned())
        })
        .collect()
}

#[test]
fn a_go_controller_with_replicas_has_one_sidecar_per_replica_on_kube_apiserver() {
    let plane = ControlPlane::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let s3 = S3::start(&dir.join("s3"));
    let dataset = format!("s3://{BUCKET}/replicas");
    populate(plane.kubeconfig());
    let mut replicas =
        ["a", "b"].map(|name| Replica::start(dir, name, &dataset, &s3, plane.kubeconfig()));
    let logs = |replicas: &[Replica]| {
        replicas
            .iter()
            .map(|r| format!("{}:\n{}\n{}", r.name, r.log("controller"), r.log("ingest")))
            .collect::<Vec<_>>()
            .join("\n")
    };

    // One leads: its sidecar receives a reconcile of every object; the standby's receives
    // nothing at all.
    wait_reconciled(plane.kubeconfig(), || logs(&replicas));
    eventually(
        "a reconcile of every HostedCluster at one sidecar",
        || {
            replicas
                .iter()
                .any(|r| r.reconciles() >= HOSTED_CLUSTERS as u64)
        },
        || logs(&replicas),
    );
    let leader = replicas
        .iter()
        .position(|r| r.reconciles() > 0)
        .expect("a leader's sidecar");
    let standby = 1 - leader;
    let holder = plane.kubectl(&[
        "get",
        "lease",
        LEASE,
        "-n",
        LEASE_NAMESPACE,
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ]);
    eprintln!(
        "replica {} leads (Lease {LEASE} held by {holder}): its sidecar received {} spans, {} reconciles; the standby's {} spans",
        replicas[leader].name,
        replicas[leader].spans(),
        replicas[leader].reconciles(),
        replicas[standby].spans()
    );
    assert_eq!(
        replicas[standby].spans(),
        0,
        "the standby's sidecar received spans: its controller reconciled without the Lease"
    );

    // The leader stopped (a rolling update, a drain): the standby takes over, reconciles every
    // object at its start, and its sidecar receives them; the first sidecar gets nothing more.
    replicas[leader].stop_controller();
    let first = replicas[leader].spans();
    eventually(
        "the standby's sidecar receiving the new leader's reconciles",
        || replicas[standby].reconciles() >= HOSTED_CLUSTERS as u64,
        || logs(&replicas),
    );
    replicas[standby].stop_controller();
    assert_eq!(
        replicas[leader].spans(),
        first,
        "spans after the leader stopped"
    );

    check_dataset(replicas, &s3, &dataset);
}

/// Each sidecar wrote what it accepted; the prefix keeps the two writers apart and is read as
/// one dataset.
fn check_dataset(replicas: [Replica; 2], s3: &S3, dataset: &str) {
    // Each sidecar wrote what it accepted; the prefix keeps the two writers apart and is read
    // as one dataset.
    let [a, b] = replicas;
    let figures = [a.stop_ingest(), b.stop_ingest()];
    for [accepted, written, dropped, errors, lost] in figures {
        assert!(accepted >= HOSTED_CLUSTERS as u64, "{figures:?}");
        assert_eq!(
            (written, dropped, errors, lost),
            (accepted, 0, 0, 0),
            "{figures:?}"
        );
    }
    let total = figures[0][0] + figures[1][0];
    let location = s3.location("replicas");
    let (records, orphans) = remote_records(&location);
    assert_eq!((records, orphans), (total, 0), "the prefix's whole parts");
    let writers = writers(&location);
    assert_eq!(writers.len(), 2, "the parts' writers: {writers:?}");
    let analysis = analyze(dataset, &s3.env());
    // analyze counts a reconcile the leader's SIGTERM cut short as cancelled, apart.
    let cancelled: u64 = analysis["plans"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["cancelled"].as_u64())
        .sum();
    assert_eq!(
        common::counted_reconciles(&analysis) + cancelled,
        total,
        "{analysis}"
    );
    assert_eq!(
        analysis["files_skipped"],
        serde_json::json!([]),
        "{analysis}"
    );
    eprintln!(
        "sidecars wrote {} and {} records to {dataset} as writers {writers:?}; analyze counts {total}",
        figures[0][0], figures[1][0]
    );
}
