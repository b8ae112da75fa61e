//! A real third-party controller adopted: Open Cluster Management's `cmainstallprogression`
//! (module `open-cluster-management.io/ocm` v1.2.0 from the Go module proxy, imported unchanged;
//! client-go typed clientset, informers and sdk-go's basecontroller, no controller-runtime),
//! adopted with the Go package in `sdk/go/examples/ocm` (the glue: `adopt.go`), on a real
//! kube-apiserver with OCM's CRDs (from `open-cluster-management.io/api`), a second status writer
//! racing the controller, a restart, the `ingest` sidecar, then `analyze`. The conflict figures
//! of the analysis are the API server's audit log's: the control's 409s (steps and objects) and
//! the objects where the candidate's dry-run re-evaluation would have succeeded.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Process;
use common::apiserver::{ControlPlane, readyz, tail};
use common::wait::{wait_for_async, wait_until, wait_until_async};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};

/// The controller's User-Agent (`sdk/go/examples/ocm`: `UserAgent`).
const CONTROL: &str = "ocm-cma-install-progression/shadow-example";
/// The candidate's (`sdk/go/shadow`: `UserAgent`).
const CANDIDATE: &str = "shadow-reconciler-go-dry-run/0.1.0";
/// The racing second writer's.
const SECOND_WRITER: &str = "ocm-addon-configuration/second-writer";
/// A bound for a broken run, not a speed target.
const PATIENCE: Duration = Duration::from_mins(10);

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
}

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk/go/examples/ocm")
}

/// The adopted controller, built with the Go toolchain from the module proxy's OCM.
fn build_example() -> PathBuf {
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/go/ocm-example");
    let status = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(example_dir())
        .status()
        .unwrap_or_else(|e| panic!("cannot run go ({e}): this test needs Go; see docs/testing.md"));
    assert!(status.success(), "go build of sdk/go/examples/ocm failed");
    out
}

/// OCM's add-on CRDs, as the `open-cluster-management.io/api` module ships them.
fn ocm_crds() -> Vec<CustomResourceDefinition> {
    let out = Command::new("go")
        .args([
            "list",
            "-m",
            "-f",
            "{{.Dir}}",
            "open-cluster-management.io/api",
        ])
        .current_dir(example_dir())
        .output()
        .expect("go list");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("addon/v1alpha1");
    [
        "0000_00_addon.open-cluster-management.io_clustermanagementaddons.crd.yaml",
        "0000_01_addon.open-cluster-management.io_managedclusteraddons.crd.yaml",
    ]
    .iter()
    .map(|name| {
        let text = std::fs::read_to_string(dir.join(name))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(name).display()));
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
    })
    .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

async fn client(kubeconfig: &Path) -> kube::Client {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig).expect("the kubeconfig"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("a kube config");
    kube::Client::try_from(config).expect("a kube client")
}

fn addons(client: kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "addon.open-cluster-management.io".into(),
        version: "v1alpha1".into(),
        api_version: "addon.open-cluster-management.io/v1alpha1".into(),
        kind: "ClusterManagementAddOn".into(),
        plural: "clustermanagementaddons".into(),
    };
    Api::all_with(client, &resource)
}

/// Add-on `i`: two in three install by placements with a default config (their status needs
/// a patch: the second writer races it), the others by the manual strategy, half of them with a
/// default config (a patch) and half without (nothing to write).
fn addon(i: usize) -> (DynamicObject, bool) {
    let name = format!("addon-{i:02}");
    let placements = i % 3 != 2;
    let configs = placements || i.is_multiple_of(2);
    let mut spec = serde_json::json!({
        "installStrategy": if placements {
            serde_json::json!({"type": "Placements", "placements": [{"name": "global", "namespace": "default"}]})
        } else {
            serde_json::json!({"type": "Manual"})
        }
    });
    if configs {
        spec["supportedConfigs"] = serde_json::json!([{
            "group": "addon.open-cluster-management.io",
            "resource": "addondeploymentconfigs",
            "defaultConfig": {"name": "default", "namespace": "open-cluster-management"}
        }]);
    }
    let object: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "ClusterManagementAddOn",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("an add-on");
    (object, configs)
}

