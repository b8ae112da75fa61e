//! A real control plane for the tests: etcd and kube-apiserver on loopback, as envtest gives Go
//! controllers, plus what envtest does not: RBAC with an admin and service-account tokens, and an
//! audit log of every write that the tests read back.
//!
//! - etcd is the official binary shipped by the `etcd-bin-vendored` crate (pinned in Cargo.toml);
//! - kube-apiserver and kubectl are built from the Go module proxy by `scripts/kube-apiserver.sh`
//!   (once per machine, cached); `SHADOW_RECONCILER_KUBE_BIN_DIR` points at another build.
//!
//! Both run from a temporary directory and are stopped when the [`ControlPlane`] is dropped, also
//! when the test panics. Each runs under a small shell guard that stops it when the test process's
//! end of a pipe closes, so even a test process killed with SIGKILL leaves nothing behind.
//!
//! There is no kube-controller-manager, as in envtest: namespaces stay `Terminating`, nothing is
//! garbage-collected, and no service account or token is created unless a test asks for it.
#![allow(dead_code)] // each test binary uses a different subset

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::wait::{wait_for, wait_until};

/// The kube-apiserver version the tests are held to (the build script takes it from
/// tools/kube-apiserver/go.mod; the harness checks that `/version` agrees).
pub const KUBE_VERSION: &str = "v1.37.2";

/// Names the test process's user agents carry, so the audit can tell them apart.
pub const ADMIN_USER_AGENT: &str = "shadow-reconciler-tests/admin";

/// How long a start may take before the harness gives up. A generous bound: it only decides when
/// a broken start is reported, never whether a working one passes.
const START_TIMEOUT: Duration = Duration::from_mins(5);

/// A running etcd and kube-apiserver, stopped on drop.
pub struct ControlPlane {
    dir: tempfile::TempDir,
    etcd: Guarded,
    apiserver: Guarded,
    url: String,
    bin: PathBuf,
    kubeconfig: PathBuf,
    ca: PathBuf,
    admin_token: String,
    audit_log: PathBuf,
    etcd_url: String,
}

/// A process run under the guard: closing `stdin` stops it.
pub struct Guarded {
    name: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    log: PathBuf,
}

impl Guarded {
    pub fn spawn(name: &'static str, program: &Path, args: &[String], log: PathBuf) -> Self {
        // The guard: run the program with its output in `log`; when our end of the pipe on the
        // guard's stdin closes (drop, panic, or this process killed), send it SIGTERM, then SIGKILL.
        const GUARD: &str = r#"exec 3<&0
"$@" </dev/null >>"$LOG" 2>&1 &
child=$!
{ read -r _ <&3; kill -TERM "$child" 2>/dev/null; sleep 10; kill -KILL "$child" 2>/dev/null; } &
watcher=$!
wait "$child"
status=$?
kill "$watcher" 2>/dev/null
exit "$status""#;
        let child = Command::new("bash")
            .arg("-c")
            .arg(GUARD)
            .arg("guard")
            .arg(program)
            .args(args)
            .env("LOG", &log)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({}): {e}", program.display()));
        let mut guarded = Self {
            name,
            child,
            stdin: None,
            log,
        };
        guarded.stdin = guarded.child.stdin.take();
        guarded
    }

    /// The process's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Its log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// An error with the end of the log if the process has exited.
    pub fn check_alive(&mut self) -> Result<(), String> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Err(format!(
                "{} exited ({status}) while starting; the end of its log ({}):\n{}",
                self.name,
                self.log.display(),
                tail(&self.log, 40)
            ));
        }
        Ok(())
    }

    /// Stops the process: SIGTERM, then SIGKILL 10 s later; waits for it.
    pub fn stop(&mut self) {
        drop(self.stdin.take());
        let exited = wait_until(
            &format!("{} to exit", self.name),
            Duration::from_secs(20),
            Duration::from_millis(50),
            || match self.child.try_wait() {
                Ok(Some(_)) => Ok(()),
                Ok(None) => Err("running".to_owned()),
                Err(e) => Err(e.to_string()),
            },
        );
        if exited.is_ok() {
            return;
        }
        // The guard ignored its closed pipe: stop it (and, through the closed pipe, its child).
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The directory with kube-apiserver and kubectl: `SHADOW_RECONCILER_KUBE_BIN_DIR`, else what
/// `scripts/kube-apiserver.sh` builds or finds in its cache. Panics (never skips) if neither works.
pub fn kube_bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("SHADOW_RECONCILER_KUBE_BIN_DIR") {
            let dir = PathBuf::from(dir);
            assert!(
                dir.join("kube-apiserver").is_file() && dir.join("kubectl").is_file(),
                "SHADOW_RECONCILER_KUBE_BIN_DIR={} holds no kube-apiserver and kubectl",
                dir.display()
            );
            return dir;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kube-apiserver.sh");
        let output = Command::new("bash")
            .arg(&script)
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            output.status.success(),
            "{} failed ({}): the tests need a real kube-apiserver; see docs/testing.md",
            script.display(),
            output.status
        );
        PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
    })
}

