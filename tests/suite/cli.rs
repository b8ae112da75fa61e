//! The `shadow-reconciler` command as a user runs it: output and exit codes.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::wait::{wait_for, wait_for_async, wait_until_async};

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run shadow-reconciler")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn plan_check_accepts_the_shipped_plans() {
    let out = cli(&[
        "plan",
        "check",
        "deploy/plans/hostedcluster.yaml",
        "deploy/plans/addon-install-progression.yaml",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("deploy/plans/hostedcluster.yaml: plan hostedcluster is valid"),
        "{stdout}"
    );
    assert!(
        stdout.contains("operations      21 in 6 phases"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "code paths      20 in both; legacy only: ValidConfigurationCondition; phased only: ManagedHSMVersionCheck"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("critical        7 (non-critical 14)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "writes          1 intended difference on 1 operation; volatile fields: none"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("gated           6"), "{stdout}");
    assert!(
        stdout.contains(
            "rollout groups  non-critical-syncs (8), gated-components (6), critical-core (7)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("plan addon-install-progression is valid"),
        "{stdout}"
    );
}

#[test]
fn plan_check_rejects_a_broken_plan_with_its_location_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/plans/hostedcluster.yaml"),
    )
    .unwrap();
    let broken = good.replacen("dependsOn: [CoreHCPChain]", "dependsOn: [CoreHCP]", 1);
    let line = broken
        .lines()
        .position(|l| l.contains("dependsOn: [CoreHCP]"))
        .unwrap()
        + 1;
    let path = dir.path().join("broken.yaml");
    std::fs::write(&path, broken).unwrap();
    let out = cli(&[
        "plan",
        "check",
        path.to_str().unwrap(),
        "deploy/plans/addon-install-progression.yaml",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let expected = format!(
        "{}:{line}:19: operation KubeconfigAndPasswordSync: dependsOn names \"CoreHCP\", which is not an operation of this plan",
        path.display()
    );
    assert!(
        stderr.contains(&expected),
        "missing {expected:?} in\n{stderr}"
    );
    assert!(stderr.contains("1 of 2 plans invalid"), "{stderr}");
    assert!(
        text(&out.stdout).contains("plan addon-install-progression is valid"),
        "the valid plan is still checked"
    );
}

#[test]
fn plan_check_of_a_missing_file_exits_2() {
    let out = cli(&["plan", "check", "no/such.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("cannot read plan file no/such.yaml: "),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn simulate_model_only_prints_real_numbers() {
    let out = cli(&[
        "simulate",
        "--model-only",
        "--reconciles",
        "500",
        "--seed",
        "7",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("model-only simulation of plan hostedcluster"),
        "{stdout}"
    );
    let unblocked: u64 = stdout
        .split("unblocked by the candidate: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("an unblocked count");
    assert!(unblocked > 0, "{stdout}");
    // Same seed, same numbers.
    assert_eq!(
        text(
            &cli(&[
                "simulate",
                "--model-only",
                "--reconciles",
                "500",
                "--seed",
                "7"
            ])
            .stdout
        ),
        stdout
    );
}

#[test]
fn simulate_model_only_rejects_bad_input_with_exit_2() {
    let out = cli(&["simulate", "--model-only", "--candidate-group", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no plan here has a rollout group \"nope\""),
        "{}",
        text(&out.stderr)
    );
    let out = cli(&["simulate", "--model-only", "--failure-rate", "1.5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("1.5 is not a probability"),
        "{}",
        text(&out.stderr)
    );
    let out = cli(&["simulate", "--model-only", "--plan", "missing.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("cannot read plan file missing.yaml"),
        "{}",
        text(&out.stderr)
    );
    // ingest reads --plan the same way, before binding anything.
    let out = cli(&["ingest", "--plan", "missing.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--plan \"missing.yaml\" is neither a shipped plan")
            && text(&out.stderr).contains("cannot read plan file missing.yaml"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn sim_serve_answers_kube_clients_and_prints_the_audit_on_sigterm() {
    use std::io::BufRead;

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (mut child, stdout, first) = sim_serve(&kubeconfig);
    assert!(
        first.starts_with("serving the Kubernetes API simulator at http://127.0.0.1:"),
        "{first}"
    );

    // A kube-rs client built from the written kubeconfig, as a user would.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let config = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(
            config,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
        let list = namespaces
            .list(&kube::api::ListParams::default())
            .await
            .unwrap();
        assert_eq!(list.items.len(), 3, "default, kube-system, kube-public");
    });

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert_eq!(exit.code(), Some(0));
    let rest: Vec<String> = stdout.lines().map(Result::unwrap).collect();
    assert_eq!(
        rest.first().map(String::as_str),
        Some("1 requests answered"),
        "{rest:?}"
    );
}

#[test]
fn sim_serve_rejects_a_bad_fault_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("faults.yaml");
    std::fs::write(&path, "rules:\n  - name: x\n    action: {status: 200}\n").unwrap();
    let out = cli(&["sim", "serve", "--faults", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("rule \"x\": status 200 is not injectable"),
        "{stderr}"
    );
}

#[test]
fn simulate_runs_the_controllers_against_the_simulator() {
    // Its data in a directory of its own, not in the repository's working directory.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = cli(&[
        "simulate",
        "--hosted-clusters",
        "20",
        "--addons",
        "5",
        "--duration",
        "600",
        "--seed",
        "3",
        "--parquet-dir",
        data.to_str().expect("utf-8 path"),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.starts_with("simulated cluster: 20 HostedClusters"),
        "{stdout}"
    );
    assert!(
        stdout.contains(" 0 persisted mutations (must be 0), 0 guard refusals"),
        "{stdout}"
    );
    let after = |marker: &str| -> u64 {
        stdout
            .split(marker)
            .nth(1)
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no number after {marker:?} in {stdout}"))
    };
    assert!(after("shadow: ") > 0, "dry-run mutations: {stdout}");
    assert!(
        after("hostedcluster: ") >= 20,
        "every HostedCluster reconciled: {stdout}"
    );
}

#[test]
fn simulate_rejects_an_unknown_scenario() {
    let out = cli(&["simulate", "--scenario", "chaos"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unknown scenario \"chaos\""),
        "{}",
        text(&out.stderr)
    );
    // --plan serves both modes now (a shipped name or a file); one that is neither is an error.
    let out = cli(&["simulate", "--plan", "no-such-plan.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--plan no-such-plan.yaml: cannot read it"),
        "{}",
        text(&out.stderr)
    );
}

/// CRDs and one HostedCluster whose pull secret is missing (the control fails at its first step),
/// created through the kubeconfig the simulator wrote.
pub(crate) async fn cluster_with_a_failing_hosted_cluster(
    kubeconfig: &std::path::Path,
) -> kube::Client {
    use kube::CustomResourceExt;
    use shadow_reconciler::reconcilers::hostedcluster::{HostedCluster, HostedControlPlane};
    let config = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(config, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let crds: kube::Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = kube::Api::all(client.clone());
    for crd in [HostedCluster::crd(), HostedControlPlane::crd()] {
        crds.create(&kube::api::PostParams::default(), &crd)
            .await
            .unwrap();
    }
    failing_hosted_cluster(&client, "default", "beta").await;
    client
}

/// A HostedCluster whose pull secret is missing (the control fails at its first step), in
/// `namespace` (created if need be).
pub(crate) async fn failing_hosted_cluster(client: &kube::Client, namespace: &str, name: &str) {
    use k8s_openapi::api::core::v1::Namespace;
    use shadow_reconciler::reconcilers::hostedcluster::{
        HostedCluster, HostedClusterSpec, LocalRef, Release,
    };
    let namespaces = kube::Api::<Namespace>::all(client.clone());
    if namespaces.get_opt(namespace).await.unwrap().is_none() {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(namespace.to_owned());
        namespaces
            .create(&kube::api::PostParams::default(), &ns)
            .await
            .unwrap();
    }
    let spec = HostedClusterSpec {
        release: Release {
            image: "quay.io/ocp-release:4.17.3-x86_64".into(),
        },
        platform: "AWS".into(),
        pull_secret: LocalRef {
            name: "absent".into(),
        },
        ..HostedClusterSpec::default()
    };
    kube::Api::<HostedCluster>::namespaced(client.clone(), namespace)
        .create(
            &kube::api::PostParams::default(),
            &HostedCluster::new(name, spec),
        )
        .await
        .unwrap();
}

/// Whether the controller wrote its condition on `namespace/name`, waiting up to 5 minutes (a
/// bound for a broken run only, however loaded the machine: the condition comes within one
/// reconcile).
pub(crate) async fn reconciled(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    wait: bool,
) -> bool {
    use shadow_reconciler::reconcilers::hostedcluster::HostedCluster;
    use std::time::Duration;
    let api = kube::Api::<HostedCluster>::namespaced(client.clone(), namespace);
    // Without waiting: one look.
    let timeout = if wait {
        Duration::from_mins(5)
    } else {
        Duration::ZERO
    };
    let what = format!("the condition on {namespace}/{name}");
    wait_until_async(&what, timeout, Duration::from_millis(100), async || {
        let hc = api.get(name).await.unwrap();
        if hc.status.is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c["type"] == "ReconciliationSucceeded")
        }) {
            Ok(())
        } else {
            Err("no ReconciliationSucceeded condition".to_owned())
        }
    })
    .await
    .is_ok()
}

/// `run --namespace` reconciles the HostedClusters of that namespace only.
#[test]
fn run_with_a_namespace_reconciles_only_that_namespace() {
    use std::process::Stdio;

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (mut server, _stdout, _) = sim_serve(&kubeconfig);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = runtime.block_on(async {
        let client = cluster_with_a_failing_hosted_cluster(&kubeconfig).await;
        failing_hosted_cluster(&client, "elsewhere", "beta").await;
        client
    });
    let mut controller = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args([
            "run",
            "--reconciler",
            "hostedcluster",
            "--namespace",
            "default",
            "--listen",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", &kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    runtime.block_on(async {
        assert!(reconciled(&client, "default", "beta", true).await);
        // One created after the start, in the namespace: seen through the watch. By then a
        // controller watching every namespace would have reconciled the other one, listed at
        // its start.
        failing_hosted_cluster(&client, "default", "gamma").await;
        assert!(reconciled(&client, "default", "gamma", true).await);
        assert!(
            !reconciled(&client, "elsewhere", "beta", false).await,
            "a HostedCluster outside --namespace was reconciled"
        );
    });
    for child in [&controller, &server] {
        assert!(
            Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .unwrap()
                .success()
        );
    }
    let code = controller.wait().unwrap().code();
    let mut logs = String::new();
    std::io::Read::read_to_string(&mut controller.stderr.take().unwrap(), &mut logs).unwrap();
    assert_eq!(code, Some(0), "{logs}");
    assert!(!logs.contains("elsewhere"), "{logs}");
    assert_eq!(server.wait().unwrap().code(), Some(0));
}

#[test]
fn run_reconciles_against_a_cluster_from_the_kubeconfig() {
    use std::process::Stdio;

    use shadow_reconciler::reconcilers::hostedcluster::HostedCluster;

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (mut server, _stdout, _) = sim_serve(&kubeconfig);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = runtime.block_on(cluster_with_a_failing_hosted_cluster(&kubeconfig));

    let mut controller = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args([
            "run",
            "--reconciler",
            "hostedcluster",
            "--mode",
            "shadow",
            "--listen",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", &kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let condition = runtime.block_on(async {
        let api = kube::Api::<HostedCluster>::namespaced(client, "default");
        // A bound for a broken run only (5 minutes), however loaded the machine.
        wait_for_async(
            "the controller's condition on default/beta",
            std::time::Duration::from_mins(5),
            std::time::Duration::from_millis(100),
            async || {
                let hc = api.get("beta").await.unwrap();
                hc.status
                    .and_then(|s| {
                        s.conditions
                            .into_iter()
                            .find(|c| c["type"] == "ReconciliationSucceeded")
                    })
                    .ok_or_else(|| "no ReconciliationSucceeded condition".to_owned())
            },
        )
        .await
    });
    assert_eq!(condition["status"], "False");
    assert!(
        condition["message"]
            .as_str()
            .unwrap()
            .contains("\"absent\" not found"),
        "{condition}"
    );
    for child in [&controller, &server] {
        assert!(
            Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .unwrap()
                .success()
        );
    }
    let code = controller.wait().unwrap().code();
    let mut logs = String::new();
    std::io::Read::read_to_string(&mut controller.stderr.take().unwrap(), &mut logs).unwrap();
    assert_eq!(code, Some(0), "{logs}");
    let line = logs
        .lines()
        .find(|l| l.contains("reconciliation completed with errors"))
        .unwrap_or_else(|| panic!("{logs}"));
    let json: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    assert_eq!(json["fields"]["plan"], "hostedcluster", "{line}");
    assert_eq!(server.wait().unwrap().code(), Some(0));
}

#[test]
fn run_without_a_cluster_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args(["run"])
        .env("KUBECONFIG", dir.path().join("missing"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("cannot find a cluster"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn run_rejects_a_bad_flag_default_before_looking_for_a_cluster() {
    let out = cli(&["run", "--enforce-group", "no-such-group"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--enforce-group \"no-such-group\": no plan here has a rollout group \"no-such-group\"; the groups: hostedcluster/non-critical-syncs"),
        "{stderr}"
    );
    let out = cli(&[
        "run",
        "--reconciler",
        "hostedcluster",
        "--candidate-group",
        "status-patches",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--candidate-group \"status-patches\""),
        "{}",
        text(&out.stderr)
    );
    let out = cli(&["run", "--ramp-percent", "150"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("\"150\" is not a percentage from 0 to 100"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn simulate_rejects_unknown_rollout_groups_whatever_the_mode() {
    let out = cli(&[
        "simulate",
        "--hosted-clusters",
        "1",
        "--addons",
        "1",
        "--enforce-group",
        "hostedcluster/nope",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("plan \"hostedcluster\" has no rollout group \"nope\""),
        "{}",
        text(&out.stderr)
    );
    let out = cli(&["simulate", "--candidate-group", "other/x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no plan \"other\" here"),
        "{}",
        text(&out.stderr)
    );
    // GROUP alone names the group in every plan that has it: one no plan has is an error.
    let out = cli(&["simulate", "--enforce-group", "no-slash"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no plan here has a rollout group \"no-slash\""),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn simulate_in_enforce_mode_retries_the_enforced_status_patches() {
    // Its data in a directory of its own, not in the repository's working directory.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = cli(&[
        "simulate",
        "--parquet-dir",
        data.to_str().expect("utf-8 path"),
        "--hosted-clusters",
        "10",
        "--addons",
        "5",
        "--seed",
        "4",
        "--mode",
        "enforce",
        "--enforce-group",
        "hostedcluster/non-critical-syncs",
        "--enforce-group",
        "addon-install-progression/status-patches",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("retried-succeeded"),
        "the enforced add-on patches retry the storm's conflicts: {stdout}"
    );
}

#[test]
fn run_stops_on_sigterm_even_when_its_kinds_are_not_served() {
    use std::process::Stdio;
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (mut server, _stdout, _) = sim_serve(&kubeconfig);
    // No CRDs: the controllers' watches fail and back off.
    let mut controller = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args(["run", "--listen", "127.0.0.1:0"])
        .env("KUBECONFIG", &kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        Command::new("kill")
            .args(["-TERM", &controller.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let code = wait_for(
        "run to stop after SIGTERM",
        Duration::from_secs(30),
        Duration::from_millis(200),
        || match controller.try_wait().unwrap() {
            Some(status) => Ok(status.code()),
            None => Err("still running".to_owned()),
        },
    );
    assert_eq!(code, Some(0));
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    let _ = server.wait();
}

/// `sim serve` writing its kubeconfig to `kubeconfig`: the process, its stdout (kept open, so it
/// can print its summary) and its first line.
pub(crate) fn sim_serve(
    kubeconfig: &Path,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
    String,
) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args([
            "sim",
            "serve",
            "--kubeconfig-out",
            kubeconfig.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(
        first.starts_with("serving the Kubernetes API simulator at http://127.0.0.1:"),
        "{first}"
    );
    (child, stdout, first)
}

/// Every command ends quietly on a closed stdout (`| head -1`), as Unix tools do: no panic, the
/// exit code it would have had, and nothing on stderr about stdout.
#[test]
fn a_closed_stdout_ends_the_output_quietly() {
    let data = tempfile::tempdir().expect("temp dir");
    let data_dir = data.path().join("data");
    let data_arg = data_dir.to_str().expect("utf-8 path");
    let cases: [(&[&str], i32); 4] = [
        (
            &[
                "plan",
                "check",
                "deploy/plans/hostedcluster.yaml",
                "deploy/plans/addon-install-progression.yaml",
            ],
            0,
        ),
        (&["simulate", "--model-only", "--reconciles", "20000"], 0),
        (
            &[
                "simulate",
                "--hosted-clusters",
                "10",
                "--addons",
                "3",
                "--duration",
                "600",
                "--parquet-dir",
                data_arg,
            ],
            0,
        ),
        // Inconclusive on so few objects: exit 3, as with an open stdout.
        (&["analyze", data_arg], 3),
    ];
    for (args, code) in cases {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run shadow-reconciler");
        // The reader goes away before the first byte: every write to stdout meets EPIPE.
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("panicked")
                && !stderr.contains("Broken pipe")
                && !stderr.contains("stdout"),
            "{args:?}: {stderr}"
        );
    }
}

/// Unmounts a test's filesystem when dropped (a failed assertion leaves no mount behind).
struct Unmount<'a>(&'a std::path::Path);

impl Drop for Unmount<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}

/// A full disk: `simulate` fails naming the cause and the path (a 64 KiB tmpfs, mounted by the
/// test; the suite runs as root, as scripts/test.sh's CI does).
#[test]
fn a_full_disk_is_named_with_its_path() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mount = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(dir.path())
        .output()
        .expect("run mount");
    assert!(
        mount.status.success(),
        "this test needs to mount a small tmpfs (as root): {}",
        text(&mount.stderr)
    );
    let _unmount = Unmount(dir.path());
    let data = dir.path().join("data");
    let out = cli(&[
        "simulate",
        "--hosted-clusters",
        "20",
        "--addons",
        "5",
        "--duration",
        "600",
        "--parquet-grace",
        "3",
        "--parquet-dir",
        data.to_str().expect("utf-8 path"),
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("No space left on device") && stderr.contains(&data.display().to_string()),
        "the cause and the path: {stderr}"
    );
}

/// A `--parquet-dir` that cannot take files fails at start-up, naming it, before anything runs.
#[test]
fn a_parquet_dir_that_is_a_file_fails_at_start_up() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").expect("write");
    let file_arg = file.to_str().expect("utf-8 path");
    for args in [
        vec![
            "ingest",
            "--plan",
            "hostedcluster",
            "--otlp-grpc",
            "127.0.0.1:0",
            "--otlp-http",
            "127.0.0.1:0",
            "--listen",
            "127.0.0.1:0",
            "--parquet-dir",
            file_arg,
        ],
        vec![
            "simulate",
            "--hosted-clusters",
            "2",
            "--addons",
            "1",
            "--parquet-dir",
            file_arg,
        ],
    ] {
        let out = cli(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("--parquet-dir {file_arg}")),
            "{args:?}: {stderr}"
        );
    }
}

/// `ingest`'s arguments on free loopback ports, then `extra`.
fn ingest<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "ingest",
        "--plan",
        "hostedcluster",
        "--otlp-grpc",
        "127.0.0.1:0",
        "--otlp-http",
        "127.0.0.1:0",
        "--listen",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    args
}

/// Object store locations: a scheme we do not know, a URL where only a local directory makes
/// sense, the spool's options without an object store, and a store that cannot be reached are
/// each one clear error (exit 2) naming the flag and the value.
#[test]
fn object_store_locations_fail_clearly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let local = dir.path().join("data");
    let local = local.to_str().expect("utf-8 path");
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            ingest(&["--parquet-dir", "ftp://host/data"]),
            vec![
                "--parquet-dir ftp://host/data",
                "unsupported URL scheme \"ftp\"",
                "s3://",
            ],
        ),
        (
            ingest(&["--parquet-dir", local, "--parquet-spool", local]),
            vec!["--parquet-spool", "object store", local],
        ),
        (
            vec!["simulate", "--parquet-dir", "s3://bucket/data"],
            vec![
                "--parquet-dir s3://bucket/data",
                "local dataset",
                "analyze URL",
            ],
        ),
        (
            vec!["analyze", "gs:///data"],
            vec!["gs:///data", "no bucket"],
        ),
    ];
    for (args, expected) in cases {
        let out = cli(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        for e in &expected {
            assert!(stderr.contains(e), "{args:?}: {e:?} not in {stderr}");
        }
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    }
    // An S3 endpoint that refuses connections: analyze names the URL and the cause.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let out = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args(["analyze", "s3://bucket/data"])
        .env("AWS_ENDPOINT", format!("http://127.0.0.1:{port}"))
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "k")
        .env("AWS_SECRET_ACCESS_KEY", "s")
        .output()
        .expect("run analyze");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("s3://bucket/data/table=") && stderr.contains("cannot list"),
        "{stderr}"
    );
}

/// OTLP is unauthenticated: `ingest` receives on loopback unless told otherwise.
#[test]
fn ingest_receives_otlp_on_loopback_by_default() {
    let help = text(&cli(&["ingest", "--help"]).stdout);
    for default in ["[default: 127.0.0.1:4317]", "[default: 127.0.0.1:4318]"] {
        assert!(help.contains(default), "{help}");
    }
    assert!(!help.contains("[default: 0.0.0.0:431"), "{help}");
}

#[test]
fn run_without_any_cluster_says_so_in_one_line_and_what_to_try() {
    let home = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args(["run", "--no-flag-watch"])
        .env("HOME", home.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("run shadow-reconciler");
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    let config = home.path().join(".kube/config");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "error: cannot find a cluster: no --kubeconfig, KUBECONFIG is not set, {} does not exist, and this is not a pod; no cluster at hand? `shadow-reconciler simulate` runs everything on the embedded simulator, and `shadow-reconciler sim serve --kubeconfig-out FILE` serves it for `run`",
            config.display()
        )
    );
}

/// Against a cluster without the CRDs, `run` says which kinds it cannot list: in its log (at
/// once, not only after a timeout) and in `/readyz`.
#[test]
fn run_names_the_kinds_it_cannot_list() {
    use std::io::{BufRead, Read, Write};
    use std::process::Stdio;

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (mut server, _stdout, _) = sim_serve(&kubeconfig);
    let mut run = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args([
            "run",
            "--listen",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--no-flag-watch",
        ])
        .env("KUBECONFIG", &kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A bound for a broken run, not a speed target: a run that never logs is killed, so the
    // read below ends and the test fails saying so.
    let pid = run.id().to_string();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_mins(5));
        let _ = Command::new("kill").args(["-KILL", &pid]).status();
    });
    let mut lines = std::io::BufReader::new(run.stderr.take().unwrap()).lines();
    let mut address = None;
    let mut warned = std::collections::BTreeSet::new();
    while warned.len() < 2 {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("run ended its log before naming both kinds: {warned:?}"))
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if let Some(a) = v["fields"]["address"].as_str() {
            address = Some(a.to_owned());
        }
        if v["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("cannot list the reconciled kind"))
        {
            warned.insert(v["fields"]["kind"].as_str().unwrap_or_default().to_owned());
        }
    }
    assert_eq!(
        warned.into_iter().collect::<Vec<_>>(),
        [
            "clustermanagementaddons.example.shadow-reconciler.io",
            "hostedclusters.example.shadow-reconciler.io"
        ]
    );
    let address = address.expect("the log gives the endpoints' address");
    let mut stream = std::net::TcpStream::connect(&address).unwrap();
    write!(
        stream,
        "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 503"), "{response}");
    assert!(
        response.contains("not ready: cannot list clustermanagementaddons.example.shadow-reconciler.io, hostedclusters.example.shadow-reconciler.io yet; apply the CRDs (deploy/crds)"),
        "{response}"
    );
    let _ = Command::new("kill")
        .args(["-TERM", &run.id().to_string()])
        .status();
    let _ = run.wait();
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    let _ = server.wait();
}

/// `simulate --fail-on` turns the analysis' overall readiness into the exit code, as `analyze`
/// does (1 not ready, 3 inconclusive); without it the run exits 0 whatever the verdict.
#[test]
fn simulate_fail_on_follows_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    for fail_on in [None, Some("not-ready"), Some("inconclusive")] {
        let data = dir.path().join(fail_on.unwrap_or("none"));
        let mut args = vec![
            "simulate",
            "--hosted-clusters",
            "5",
            "--addons",
            "2",
            "--parquet-dir",
            data.to_str().unwrap(),
        ];
        if let Some(f) = fail_on {
            args.extend(["--fail-on", f]);
        }
        let out = cli(&args);
        let stdout = text(&out.stdout);
        let overall = stdout
            .lines()
            .find_map(|l| l.strip_prefix("overall: "))
            .unwrap_or_else(|| panic!("{fail_on:?}: no overall verdict:\n{stdout}"))
            .split_whitespace()
            .next()
            .unwrap()
            .to_owned();
        let expected = match (fail_on, overall.as_str()) {
            (Some(_), "not-ready") => 1,
            (Some("inconclusive"), "inconclusive") => 3,
            (_, "ready" | "not-ready" | "inconclusive") => 0,
            (_, other) => panic!("unknown verdict {other:?}"),
        };
        assert_eq!(
            out.status.code(),
            Some(expected),
            "--fail-on {fail_on:?} with overall {overall}: {}",
            text(&out.stderr)
        );
    }
    let out = cli(&["simulate", "--fail-on", "not-ready", "--no-parquet"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("cannot be used with"),
        "{}",
        text(&out.stderr)
    );
}

/// The Rust example controller's plan is valid and names exactly the operations the example
/// implements (the engine would refuse to start otherwise); the example itself is built by
/// `cargo test --all-targets`.
#[test]
fn the_rust_example_controller_matches_its_plan() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let plan = shadow_reconciler::plan::ReconcilePlan::load(root.join("examples/widget-plan.yaml"))
        .expect("the example's plan is valid");
    let source = std::fs::read_to_string(root.join("examples/rust-controller.rs")).unwrap();
    let list = source
        .split_once("const OPERATIONS: &[&str] = &[")
        .and_then(|(_, rest)| rest.split_once("];"))
        .expect("the example lists its OPERATIONS")
        .0;
    let implemented: Vec<&str> = list
        .split(',')
        .map(|s| s.trim().trim_matches('"'))
        .filter(|s| !s.is_empty())
        .collect();
    let planned: Vec<&str> = plan
        .operations()
        .iter()
        .map(shadow_reconciler::plan::Operation::name)
        .collect();
    assert_eq!(implemented, planned);
}

/// `simulate --quiet` keeps stderr to what must be seen (the Parquet writer's tally here) and
/// stdout unchanged.
#[test]
fn simulate_quiet_keeps_stderr_to_what_must_be_seen() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = cli(&[
        "simulate",
        "--quiet",
        "--hosted-clusters",
        "3",
        "--addons",
        "1",
        "--parquet-dir",
        data.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("metrics at"), "{stderr}");
    assert!(
        stderr.lines().all(|l| l.starts_with("parquet: ")),
        "only the Parquet tally: {stderr}"
    );
    assert!(
        text(&out.stdout).contains("overall: "),
        "{}",
        text(&out.stdout)
    );
}