/// The controller with `ingest` as its sidecar.
struct Shadowed {
    ingest: Process,
    controller: Option<Process>,
    grpc: u16,
    data: PathBuf,
    dir: PathBuf,
    kubeconfig: PathBuf,
    executable: PathBuf,
    starts: usize,
}

impl Shadowed {
    fn start(dir: &Path, kubeconfig: &Path, executable: PathBuf) -> Self {
        let (grpc, listen) = (common::free_port(), common::free_port());
        let listen = format!("127.0.0.1:{listen}");
        let data = dir.join("data");
        let ingest = Process(
            binary()
                .args(["ingest", "--plan", "addon-install-progression"])
                .args(["--log-format", "json", "--otlp-grpc"])
                .arg(format!("127.0.0.1:{grpc}"))
                .args(["--otlp-http", "127.0.0.1:0", "--listen", &listen])
                .arg("--parquet-dir")
                .arg(&data)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join("ingest.log")).expect("ingest.log"))
                .spawn()
                .expect("start ingest"),
        );
        let ready = wait_until("ingest ready", PATIENCE, Duration::from_millis(50), || {
            readyz(&listen)
        });
        if let Err(e) = ready {
            panic!("{e}\ningest: {}", tail(&dir.join("ingest.log"), 20));
        }
        let mut shadowed = Self {
            ingest,
            controller: None,
            grpc,
            data,
            dir: dir.to_path_buf(),
            kubeconfig: kubeconfig.to_path_buf(),
            executable,
            starts: 0,
        };
        shadowed.start_controller();
        shadowed
    }

    fn start_controller(&mut self) {
        self.starts += 1;
        let log = self.dir.join(format!("controller-{}.log", self.starts));
        let plan = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("deploy/plans/addon-install-progression.yaml");
        self.controller = Some(Process(
            Command::new(&self.executable)
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .arg("--plan")
                .arg(plan)
                // Sampled re-executions meet the control's own fresh writes: they must count
                // in no conflict figure.
                .args(["--second-writer", "--reexecute-sample-rate", "0.3"])
                // Every reconcile compared: the test holds the audit's 409s against the data.
                .args(["--shadow-qps", "unlimited"])
                .env(
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                    format!("http://127.0.0.1:{}", self.grpc),
                )
                .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).expect("controller log"))
                .spawn()
                .expect("start the OCM controller"),
        ));
    }

    fn log(&self) -> String {
        tail(
            &self.dir.join(format!("controller-{}.log", self.starts)),
            30,
        )
    }

    /// SIGTERM the controller: it flushes its spans and exits 0.
    fn stop_controller(&mut self) {
        let mut process = self.controller.take().expect("a running controller");
        let pid = process.0.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let code = process.0.wait().expect("wait").code();
        assert_eq!(
            code,
            Some(0),
            "the controller after SIGTERM:\n{}",
            self.log()
        );
    }

    /// Stops the controller, then the sidecar (the Parquet drains); the dataset.
    fn stop(mut self) -> PathBuf {
        if self.controller.is_some() {
            self.stop_controller();
        }
        let pid = self.ingest.0.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let code = self.ingest.0.wait().expect("wait").code();
        assert_eq!(
            code,
            Some(0),
            "ingest after SIGTERM:\n{}",
            tail(&self.dir.join("ingest.log"), 30)
        );
        self.data.clone()
    }
}