/// The etcd binary of the `etcd-bin-vendored` crate.
pub fn etcd_bin() -> &'static Path {
    etcd_bin_vendored::etcd_bin_path()
        .unwrap_or_else(|e| panic!("no vendored etcd binary for this platform: {e}"))
}

/// A free loopback port (free when asked; bind it soon).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// The last `lines` lines of a log file.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Runs a command; panics with its stderr if it fails.
pub fn run_ok(command: &mut Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A certificate the test PKI issues: `NAME.crt` and its key `NAME.key`, signed by its CA, for
/// `subject`, with the X.509 extensions `extensions` (an `openssl x509 -extfile`, written to
/// `NAME.ext`).
pub struct Issued<'a> {
    /// The files' name.
    pub name: &'a str,
    /// The subject (`/CN=kube-apiserver`).
    pub subject: &'a str,
    /// The extensions, one per line.
    pub extensions: &'a str,
}

/// The test PKI in `dir`, made with openssl: a CA (`ca.crt`, `ca.key`, subject `/CN=CA_NAME`),
/// a certificate signed by it for each of `issued` (all EC P-256, valid for 3 days), and a
/// service-account key pair: the control plane's PKI (one serving certificate) and the node's
/// (`tests/common/node.rs`: the API server's, the kubelet's, and the API server's client
/// certificate for the kubelet).
pub fn write_pki(dir: &Path, ca_name: &str, issued: &[Issued<'_>]) {
    let openssl = |args: &[&str], what: &str| {
        run_ok(Command::new("openssl").args(args).current_dir(dir), what);
    };
    openssl(
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "3",
            "-subj",
            &format!("/CN={ca_name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
        &format!("openssl (the CA {ca_name})"),
    );
    for certificate in issued {
        let name = certificate.name;
        let (key, csr, crt, ext) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.crt"),
            format!("{name}.ext"),
        );
        openssl(
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &csr,
                "-subj",
                certificate.subject,
            ],
            &format!("openssl (the key {key})"),
        );
        std::fs::write(dir.join(&ext), certificate.extensions)
            .unwrap_or_else(|e| panic!("write {ext}: {e}"));
        openssl(
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &crt,
                "-days",
                "3",
                "-extfile",
                &ext,
            ],
            &format!("openssl (the certificate {crt})"),
        );
    }
    write_service_account_keys(dir);
}

/// A service-account signing key pair, `sa.key` and `sa.pub`, in `dir`.
pub fn write_service_account_keys(dir: &Path) {
    run_ok(
        Command::new("openssl").current_dir(dir).args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            "sa.key",
        ]),
        "openssl (service-account key)",
    );
    run_ok(
        Command::new("openssl")
            .current_dir(dir)
            .args(["pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub"]),
        "openssl (service-account public key)",
    );
}

/// Every write is recorded with its user, user agent and URI (which carries `dryRun=All`);
/// deletes also with their `DeleteOptions`, which the server reads instead of the query when the
/// request has a body. Reads are recorded for service accounts (what RBAC tests look at), and
/// the reads of one OCM add-on, whose user agent says which run read it (the OCM adoption test).
pub const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Request
  verbs: [delete, deletecollection]
- level: Metadata
  userGroups: [system:serviceaccounts]
- level: Metadata
  verbs: [create, update, patch]
- level: Metadata
  verbs: [get]
  resources: [{group: addon.open-cluster-management.io}]
- level: None
";

