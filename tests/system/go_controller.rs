//! The Go package in a Go controller: the HostedCluster example of `sdk/go/examples`, on
//! controller-runtime (informers, list+watch), in shadow, with `ingest` as its sidecar writing
//! Parquet. On the simulator (`sim serve`) and on a real kube-apiserver, with the population of
//! `simulate --scenario missing-secrets`: no dry-run write persists (the servers' audit), the
//! unblocked operations carry real dry-run outcomes, `analyze` finds the same control-plane
//! namespace dependencies as the Rust reference reconciler on the same population, and a flag
//! ConfigMap created mid-run changes the controller's next reconciles.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use common::Process;
use common::apiserver::{ControlPlane, http_exchange, readyz, tail};
use common::wait::{wait_for, wait_until, wait_until_async};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use shadow_reconciler::reconcilers::hostedcluster::HostedCluster;

pub(crate) const HOSTED_CLUSTERS: usize = 200;
/// The candidate's User-Agent (`sdk/go/shadow`: `UserAgent`).
pub(crate) const GO_DRY_RUN: &str = "shadow-reconciler-go-dry-run/0.1.0";
/// The example controller's User-Agent.
pub(crate) const GO_CONTROL: &str = "shadow-reconciler-go-example/0.1.0";
/// A bound for a broken run, not a speed target.
pub(crate) const PATIENCE: Duration = Duration::from_mins(10);

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
}

fn go_example() -> &'static Path {
    common::go_example::binary()
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

pub(crate) async fn client(kubeconfig: &Path) -> kube::Client {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig).expect("the kubeconfig"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("a kube config");
    kube::Client::try_from(config).expect("a kube client")
}

/// `sim serve` as a child process, and the kubeconfig it wrote.
fn start_simulator(dir: &Path) -> (Process, PathBuf, PathBuf) {
    let kubeconfig = dir.join("sim.kubeconfig");
    let stdout = dir.join("sim.out");
    let process = Process(
        binary()
            .args(["sim", "serve", "--kubeconfig-out"])
            .arg(&kubeconfig)
            .stdout(std::fs::File::create(&stdout).expect("sim.out"))
            .stderr(Stdio::null())
            .spawn()
            .expect("start sim serve"),
    );
    wait_for(
        "sim serve serving",
        PATIENCE,
        Duration::from_millis(50),
        || match std::fs::read_to_string(&stdout) {
            Ok(out) if out.contains("serving") => Ok(()),
            Ok(out) => Err(format!("its stdout: {out:?}")),
            Err(e) => Err(format!("{}: {e}", stdout.display())),
        },
    );
    (process, kubeconfig, stdout)
}

pub(crate) fn populate(kubeconfig: &Path) -> serde_json::Value {
    let out = binary()
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
            &HOSTED_CLUSTERS.to_string(),
            "--kubeconfig",
        ])
        .arg(kubeconfig)
        .output()
        .expect("run sim populate");
    assert!(
        out.status.success(),
        "sim populate: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("sim populate prints JSON")
}

/// The Go controller with `ingest` as its sidecar.
pub(crate) struct Shadowed {
    ingest: Process,
    controller: Process,
    listen: String,
    data: PathBuf,
    dir: PathBuf,
    grpc: u16,
    kubeconfig: PathBuf,
    extra: Vec<String>,
    ingest_args: Vec<String>,
    ingest_kubeconfig: PathBuf,
}

/// The Go example controller, sending its spans to `127.0.0.1:{grpc}`, its stderr to `log`.
pub(crate) fn spawn_controller(
    kubeconfig: &Path,
    grpc: u16,
    extra: &[String],
    log: &Path,
) -> Process {
    let plan = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/plans/hostedcluster.yaml");
    Process(
        Command::new(go_example())
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--plan")
            .arg(plan)
            // Every reconcile compared: these tests hold the evidence of a whole run (the
            // budget's skips are tested in sdk/go/shadow/budget_test.go); `extra` may say
            // otherwise.
            .args(["--shadow-qps", "unlimited"])
            .args(extra)
            .env(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{grpc}"),
            )
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).expect("the controller's log"))
            .spawn()
            .expect("start the Go example controller"),
    )
}

