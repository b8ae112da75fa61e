//! The `shadow-reconciler` command refusing what it cannot do: bad arguments, missing or broken
//! files, places it cannot write, no cluster. Each refusal exits 2 and says why on stderr.
//!
//! Most are rows of [`REFUSALS`], run by [`every_refusal_exits_2_naming_the_problem`]; the few
//! that need more than a command line (a computed line number, a mounted tmpfs, a port, an exact
//! message naming `$HOME`) are tests of their own below it. The exact wording of many of these
//! messages is frozen in `error_messages.rs`; here a case checks the fragments that matter.

use std::path::Path;
use std::process::Command;

use super::cli::{cli, text};

/// One refusal: the command exits 2 with every fragment of `stderr` in what it prints there.
///
/// Every case runs in the repository's directory, with a fresh temporary directory holding its
/// `files`; `{tmp}` in `args`, `env` and `stderr` stands for that directory.
struct Refusal {
    name: &'static str,
    /// The command line after `shadow-reconciler`, split on spaces (no argument here has one).
    args: &'static str,
    /// What stderr must contain, each.
    stderr: &'static [&'static str],
    /// Files to write into `{tmp}` first: (name, content).
    files: &'static [(&'static str, &'static str)],
    /// Environment variables to set, and to remove.
    env: &'static [(&'static str, &'static str)],
    unset: &'static [&'static str],
    /// The whole of stderr is one line.
    one_line: bool,
}

/// A case's defaults: no files, the test's environment, any number of lines.
const CASE: Refusal = Refusal {
    name: "",
    args: "",
    stderr: &[],
    files: &[],
    env: &[],
    unset: &[],
    one_line: false,
};

/// A regular file where a directory is wanted.
const A_FILE: &[(&str, &str)] = &[("a-file", "not a directory")];

const REFUSALS: &[Refusal] = &[
    // Plans, and the commands that read them.
    Refusal {
        name: "plan check of a missing file",
        args: "plan check no/such.yaml",
        stderr: &["cannot read plan file no/such.yaml: "],
        ..CASE
    },
    Refusal {
        name: "simulate --model-only with a group no plan has",
        args: "simulate --model-only --candidate-group nope",
        stderr: &["no plan here has a rollout group \"nope\""],
        ..CASE
    },
    Refusal {
        name: "simulate --model-only with a failure rate above 1",
        args: "simulate --model-only --failure-rate 1.5",
        stderr: &["1.5 is not a probability"],
        ..CASE
    },
    Refusal {
        name: "simulate --model-only with a missing plan file",
        args: "simulate --model-only --plan missing.yaml",
        stderr: &["cannot read plan file missing.yaml"],
        ..CASE
    },
    Refusal {
        // ingest reads --plan the same way, before binding anything.
        name: "ingest with a missing plan file",
        args: "ingest --plan missing.yaml",
        stderr: &[
            "--plan \"missing.yaml\" is neither a shipped plan",
            "cannot read plan file missing.yaml",
        ],
        ..CASE
    },
    Refusal {
        // --plan serves both modes (a shipped name or a file); one that is neither is an error.
        name: "simulate with a --plan that is neither shipped nor a file",
        args: "simulate --plan no-such-plan.yaml",
        stderr: &["--plan no-such-plan.yaml: cannot read it"],
        ..CASE
    },
    Refusal {
        name: "simulate with an unknown scenario",
        args: "simulate --scenario chaos",
        stderr: &["unknown scenario \"chaos\""],
        ..CASE
    },
    Refusal {
        name: "sim serve with a fault that cannot be injected",
        args: "sim serve --faults {tmp}/faults.yaml",
        files: &[(
            "faults.yaml",
            "rules:\n  - name: x\n    action: {status: 200}\n",
        )],
        stderr: &["rule \"x\": status 200 is not injectable"],
        ..CASE
    },
    // Rollout groups, modes and ramps: refused before `run` looks for a cluster.
    Refusal {
        name: "run --enforce-group that no plan has",
        args: "run --enforce-group no-such-group",
        stderr: &[
            "--enforce-group \"no-such-group\": no plan here has a rollout group \"no-such-group\"; the groups: hostedcluster/non-critical-syncs",
        ],
        ..CASE
    },
    Refusal {
        name: "run --candidate-group that the reconciler's plan lacks",
        args: "run --reconciler hostedcluster --candidate-group status-patches",
        stderr: &["--candidate-group \"status-patches\""],
        ..CASE
    },
    Refusal {
        name: "run --ramp-percent above 100",
        args: "run --ramp-percent 150",
        stderr: &["\"150\" is not a percentage from 0 to 100"],
        ..CASE
    },
    Refusal {
        name: "simulate --enforce-group PLAN/GROUP that the plan lacks",
        args: "simulate --hosted-clusters 1 --addons 1 --enforce-group hostedcluster/nope",
        stderr: &["plan \"hostedcluster\" has no rollout group \"nope\""],
        ..CASE
    },
    Refusal {
        name: "simulate --candidate-group of a plan that is not here",
        args: "simulate --candidate-group other/x",
        stderr: &["no plan \"other\" here"],
        ..CASE
    },
    Refusal {
        // GROUP alone names the group in every plan that has it: one no plan has is an error.
        name: "simulate --enforce-group GROUP that no plan has",
        args: "simulate --enforce-group no-slash",
        stderr: &["no plan here has a rollout group \"no-slash\""],
        ..CASE
    },
    Refusal {
        name: "simulate --fail-on without the data to judge",
        args: "simulate --fail-on not-ready --no-parquet",
        stderr: &["cannot be used with"],
        ..CASE
    },
    Refusal {
        name: "run with a KUBECONFIG that does not exist",
        args: "run",
        env: &[("KUBECONFIG", "{tmp}/missing")],
        unset: &["KUBERNETES_SERVICE_HOST"],
        stderr: &["cannot find a cluster"],
        ..CASE
    },
    // A --parquet-dir that cannot take files fails at start-up, naming it, before anything runs.
    Refusal {
        name: "ingest with a --parquet-dir that is a file",
        args: "ingest --plan hostedcluster --otlp-grpc 127.0.0.1:0 --otlp-http 127.0.0.1:0 --listen 127.0.0.1:0 --parquet-dir {tmp}/a-file",
        files: A_FILE,
        stderr: &["--parquet-dir {tmp}/a-file"],
        ..CASE
    },
    Refusal {
        name: "simulate with a --parquet-dir that is a file",
        args: "simulate --hosted-clusters 2 --addons 1 --parquet-dir {tmp}/a-file",
        files: A_FILE,
        stderr: &["--parquet-dir {tmp}/a-file"],
        ..CASE
    },
    // Object store locations: each one line naming the flag and the value.
    Refusal {
        name: "ingest into an object store of an unknown scheme",
        args: "ingest --plan hostedcluster --otlp-grpc 127.0.0.1:0 --otlp-http 127.0.0.1:0 --listen 127.0.0.1:0 --parquet-dir ftp://host/data",
        stderr: &[
            "--parquet-dir ftp://host/data",
            "unsupported URL scheme \"ftp\"",
            "s3://",
        ],
        one_line: true,
        ..CASE
    },
    Refusal {
        name: "ingest with a spool but no object store",
        args: "ingest --plan hostedcluster --otlp-grpc 127.0.0.1:0 --otlp-http 127.0.0.1:0 --listen 127.0.0.1:0 --parquet-dir {tmp}/data --parquet-spool {tmp}/data",
        stderr: &["--parquet-spool", "object store", "{tmp}/data"],
        one_line: true,
        ..CASE
    },
    Refusal {
        name: "simulate into an object store",
        args: "simulate --parquet-dir s3://bucket/data",
        stderr: &[
            "--parquet-dir s3://bucket/data",
            "local dataset",
            "analyze URL",
        ],
        one_line: true,
        ..CASE
    },
    Refusal {
        name: "analyze a URL without a bucket",
        args: "analyze gs:///data",
        stderr: &["gs:///data", "no bucket"],
        one_line: true,
        ..CASE
    },
];