/// 32 random hex digits.
pub fn random_token() -> String {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .expect("read /dev/urandom");
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver and waits until the API server is ready. The loopback
    /// ports are picked free and then handed to the servers, so another process can take one in
    /// between: a start that fails on a port in use is tried again with new ones.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// As [`start`](Self::start), with more flags for kube-apiserver (`--max-requests-inflight=10`).
    pub fn start_with(apiserver_flags: &[&str]) -> Self {
        let mut attempt = 1;
        loop {
            match Self::try_start(apiserver_flags) {
                Ok(plane) => return plane,
                Err(e) if attempt < 3 && e.contains("address already in use") => attempt += 1,
                Err(e) => panic!("{e}"),
            }
        }
    }

    fn try_start(apiserver_flags: &[&str]) -> Result<Self, String> {
        let bin = kube_bin_dir().to_path_buf();
        let dir = tempfile::Builder::new()
            .prefix("shadow-reconciler-control-plane-")
            .tempdir()
            .expect("temp dir");
        let root = dir.path();
        write_pki(
            root,
            "shadow-reconciler-test-ca",
            &[Issued {
                name: "server",
                subject: "/CN=kube-apiserver",
                extensions: "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
                             keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
            }],
        );
        let admin_token = random_token();
        std::fs::write(
            root.join("tokens.csv"),
            format!("{admin_token},admin,admin,system:masters\n"),
        )
        .expect("write the token file");
        std::fs::write(root.join("audit-policy.yaml"), AUDIT_POLICY).expect("audit policy");
        let audit_log = root.join("audit.log");

        let (client_port, peer_port) = (free_port(), free_port());
        let etcd_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let etcd = Guarded::spawn(
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
            root.join("etcd.log"),
        );

        let port = free_port();
        let path = |name: &str| root.join(name).display().to_string();
        let mut flags = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".to_owned(),
            "--advertise-address=127.0.0.1".to_owned(),
            // No Endpoints object for the `kubernetes` Service: loopback is not a valid
            // endpoint, and nothing in the tests reaches the API server through it.
            "--endpoint-reconciler-type=none".to_owned(),
            format!("--secure-port={port}"),
            format!("--tls-cert-file={}", path("server.crt")),
            format!("--tls-private-key-file={}", path("server.key")),
            format!("--token-auth-file={}", path("tokens.csv")),
            "--authorization-mode=RBAC".to_owned(),
            format!("--service-account-key-file={}", path("sa.pub")),
            format!("--service-account-signing-key-file={}", path("sa.key")),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
            "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
            "--allow-privileged=true".to_owned(),
            // As envtest: without kube-controller-manager no ServiceAccount is created, so the
            // admission plugin that would require one for pods is off.
            "--disable-admission-plugins=ServiceAccount".to_owned(),
            format!("--audit-policy-file={}", path("audit-policy.yaml")),
            format!("--audit-log-path={}", audit_log.display()),
            "--audit-log-mode=blocking".to_owned(),
            "--audit-log-format=json".to_owned(),
            // ServiceAccounts bypass the watch cache, so that a watch from a compacted
            // revision reaches etcd and answers 410 Gone deterministically (the cache serves
            // any revision as long as it has not dropped events, which a test cannot force).
            "--watch-cache-sizes=serviceaccounts#0".to_owned(),
            format!("--cert-dir={}", path("certs")),
        ];
        flags.extend(apiserver_flags.iter().map(|&f| f.to_owned()));
        let apiserver = Guarded::spawn(
            "kube-apiserver",
            &bin.join("kube-apiserver"),
            &flags,
            root.join("kube-apiserver.log"),
        );
        let url = format!("https://127.0.0.1:{port}");
        let ca = root.join("ca.crt");
        let kubeconfig = root.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            kubeconfig_text(&url, &ca, &admin_token, "admin"),
        )
        .expect("write the kubeconfig");
        let mut plane = Self {
            dir,
            etcd,
            apiserver,
            url,
            bin,
            kubeconfig,
            ca,
            admin_token,
            audit_log,
            etcd_url,
        };
        plane.wait_ready()?;
        Ok(plane)
    }

    /// Waits for `/readyz`, then for the `default` namespace, [`START_TIMEOUT`] for both; an
    /// error (to start again) if etcd or kube-apiserver exits meanwhile.
    fn wait_ready(&mut self) -> Result<(), String> {
        let started = Instant::now();
        // A process that exited ends the wait with its error (`Ok(Err)`).
        let ready = wait_until(
            "kube-apiserver ready (/readyz)",
            START_TIMEOUT,
            Duration::from_millis(250),
            || {
                if let Err(e) = self.etcd.check_alive() {
                    return Ok(Err(e));
                }
                if let Err(e) = self.apiserver.check_alive() {
                    return Ok(Err(e));
                }
                let ready = kubectl_at(&self.bin, &self.kubeconfig)
                    .args(["get", "--raw", "/readyz"])
                    .output()
                    .expect("run kubectl");
                if ready.status.success() {
                    Ok(Ok(()))
                } else {
                    Err(String::from_utf8_lossy(&ready.stderr).trim().to_owned())
                }
            },
        );
        match ready {
            Ok(exited) => exited?,
            Err(e) => panic!(
                "{e}\nthe end of its log:\n{}",
                tail(&self.apiserver.log, 40)
            ),
        }
        // The bootstrap controllers create `default` and the system namespaces shortly after
        // readiness; tests create objects there.
        wait_for(
            "namespace default",
            START_TIMEOUT.saturating_sub(started.elapsed()),
            Duration::from_millis(100),
            || {
                let namespace = self.kubectl_output(&["get", "namespace", "default"]);
                if namespace.status.success() {
                    Ok(())
                } else {
                    Err(String::from_utf8_lossy(&namespace.stderr).trim().to_owned())
                }
            },
        );
        let version = self.kubectl(&["version", "-o", "json"]);
        let version: serde_json::Value = serde_json::from_str(&version).expect("version JSON");
        assert_eq!(
            version["serverVersion"]["gitVersion"], KUBE_VERSION,
            "the API server reports another version than the one the tests are held to"
        );
        Ok(())
    }

    /// The API server's URL (`https://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A kubeconfig for the admin (group `system:masters`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The control plane's temporary directory (logs, certificates, the audit log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a kubeconfig that authenticates with `token` and returns its path.
    pub fn kubeconfig_for(&self, name: &str, token: &str) -> PathBuf {
        let path = self.dir.path().join(format!("kubeconfig-{name}"));
        std::fs::write(&path, kubeconfig_text(&self.url, &self.ca, token, name))
            .expect("write a kubeconfig");
        path
    }

    /// A kube-rs configuration for the admin with the given user agent.
    pub async fn admin_config(&self, user_agent: &str) -> kube::Config {
        self.config_with_token(&self.admin_token.clone(), user_agent)
            .await
    }

    /// A kube-rs client for the admin with the given user agent.
    pub async fn client(&self, user_agent: &str) -> kube::Client {
        self.client_with_token(&self.admin_token.clone(), user_agent)
            .await
    }

    /// A kube-rs client authenticated by `token`.
    pub async fn client_with_token(&self, token: &str, user_agent: &str) -> kube::Client {
        let config = self.config_with_token(token, user_agent).await;
        kube::Client::try_from(config).expect("kube client")
    }

    /// A kube-rs configuration authenticated by `token`, as `Config::from_kubeconfig` builds it.
    pub async fn config_with_token(&self, token: &str, user_agent: &str) -> kube::Config {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&kubeconfig_text(
            &self.url, &self.ca, token, "client",
        ))
        .expect("kubeconfig");
        let mut config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .expect("kube config");
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_str(user_agent).expect("user agent"),
        ));
        config
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

    fn kubectl_command(&self) -> Command {
        kubectl_at(&self.bin, &self.kubeconfig)
    }

    /// A token for a service account (the `TokenRequest` API), valid for an hour.
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        self.kubectl(&["create", "token", name, "-n", namespace, "--duration=1h"])
            .trim()
            .to_owned()
    }

    /// What the standalone overlay applies (with its shadow-flow component), but the Deployment
    /// (no kubelet here), the PVC and the prometheus-operator objects (their CRDs are not
    /// installed): the CRDs, the namespace, the service accounts, the flag config map, the RBAC, the
    /// shadow's flow schema and priority level.
    pub fn apply_deploy(&self) {
        for file in [
            "crds/hostedclusters.example.shadow-reconciler.io.yaml",
            "crds/hostedcontrolplanes.example.shadow-reconciler.io.yaml",
            "crds/clustermanagementaddons.example.shadow-reconciler.io.yaml",
            "base/namespace.yaml",
            "base/serviceaccount.yaml",
            "base/rbac-flag.yaml",
            "base/flag-configmap.yaml",
            "overlays/standalone/rbac-reconcilers.yaml",
            "components/shadow-flow/shadow-flow.yaml",
        ] {
            let path = format!("{}/deploy/{file}", env!("CARGO_MANIFEST_DIR"));
            self.kubectl(&["apply", "-f", &path]);
        }
    }

    /// Compacts etcd at its current revision (through etcd's JSON gateway), so that a watch from
    /// any earlier resourceVersion the API server cannot serve from its cache answers 410 Gone.
    pub fn compact_etcd(&self) {
        let range = etcd_post(&self.etcd_url, "/v3/kv/range", r#"{"key":"AA=="}"#);
        let revision = range["header"]["revision"]
            .as_str()
            .unwrap_or_else(|| panic!("etcd answered no revision: {range}"))
            .to_owned();
        etcd_post(
            &self.etcd_url,
            "/v3/kv/compaction",
            &format!(r#"{{"revision":"{revision}","physical":true}}"#),
        );
    }

    /// Every request the API server has audited so far, in order: writes, deletes with their
    /// options, and every request of a service account; a watch when it started and when it ended.
    pub fn audit(&self) -> Vec<AuditEvent> {
        read_audit(&self.audit_log)
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.apiserver.stop();
        self.etcd.stop();
        if std::env::var_os("SHADOW_RECONCILER_KEEP_CONTROL_PLANE").is_some() {
            let kept =
                std::mem::replace(&mut self.dir, tempfile::tempdir().expect("temp dir")).keep();
            eprintln!("control plane directory kept: {}", kept.display());
        }
    }
}

/// kubectl of `bin` as the user of `kubeconfig`.
fn kubectl_at(bin: &Path, kubeconfig: &Path) -> Command {
    let mut command = Command::new(bin.join("kubectl"));
    command
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .arg("--request-timeout=60s");
    command
}

/// Every request an API server has audited so far in the JSON log at `path`, in order: a
/// request when it completed, a watch also when it started.
pub fn read_audit(path: &Path) -> Vec<AuditEvent> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    // The server may be writing the last line.
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("audit log line is not JSON ({e}): {line}"));
            AuditEvent::from_json(&v)
        })
        // A watch is long-running: it is audited when it starts, and again when it ends.
        .filter(|e| {
            e.stage == "ResponseComplete" || (e.stage == "ResponseStarted" && e.verb == "watch")
        })
        .collect()
}