fn start_shadowed(dir: &Path, kubeconfig: &Path, extra: &[&str]) -> Shadowed {
    start_shadowed_with(dir, kubeconfig, extra, &[], kubeconfig)
}

/// As [`start_shadowed`], with more arguments for `ingest` (`ingest_extra`) and its
/// `KUBECONFIG` (the rollout driver's identity).
pub(crate) fn start_shadowed_with(
    dir: &Path,
    kubeconfig: &Path,
    extra: &[&str],
    ingest_extra: &[&str],
    ingest_kubeconfig: &Path,
) -> Shadowed {
    let (grpc, listen) = (common::free_port(), common::free_port());
    let listen = format!("127.0.0.1:{listen}");
    let ingest_args: Vec<String> = [
        "ingest",
        "--plan",
        "hostedcluster",
        "--log-format",
        "json",
        "--otlp-grpc",
        &format!("127.0.0.1:{grpc}"),
        "--otlp-http",
        "127.0.0.1:0",
        "--listen",
        &listen,
        "--parquet-dir",
        dir.join("data").to_str().expect("a UTF-8 path"),
    ]
    .iter()
    .map(|&a| a.to_owned())
    .chain(ingest_extra.iter().map(|&a| a.to_owned()))
    .collect();
    let ingest = spawn_ingest(dir, &listen, &ingest_args, ingest_kubeconfig);
    let extra: Vec<String> = extra.iter().map(|&a| a.to_owned()).collect();
    let controller = spawn_controller(kubeconfig, grpc, &extra, &dir.join("controller.log"));
    Shadowed {
        ingest,
        controller,
        listen,
        data: dir.join("data"),
        dir: dir.to_path_buf(),
        grpc,
        kubeconfig: kubeconfig.to_path_buf(),
        extra,
        ingest_args,
        ingest_kubeconfig: ingest_kubeconfig.to_path_buf(),
    }
}

/// `ingest` with `args`, its stderr to `dir/ingest.log`, once it answers `/readyz` on `listen`.
fn spawn_ingest(dir: &Path, listen: &str, args: &[String], kubeconfig: &Path) -> Process {
    let ingest = Process(
        binary()
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("ingest.log")).expect("ingest.log"))
            .spawn()
            .expect("start ingest"),
    );
    let ready = wait_until("ingest ready", PATIENCE, Duration::from_millis(50), || {
        readyz(listen)
    });
    if let Err(e) = ready {
        panic!("{e}\ningest: {}", tail(&dir.join("ingest.log"), 20));
    }
    ingest
}

impl Shadowed {
    fn metrics(&self) -> String {
        http_exchange(&self.listen, "GET", "/metrics", "")
            .map(|(_, body)| body)
            .unwrap_or_default()
    }

