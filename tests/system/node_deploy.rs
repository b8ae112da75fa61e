//! The shipped manifests as users deploy them, on a real node (tests/common/node.rs): the image
//! built by `scripts/image.sh` runs as a pod of `deploy/overlays/standalone`, applied with one
//! change, every object in the shadow's paired sample (`--paired-sample-percent 100`: the object
//! without its SSH key is compared whatever its UID, so its dry runs are there to check), the
//! image's reference the manifests' own, its volume a node-local `PersistentVolume` the test
//! provides, as a cluster's provisioner would. The two replicas must become Ready through their
//! probes (one leading, one standing by), reconcile `HostedClusters` created with kubectl, be
//! scraped by a real Prometheus through the shipped `ServiceMonitor`, follow a flag flip and its
//! rollback, hand over when the leader's pod is deleted and when its process is killed
//! (`tests/system/node_handover.rs`), lose no record a leader stopped gracefully accepted and record
//! none twice, and leave the audit log with 0 refused requests, 0 persisted shadow writes of
//! their `ServiceAccount` and the leaders' writes one after the other. Then
//! `deploy/overlays/sidecar`, with the Go example controller's image in place of the overlay's
//! stand-in: its spans reach the `ingest` sidecar over the pod's loopback, and `analyze` run in
//! the sidecar with `kubectl exec` finds the dependency on the control-plane namespace.

use crate::common;
use crate::node_handover;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::node::Node;
use common::wait::wait_until;

pub(crate) const NAMESPACE: &str = "shadow-reconciler";
pub(crate) const SERVICE_ACCOUNT: &str =
    "system:serviceaccount:shadow-reconciler:shadow-reconciler";
/// prometheus-operator's release whose CRDs (`ServiceMonitor`, `PrometheusRule`) the test installs,
/// from the Go module proxy (the module carries them in example/prometheus-operator-crd).
const PROMETHEUS_OPERATOR: &str = "github.com/prometheus-operator/prometheus-operator@v0.89.0";
/// Generous bounds that only decide when a broken deployment is reported.
const SLOW: Duration = Duration::from_mins(5);

pub(crate) fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The images, built by `scripts/image.sh` (cached by cargo and go between runs).
struct Images {
    tool: PathBuf,
    example: PathBuf,
}