/// A POST to etcd's JSON gateway; its answer.
fn etcd_post(base: &str, path: &str, body: &str) -> serde_json::Value {
    let addr = base.trim_start_matches("http://");
    let (head, body) =
        http_exchange(addr, "POST", path, body).unwrap_or_else(|e| panic!("etcd {path}: {e}"));
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "etcd {path}: {head}\n{body}"
    );
    // The body may be chunked; the JSON object sits between the first '{' and the last '}'.
    let json = body
        .find('{')
        .zip(body.rfind('}'))
        .map_or("", |(a, b)| &body[a..=b]);
    serde_json::from_str(json).unwrap_or_else(|e| panic!("etcd {path}: {e}: {body}"))
}

/// One plain HTTP/1.1 request to a loopback server (etcd's gateway, a process's `/metrics`):
/// its status line and headers, and its body.
pub fn http_exchange(
    addr: &str,
    method: &str,
    path: &str,
    body: &str,
) -> std::io::Result<(String, String)> {
    use std::io::Read as _;
    let mut stream = std::net::TcpStream::connect(addr)?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    Ok((head.to_owned(), body.to_owned()))
}

/// Whether the process serving plain HTTP at `addr` answers `/readyz` with 200: a wait's probe,
/// whose `Err` is the answer's status line or the connection's error.
pub fn readyz(addr: &str) -> Result<(), String> {
    match http_exchange(addr, "GET", "/readyz", "") {
        Ok((head, _)) if head.contains(" 200") => Ok(()),
        Ok((head, _)) => Err(head.lines().next().unwrap_or_default().to_owned()),
        Err(e) => Err(e.to_string()),
    }
}

