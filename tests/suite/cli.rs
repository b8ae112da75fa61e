//! The `shadow-reconciler` command as a user runs it: output and exit codes. Its refusals (exit
//! 2 on bad input or an unusable place) are in `cli_refusals.rs`; the cluster the `run` tests use
//! is in `cli_cluster.rs`.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::wait::{wait_for, wait_for_async};

// The simulated cluster the `run` tests use, which election.rs uses too.
pub(crate) use super::cli_cluster::{
    cluster_with_a_failing_hosted_cluster, failing_hosted_cluster, reconciled, sim_serve,
};

/// Runs `shadow-reconciler` with `args` in the repository's directory.
pub(crate) fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run shadow-reconciler")
}

/// `bytes` of the command's output as text.
pub(crate) fn text(bytes: &[u8]) -> String {
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
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (mut server, _stdout, _) = sim_serve(&kubeconfig);
    // No CRDs: the controllers' watches fail and back off. The signal comes once they run.
    let (mut controller, _) = run_without_its_kinds(&kubeconfig, &[]);
    assert!(
        Command::new("kill")
            .args(["-TERM", &controller.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let code = wait_for(
        "run to stop after SIGTERM",
        Duration::from_mins(2),
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

/// OTLP is unauthenticated: `ingest` receives on loopback unless told otherwise.
#[test]
fn ingest_receives_otlp_on_loopback_by_default() {
    let help = text(&cli(&["ingest", "--help"]).stdout);
    for default in ["[default: 127.0.0.1:4317]", "[default: 127.0.0.1:4318]"] {
        assert!(help.contains(default), "{help}");
    }
    assert!(!help.contains("[default: 0.0.0.0:431"), "{help}");
}

/// Against a cluster without the CRDs, `run` says which kinds it cannot list: in its log (at
/// once, not only after a timeout) and in `/readyz`.
#[test]
fn run_names_the_kinds_it_cannot_list() {
    use std::io::{Read, Write};

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (mut server, _stdout, _) = sim_serve(&kubeconfig);
    let (mut run, address) = run_without_its_kinds(&kubeconfig, &["--no-flag-watch"]);
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

/// `run` (with `extra`) on the simulator of `kubeconfig`, where no CRD is applied, once its log
/// has named both reconciled kinds as ones it cannot list: its controllers run. The process,
/// and its endpoints' address from the log. Its log goes on being read, so that it never
/// blocks on a full pipe.
fn run_without_its_kinds(kubeconfig: &Path, extra: &[&str]) -> (std::process::Child, String) {
    use std::io::BufRead;

    let mut run = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args(["run", "--listen", "127.0.0.1:0", "--log-format", "json"])
        .args(extra)
        .env("KUBECONFIG", kubeconfig)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
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
    std::thread::spawn(move || lines.for_each(drop));
    (run, address.expect("the log gives the endpoints' address"))
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