fn build_images() -> Images {
    let output = Command::new("bash")
        .arg(repo().join("scripts/image.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/image.sh");
    assert!(
        output.status.success(),
        "scripts/image.sh failed ({}): see above",
        output.status
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let archive = |name: &str| {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("scripts/image.sh printed no line for {name}: {stdout}"));
        PathBuf::from(line.split(' ').nth(3).expect("IMAGE REF DIGEST ARCHIVE"))
    };
    Images {
        tool: archive("shadow-reconciler"),
        example: archive("example-controller"),
    }
}

/// Polls `done` until it holds, panicking with `what` and `context()` (the state then) after
/// [`SLOW`].
pub(crate) fn eventually(what: &str, mut done: impl FnMut() -> bool, context: impl Fn() -> String) {
    let waited = wait_until(what, SLOW, Duration::from_millis(500), || {
        if done() { Ok(()) } else { Err(String::new()) }
    });
    if let Err(e) = waited {
        panic!("{e}\n{}", context());
    }
}

/// What the cluster says about the deployment's pods, for failure messages.
fn describe(node: &Node) -> String {
    describe_in(node, NAMESPACE, "deploy/shadow-reconciler")
}

/// The reconcilers under test create, for real in the control, the `Deployments` of each hosted
/// control plane (images no node here can pull): hundreds of pods on one node would starve the
/// pods under test. An admission policy refuses pods outside their namespaces; the `Deployments`
/// and `ReplicaSets` stay, with `FailedCreate` events, which nothing in the tests reads.
fn only_pods_under_test(node: &Node) {
    apply_stdin(
        node,
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: only-pods-under-test
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [\"\"]
        apiVersions: [v1]
        operations: [CREATE]
        resources: [pods]
  validations:
    - expression: request.namespace in ['shadow-reconciler', 'hypershift']
      message: the test node runs only the pods under test
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: only-pods-under-test
spec:
  policyName: only-pods-under-test
  validationActions: [Deny]
",
    );
}

/// Installs prometheus-operator's `ServiceMonitor` and `PrometheusRule` CRDs, downloaded from the Go
/// module proxy.
fn install_monitoring_crds(node: &Node) {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = Command::new("go")
        .args(["mod", "download", "-json", PROMETHEUS_OPERATOR])
        .current_dir(dir.path())
        .output()
        .expect("run go mod download");
    assert!(
        output.status.success(),
        "go mod download {PROMETHEUS_OPERATOR} failed (is the Go module proxy reachable?): {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let info: serde_json::Value = serde_json::from_slice(&output.stdout).expect("go mod JSON");
    let crds = Path::new(info["Dir"].as_str().expect("the module's Dir"))
        .join("example/prometheus-operator-crd");
    for kind in ["servicemonitors", "prometheusrules"] {
        let file = crds.join(format!("monitoring.coreos.com_{kind}.yaml"));
        node.kubectl(&["apply", "--server-side", "-f", &file.display().to_string()]);
        node.kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=120s",
            &format!("crd/{kind}.monitoring.coreos.com"),
        ]);
    }
}

/// A directory of the node, `volumes/NAME`, that the images' user (65532) may write.
pub(crate) fn node_volume_dir(node: &Node, name: &str) -> PathBuf {
    let data = node.dir().join("volumes").join(name);
    std::fs::create_dir_all(&data).expect("create the volume's directory");
    let chown = Command::new("chown")
        .args(["65532:65532"])
        .arg(&data)
        .status()
        .expect("chown");
    assert!(chown.success(), "chown of the volume failed");
    data
}

/// A node-local `PersistentVolume` for the overlay's claim, as a provisioner would bind it.
fn provide_volume(node: &Node) -> PathBuf {
    let data = node_volume_dir(node, "data");
    let pv = format!(
        "apiVersion: v1
kind: PersistentVolume
metadata:
  name: shadow-reconciler-data
spec:
  capacity: {{storage: 10Gi}}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {{path: {}, type: Directory}}
  claimRef: {{namespace: {NAMESPACE}, name: shadow-reconciler-data}}
",
        data.display()
    );
    apply_stdin(node, &pv);
    data
}

pub(crate) fn apply_stdin(node: &Node, yaml: &str) {
    use std::io::Write as _;
    let mut child = node
        .kubectl_command()
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl apply");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(yaml.as_bytes())
        .expect("write to kubectl");
    let output = child.wait_with_output().expect("kubectl apply");
    assert!(
        output.status.success(),
        "kubectl apply failed: {}\n{yaml}",
        String::from_utf8_lossy(&output.stderr)
    );
}

pub(crate) fn hosted_cluster(name: &str) -> String {
    format!(
        "apiVersion: example.shadow-reconciler.io/v1
kind: HostedCluster
metadata:
  name: {name}
  namespace: clusters
spec:
  release:
    image: quay.io/openshift-release-dev/ocp-release:4.17.3-x86_64
  platform: None
  pullSecret:
    name: pull-secret
"
    )
}

/// A `HostedCluster` whose SSH key Secret does not exist: the legacy loop stops at `SSHKeySync`,
/// and the candidate runs the operations after it as dry runs.
fn hosted_cluster_without_ssh_key(name: &str) -> String {
    format!(
        "{}  sshKey:\n    name: missing-ssh-key\n",
        hosted_cluster(name)
    )
}

/// Waits until the pod has written the object's `ReconciliationSucceeded` condition, whatever
/// its status.
fn wait_attempted(node: &Node, name: &str) {
    eventually(
        &format!("HostedCluster {name} reconciled (and failed) by the pod"),
        || {
            !node
                .kubectl_output(&[
                    "get",
                    "hostedcluster",
                    name,
                    "-n",
                    "clusters",
                    "-o",
                    r#"jsonpath={.status.conditions[?(@.type=="ReconciliationSucceeded")].status}"#,
                ])
                .stdout
                .is_empty()
        },
        || describe(node),
    );
}

fn wait_reconciled(node: &Node, name: &str) {
    eventually(
        &format!("HostedCluster {name} reconciled by the pod"),
        || {
            node.kubectl_output(&[
                "get",
                "hostedcluster",
                name,
                "-n",
                "clusters",
                "-o",
                r#"jsonpath={.status.conditions[?(@.type=="ReconciliationSucceeded")].status}"#,
            ])
            .stdout
                == b"True"
        },
        || describe(node),
    );
}

/// A real Prometheus (Debian's), scraping what the shipped `ServiceMonitor` selects. Debian builds
/// Prometheus without Kubernetes service discovery, so the test does the discovery
/// prometheus-operator's generated configuration would have Prometheus do: the `Services` in the
/// monitor's namespaces with its selector's labels, their `EndpointSlices`, the ready endpoints'
/// addresses on the port the monitor names, written as a `file_sd` target file; the path is the
/// monitor's, only the interval is shortened to 2 s.
pub(crate) struct Prometheus {
    child: Child,
    port: u16,
    monitor: serde_json::Value,
    targets: PathBuf,
    dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(node: &Node) -> Self {
        let monitor: serde_json::Value = serde_json::from_str(&node.kubectl(&[
            "get",
            "servicemonitor",
            "shadow-reconciler",
            "-n",
            NAMESPACE,
            "-o",
            "json",
        ]))
        .expect("ServiceMonitor JSON");
        let dir = tempfile::tempdir().expect("temp dir");
        let targets = dir.path().join("targets.json");
        let config = format!(
            "global: {{scrape_interval: 2s, scrape_timeout: 1s}}
scrape_configs:
  - job_name: serviceMonitor/{NAMESPACE}/shadow-reconciler/0
    metrics_path: {}
    file_sd_configs:
      - files: [{}]
        refresh_interval: 1s
",
            monitor["spec"]["endpoints"][0]["path"]
                .as_str()
                .unwrap_or("/metrics"),
            targets.display()
        );
        let config_file = dir.path().join("prometheus.yml");
        std::fs::write(&config_file, &config).expect("write prometheus.yml");
        let port = common::free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).expect("log"))
            .spawn()
            .expect("start prometheus (Debian's package prometheus; scripts/test.sh installs it)");
        let prometheus = Self {
            child,
            port,
            monitor,
            targets,
            dir,
        };
        prometheus.discover(node);
        prometheus
    }

    /// Writes the targets the `ServiceMonitor` selects now (a restarted pod has a new address).
    pub(crate) fn discover(&self, node: &Node) {
        let spec = &self.monitor["spec"];
        let port_name = spec["endpoints"][0]["port"]
            .as_str()
            .expect("the endpoint's port name");
        let selector: Vec<String> = spec["selector"]["matchLabels"]
            .as_object()
            .expect("the ServiceMonitor selects by matchLabels")
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().expect("a label value")))
            .collect();
        let namespaces: Vec<String> = spec["namespaceSelector"]["matchNames"]
            .as_array()
            .map_or_else(
                || vec![NAMESPACE.to_owned()],
                |a| {
                    a.iter()
                        .filter_map(|n| n.as_str().map(str::to_owned))
                        .collect()
                },
            );
        let mut targets = Vec::new();
        for namespace in &namespaces {
            let services: serde_json::Value = serde_json::from_str(&node.kubectl(&[
                "get",
                "services",
                "-n",
                namespace,
                "-l",
                &selector.join(","),
                "-o",
                "json",
            ]))
            .expect("Services JSON");
            for service in services["items"].as_array().into_iter().flatten() {
                let name = service["metadata"]["name"].as_str().unwrap_or_default();
                let slices: serde_json::Value = serde_json::from_str(&node.kubectl(&[
                    "get",
                    "endpointslices",
                    "-n",
                    namespace,
                    "-l",
                    &format!("kubernetes.io/service-name={name}"),
                    "-o",
                    "json",
                ]))
                .expect("EndpointSlices JSON");
                for slice in slices["items"].as_array().into_iter().flatten() {
                    let Some(port) = slice["ports"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|p| p["name"] == port_name)
                        .and_then(|p| p["port"].as_u64())
                    else {
                        continue;
                    };
                    for endpoint in slice["endpoints"].as_array().into_iter().flatten() {
                        if endpoint["conditions"]["ready"] == false {
                            continue;
                        }
                        for address in endpoint["addresses"].as_array().into_iter().flatten() {
                            targets.push(serde_json::json!({
                                "targets": [format!("{}:{port}", address.as_str().unwrap_or_default())],
                                "labels": {"namespace": namespace, "service": name,
                                           "pod": endpoint["targetRef"]["name"]},
                            }));
                        }
                    }
                }
            }
        }
        let tmp = self.targets.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec(&targets).expect("JSON")).expect("write targets");
        std::fs::rename(&tmp, &self.targets).expect("move the targets in place");
    }

    /// The values of an instant query, by their labels.
    pub(crate) fn query(&self, query: &str) -> Vec<(serde_json::Value, f64)> {
        let path = format!("/api/v1/query?query={}", urlencode(query));
        let body = common::http_get(&format!("127.0.0.1:{}", self.port), &path);
        let json = body.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(json) else {
            return Vec::new();
        };
        doc["data"]["result"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                let value = r["value"][1]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(f64::NAN);
                (r["metric"].clone(), value)
            })
            .collect()
    }

    /// The sum of a query's values (0 when it has none).
    pub(crate) fn sum(&self, query: &str) -> f64 {
        self.query(query).iter().map(|(_, v)| v).sum()
    }

    fn log(&self) -> String {
        common::apiserver::tail(&self.dir.path().join("prometheus.log"), 20)
    }
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The figures of the closing Parquet line in the log `child` follows
/// ([`common::parquet_closing_line`]).
pub(crate) fn parquet_summary(child: Child) -> [u64; 5] {
    common::parquet_closing_line(&read_followed(child))
}