/// Waits until each add-on of `range` whose status needs writing has it written (its default
/// config references), by the control.
fn wait_written(kubeconfig: &Path, range: std::ops::Range<usize>, shadowed: &Shadowed) {
    runtime().block_on(async {
        let api = addons(client(kubeconfig).await);
        let expected: BTreeSet<String> = range
            .filter(|&i| addon(i).1)
            .map(|i| addon(i).0.metadata.name.expect("a name"))
            .collect();
        let written = wait_until_async(
            "the add-ons' status written",
            PATIENCE,
            Duration::from_millis(200),
            async || {
                let list = api
                    .list(&kube::api::ListParams::default())
                    .await
                    .expect("list add-ons");
                let written: BTreeSet<String> = list
                    .items
                    .iter()
                    .filter(|a| {
                        a.data["status"]["defaultconfigReferences"]
                            .as_array()
                            .is_some_and(|r| !r.is_empty())
                    })
                    .filter_map(|a| a.metadata.name.clone())
                    .collect();
                if expected.is_subset(&written) {
                    Ok(())
                } else {
                    Err(format!(
                        "not written: {:?}",
                        expected.difference(&written).collect::<Vec<_>>()
                    ))
                }
            },
        )
        .await;
        if let Err(e) = written {
            panic!("{e}\n{}", shadowed.log());
        }
    });
}

fn create(kubeconfig: &Path, range: std::ops::Range<usize>) {
    runtime().block_on(async {
        let api = addons(client(kubeconfig).await);
        for i in range {
            api.create(&PostParams::default(), &addon(i).0)
                .await
                .expect("create an add-on");
        }
    });
}

#[test]
fn ocms_controller_adopted_in_shadow_gives_the_audit_logs_conflict_figures() {
    let glue = std::fs::read_to_string(example_dir().join("adopt.go")).expect("adopt.go");
    let executable = build_example();
    let plane = ControlPlane::start();
    let kubeconfig = plane.kubeconfig().to_path_buf();
    install_crds(&kubeconfig);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut shadowed = Shadowed::start(dir.path(), &kubeconfig, executable);
    create(&kubeconfig, 0..12);
    wait_written(&kubeconfig, 0..12, &shadowed);
    // A restart: the new process lists every add-on again (its earlier ones need nothing).
    shadowed.stop_controller();
    shadowed.start_controller();
    create(&kubeconfig, 12..24);
    wait_written(&kubeconfig, 0..24, &shadowed);
    let data = shadowed.stop();
    check_against_audit(&plane.audit(), &data);

    // The glue is what docs/client-go.md shows, and it stays small.
    let lines = glue_lines(&glue);
    assert!(lines <= 60, "adopt.go has {lines} lines of glue");
}

fn install_crds(kubeconfig: &Path) {
    runtime().block_on(async {
        let crds: Api<CustomResourceDefinition> = Api::all(client(kubeconfig).await);
        for crd in ocm_crds() {
            let name = crd.metadata.name.clone().expect("a CRD name");
            crds.create(&PostParams::default(), &crd)
                .await
                .expect("create an OCM CRD");
            wait_for_async(
                &format!("{name} established"),
                PATIENCE,
                Duration::from_millis(100),
                async || match crds.get(&name).await {
                    Ok(c) => {
                        let conditions = c.status.and_then(|s| s.conditions).unwrap_or_default();
                        if conditions
                            .iter()
                            .any(|c| c.type_ == "Established" && c.status == "True")
                        {
                            Ok(())
                        } else {
                            Err(format!(
                                "conditions {:?}",
                                conditions
                                    .iter()
                                    .map(|c| format!("{}={}", c.type_, c.status))
                                    .collect::<Vec<_>>()
                            ))
                        }
                    }
                    Err(e) => Err(e.to_string()),
                },
            )
            .await;
        }
    });
}

