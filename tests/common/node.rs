//! A real single-node Kubernetes for the deployment tests: etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler and a kubelet on containerd + runc, all on this machine,
//! so that our images run as pods that are scheduled, probed, scraped and restarted.
//!
//! - kube-apiserver and kubectl come from `scripts/kube-apiserver.sh`, the kubelet,
//!   kube-controller-manager and kube-scheduler from `scripts/kube-apiserver.sh --node` (the same
//!   Go module, built once per machine and cached; `SHADOW_RECONCILER_KUBE_NODE_BIN_DIR` points at
//!   another build); etcd from the `etcd-bin-vendored` crate; containerd, runc and the CNI plugins
//!   are Debian's packages (`scripts/test.sh` installs them).
//! - Images are never pulled: the pause image is built here from `tests/data/pause.c`, the others
//!   are OCI archives the test imports (`scripts/image.sh`).
//! - Pods get a bridge network (`srnode0`, 10.244.0.0/24, the host is 10.244.0.1, which is also
//!   the node's address). There is no kube-proxy: a cluster IP does not route, except the API
//!   server's own, because the API server listens on the `kubernetes` Service's cluster IP
//!   (10.254.254.1:443, an address put on the loopback interface), which is what in-cluster
//!   clients connect to. Network policies are accepted and not enforced.
//! - It needs root (containerd, runc, the network, cgroups) and holds a machine-wide lock: one node
//!   at a time. It records and restores every sysctl the kubelet and the bridge plugin change,
//!   removes the bridge, the address, the mounts, the cgroups and the files outside its directory
//!   it created, and stops every process it started ([`Node::stop`] says what it could not undo).
//!
//! docs/testing.md describes it; `SHADOW_RECONCILER_KEEP_NODE=1` keeps its directory (logs).
#![allow(dead_code)] // each test binary uses a different subset

use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use super::apiserver::{
    AUDIT_POLICY, AuditEvent, Guarded, Issued, etcd_bin, free_port, kube_bin_dir, kubeconfig_text,
    random_token, read_audit, run_ok, tail, write_pki,
};
use super::wait::wait_until;

/// The node's name (the kubelet's identity `system:node:shadow-node`).
pub const NODE_NAME: &str = "shadow-node";
/// The bridge the pods are attached to.
const BRIDGE: &str = "srnode0";
/// The host's address on the bridge: the pods' gateway and the node's internal IP.
pub const NODE_IP: &str = "10.244.0.1";
const POD_SUBNET: &str = "10.244.0.0/24";
/// The Service range; its first address is the `kubernetes` Service's cluster IP, where the API
/// server listens.
const SERVICE_RANGE: &str = "10.254.254.0/24";
pub const API_IP: &str = "10.254.254.1";
const LOCK: &str = "/run/lock/shadow-reconciler-node.lock";
/// Every sysctl the kubelet (`vm.overcommit_memory`, `kernel.panic`, `kernel.panic_on_oops`, and
/// the kernel keyring limits) and the CNI bridge plugin (`ip_forward`) may change.
const SYSCTLS: &[&str] = &[
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
];
/// Fixed paths the kubelet uses whatever its root directory.
const KUBELET_FIXED_DIRS: &[&str] = &["/var/lib/kubelet/device-plugins", "/var/lib/kubelet"];
/// How long a start may take: only decides when a broken start is reported.
const START_TIMEOUT: Duration = Duration::from_mins(5);

/// A running node, torn down on [`Node::stop`] or drop.
pub struct Node {
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    processes: Vec<Guarded>,
    kubectl: PathBuf,
    kubeconfig: PathBuf,
    admin_token: String,
    url: String,
    audit_log: PathBuf,
    socket: PathBuf,
    undo: Undo,
    torn_down: bool,
    _lock: std::fs::File,
}

/// What the node changed outside its directory, to restore.
#[derive(Default)]
struct Undo {
    sysctls: Vec<(String, String)>,
    created_dirs: Vec<PathBuf>,
    bridge: bool,
    api_address: bool,
}

/// The directory with the kubelet, kube-controller-manager and kube-scheduler.
pub fn node_bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("SHADOW_RECONCILER_KUBE_NODE_BIN_DIR") {
            return PathBuf::from(dir);
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kube-apiserver.sh");
        let output = Command::new("bash")
            .arg(&script)
            .arg("--node")
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            output.status.success(),
            "{} --node failed ({}): the node tests need a kubelet; see docs/testing.md",
            script.display(),
            output.status
        );
        PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
    })
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(program))
            .find(|p| p.is_file())
    })
}