/// Runs every row of [`REFUSALS`] and fails once, naming each case that went wrong with its
/// command line, exit code, what was missing and the command's output.
#[test]
fn every_refusal_exits_2_naming_the_problem() {
    let mut wrong = Vec::new();
    for case in REFUSALS {
        let dir = tempfile::tempdir().expect("temp dir");
        let tmp = dir.path().to_str().expect("utf-8 path");
        let at_tmp = |s: &str| s.replace("{tmp}", tmp);
        for (name, content) in case.files {
            std::fs::write(dir.path().join(name), content).expect("write a case's file");
        }
        let args: Vec<String> = case.args.split(' ').map(at_tmp).collect();
        let mut command = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"));
        command.args(&args).current_dir(env!("CARGO_MANIFEST_DIR"));
        for (key, value) in case.env {
            command.env(key, at_tmp(value));
        }
        for key in case.unset {
            command.env_remove(key);
        }
        let out = command.output().expect("run shadow-reconciler");
        let stderr = text(&out.stderr);
        let mut problems = Vec::new();
        if out.status.code() != Some(2) {
            problems.push(format!("exit {:?}, not 2", out.status.code()));
        }
        for fragment in case.stderr.iter().map(|f| at_tmp(f)) {
            if !stderr.contains(&fragment) {
                problems.push(format!("stderr lacks {fragment:?}"));
            }
        }
        if case.one_line && stderr.lines().count() != 1 {
            problems.push(format!(
                "{} lines on stderr, not one",
                stderr.lines().count()
            ));
        }
        if !problems.is_empty() {
            wrong.push(format!(
                "{}: `shadow-reconciler {}`\n    {}\n    stderr: {}\n    stdout: {}",
                case.name,
                args.join(" "),
                problems.join("; "),
                stderr.trim_end().replace('\n', "\n            "),
                text(&out.stdout).trim_end().replace('\n', "\n            "),
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} refusals went wrong:\n{}",
        wrong.len(),
        REFUSALS.len(),
        wrong.join("\n")
    );
}

// The refusals that need more than a command line.

/// A broken plan among valid ones: its file, line and column (computed from the shipped plan it
/// breaks), the count of invalid plans, and the valid plan still checked (on stdout).
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

/// An S3 endpoint that refuses connections: analyze names the URL and the cause.
#[test]
fn analyze_names_an_object_store_it_cannot_reach() {
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

/// No cluster anywhere (no kubeconfig under `$HOME`, no pod): the whole of stderr is the one line
/// saying so and what to try instead.
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