/// A kubeconfig for `url`, trusting `ca`, authenticating with `token`.
pub fn kubeconfig_text(url: &str, ca: &Path, token: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {url}\n    certificate-authority: {}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: {user}\ncurrent-context: test\nusers:\n- name: {user}\n  user:\n    token: {token}\n",
        ca.display()
    )
}

/// Asserts what the audit log must show of a shadow: no persisted write of `shadow_agent`, every
/// one of its writes a dry run where the server reads it, at least one dry-run write (else the
/// test would prove nothing), and persisted writes of `control_agent`. Prints the counts.
pub fn assert_shadow_persisted_nothing(
    audit: &[AuditEvent],
    shadow_agent: &str,
    control_agent: &str,
) {
    let shadow: Vec<_> = audit
        .iter()
        .filter(|e| e.user_agent == shadow_agent && e.is_write())
        .collect();
    let persisted: Vec<_> = shadow
        .iter()
        .filter(|e| e.succeeded() && !e.dry_run())
        .collect();
    assert!(
        persisted.is_empty(),
        "the audit log shows {} persisted writes of {shadow_agent}, e.g. {:?}",
        persisted.len(),
        persisted.first()
    );
    let not_dry: Vec<_> = shadow.iter().filter(|e| !e.dry_run()).collect();
    assert!(
        not_dry.is_empty(),
        "writes of {shadow_agent} without dryRun=All reached the server: {not_dry:?}"
    );
    assert!(
        shadow.iter().any(|e| e.succeeded()),
        "{shadow_agent} sent no dry-run write: the test would prove nothing"
    );
    let control = audit
        .iter()
        .filter(|e| e.user_agent == control_agent && e.is_write() && e.succeeded() && !e.dry_run())
        .count();
    assert!(
        control > 0,
        "the writes of {control_agent} are missing from the audit"
    );
    eprintln!(
        "audit: {} writes of {shadow_agent} (all dryRun=All, 0 persisted), {control} persisted writes of {control_agent}",
        shadow.len()
    );
}