fn sh(command: &str) -> Output {
    Command::new("bash")
        .arg("-c")
        .arg(command)
        .output()
        .expect("run bash")
}

fn sh_ok(command: &str) {
    let output = sh(command);
    assert!(
        output.status.success(),
        "`{command}` failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The tools the node needs from the machine, with the package that has each.
fn check_prerequisites() {
    let id = sh("id -u");
    assert_eq!(
        String::from_utf8_lossy(&id.stdout).trim(),
        "0",
        "the node tests run containerd, runc and a bridge network: they need root (CI runs as root)"
    );
    for (program, package) in [
        ("containerd", "containerd"),
        ("ctr", "containerd"),
        ("runc", "runc"),
        ("ip", "iproute2"),
        ("gcc", "gcc"),
        ("openssl", "openssl"),
    ] {
        assert!(
            which(program).is_some(),
            "the node tests need `{program}` (Debian's package {package}; scripts/test.sh installs it)"
        );
    }
    assert!(
        Path::new("/usr/lib/cni/bridge").is_file()
            && Path::new("/usr/lib/cni/host-local").is_file(),
        "the node tests need the CNI plugins in /usr/lib/cni (Debian's package containernetworking-plugins; scripts/test.sh installs it)"
    );
}

/// Removes what a node killed before its teardown (SIGKILL of the test) left outside its
/// directory: its bridge, the API server's address, its cgroups, mounts and shims.
fn clean_leftovers() {
    let _ = sh(&format!("ip link del {BRIDGE} 2>/dev/null"));
    let _ = sh(&format!("ip addr del {API_IP}/32 dev lo 2>/dev/null"));
    let _ = sh("pkill -KILL -f 'containerd-shim-runc-v2 .*shadow-reconciler-node-' 2>/dev/null");
    let mut mounts = mounts_under(Path::new(&std::env::temp_dir()), "shadow-reconciler-node-");
    mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for mount in mounts {
        let _ = Command::new("umount").arg("-l").arg(&mount).status();
    }
    remove_kubepods_cgroups();
}

/// Mount points under `base` whose path contains `marker`.
fn mounts_under(base: &Path, marker: &str) -> Vec<String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| p.replace("\\040", " "))
        .filter(|p| p.starts_with(&*base.to_string_lossy()) && p.contains(marker))
        .collect()
}

/// The kubelet's `kubepods` cgroups in every v1 hierarchy: the processes still in them (a pod's
/// processes whose shim was killed) are killed, then the cgroups removed, deepest first.
fn remove_kubepods_cgroups() {
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    let tops: Vec<PathBuf> = hierarchies
        .flatten()
        .map(|h| h.path().join("kubepods"))
        .filter(|top| top.is_dir())
        .collect();
    let mut dirs = Vec::new();
    for top in &tops {
        collect_dirs(top, &mut dirs);
    }
    // Past the bound, the cgroups that still hold processes are not removed (the teardown
    // reports them).
    let _ = wait_until(
        "the kubepods cgroups emptied",
        Duration::from_secs(20),
        Duration::from_millis(200),
        || {
            let pids: Vec<String> = dirs
                .iter()
                .filter_map(|d| std::fs::read_to_string(d.join("cgroup.procs")).ok())
                .flat_map(|procs| procs.lines().map(str::to_owned).collect::<Vec<_>>())
                .collect();
            if pids.is_empty() {
                return Ok(());
            }
            let _ = Command::new("kill").arg("-KILL").args(&pids).status();
            Err(format!("{} processes killed", pids.len()))
        },
    );
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for dir in dirs {
        let _ = std::fs::remove_dir(&dir);
    }
}

fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    out.push(dir.to_path_buf());
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                collect_dirs(&entry.path(), out);
            }
        }
    }
}

fn read_sysctl(name: &str) -> Option<String> {
    std::fs::read_to_string(Path::new("/proc/sys").join(name))
        .ok()
        .map(|v| v.trim().to_owned())
}