/// The whole log a `kubectl logs -f` followed, once its pod's container has ended.
pub(crate) fn read_followed(mut child: Child) -> String {
    let mut log = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut log)
        .expect("read the log");
    let _ = child.wait();
    log
}

#[test]
fn the_overlays_run_on_a_real_node() {
    let images = build_images();
    let node = Node::start(&[&images.tool, &images.example]);
    only_pods_under_test(&node);
    install_monitoring_crds(&node);
    standalone(&node);
    sidecar(&node);
    node.stop().expect("the node restores what it changed");
}

/// A kustomize overlay in `target/` (kustomize takes a base only by a relative path, so it lives
/// inside the repository): `base`, relative to it, with `patches` (the entries of a
/// `patches:` list). Removed when dropped.
fn overlay_in_target(prefix: &str, base: &str, patches: &str) -> tempfile::TempDir {
    let target = repo().join("target");
    std::fs::create_dir_all(&target).expect("create target/");
    let overlay = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(&target)
        .expect("temp dir");
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {base}\npatches:\n{patches}"
        ),
    )
    .expect("write the kustomization");
    overlay
}

#[allow(clippy::too_many_lines)] // one scenario, step by step
fn standalone(node: &Node) {
    let data = provide_volume(node);

    // The overlay as shipped, every object in the paired sample (its default, a fifth of the
    // objects by UID, would leave the test's one failing object uncompared four times in five).
    let overlay = overlay_in_target(
        "node-standalone-overlay-",
        "../../deploy/overlays/standalone",
        r#"  - target: {group: apps, version: v1, kind: Deployment, name: shadow-reconciler}
    patch: |-
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --paired-sample-percent
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: "100"
"#,
    );
    node.kubectl(&["apply", "-k", &overlay.path().display().to_string()]);
    let rollout = node.kubectl_output(&[
        "rollout",
        "status",
        "-n",
        NAMESPACE,
        "deploy/shadow-reconciler",
        "--timeout=300s",
    ]);
    assert!(
        rollout.status.success(),
        "the pod did not become Ready through its probes: {}\n{}",
        String::from_utf8_lossy(&rollout.stderr),
        describe(node)
    );

    // HostedClusters created with kubectl are reconciled by the pod.
    node.kubectl(&[
        "apply",
        "-f",
        &repo()
            .join("deploy/examples/hostedcluster.yaml")
            .display()
            .to_string(),
    ]);
    for i in 0..3 {
        apply_stdin(node, &hosted_cluster(&format!("node-{i}")));
    }
    for name in ["example", "node-0", "node-1", "node-2"] {
        wait_reconciled(node, name);
    }
    apply_stdin(node, &hosted_cluster_without_ssh_key("no-ssh-key"));
    wait_attempted(node, "no-ssh-key");

    // A real Prometheus finds the pod through the ServiceMonitor and scrapes it.
    let prometheus = Prometheus::start(node);
    eventually(
        "Prometheus scraping the pod through the ServiceMonitor",
        || {
            prometheus.discover(node);
            prometheus.sum("sum(shadow_reconciler_reconciles_total)") >= 5.0
        },
        || format!("up: {:?}\n{}", prometheus.query("up"), prometheus.log()),
    );

    runbook_data_step(node, &data);
    driver_starts_a_rollout(node, &prometheus);

    // The flag flipped with kubectl apply: one rollout group to enforce, in the running pod.
    let flag = std::fs::read_to_string(repo().join("deploy/base/flag-configmap.yaml"))
        .expect("read the flag ConfigMap");
    let enforce = flag
        .replace("mode: shadow", "mode: enforce")
        .replace("enforcedGroups: \"\"", "enforcedGroups: non-critical-syncs");
    assert_ne!(enforce, flag, "the shipped flag ConfigMap changed shape");
    apply_stdin(node, &enforce);
    eventually(
        "the pod following the flag to enforce",
        || prometheus.sum(r#"shadow_reconciler_flag_info{mode="enforce"}"#) >= 1.0,
        || format!("{:?}", prometheus.query("shadow_reconciler_flag_info")),
    );
    apply_stdin(node, &hosted_cluster("enforced"));
    wait_reconciled(node, "enforced");
    eventually(
        "a reconcile in mode enforce",
        || prometheus.sum(r#"shadow_reconciler_reconciles_total{mode="enforce"}"#) >= 1.0,
        || {
            format!(
                "{:?}",
                prometheus.query("shadow_reconciler_reconciles_total")
            )
        },
    );
    // And back: the rollback.
    apply_stdin(node, &flag);
    eventually(
        "the pod following the flag back to shadow",
        || {
            prometheus.sum(r#"shadow_reconciler_flag_info{mode="shadow"}"#) >= 1.0
                && prometheus
                    .sum(r#"shadow_reconciler_flag_changes_total{from="enforce",to="shadow"}"#)
                    >= 1.0
        },
        || format!("{:?}", prometheus.query("shadow_reconciler_flag_info")),
    );

    // The two replicas: the leader's pod deleted hands over at once, committing every record it
    // accepted; the next leader's process killed hands over within the Lease's duration.
    let handovers = node_handover::hand_over(node, &prometheus, |name| {
        apply_stdin(node, &hosted_cluster(name));
        wait_reconciled(node, name);
    });
    let first = handovers.graceful;
    let last = handovers.leaders.last().expect("leaders");
    let second = node_handover::follow_pod_log(node, &last.pod);
    node.kubectl(&[
        "scale",
        "-n",
        NAMESPACE,
        "deploy/shadow-reconciler",
        "--replicas=0",
    ]);
    let second = parquet_summary(second);
    // The volume is final once both pods are gone: the standby's SIGTERM may come after the
    // last leader released the Lease, and then it leads (and commits) for a moment too.
    eventually(
        "the deployment's pods gone after the scale to 0",
        || {
            node.kubectl(&[
                "get",
                "pods",
                "-n",
                NAMESPACE,
                "-l",
                "app.kubernetes.io/name=shadow-reconciler,app.kubernetes.io/component=controller",
                "-o",
                "name",
            ])
            .trim()
            .is_empty()
        },
        || describe(node),
    );
    for (pod, [accepted, written, dropped, errors, lost]) in [("first", first), ("last", second)] {
        eprintln!(
            "{pod} pod: {accepted} records accepted, {written} written, {dropped} dropped, {errors} write errors, {lost} lost"
        );
        assert!(accepted > 0, "the {pod} pod accepted no record");
        assert_eq!(
            (written, dropped, errors, lost),
            (accepted, 0, 0, 0),
            "the {pod} pod lost records"
        );
    }
    // On the volume: no reconcile twice; the two leaders stopped gracefully committed all they
    // accepted, the killed one what it had committed before the kill (its open part is lost
    // with the process); analyze counts them all.
    let (rows, distinct) = common::reconciles_in(&data);
    assert_eq!(distinct, rows, "a reconcile recorded twice on the volume");
    assert!(
        rows >= first[0] + second[0],
        "{rows} reconciles on the volume; the leaders stopped gracefully accepted {} and {}",
        first[0],
        second[0]
    );
    eprintln!(
        "volume: {rows} reconciles, none twice: {} and {} of the leaders stopped gracefully, {} committed by the killed one (or a standby that led last)",
        first[0],
        second[0],
        rows - first[0] - second[0]
    );
    let analysis = common::analyze_json(&data);
    let counted = common::counted_reconciles(&analysis);
    assert_eq!(
        counted, rows,
        "analyze over the volume counts {counted} reconciles"
    );
    node_handover::writes_never_interleave(node, &handovers.leaders);

    // The ServiceAccount in the audit log: nothing refused, no shadow write persisted.
    let audit = node.audit();
    let mine: Vec<_> = audit.iter().filter(|e| e.user == SERVICE_ACCOUNT).collect();
    let refused: Vec<_> = mine.iter().filter(|e| e.code == 403).collect();
    assert!(
        refused.is_empty(),
        "{} requests of the ServiceAccount refused, e.g. {:?}",
        refused.len(),
        refused.first()
    );
    let dry_run_agent = shadow_reconciler::engine::dryrun::USER_AGENT;
    let writes = |e: &&&common::apiserver::AuditEvent| {
        matches!(
            e.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    };
    let shadow: Vec<_> = mine
        .iter()
        .filter(writes)
        .filter(|e| e.user_agent == dry_run_agent)
        .collect();
    let persisted: Vec<_> = shadow
        .iter()
        .filter(|e| e.succeeded() && !e.dry_run())
        .collect();
    assert!(
        persisted.is_empty(),
        "persisted shadow writes: {persisted:?}"
    );
    assert!(
        shadow.iter().any(|e| e.succeeded()),
        "no dry-run write of the pod in the audit: the test would prove nothing"
    );
    let control = mine
        .iter()
        .filter(writes)
        .filter(|e| e.user_agent != dry_run_agent && e.succeeded() && !e.dry_run())
        .count();
    assert!(
        control > 0,
        "no persisted write of the control in the audit"
    );
    eprintln!(
        "audit: {} requests of the ServiceAccount, 0 refused; {} dry-run writes, 0 persisted; {control} persisted control writes",
        mine.len(),
        shadow.len()
    );
}

/// The rollout runbook's data step (docs/flag.md, step 2) as written, on the shipped image: the
/// image's own binary analyses the volume in the pod through `kubectl exec`, and its exit code
/// (0 ready, 1 not ready, 3 inconclusive) comes back. Run once the pod has committed a part of
/// reconciles to the volume (`data`, the node's side of it), as the runbook's step 1 has.
fn runbook_data_step(node: &Node, data: &Path) {
    let committed = || {
        walkdir(data.join("table=reconciles"))
            .iter()
            .any(|p| p.extension().is_some_and(|e| e == "parquet"))
    };
    eventually(
        "a committed part of reconciles on the volume",
        committed,
        || format!("{:?}", walkdir(data.to_path_buf())),
    );
    let doc = std::fs::read_to_string(repo().join("docs/flag.md")).expect("read docs/flag.md");
    let command = doc
        .split('`')
        .find(|span| {
            span.starts_with("kubectl ") && span.contains(" exec ") && span.contains(" analyze ")
        })
        .expect("docs/flag.md's runbook analyses the data with kubectl exec")
        .replace("PLAN/GROUP", "hostedcluster/non-critical-syncs");
    let args: Vec<&str> = command.split_whitespace().skip(1).collect();
    let out = node.kubectl_output(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        matches!(out.status.code(), Some(0 | 1 | 3)) && stdout.contains("non-critical-syncs"),
        "{command}: exit {:?}\n{stdout}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("runbook data step: exit {:?}", out.status.code());
}

/// Every file under `dir`, recursively (none if it does not exist).
fn walkdir(dir: PathBuf) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// The shipped overlay runs the rollout driver: the pod holds the Lease, and a `ShadowRollout`
/// created with kubectl (the first of deploy/rollout/example-rollouts.yaml) is started at its
/// first step, its status written and its group's entry added to the flag's `groups` key,
/// beside a person's entry of another group, which stays. Then both are removed again.
fn driver_starts_a_rollout(node: &Node, prometheus: &Prometheus) {
    eventually(
        "the pod holding the rollout Lease",
        || prometheus.sum("shadow_reconciler_rollout_leader") >= 1.0,
        || format!("{:?}", prometheus.query("shadow_reconciler_rollout_leader")),
    );
    node.kubectl(&[
        "-n",
        NAMESPACE,
        "patch",
        "configmap",
        "shadow-reconciler-flag",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"groups":"critical-core: shadow"}}"#,
    ]);
    let examples = std::fs::read_to_string(repo().join("deploy/rollout/example-rollouts.yaml"))
        .expect("read the example rollouts");
    let first = examples
        .split("\n---\n")
        .next()
        .expect("a first example rollout");
    assert!(
        first.contains("group: hostedcluster/non-critical-syncs"),
        "{first}"
    );
    apply_stdin(node, first);
    let get = |what: &[&str]| {
        node.kubectl_output(&[&["-n", NAMESPACE, "get"], what].concat())
            .stdout
    };
    eventually(
        "the driver starting the rollout and writing its group into the flag",
        || {
            let status = get(&[
                "shadowrollout",
                "non-critical-syncs",
                "-o",
                "jsonpath={.status.phase} {.status.stepOf}",
            ]);
            let groups = get(&[
                "configmap",
                "shadow-reconciler-flag",
                "-o",
                "jsonpath={.data.groups}",
            ]);
            String::from_utf8_lossy(&status) == "Progressing 1/4"
                && String::from_utf8_lossy(&groups)
                    == "critical-core: shadow\nhostedcluster/non-critical-syncs: enforce 5%"
        },
        || {
            format!(
                "{}\n{}",
                String::from_utf8_lossy(&get(&["shadowrollout", "-o", "yaml"])),
                String::from_utf8_lossy(&get(&[
                    "configmap",
                    "shadow-reconciler-flag",
                    "-o",
                    "yaml"
                ]))
            )
        },
    );
    node.kubectl(&[
        "-n",
        NAMESPACE,
        "delete",
        "shadowrollout",
        "non-critical-syncs",
    ]);
    node.kubectl(&[
        "-n",
        NAMESPACE,
        "patch",
        "configmap",
        "shadow-reconciler-flag",
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/data/groups"}]"#,
    ]);
}

/// The `HostedClusters` of the `missing-secrets` population the sidecar's controller reconciles:
/// enough that `analyze` judges the namespace dependency (as `tests/system/go_controller.rs`).
const POPULATION: usize = 200;

#[allow(clippy::too_many_lines)] // one scenario, step by step
fn sidecar(node: &Node) {
    // What a user's manifests hold and the overlay does not: the controller's namespace, its
    // ServiceAccount, and its permissions (the reference reconciler's ClusterRole, which covers
    // the same operations).
    node.kubectl(&["create", "namespace", "hypershift"]);
    node.kubectl(&["create", "serviceaccount", "operator", "-n", "hypershift"]);
    node.kubectl(&[
        "create",
        "clusterrolebinding",
        "operator-hostedcluster",
        "--clusterrole=shadow-reconciler-hostedcluster",
        "--serviceaccount=hypershift:operator",
    ]);
    // controller-runtime's client reads through informers: every kind it reads is listed and
    // watched cluster-wide, which the reference ClusterRole (narrowed by resource names) does not
    // grant.
    node.kubectl(&[
        "create",
        "clusterrole",
        "operator-read",
        "--verb=get,list,watch",
        "--resource=*.*",
    ]);
    node.kubectl(&[
        "create",
        "clusterrolebinding",
        "operator-read",
        "--clusterrole=operator-read",
        "--serviceaccount=hypershift:operator",
    ]);
    // The overlay, with the stand-in's container running the example controller. Every reconcile
    // compared (`--shadow-qps unlimited`): under the default budget (10 requests a second) the
    // evidence for a dependency builds over hours at this population, not in this test's minutes;
    // the budget's skips are tested in tests/suite/shadow_budget.rs and sdk/go/shadow.
    let overlay = overlay_in_target(
        "node-sidecar-overlay-",
        "../../deploy/overlays/sidecar",
        &format!(
            r#"  - target: {{group: apps, version: v1, kind: Deployment, name: operator, namespace: hypershift}}
    patch: |-
      apiVersion: apps/v1
      kind: Deployment
      metadata: {{name: operator, namespace: hypershift}}
      spec:
        template:
          spec:
            containers:
              - name: operator
                image: ghcr.io/shadow-reconciler/example-controller:{}
                args: [--plan, /etc/shadow-reconciler/plans/hostedcluster.yaml, --health-probe-bind-address, ":6060", --shadow-qps, unlimited]
"#,
            env!("CARGO_PKG_VERSION")
        ),
    );
    node.kubectl(&["apply", "-k", &overlay.path().display().to_string()]);
    let rollout = node.kubectl_output(&[
        "rollout",
        "status",
        "-n",
        "hypershift",
        "deploy/operator",
        "--timeout=300s",
    ]);
    assert!(
        rollout.status.success(),
        "the controller's pod with its sidecar did not become Ready: {}\n{}",
        String::from_utf8_lossy(&rollout.stderr),
        describe_in(node, "hypershift", "deploy/operator")
    );

    // The population, created from outside as kubectl would.
    let populate = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args([
            "sim",
            "populate",
            "--scenario",
            "missing-secrets",
            "--seed",
            "1",
        ])
        .args(["--hosted-clusters", &POPULATION.to_string(), "--kubeconfig"])
        .arg(node.kubeconfig())
        .output()
        .expect("run sim populate");
    assert!(
        populate.status.success(),
        "sim populate: {}",
        String::from_utf8_lossy(&populate.stderr)
    );

    // analyze, in the sidecar, over what ingest wrote of the controller's spans.
    let last = std::cell::RefCell::new(String::new());
    eventually(
        "analyze in the sidecar finding the dependency on the control-plane namespace",
        || {
            let out = node.kubectl_output(&[
                "exec",
                "-n",
                "hypershift",
                "deploy/operator",
                "-c",
                "shadow-reconciler",
                "--",
                "shadow-reconciler",
                "analyze",
                "--format",
                "json",
                "/var/lib/shadow-reconciler/data",
            ]);
            *last.borrow_mut() = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
                return false;
            };
            doc["plans"].as_array().into_iter().flatten().any(|p| {
                p["plan"] == "hostedcluster"
                    && p["dependencies"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|d| d["failed"] == "CPOImageAndNamespace")
            })
        },
        || {
            format!(
                "{}\nthe last analyze:\n{}",
                describe_in(node, "hypershift", "deploy/operator"),
                last.borrow().chars().take(3000).collect::<String>()
            )
        },
    );
    // The spans came over the pod's loopback (the overlay has the receivers listen on 127.0.0.1
    // only), counted by the sidecar's metrics, which Prometheus would scrape on the pod's IP.
    let ip = node.kubectl(&[
        "get",
        "pods",
        "-n",
        "hypershift",
        "-l",
        "name=operator",
        "-o",
        "jsonpath={.items[0].status.podIP}",
    ]);
    let metrics = common::http_get(&format!("{}:8080", ip.trim()), "/metrics");
    let accepted: f64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("shadow_reconciler_ingest_spans_total{")
                && l.contains(r#"result="accepted""#)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(accepted > 0.0, "the sidecar accepted no span:\n{metrics}");
    eprintln!(
        "sidecar: {accepted} spans accepted over loopback; analyze in the pod found the namespace dependency"
    );
    crate::node_rollout::sidecar_drives_rollouts(node);
}

/// Pods, events and the log of every container of `target`, for failure messages.
pub(crate) fn describe_in(node: &Node, namespace: &str, target: &str) -> String {
    let pods = node.kubectl_output(&["get", "pods", "-n", namespace, "-o", "wide"]);
    let events =
        node.kubectl_output(&["get", "events", "-n", namespace, "--sort-by=.lastTimestamp"]);
    let logs = node.kubectl_output(&[
        "logs",
        "-n",
        namespace,
        target,
        "--all-containers",
        "--tail=30",
    ]);
    format!(
        "pods:\n{}\nevents:\n{}\nlogs:\n{}{}",
        String::from_utf8_lossy(&pods.stdout),
        String::from_utf8_lossy(&events.stdout),
        String::from_utf8_lossy(&logs.stdout),
        String::from_utf8_lossy(&logs.stderr)
    )
}