/// One write as the API server audited it.
#[derive(Debug, Clone)]
pub struct AuditEvent {
    /// `ResponseComplete`, or `ResponseStarted` for a watch.
    pub stage: String,
    /// `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: String,
    /// The request URI, with its query (`dryRun=All`).
    pub uri: String,
    /// The authenticated user.
    pub user: String,
    /// The user it impersonated (`Impersonate-User`), empty when none.
    pub impersonated: String,
    /// The client's user agent.
    pub user_agent: String,
    /// The pod a service account's bound token was issued to
    /// (`user.extra["authentication.kubernetes.io/pod-name"]`), empty for other credentials.
    pub pod: String,
    /// The answer's HTTP code.
    pub code: u16,
    /// Resource, namespace, name and subresource of the object written.
    pub resource: String,
    /// Namespace of the object, empty for cluster-scoped ones.
    pub namespace: String,
    /// Name of the object (empty for a create without a name in the URI).
    pub name: String,
    /// `status` for the status subresource.
    pub subresource: String,
    /// The request's body as audited (deletes only: their `DeleteOptions`), or null.
    pub request_object: serde_json::Value,
    /// When the answer was complete (`stageTimestamp`), µs since the Unix epoch; 0 if absent.
    pub time_us: i64,
    /// When the request was received (`requestReceivedTimestamp`), µs since the Unix epoch; 0 if
    /// absent.
    pub received_us: i64,
}

/// An RFC 3339 timestamp of the audit log in µs since the Unix epoch; 0 if absent.
fn micros(v: &serde_json::Value) -> i64 {
    v.as_str()
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .map_or(0, k8s_openapi::jiff::Timestamp::as_microsecond)
}

impl AuditEvent {
    /// One audit event from its JSON line.
    pub fn from_json(v: &serde_json::Value) -> Self {
        let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
        Self {
            stage: s(&v["stage"]),
            verb: s(&v["verb"]),
            uri: s(&v["requestURI"]),
            user: s(&v["user"]["username"]),
            impersonated: s(&v["impersonatedUser"]["username"]),
            user_agent: s(&v["userAgent"]),
            pod: s(&v["user"]["extra"]["authentication.kubernetes.io/pod-name"][0]),
            code: v["responseStatus"]["code"]
                .as_u64()
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or_default(),
            resource: s(&v["objectRef"]["resource"]),
            namespace: s(&v["objectRef"]["namespace"]),
            name: s(&v["objectRef"]["name"]),
            subresource: s(&v["objectRef"]["subresource"]),
            request_object: v["requestObject"].clone(),
            time_us: micros(&v["stageTimestamp"]),
            received_us: micros(&v["requestReceivedTimestamp"]),
        }
    }

    /// Whether the server took the request as a dry run: from the `DeleteOptions` body of a
    /// delete that had one (the server then ignores the query), else from the query.
    pub fn dry_run(&self) -> bool {
        if matches!(self.verb.as_str(), "delete" | "deletecollection")
            && self.request_object.is_object()
        {
            return self.request_object["dryRun"]
                .as_array()
                .is_some_and(|d| d.iter().any(|v| v == "All"));
        }
        self.uri
            .split_once('?')
            .is_some_and(|(_, q)| q.split('&').any(|kv| kv == "dryRun=All"))
    }

    /// Whether the request writes (the audit also records some reads).
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }

    /// Whether the write was accepted (and, unless a dry run, persisted).
    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.code)
    }
}