fn containerd_config(root: &Path) -> String {
    let r = root.display();
    format!(
        r#"version = 2
root = "{r}/containerd/root"
state = "{r}/containerd/state"
oom_score = 0
[grpc]
  address = "{r}/containerd/containerd.sock"
[ttrpc]
  address = "{r}/containerd/containerd-ttrpc.sock"
[debug]
  address = ""
[metrics]
  address = ""
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "localhost/pause:local"
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    enable_selinux = false
    disable_apparmor = true
    # This machine drops CAP_SYS_RESOURCE: runc cannot lower oom_score_adj otherwise.
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "{r}/containerd/runc"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "{r}/cni/net.d"
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = ""
"#
    )
}

fn kubelet_config(root: &Path, port: u16, healthz_port: u16) -> String {
    let r = root.display();
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {NODE_IP}
port: {port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz_port}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://{r}/containerd/containerd.sock
imageServiceEndpoint: unix://{r}/containerd/containerd.sock
staticPodPath: ""
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {r}/pki/ca.crt}}
authorization:
  mode: Webhook
tlsCertFile: {r}/pki/kubelet-serving.crt
tlsPrivateKeyFile: {r}/pki/kubelet-serving.key
clusterDomain: cluster.local
makeIPTablesUtilChains: false
serializeImagePulls: false
resolvConf: /etc/resolv.conf
evictionHard: {{memory.available: "100Mi", nodefs.available: "2%", imagefs.available: "2%"}}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
podLogsDir: {r}/kubelet/pod-logs
volumePluginDir: {r}/kubelet/volume-plugins
"#
    )
}

/// The pods' network: a bridge with the host as the pods' default gateway (the route to the API
/// server's address), no masquerading, no iptables.
fn cni_config(root: &Path) -> String {
    format!(
        r#"{{
  "cniVersion": "1.0.0",
  "name": "shadow-node",
  "plugins": [
    {{"type": "bridge", "bridge": "{BRIDGE}", "isGateway": true, "isDefaultGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {{"type": "host-local", "dataDir": "{}/cni/ipam",
               "ranges": [[{{"subnet": "{POD_SUBNET}", "rangeStart": "10.244.0.10", "gateway": "{NODE_IP}"}}]]}}}}
  ]
}}
"#,
        root.display()
    )
}

/// Polls `ready` (`Err`: what it saw instead) until it holds; panics with the ends of the logs
/// after [`START_TIMEOUT`], or as soon as one of `processes` exited.
fn wait(processes: &mut [Guarded], what: &str, mut ready: impl FnMut() -> Result<(), String>) {
    let waited = wait_until(what, START_TIMEOUT, Duration::from_millis(500), || {
        let state = match ready() {
            Ok(()) => return Ok(()),
            Err(state) => state,
        };
        for process in processes.iter_mut() {
            if let Err(e) = process.check_alive() {
                panic!("the test node: {e}");
            }
        }
        Err(state)
    });
    if let Err(e) = waited {
        let logs = processes.iter().fold(String::new(), |mut out, p| {
            let _ = write!(out, "\n--- {} ---\n{}", p.name(), tail(p.log(), 15));
            out
        });
        panic!("the test node: {e}{logs}");
    }
}

/// `Ok` if a command succeeded, else what it said: a wait's last state.
fn succeeded(output: &Output) -> Result<(), String> {
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// kubectl as the admin of a node, detached from the node's borrow.
#[derive(Clone)]
struct Admin {
    kubectl: PathBuf,
    kubeconfig: PathBuf,
    socket: PathBuf,
}

impl Admin {
    fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(&self.kubectl)
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .arg("--request-timeout=60s")
            .args(args)
            .output()
            .expect("run kubectl")
    }

    fn ctr(&self, args: &[&str]) -> Output {
        Command::new("ctr")
            .arg("--address")
            .arg(&self.socket)
            .args(["--namespace", "k8s.io"])
            .args(args)
            .output()
            .expect("run ctr")
    }
}

impl Node {
    fn admin(&self) -> Admin {
        Admin {
            kubectl: self.kubectl.clone(),
            kubeconfig: self.kubeconfig.clone(),
            socket: self.socket.clone(),
        }
    }