/// The audit log's status patches of the add-ons, by whom and how they ended, against the
/// analysis of the sidecar's data.
fn check_against_audit(audit: &[common::apiserver::AuditEvent], data: &Path) {
    common::apiserver::assert_shadow_persisted_nothing(audit, CANDIDATE, CONTROL);
    let status_patches = |agent: &str| {
        audit
            .iter()
            .filter(move |e| {
                e.user_agent == agent
                    && e.verb == "patch"
                    && e.resource == "clustermanagementaddons"
                    && e.subresource == "status"
            })
            .collect::<Vec<_>>()
    };
    let control = status_patches(CONTROL);
    let control_409s: Vec<_> = control
        .iter()
        .filter(|e| e.code == 409 && !e.dry_run())
        .collect();
    let conflicted: BTreeSet<&str> = control_409s.iter().map(|e| e.name.as_str()).collect();
    let candidate = status_patches(CANDIDATE);
    let dry_ok: BTreeSet<&str> = candidate
        .iter()
        .filter(|e| e.dry_run() && e.succeeded())
        .map(|e| e.name.as_str())
        .collect();
    check_racing(audit, &conflicted);
    check_reads(audit, &candidate, &conflicted);
    assert!(
        conflicted.is_subset(&dry_ok),
        "an add-on whose control met a 409 has no successful dry-run patch: {:?}",
        conflicted.difference(&dry_ok).collect::<Vec<_>>()
    );

    // The analysis says the same.
    let doc = common::analyze_json(data);
    let plan = doc["plans"]
        .as_array()
        .expect("plans")
        .iter()
        .find(|p| p["plan"] == "addon-install-progression")
        .cloned()
        .unwrap_or_else(|| panic!("no addon-install-progression in the analysis: {doc}"));
    let conflicts = plan["conflicts"].as_array().expect("conflicts").clone();
    let sum = |field: &str| -> u64 { conflicts.iter().filter_map(|c| c[field].as_u64()).sum() };
    eprintln!(
        "audit: {} control 409s on {} add-ons, dry-run patches succeeded on {} add-ons; analysis: {}",
        control_409s.len(),
        conflicted.len(),
        dry_ok.len(),
        serde_json::to_string(&conflicts).unwrap_or_default()
    );
    assert_eq!(
        sum("control_409s"),
        control_409s.len() as u64,
        "{conflicts:?}"
    );
    assert_eq!(sum("objects"), conflicted.len() as u64, "{conflicts:?}");
    assert_eq!(
        sum("would_have_succeeded_objects"),
        conflicted.len() as u64,
        "the candidate's re-evaluation of every 409 would have succeeded (the audit's dry-run 200s): {conflicts:?}"
    );
    assert_eq!(sum("still_failed_objects"), 0, "{conflicts:?}");
    assert_eq!(sum("not_reevaluated"), 0, "{conflicts:?}");
    // Every add-on recovered (the audit's later 200s); the data sees each recovery unless the
    // reconcile it was in was cut short by the controller's SIGTERM (left out, counted apart).
    // An add-on meets one 409 as a rule, and sometimes two (seen once with the other core
    // busy: 17 409s on 16 add-ons, two episodes on one): at least one episode per add-on, and
    // never more episodes than 409s.
    let cancelled = plan["cancelled"].as_u64().expect("cancelled");
    let episodes = |c: &serde_json::Value| {
        c["recovery"]["episodes"].as_u64().unwrap_or(0)
            + c["recovery"]["unrecovered"].as_u64().unwrap_or(0)
    };
    assert!(
        conflicts.iter().map(episodes).sum::<u64>() <= control_409s.len() as u64,
        "more episodes than the audit's 409s: {conflicts:?}"
    );
    for c in &conflicts {
        let recovery = &c["recovery"];
        assert!(
            episodes(c) >= c["objects"].as_u64().unwrap_or(0),
            "an add-on without an episode: {c}"
        );
        assert!(
            recovery["unrecovered"].as_u64().unwrap_or(0) <= cancelled,
            "an episode not recovered, and no reconcile cancelled that could have held its recovery ({cancelled} cancelled): {c}"
        );
    }
    assert_eq!(plan["guard_refusals"], 0, "{plan}");

    check_branches(&plan);
}