    /// Reconciles ingest recorded in `mode` (counters print as integers).
    fn reconciles(&self, mode: &str) -> u64 {
        self.metrics()
            .lines()
            .filter(|l| {
                l.starts_with("shadow_reconciler_reconciles_total")
                    && l.contains(&format!("mode=\"{mode}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    /// Waits until ingest has counted `at_least` reconciles in `mode`.
    fn wait_reconciles(&self, mode: &str, at_least: u64) {
        wait_for(
            &format!("{at_least} reconciles in mode {mode} counted by ingest"),
            PATIENCE,
            Duration::from_millis(250),
            || match self.reconciles(mode) {
                n if n >= at_least => Ok(()),
                n => Err(format!("{n} so far")),
            },
        );
    }

    pub(crate) fn log(&self, name: &str) -> String {
        tail(&self.dir.join(name), 30)
    }

    /// SIGTERM the controller, which must exit 0 (its spans flushed), and start a new one (its
    /// log kept as `controller-{n}.log`).
    fn restart_controller(&mut self, n: usize) {
        let pid = self.controller.0.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let code = self.controller.0.wait().expect("wait").code();
        let log = self.dir.join("controller.log");
        assert_eq!(
            code,
            Some(0),
            "the controller after SIGTERM {n}:\n{}",
            tail(&log, 30)
        );
        std::fs::rename(&log, self.dir.join(format!("controller-{n}.log"))).expect("keep the log");
        self.controller = spawn_controller(&self.kubeconfig, self.grpc, &self.extra, &log);
    }

    /// SIGTERM the sidecar, which must exit 0 (its Parquet drained, its Lease released), and
    /// start a new one with the same arguments (the old log kept as `ingest-{n}.log`).
    pub(crate) fn restart_ingest(&mut self, n: usize) {
        let pid = self.ingest.0.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let code = self.ingest.0.wait().expect("wait").code();
        let log = self.dir.join("ingest.log");
        assert_eq!(
            code,
            Some(0),
            "ingest after SIGTERM {n}:\n{}",
            tail(&log, 30)
        );
        std::fs::rename(&log, self.dir.join(format!("ingest-{n}.log"))).expect("keep the log");
        self.ingest = spawn_ingest(
            &self.dir,
            &self.listen,
            &self.ingest_args,
            &self.ingest_kubeconfig,
        );
    }

    /// SIGTERM the controller (it flushes its spans), then the sidecar (the Parquet drains).
    pub(crate) fn stop(mut self) -> PathBuf {
        for (process, log) in [
            (&mut self.controller, "controller.log"),
            (&mut self.ingest, "ingest.log"),
        ] {
            let pid = process.0.id().to_string();
            let _ = Command::new("kill").args(["-TERM", &pid]).status();
            let code = process.0.wait().expect("wait").code();
            assert_eq!(
                code,
                Some(0),
                "{log} after SIGTERM:\n{}",
                tail(&self.dir.join(log), 30)
            );
        }
        self.data.clone()
    }
}

/// Waits until every HostedCluster carries the `ReconciliationSucceeded` condition: each was
/// reconciled at least once (the engine writes it after the control). `log`: what a timeout
/// shows.
pub(crate) fn wait_reconciled(kubeconfig: &Path, log: impl Fn() -> String) {
    let rt = runtime();
    rt.block_on(async {
        let api: Api<HostedCluster> = Api::all(client(kubeconfig).await);
        let reconciled = wait_until_async(
            "every HostedCluster reconciled",
            PATIENCE,
            Duration::from_millis(250),
            async || {
                let list = api
                    .list(&kube::api::ListParams::default())
                    .await
                    .expect("list HostedClusters");
                let done = list
                    .items
                    .iter()
                    .filter(|hc| {
                        hc.status.as_ref().is_some_and(|s| {
                            s.conditions
                                .iter()
                                .any(|c| c["type"] == "ReconciliationSucceeded")
                        })
                    })
                    .count();
                if list.items.len() == HOSTED_CLUSTERS && done == HOSTED_CLUSTERS {
                    Ok(())
                } else {
                    Err(format!(
                        "{done} of {} HostedClusters reconciled",
                        list.items.len()
                    ))
                }
            },
        )
        .await;
        if let Err(e) = reconciled {
            panic!("{e}:\n{}", log());
        }
    });
}

/// `analyze`'s hostedcluster dependencies as (failed, later), and its JSON.
fn analysis(data: &Path) -> (BTreeSet<(String, String)>, serde_json::Value) {
    let doc = common::analyze_json(data);
    let plan = doc["plans"]
        .as_array()
        .expect("plans")
        .iter()
        .find(|p| p["plan"] == "hostedcluster")
        .cloned()
        .expect("the hostedcluster plan in the analysis");
    let found = plan["dependencies"]
        .as_array()
        .expect("dependencies")
        .iter()
        .map(|d| {
            (
                d["failed"].as_str().unwrap_or_default().to_owned(),
                d["later"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    (found, plan)
}

/// What the Rust reference reconciler finds on the same population (`simulate`, seed 1).
fn rust_reference() -> &'static BTreeSet<(String, String)> {
    static FOUND: OnceLock<BTreeSet<(String, String)>> = OnceLock::new();
    FOUND.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = binary()
            .args(["simulate", "--scenario", "missing-secrets", "--seed", "1"])
            .args([
                "--hosted-clusters",
                &HOSTED_CLUSTERS.to_string(),
                "--addons",
                "0",
            ])
            .args(["--duration", "900", "--parquet-dir"])
            .arg(dir.path())
            .output()
            .expect("run simulate");
        assert!(
            out.status.success(),
            "simulate: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        analysis(dir.path()).0
    })
}

/// The checks both servers share: the namespace dependencies, found with real dry-run outcomes.
fn check_analysis(data: &Path) {
    let (found, plan) = analysis(data);
    assert!(
        found
            .iter()
            .any(|(failed, _)| failed == "CPOImageAndNamespace"),
        "no dependency on the control-plane namespace found: {found:?}"
    );
    // The planted fault's dependencies are the same as the Rust reference's; any other one
    // must start at an operation that failed on 409s only (the cache's lag behind the
    // controller's own writes, which scheduling decides: docs/analyze.md, "Limits").
    let planted = |set: &BTreeSet<(String, String)>| -> BTreeSet<(String, String)> {
        set.iter()
            .filter(|(failed, _)| failed == "CPOImageAndNamespace")
            .cloned()
            .collect()
    };
    assert_eq!(
        planted(&found),
        planted(rust_reference()),
        "the Go controller's data gives other dependencies on the namespace than the Rust reference's"
    );
    for (failed, later) in found
        .iter()
        .filter(|(failed, _)| failed != "CPOImageAndNamespace")
    {
        let classes = plan["operations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["operation"] == failed.as_str())
            .map(|o| o["failures_by_class"].clone());
        assert_eq!(
            classes
                .as_ref()
                .and_then(|c| c.as_object())
                .map(|c| c.keys().collect::<Vec<_>>()),
            Some(vec![&"conflict".to_owned()]),
            "a dependency {failed} -> {later} the world did not plant"
        );
    }
    assert_eq!(plan["guard_refusals"], 0, "{plan}");
    // Unblocked operations carry dry-run outcomes: some would have succeeded, some failed.
    let unblocked = plan["unblocked"].as_array().expect("unblocked");
    let after_namespace = |op: &str| {
        unblocked
            .iter()
            .find(|u| u["first_failure"] == "CPOImageAndNamespace" && u["operation"] == op)
            .unwrap_or_else(|| panic!("{op} never unblocked after CPOImageAndNamespace"))
            .clone()
    };
    let (secret, recovery) = (
        after_namespace("PlatformCredentials"),
        after_namespace("ETCDMemberRecovery"),
    );
    assert!(
        secret["unblocked"].as_u64() > Some(0) && secret["succeeded"] == 0,
        "a Secret in the missing namespace cannot be written: {secret}"
    );
    assert_eq!(
        recovery["succeeded"], recovery["unblocked"],
        "an operation with nothing to write would have succeeded: {recovery}"
    );
    let dry_runs: u64 = plan["operations"]
        .as_array()
        .expect("operations")
        .iter()
        .filter_map(|o| o["executions_dry_run"].as_u64())
        .sum();
    assert!(dry_runs > 0, "no dry-run execution in the data");
}

#[test]
fn the_go_controller_in_shadow_on_the_simulator() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut sim, kubeconfig, sim_out) = start_simulator(dir.path());
    let planted = populate(&kubeconfig);
    assert_eq!(planted["missing_pull_secret"], 34, "{planted}");
    // The simulator reads JSON bodies only (docs/simulator.md).
    let shadowed = start_shadowed(
        dir.path(),
        &kubeconfig,
        &["--content-type", "json", "--flag-namespace", "shadow-flags"],
    );
    wait_reconciled(&kubeconfig, || shadowed.log("controller.log"));
    // The status is written during the reconcile; its span reaches ingest with the SDK's next
    // batch, after it.
    shadowed.wait_reconciles("shadow", HOSTED_CLUSTERS as u64);
    assert_eq!(shadowed.reconciles("off"), 0, "no flag said off yet");

    // The flag: a ConfigMap saying off, then a change to one object; its next reconcile (and
    // every later one) runs in mode off.
    runtime().block_on(async {
        let client = client(&kubeconfig).await;
        Api::<Namespace>::all(client.clone())
            .create(
                &PostParams::default(),
                &Namespace {
                    metadata: ObjectMeta {
                        name: Some("shadow-flags".into()),
                        ..ObjectMeta::default()
                    },
                    ..Namespace::default()
                },
            )
            .await
            .expect("create the flag namespace");
        let flag = ConfigMap {
            metadata: ObjectMeta {
                name: Some("shadow-reconciler-flag".into()),
                ..ObjectMeta::default()
            },
            data: Some([("mode".to_owned(), "off".to_owned())].into()),
            ..ConfigMap::default()
        };
        Api::<ConfigMap>::namespaced(client.clone(), "shadow-flags")
            .create(&PostParams::default(), &flag)
            .await
            .expect("create the flag ConfigMap");
    });
    // The object is touched until a reconcile of it runs in mode off: whenever the controller's
    // cache sees the ConfigMap, the next touch after that reconciles under it.
    let mut touches = 0u32;
    let off = wait_until(
        "a reconcile in mode off",
        PATIENCE,
        Duration::from_secs(1),
        || {
            if shadowed.reconciles("off") >= 1 {
                return Ok(());
            }
            touches += 1;
            runtime().block_on(async {
            Api::<HostedCluster>::namespaced(client(&kubeconfig).await, "team-0")
                .patch(
                    "hc-0000",
                    &PatchParams::default(),
                    &Patch::Merge(
                        serde_json::json!({"metadata": {"annotations": {"test/touched": touches.to_string()}}}),
                    ),
                )
                .await
                .expect("touch hc-0000");
            });
            Err(format!("none after {touches} touches"))
        },
    );
    if let Err(e) = off {
        panic!(
            "no reconcile in mode off after the flag said so: {e}:\n{}",
            shadowed.log("controller.log")
        );
    }
    let data = shadowed.stop();

    // The simulator's audit, by user agent: the candidate's writes were all dry runs.
    let pid = sim.0.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let _ = sim.0.wait();
    let audit = std::fs::read_to_string(&sim_out).expect("the simulator's audit");
    let row = |agent: &str| -> Vec<u64> {
        audit
            .lines()
            .find(|l| l.starts_with(agent))
            .unwrap_or_else(|| panic!("no {agent} in the audit:\n{audit}"))
            .split_whitespace()
            .skip(1)
            .map(|n| n.parse().expect("a count"))
            .collect()
    };
    let (dry, control) = (row(GO_DRY_RUN), row(GO_CONTROL));
    // requests, persisted, dry-run, errors, faulted
    assert_eq!(dry[1], 0, "a dry-run write persisted:\n{audit}");
    assert!(dry[2] > 0, "the candidate sent no dry run:\n{audit}");
    assert!(
        control[1] > 0,
        "the controller's writes are missing:\n{audit}"
    );
    eprintln!("simulator audit:\n{audit}");

    check_analysis(&data);
}

#[test]
fn the_go_controller_in_shadow_on_kube_apiserver() {
    let plane = ControlPlane::start();
    let dir = tempfile::tempdir().expect("temp dir");
    populate(plane.kubeconfig());
    // client-go's default encoding (protobuf for built-in types), as in production.
    let shadowed = start_shadowed(dir.path(), plane.kubeconfig(), &[]);
    wait_reconciled(plane.kubeconfig(), || shadowed.log("controller.log"));
    let data = shadowed.stop();

    common::apiserver::assert_shadow_persisted_nothing(&plane.audit(), GO_DRY_RUN, GO_CONTROL);

    check_analysis(&data);
}

/// SIGTERMs of the controller in the middle of its reconciles.
const RESTARTS: usize = 20;

/// Whether the controller-runtime controller has finished a reconcile, from its `/metrics`
/// (not while it is not serving yet).
fn finished_a_reconcile(address: &str) -> Result<(), String> {
    let (_, body) = http_exchange(address, "GET", "/metrics", "").map_err(|e| e.to_string())?;
    let finished = body
        .lines()
        .filter(|l| {
            l.starts_with("controller_runtime_reconcile_total{")
                && l.contains("controller=\"hostedcluster\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .any(|n| n > 0.0);
    if finished {
        Ok(())
    } else {
        Err("controller_runtime_reconcile_total of hostedcluster: 0".to_owned())
    }
}

/// The HyperShift shape on the real server: the legacy loop as one function with `shadow.Step`
/// marks (`--legacy func`), so every step of both paths is paired at its mark and compared,
/// `CoreHCPChain`'s Service (cluster IP and node port allocated by the server) and `generateName`
/// ConfigMap included; the controller stopped by `SIGTERM` in the middle of its reconciles 20 times (each
/// new process reconciles all 200 HostedClusters again), then run until every one is reconciled.
/// Identical code writes no unexpected difference; a reconcile cut short is counted as cancelled,
/// never a failure (no transport or timeout failure in the data) or a write difference.
#[test]
fn the_go_controllers_legacy_function_through_restarts_on_kube_apiserver() {
    let plane = ControlPlane::start();
    let dir = tempfile::tempdir().expect("temp dir");
    populate(plane.kubeconfig());
    let metrics = format!("127.0.0.1:{}", common::free_port());
    let mut shadowed = start_shadowed(
        dir.path(),
        plane.kubeconfig(),
        &["--legacy", "func", "--metrics-bind-address", &metrics],
    );
    for n in 1..=RESTARTS {
        // In the middle of the new process's reconciles: it has finished one of the 200 its
        // informers queued at start.
        let finished = wait_until(
            &format!("a reconcile finished after start {n}"),
            PATIENCE,
            Duration::from_millis(20),
            || finished_a_reconcile(&metrics),
        );
        if let Err(e) = finished {
            panic!("{e}:\n{}", shadowed.log("controller.log"));
        }
        shadowed.restart_controller(n);
    }
    wait_reconciled(plane.kubeconfig(), || shadowed.log("controller.log"));
    let data = shadowed.stop();

    let audit = plane.audit();
    common::apiserver::assert_shadow_persisted_nothing(&audit, GO_DRY_RUN, GO_CONTROL);
    // The Service is applied (a patch, which creates it), the ConfigMap created.
    let creates = |agent: &str, resource: &str, dry: bool| {
        audit
            .iter()
            .filter(|e| {
                e.user_agent == agent
                    && matches!(e.verb.as_str(), "create" | "patch")
                    && e.resource == resource
                    && e.succeeded()
                    && e.dry_run() == dry
            })
            .count()
    };
    for (resource, what) in [
        ("services", "the private endpoint Service"),
        ("configmaps", "the generateName endpoint ConfigMap"),
    ] {
        assert!(
            creates(GO_DRY_RUN, resource, true) > 0 && creates(GO_CONTROL, resource, false) > 0,
            "{what} was not created by both runs: the comparison of allocated values was not exercised"
        );
    }

    check_analysis(&data);
    let (_, plan) = analysis(&data);
    let cancelled = plan["cancelled"].as_u64().expect("cancelled");
    eprintln!("{RESTARTS} restarts: {cancelled} reconciles cancelled");
    assert!(
        cancelled > 0,
        "{RESTARTS} SIGTERMs in the middle of the reconciles cut none short: {plan}"
    );
    for op in plan["operations"].as_array().expect("operations") {
        let classes = op["failures_by_class"]
            .as_object()
            .expect("failures_by_class");
        assert!(
            !classes.contains_key("transport") && !classes.contains_key("timeout"),
            "a failure the shutdown made: {op}"
        );
    }
    let unexpected: Vec<_> = plan["writes"]
        .as_array()
        .expect("writes")
        .iter()
        .filter(|w| w["intended"] != true)
        .collect();
    assert!(
        unexpected.is_empty(),
        "unexpected write differences from identical code: {unexpected:#?}"
    );
    let chain = plan["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["operation"] == "CoreHCPChain")
        .expect("CoreHCPChain");
    assert!(
        chain["executions_dry_run"].as_u64() > Some(0),
        "CoreHCPChain was never paired: {chain}"
    );
    for group in plan["readiness"].as_array().expect("readiness") {
        for finding in group["findings"].as_array().expect("findings") {
            assert!(
                !["unexpected-writes", "noisy-fields", "unstable-writes"]
                    .contains(&finding["code"].as_str().unwrap_or_default()),
                "a write finding from identical code: {finding}"
            );
        }
    }
}