    /// Starts the node with the OCI archives `images` imported, and waits until it is Ready.
    pub fn start(images: &[&Path]) -> Self {
        check_prerequisites();
        std::fs::create_dir_all("/run/lock").expect("create /run/lock");
        let lock = std::fs::File::create(LOCK).expect("create the node lock");
        if lock.try_lock().is_err() {
            eprintln!("another test node runs on this machine; waiting for it ({LOCK})");
            lock.lock().expect("lock the node");
        }
        clean_leftovers();
        let kube = kube_bin_dir().to_path_buf();
        let node_bin = node_bin_dir().to_path_buf();
        let dir = tempfile::Builder::new()
            .prefix("shadow-reconciler-node-")
            .tempdir()
            .expect("temp dir");
        let root = dir.path().to_path_buf();
        let mut undo = Undo {
            sysctls: SYSCTLS
                .iter()
                .filter_map(|s| read_sysctl(s).map(|v| ((*s).to_owned(), v)))
                .collect(),
            ..Undo::default()
        };
        for fixed in KUBELET_FIXED_DIRS {
            if !Path::new(fixed).exists() {
                undo.created_dirs.push(PathBuf::from(fixed));
            }
        }
        let mut node = Self {
            dir: Some(dir),
            root: root.clone(),
            processes: Vec::new(),
            kubectl: kube.join("kubectl"),
            kubeconfig: root.join("admin.kubeconfig"),
            admin_token: random_token(),
            url: format!("https://{API_IP}:443"),
            audit_log: root.join("audit.log"),
            socket: root.join("containerd/containerd.sock"),
            undo,
            torn_down: false,
            _lock: lock,
        };
        node.start_network();
        node.start_control_plane(&kube, &node_bin);
        node.start_containerd(images);
        node.start_kubelet(&node_bin);
        node
    }

    fn start_network(&mut self) {
        sh_ok(&format!(
            "ip link add {BRIDGE} type bridge && ip addr add {NODE_IP}/24 dev {BRIDGE} && ip link set {BRIDGE} up"
        ));
        self.undo.bridge = true;
        sh_ok(&format!("ip addr add {API_IP}/32 dev lo"));
        self.undo.api_address = true;
        if let Err(e) = TcpListener::bind((API_IP, 443)) {
            panic!("{API_IP}:443 cannot be bound ({e}): the node's API server listens there");
        }
    }

    fn spawn(&mut self, name: &'static str, program: &Path, args: &[String]) {
        let log = self.root.join(format!("{name}.log"));
        self.processes
            .push(Guarded::spawn(name, program, args, log));
    }

    /// The PKI, the tokens of the admin and the components, their kubeconfigs, the audit policy.
    fn write_credentials(&self) {
        let root = &self.root;
        let pki = root.join("pki");
        std::fs::create_dir_all(&pki).expect("create pki");
        // The node's CA, the API server's serving certificate (for its Service's names and
        // addresses), the kubelet's serving certificate, and the API server's client certificate
        // for the kubelets.
        let apiserver = format!(
            "subjectAltName=IP:{API_IP},IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n"
        );
        let kubelet_subject = format!("/CN={NODE_NAME}/O=system:nodes");
        let kubelet =
            format!("subjectAltName=IP:{NODE_IP},DNS:{NODE_NAME}\nextendedKeyUsage=serverAuth\n");
        write_pki(
            &pki,
            "shadow-reconciler-node-ca",
            &[
                Issued {
                    name: "apiserver",
                    subject: "/CN=kube-apiserver",
                    extensions: &apiserver,
                },
                Issued {
                    name: "kubelet-serving",
                    subject: &kubelet_subject,
                    extensions: &kubelet,
                },
                Issued {
                    name: "apiserver-kubelet-client",
                    subject: "/CN=kube-apiserver-kubelet-client/O=system:masters",
                    extensions: "extendedKeyUsage=clientAuth\n",
                },
            ],
        );
        let tokens = [
            ("kcm", "system:kube-controller-manager", ""),
            ("scheduler", "system:kube-scheduler", ""),
            (
                "kubelet",
                &*format!("system:node:{NODE_NAME}"),
                "system:nodes",
            ),
        ]
        .map(|(name, user, group)| (name, user.to_owned(), group, random_token()));
        let mut token_file = format!("{},admin,admin,system:masters\n", self.admin_token);
        for (name, user, group, token) in &tokens {
            let _ = writeln!(token_file, "{token},{user},{name},\"{group}\"");
            std::fs::write(
                root.join(format!("{name}.kubeconfig")),
                kubeconfig_text(&self.url, &pki.join("ca.crt"), token, name),
            )
            .expect("write a kubeconfig");
        }
        std::fs::write(root.join("tokens.csv"), token_file).expect("write the token file");
        std::fs::write(
            &self.kubeconfig,
            kubeconfig_text(&self.url, &pki.join("ca.crt"), &self.admin_token, "admin"),
        )
        .expect("write the admin kubeconfig");
        std::fs::write(root.join("audit-policy.yaml"), AUDIT_POLICY).expect("audit policy");
    }