/// The second writer's writes, and the control's 409s they caused.
fn check_racing(audit: &[common::apiserver::AuditEvent], conflicted: &BTreeSet<&str>) {
    // The second writer races every add-on whose status needs a patch: before the control's
    // first patch of it and before the candidate's first dry-run patch of it.
    let needs_patch: BTreeSet<String> = (0..24)
        .filter(|&i| addon(i).1)
        .map(|i| addon(i).0.metadata.name.expect("a name"))
        .collect();
    let mut racing: BTreeMap<&str, usize> = BTreeMap::new();
    for e in audit.iter().filter(|e| {
        e.user_agent == SECOND_WRITER
            && e.verb == "patch"
            && e.resource == "clustermanagementaddons"
            && e.succeeded()
    }) {
        *racing.entry(e.name.as_str()).or_default() += 1;
    }
    assert!(
        racing
            .keys()
            .copied()
            .eq(needs_patch.iter().map(String::as_str))
            && racing.values().all(|&n| n == 2),
        "the second writer wrote each add-on that needs a patch twice: {racing:?}"
    );
    assert!(
        conflicted
            .iter()
            .copied()
            .eq(needs_patch.iter().map(String::as_str)),
        "each such add-on's first control patch met a 409: {conflicted:?}"
    );
}

/// Who read the add-ons from the API server: the retrying run, as itself.
fn check_reads(
    audit: &[common::apiserver::AuditEvent],
    candidate: &[&common::apiserver::AuditEvent],
    conflicted: &BTreeSet<&str>,
) {
    // The re-reads after a 409 are the retrying run's: the candidate's, one per retry (each
    // conflicted add-on's first dry-run patch met the second writer); the control, which does
    // not retry, reads from its cache only.
    let gets = |agent: &str| -> BTreeMap<&str, usize> {
        let mut by_name = BTreeMap::new();
        for e in audit.iter().filter(|e| {
            e.user_agent == agent
                && e.verb == "get"
                && e.resource == "clustermanagementaddons"
                && !e.name.is_empty()
        }) {
            *by_name.entry(e.name.as_str()).or_default() += 1;
        }
        by_name
    };
    assert!(
        gets(CONTROL).is_empty(),
        "the control read add-ons from the API server (a candidate's re-read sent as the control's?): {:?}",
        gets(CONTROL)
    );
    let mut dry_409s: BTreeMap<&str, usize> = BTreeMap::new();
    for e in candidate.iter().filter(|e| e.dry_run() && e.code == 409) {
        *dry_409s.entry(e.name.as_str()).or_default() += 1;
    }
    // At most one fresh read per 409 the candidate met (none when the shutdown cut the retry
    // short), and one at least for every add-on whose control met a 409.
    let fresh = gets(CANDIDATE);
    assert!(
        fresh
            .iter()
            .all(|(name, &n)| n <= dry_409s.get(name).copied().unwrap_or(0))
            && conflicted.iter().all(|name| fresh.contains_key(name)),
        "fresh reads {fresh:?}, the candidate's 409s {dry_409s:?}, the control's {conflicted:?}"
    );
}

/// The branches an add-on does not take had nothing to do: never unblocked.
fn check_branches(plan: &serde_json::Value) {
    // A manual add-on's 409 blocked the control's two other branches; the candidate ran them,
    // and they had nothing to do: not unblocked.
    let operations = plan["operations"].as_array().expect("operations");
    for op in operations {
        assert_eq!(
            op["unblocked"], 0,
            "a branch not taken counted as unblocked: {op}"
        );
    }
    let manual_conflicts = (0..24).filter(|&i| i % 3 == 2 && addon(i).1).count() as u64;
    let operation = |name: &str| {
        operations
            .iter()
            .find(|o| o["operation"] == name)
            .unwrap_or_else(|| panic!("{name} not in the analysis"))
    };
    let manual = operation("ManualStrategyStatus");
    assert!(
        manual["blocked_in_control"].as_u64() >= Some(2 * manual_conflicts)
            && manual["blocked_then_run_by_candidate"] == 0,
        "the manual add-ons' 409s blocked the two other branches in the control, which the candidate ran with nothing to do: {manual}"
    );
    for name in ["SelfManagedStatus", "PlacementStatus"] {
        let op = operation(name);
        assert!(
            op["executions_dry_run"].as_u64() >= Some(manual_conflicts),
            "the candidate ran {name} where the control's manual branch met a 409: {op}"
        );
    }
}

/// The lines of `adopt.go` after its imports that are neither blank nor comments.
fn glue_lines(source: &str) -> usize {
    let body = source.split_once("\n)\n").map_or(source, |(_, rest)| rest);
    body.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .count()
}