    fn start_control_plane(&mut self, kube: &Path, node_bin: &Path) {
        self.write_credentials();
        let root = self.root.clone();
        let pki = root.join("pki");
        let p = |name: &str| pki.join(name).display().to_string();
        let (client_port, peer_port) = (free_port(), free_port());
        let etcd_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        self.spawn(
            "etcd",
            etcd_bin(),
            &[
                format!("--data-dir={}", root.join("etcd").display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=default={peer_url}"),
                "--unsafe-no-fsync".to_owned(),
                "--log-level=warn".to_owned(),
            ],
        );
        self.spawn(
            "kube-apiserver",
            &kube.join("kube-apiserver"),
            &[
                format!("--etcd-servers={etcd_url}"),
                format!("--bind-address={API_IP}"),
                format!("--advertise-address={API_IP}"),
                "--secure-port=443".to_owned(),
                format!("--tls-cert-file={}", p("apiserver.crt")),
                format!("--tls-private-key-file={}", p("apiserver.key")),
                format!("--client-ca-file={}", p("ca.crt")),
                format!("--token-auth-file={}", root.join("tokens.csv").display()),
                "--authorization-mode=Node,RBAC".to_owned(),
                "--enable-admission-plugins=NodeRestriction".to_owned(),
                format!("--service-account-key-file={}", p("sa.pub")),
                format!("--service-account-signing-key-file={}", p("sa.key")),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
                format!("--service-cluster-ip-range={SERVICE_RANGE}"),
                "--allow-privileged=true".to_owned(),
                format!(
                    "--kubelet-client-certificate={}",
                    p("apiserver-kubelet-client.crt")
                ),
                format!("--kubelet-client-key={}", p("apiserver-kubelet-client.key")),
                format!("--kubelet-certificate-authority={}", p("ca.crt")),
                "--kubelet-preferred-address-types=InternalIP".to_owned(),
                format!(
                    "--audit-policy-file={}",
                    root.join("audit-policy.yaml").display()
                ),
                format!("--audit-log-path={}", self.audit_log.display()),
                "--audit-log-mode=blocking".to_owned(),
                "--audit-log-format=json".to_owned(),
                format!("--cert-dir={}", root.join("apiserver-certs").display()),
            ],
        );
        let admin = self.admin();
        wait(&mut self.processes, "kube-apiserver ready", || {
            succeeded(&admin.kubectl(&["get", "--raw", "/readyz"]))
        });
        let kcm = root.join("kcm.kubeconfig").display().to_string();
        self.spawn(
            "kube-controller-manager",
            &node_bin.join("kube-controller-manager"),
            &[
                format!("--kubeconfig={kcm}"),
                format!("--authentication-kubeconfig={kcm}"),
                format!("--authorization-kubeconfig={kcm}"),
                "--bind-address=127.0.0.1".to_owned(),
                format!("--secure-port={}", free_port()),
                "--use-service-account-credentials=true".to_owned(),
                format!("--service-account-private-key-file={}", p("sa.key")),
                format!("--root-ca-file={}", p("ca.crt")),
                "--leader-elect=false".to_owned(),
                format!("--cert-dir={}", root.join("kcm-certs").display()),
            ],
        );
        let sched = root.join("scheduler.kubeconfig").display().to_string();
        self.spawn(
            "kube-scheduler",
            &node_bin.join("kube-scheduler"),
            &[
                format!("--kubeconfig={sched}"),
                format!("--authentication-kubeconfig={sched}"),
                format!("--authorization-kubeconfig={sched}"),
                "--bind-address=127.0.0.1".to_owned(),
                format!("--secure-port={}", free_port()),
                "--leader-elect=false".to_owned(),
            ],
        );
    }

    fn start_containerd(&mut self, images: &[&Path]) {
        let root = self.root.clone();
        for dir in ["containerd", "cni/net.d", "cni/ipam", "kubelet"] {
            std::fs::create_dir_all(root.join(dir)).expect("create a node directory");
        }
        std::fs::write(root.join("containerd.toml"), containerd_config(&root))
            .expect("write containerd's config");
        // Written in place before the kubelet starts: containerd reads the directory on change.
        std::fs::write(
            root.join("cni/net.d/10-shadow-node.conflist"),
            cni_config(&root),
        )
        .expect("write the CNI config");
        self.spawn(
            "containerd",
            &which("containerd").expect("containerd"),
            &[format!(
                "--config={}",
                root.join("containerd.toml").display()
            )],
        );
        let admin = self.admin();
        wait(&mut self.processes, "containerd serving", || {
            succeeded(&admin.ctr(&["version"]))
        });
        let pause = self.build_pause();
        for image in std::iter::once(pause.as_path()).chain(images.iter().copied()) {
            let output = self.ctr(&["images", "import", &image.display().to_string()]);
            assert!(
                output.status.success(),
                "ctr images import {} failed: {}",
                image.display(),
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }

    /// The sandbox image: `tests/data/pause.c` linked statically, in an image of its own.
    fn build_pause(&self) -> PathBuf {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let binary = self.root.join("pause");
        run_ok(
            Command::new("gcc")
                .args(["-Os", "-static", "-o"])
                .arg(&binary)
                .arg(manifest.join("tests/data/pause.c")),
            "gcc -static tests/data/pause.c",
        );
        let archive = self.root.join("pause.oci.tar");
        run_ok(
            Command::new("python3")
                .arg(manifest.join("scripts/oci_image.py"))
                .args(["--name", "localhost/pause:local", "--out"])
                .arg(&archive)
                .args([
                    "--entrypoint",
                    r#"["/pause"]"#,
                    "--user",
                    "65535:65535",
                    "--file",
                ])
                .arg(format!("{}:pause:0755", binary.display()))
                .env("SOURCE_DATE_EPOCH", "0"),
            "scripts/oci_image.py (the pause image)",
        );
        archive
    }

    fn start_kubelet(&mut self, node_bin: &Path) {
        let root = self.root.clone();
        let config = root.join("kubelet.yaml");
        std::fs::write(&config, kubelet_config(&root, free_port(), free_port()))
            .expect("write the kubelet's config");
        self.spawn(
            "kubelet",
            &node_bin.join("kubelet"),
            &[
                format!("--config={}", config.display()),
                format!("--kubeconfig={}", root.join("kubelet.kubeconfig").display()),
                format!("--root-dir={}", root.join("kubelet").display()),
                format!("--cert-dir={}", root.join("kubelet/pki").display()),
                format!("--hostname-override={NODE_NAME}"),
                format!("--node-ip={NODE_IP}"),
                "--v=1".to_owned(),
            ],
        );
        let admin = self.admin();
        wait(&mut self.processes, "the node Ready", || {
            let ready = admin.kubectl(&[
                "get",
                "node",
                NODE_NAME,
                "-o",
                r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}"#,
            ]);
            succeeded(&ready)?;
            match String::from_utf8_lossy(&ready.stdout).as_ref() {
                "True" => Ok(()),
                other => Err(format!("Ready: {other:?}")),
            }
        });
        // Pods need their namespace's ServiceAccount, which kube-controller-manager creates.
        wait(&mut self.processes, "the default ServiceAccount", || {
            succeeded(&admin.kubectl(&["get", "serviceaccount", "default", "-n", "default"]))
        });
    }

    /// containerd's client on the node's socket, in the kubelet's namespace.
    pub fn ctr(&self, args: &[&str]) -> Output {
        self.admin().ctr(args)
    }

    /// The admin's bearer token (group `system:masters`).
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// The API server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A kubeconfig for the admin (group `system:masters`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The node's directory (logs of every process, the audit log).
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// The kubectl binary.
    pub fn kubectl_bin(&self) -> &Path {
        &self.kubectl
    }

    /// Runs kubectl as the admin; panics with its stderr if it fails. Returns stdout.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let output = self.kubectl_output(args);
        assert!(
            output.status.success(),
            "kubectl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Runs kubectl as the admin.
    pub fn kubectl_output(&self, args: &[&str]) -> Output {
        self.kubectl_command()
            .args(args)
            .output()
            .expect("run kubectl")
    }

    /// kubectl as the admin, to add arguments, stdin or a working directory to.
    pub fn kubectl_command(&self) -> Command {
        let mut command = Command::new(&self.kubectl);
        command
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .arg("--request-timeout=60s");
        command
    }

    /// Every request the API server audited so far (see the policy above).
    pub fn audit(&self) -> Vec<AuditEvent> {
        read_audit(&self.audit_log)
    }

    /// Tears the node down and says what it could not restore.
    pub fn stop(mut self) -> Result<(), String> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), String> {
        if self.torn_down {
            return Ok(());
        }
        self.torn_down = true;
        let mut problems = Vec::new();
        // Pods first, through the kubelet, so that it stops their containers and sandboxes.
        if self.processes.iter().any(|p| p.name() == "kubelet") {
            let _ = self.kubectl_output(&[
                "delete",
                "pods",
                "--all",
                "--all-namespaces",
                "--grace-period=5",
                "--wait=false",
            ]);
            // Not a failure of its own past the bound: what is left is stopped below, and
            // reported if it cannot be.
            let stopped = wait_until(
                "the pods deleted and their containers stopped",
                Duration::from_mins(2),
                Duration::from_millis(500),
                || match (self.pods(), self.running_tasks()) {
                    (0, 0) => Ok(()),
                    (pods, tasks) => Err(format!("{pods} pods, {tasks} running tasks")),
                },
            );
            if let Err(e) = stopped {
                eprintln!("the test node's teardown: {e}");
            }
        }
        // Then the processes, in the reverse order of their start.
        while let Some(mut process) = self.processes.pop() {
            process.stop();
        }
        // Whatever containerd's shims still run (pods the kubelet did not stop in time).
        let root = self.root.display().to_string();
        let _ = sh(&format!(
            "pkill -KILL -f 'containerd-shim-runc-v2 .*{root}' 2>/dev/null"
        ));
        let mut mounts = mounts_under(&self.root, "");
        mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for mount in &mounts {
            let _ = Command::new("umount").arg("-l").arg(mount).status();
        }
        if !mounts_under(&self.root, "").is_empty() {
            problems.push(format!("mounts left under {root}"));
        }
        // The kubelet's symlinks to its pods' logs in the fixed /var/log/containers.
        if let Ok(links) = std::fs::read_dir("/var/log/containers") {
            for link in links.flatten() {
                if std::fs::read_link(link.path())
                    .is_ok_and(|target| target.starts_with(&self.root))
                {
                    let _ = std::fs::remove_file(link.path());
                }
            }
        }
        remove_kubepods_cgroups();
        if Path::new("/sys/fs/cgroup/memory/kubepods").exists() {
            problems.push("the kubepods cgroups could not be removed".to_owned());
        }
        if self.undo.bridge && !sh(&format!("ip link del {BRIDGE}")).status.success() {
            problems.push(format!("the bridge {BRIDGE} could not be removed"));
        }
        if self.undo.api_address
            && !sh(&format!("ip addr del {API_IP}/32 dev lo"))
                .status
                .success()
        {
            problems.push(format!("the address {API_IP} could not be removed from lo"));
        }
        for dir in &self.undo.created_dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
        for (name, value) in &self.undo.sysctls {
            let path = Path::new("/proc/sys").join(name);
            if read_sysctl(name).as_deref() != Some(value.as_str()) {
                let _ = std::fs::write(&path, value);
                if read_sysctl(name).as_deref() != Some(value.as_str()) {
                    problems.push(format!("sysctl {name} could not be restored to {value}"));
                }
            }
        }
        if let Some(dir) = self.dir.take() {
            if std::env::var_os("SHADOW_RECONCILER_KEEP_NODE").is_some() {
                eprintln!("node directory kept: {}", dir.keep().display());
            } else if let Err(e) = dir.close() {
                problems.push(format!("the node directory could not be removed: {e}"));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    fn pods(&self) -> usize {
        let output = self.kubectl_output(&["get", "pods", "--all-namespaces", "--no-headers"]);
        String::from_utf8_lossy(&output.stdout).lines().count()
    }

    fn running_tasks(&self) -> usize {
        let output = self.ctr(&["tasks", "list", "--quiet"]);
        String::from_utf8_lossy(&output.stdout).lines().count()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("the test node's teardown: {e}");
        }
    }
}
