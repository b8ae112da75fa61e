//! The error messages users see, frozen: a table of bad inputs to every command (plans, flags,
//! directories, kubeconfigs, fault files), each with its exit code and the exact line it must
//! print. A change of wording fails here and is reviewed as the user-facing change it is.
//!
//! Each case runs in a fresh directory with its files written there and named relatively, so
//! the messages are the same on every machine. Plan validation has its own exhaustive table,
//! shared with the Go package (`tests/data/plan-vectors.json`), and so has the flag ConfigMap
//! (`tests/data/flag-vectors.json`); the plan cases here are the command's view of them.

use std::process::Command;

/// A small valid plan the cases edit.
const PLAN: &str = "\
apiVersion: shadow-reconciler.io/v1alpha1
kind: ReconcilePlan
metadata:
  name: checks
spec:
  operations:
    - name: Fetch
      phase: 1
      category: critical
      shadow: dry-run
    - name: Sync
      phase: 2
      category: non-critical
      shadow: dry-run
      dependsOn: [Fetch]
  legacy:
    order: [Fetch, Sync]
  rollout:
    groups:
      - name: syncs
        operations: [Sync]
";

/// A kubeconfig for a cluster nothing serves (`run` checks its directory before it connects).
const KUBECONFIG: &str = "\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
";

struct Case {
    name: &'static str,
    /// Files to write first: (name, content).
    files: &'static [(&'static str, &'static str)],
    args: &'static [&'static str],
    code: i32,
    /// A whole line stderr must hold.
    line: &'static str,
}

const CASES: &[Case] = &[
    // Plans.
    Case {
        name: "plan with a key twice",
        files: &[("p.yaml", "@PLAN@kind: ReconcilePlan\n")],
        args: &["plan", "check", "p.yaml"],
        code: 2,
        line: "p.yaml:22:1: the key `kind` appears twice in this mapping; keep one",
    },
    Case {
        name: "plan with two documents",
        files: &[("p.yaml", "@PLAN@---\nkind: ReconcilePlan\n")],
        args: &["plan", "check", "p.yaml"],
        code: 2,
        line: "p.yaml:23:1: the file holds more than one YAML document (`---`); it must hold exactly one",
    },
    Case {
        name: "plan with a YAML tag",
        files: &[("p.yaml", "@PLAN@|name: checks|name: !!timestamp 2001-12-14")],
        args: &["plan", "check", "p.yaml"],
        code: 2,
        line: "p.yaml:4:21: a YAML tag (`!!timestamp`, `!!float`, ...) on a value that must be a string: remove the tag and write the plain value",
    },
    Case {
        name: "empty plan file",
        files: &[("p.yaml", "")],
        args: &["plan", "check", "p.yaml"],
        code: 2,
        line: "p.yaml:1:1: the file holds no YAML document; a plan is one ReconcilePlan document",
    },
    Case {
        name: "plan with an unknown category",
        files: &[("p.yaml", "@PLAN@|category: critical|category: important")],
        args: &["plan", "check", "p.yaml"],
        code: 2,
        line: "p.yaml:9:17: operation Fetch: unknown value `important`, expected one of critical, non-critical",
    },
    Case {
        name: "plan with a phase out of range",
        files: &[("p.yaml", "@PLAN@|phase: 1|phase: 99999999999")],
        args: &["plan", "check", "p.yaml"],
        code: 2,
        line: "p.yaml:8:14: operation Fetch: expected a whole number from 0 to 4294967295",
    },
    Case {
        name: "plan with an unknown dependency",
        files: &[("p.yaml", "@PLAN@|dependsOn: [Fetch]|dependsOn: [Fecth]")],
        args: &["plan", "check", "p.yaml"],
        code: 2,
        line: "p.yaml:15:19: operation Sync: dependsOn names \"Fecth\", which is not an operation of this plan",
    },
    Case {
        name: "plan with an empty name",
        files: &[("p.yaml", "@PLAN@|  name: checks|  name:")],
        args: &["plan", "check", "p.yaml"],
        code: 2,
        line: "p.yaml:4:7: this value is empty; write a value here",
    },
    Case {
        name: "missing plan file",
        files: &[],
        args: &["plan", "check", "nosuch.yaml"],
        code: 2,
        line: "cannot read plan file nosuch.yaml: No such file or directory (os error 2)",
    },
    // simulate.
    Case {
        name: "simulate into a regular file",
        files: &[("data", "x")],
        args: &[
            "simulate",
            "--hosted-clusters",
            "2",
            "--parquet-dir",
            "data",
        ],
        code: 2,
        line: "error: --parquet-dir data: this is a file, not a directory; give a directory (it is created if missing)",
    },
    Case {
        name: "simulate below a regular file",
        files: &[("data", "x")],
        args: &[
            "simulate",
            "--hosted-clusters",
            "2",
            "--parquet-dir",
            "data/sub",
        ],
        code: 2,
        line: "error: --parquet-dir data/sub: cannot create the directory: Not a directory (os error 20)",
    },
    Case {
        name: "simulate with files of no rows",
        files: &[],
        args: &["simulate", "--parquet-max-rows", "0"],
        code: 2,
        line: "error: invalid value '0' for '--parquet-max-rows <PARQUET_MAX_ROWS>': must be at least 1",
    },
    Case {
        name: "simulate enforcing a group the plan lacks",
        files: &[],
        args: &[
            "simulate",
            "--hosted-clusters",
            "2",
            "--mode",
            "enforce",
            "--enforce-group",
            "hostedcluster/nosuch",
            "--parquet-dir",
            "data",
        ],
        code: 2,
        line: "error: --enforce-group \"hostedcluster/nosuch\": plan \"hostedcluster\" has no rollout group \"nosuch\"; the groups: hostedcluster/non-critical-syncs, hostedcluster/gated-components, hostedcluster/critical-core, addon-install-progression/status-patches, addon-install-progression/config-references",
    },
    Case {
        name: "simulate with a group no plan has",
        files: &[],
        args: &["simulate", "--candidate-group", "nosuch"],
        code: 2,
        line: "error: --candidate-group \"nosuch\": no plan here has a rollout group \"nosuch\"; the groups: hostedcluster/non-critical-syncs, hostedcluster/gated-components, hostedcluster/critical-core, addon-install-progression/status-patches, addon-install-progression/config-references",
    },
    Case {
        name: "simulate with an unknown scenario",
        files: &[],
        args: &["simulate", "--scenario", "nosuch"],
        code: 2,
        line: "error: invalid value 'nosuch' for '--scenario <SCENARIO>': unknown scenario \"nosuch\"; expected one of healthy, missing-secrets, conflict-storm, mixed, rollout",
    },
    // run.
    Case {
        name: "run with a missing kubeconfig",
        files: &[],
        args: &["run", "--kubeconfig", "nosuch.kubeconfig"],
        code: 2,
        line: "error: cannot read the kubeconfig nosuch.kubeconfig: No such file or directory (os error 2) (no cluster at hand? `shadow-reconciler simulate` runs everything on the embedded simulator, and `shadow-reconciler sim serve --kubeconfig-out FILE` serves it for `run`)",
    },
    Case {
        name: "run with a kubeconfig that is not YAML",
        files: &[("k", "apiVersion: v1\nclusters: [\n")],
        args: &["run", "--kubeconfig", "k"],
        code: 2,
        line: "error: cannot read the kubeconfig k:2:11: YAML syntax: unclosed bracket '['",
    },
    Case {
        name: "run with a kubeconfig of the wrong shape",
        files: &[("k", "apiVersion: v1\nclusters: 5\n")],
        args: &["run", "--kubeconfig", "k"],
        code: 2,
        line: "error: cannot read the kubeconfig k:2:11: expected a list here",
    },
    Case {
        name: "run writing into a regular file",
        files: &[("data", "x"), ("k", KUBECONFIG)],
        args: &["run", "--parquet-dir", "data", "--kubeconfig", "k"],
        code: 2,
        line: "error: --parquet-dir data: this is a file, not a directory; give a directory (it is created if missing)",
    },
    // analyze.
    Case {
        name: "analyze a missing directory",
        files: &[],
        args: &["analyze", "nosuch"],
        code: 2,
        line: "error: nosuch: no such directory",
    },
    Case {
        name: "analyze an empty directory",
        files: &[("data/.keep", "")],
        args: &["analyze", "data"],
        code: 2,
        line: "error: data: no rows of the plans [\"hostedcluster\", \"addon-install-progression\"] (found: 0 readable files, no rows)",
    },
    Case {
        name: "analyze a damaged part",
        files: &[
            (
                "data/table=reconciles/date=2026-12-01/hour=10/part-1-a-000000.parquet",
                "PAR1",
            ),
            (
                "data/table=steps/date=2026-12-01/hour=10/part-1-a-000000.parquet",
                "PAR1",
            ),
        ],
        args: &["analyze", "data"],
        code: 2,
        line: "error: data: no rows of the plans [\"hostedcluster\", \"addon-install-progression\"] (found: 0 readable files, no rows, 2 files skipped, each logged with the reason)",
    },
    Case {
        name: "analyze with a missing plan file",
        files: &[("data/.keep", "")],
        args: &["analyze", "--plan", "nosuch.yaml", "data"],
        code: 2,
        line: "error: --plan nosuch.yaml: cannot read it: No such file or directory (os error 2)",
    },
    // ingest.
    Case {
        name: "ingest with a group of a plan it does not load",
        files: &[],
        args: &[
            "ingest",
            "--plan",
            "hostedcluster",
            "--candidate-group",
            "addon-install-progression/status-patches",
        ],
        code: 2,
        line: "error: --candidate-group \"addon-install-progression/status-patches\": no plan \"addon-install-progression\" here (the plans: hostedcluster); the groups: hostedcluster/non-critical-syncs, hostedcluster/gated-components, hostedcluster/critical-core",
    },
    Case {
        name: "ingest with an unknown plan",
        files: &[],
        args: &["ingest", "--plan", "nosuch"],
        code: 2,
        line: "error: --plan \"nosuch\" is neither a shipped plan (hostedcluster, addon-install-progression) nor a valid plan file: cannot read plan file nosuch: No such file or directory (os error 2)",
    },
    Case {
        name: "ingest writing into a regular file",
        files: &[("data", "x")],
        args: &[
            "ingest",
            "--plan",
            "hostedcluster",
            "--parquet-dir",
            "data",
            "--otlp-grpc",
            "127.0.0.1:0",
            "--otlp-http",
            "127.0.0.1:0",
            "--listen",
            "127.0.0.1:0",
        ],
        code: 2,
        line: "error: --parquet-dir data: this is a file, not a directory; give a directory (it is created if missing)",
    },
    Case {
        name: "ingest with one plan given twice",
        files: &[],
        args: &[
            "ingest",
            "--plan",
            "hostedcluster",
            "--plan",
            "hostedcluster",
        ],
        code: 2,
        line: "error: --plan hostedcluster is given twice; give each plan once",
    },
    Case {
        name: "simulate with two files of one plan",
        files: &[("a.yaml", "@PLAN@"), ("b.yaml", "@PLAN@")],
        args: &["simulate", "--plan", "a.yaml", "--plan", "b.yaml"],
        code: 2,
        line: "error: --plan a.yaml and --plan b.yaml are both the plan `checks`; give each plan once (a plan is known by its metadata.name)",
    },
    Case {
        name: "ingest with a spool and no dataset",
        files: &[],
        args: &[
            "ingest",
            "--plan",
            "hostedcluster",
            "--parquet-spool",
            "spool",
        ],
        code: 2,
        line: "error: --parquet-spool and --parquet-spool-max-mib hold parts on their way to an object store, and no --parquet-dir was given: nothing is written, so they would do nothing. Add --parquet-dir s3://BUCKET/PREFIX (or gs://, az://), or drop them",
    },
    Case {
        name: "simulate with a spool on a local dataset",
        files: &[],
        args: &[
            "simulate",
            "--parquet-dir",
            "data",
            "--parquet-spool",
            "spool",
        ],
        code: 2,
        line: "error: --parquet-spool and --parquet-spool-max-mib apply to an object store (--parquet-dir s3://..., gs://..., az://...); data is a local directory, written directly",
    },
    Case {
        name: "simulate --replace of a dataset another command wrote",
        files: &[("data/table=steps/.keep", "")],
        args: &["simulate", "--parquet-dir", "data", "--replace"],
        code: 2,
        line: "error: --replace: data holds a dataset that simulate did not write (it has no .shadow-reconciler-simulate: `run` or `ingest` wrote it, or a simulate of an earlier version); simulate never deletes data it did not write: give it another --parquet-dir, or move that data away yourself",
    },
    // sim serve.
    Case {
        name: "fault rules with an unknown field",
        files: &[(
            "f.yaml",
            "rules:\n  - match: {verb: GET}\n    action: {error: 500}\n",
        )],
        args: &["sim", "serve", "--faults", "f.yaml"],
        code: 2,
        line: "error: f.yaml:2:13: unknown field `verb`, expected one of verbs, resource, subresource, namespace, name, userAgent, dryRun",
    },
    Case {
        name: "fault rules that are not YAML",
        files: &[("f.yaml", "rules: [\n")],
        args: &["sim", "serve", "--faults", "f.yaml"],
        code: 2,
        line: "error: f.yaml:1:8: YAML syntax: unclosed bracket '['",
    },
];

/// A file's content: `@PLAN@` is the plan, then optional `|from|to` edits or text to append.
fn content(spec: &str) -> String {
    let Some(rest) = spec.strip_prefix("@PLAN@") else {
        return spec.to_owned();
    };
    match rest.strip_prefix('|') {
        Some(edit) => {
            let (from, to) = edit.split_once('|').expect("|from|to");
            assert!(PLAN.contains(from), "{from:?} is not in the plan");
            PLAN.replacen(from, to, 1)
        }
        None => format!("{PLAN}{rest}"),
    }
}

#[test]
fn every_bad_input_gets_its_message() {
    let mut wrong = Vec::new();
    for case in CASES {
        let dir = tempfile::tempdir().expect("temp dir");
        for (name, spec) in case.files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            std::fs::write(&path, content(spec)).expect("write");
        }
        let out = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
            .args(case.args)
            .current_dir(dir.path())
            .env_remove("KUBECONFIG")
            .env("RUST_LOG", "off")
            .output()
            .expect("run the command");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code();
        if code != Some(case.code) || !stderr.lines().any(|l| l == case.line) {
            wrong.push(format!(
                "{}: {:?}\n  expected exit {} and the line\n    {}\n  got exit {code:?} and\n    {}",
                case.name,
                case.args,
                case.code,
                case.line,
                stderr.trim_end().replace('\n', "\n    ")
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases:\n{}",
        wrong.len(),
        CASES.len(),
        wrong.join("\n")
    );
}

/// A full disk: the writer's error is the filesystem's refusal of the file it wrote, in the
/// filesystem's words, not the Parquet library's. The disk is a 48 KiB tmpfs, which mounting
/// needs root for (as the suite runs in CI); elsewhere the test fails and says so.
#[test]
fn a_full_disk_is_a_write_error_naming_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let disk = dir.path().join("disk");
    std::fs::create_dir(&disk).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=48k", "tmpfs"])
        .arg(&disk)
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        mounted,
        "cannot mount a tmpfs at {} (the test needs root, as scripts/test.sh runs in CI)",
        disk.display()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args([
            "simulate",
            "--hosted-clusters",
            "20",
            "--addons",
            "5",
            "--parquet-dir",
            "data",
            "--parquet-grace",
            "1",
            "-q",
        ])
        .current_dir(&disk)
        .env("RUST_LOG", "off")
        .output()
        .expect("run simulate");
    let _ = Command::new("umount").arg(&disk).status();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line: {stderr}"));
    // The writer retries until the grace's deadline and then gives up, counting the records it
    // could not write as lost; the shutdown waits for it until the same deadline. Which comes
    // first is the scheduler's choice: the shutdown's "did not finish within" with the last
    // write error, or the records lost, with that error. Both name the file in the
    // filesystem's words.
    let grace_expired = line.contains("(the last write error: cannot write data/table=")
        && line.ends_with(".parquet: No space left on device (os error 28))");
    let gave_up = line
        .contains(" accepted records were not written to data: cannot write data/table=")
        && line.ends_with(".parquet: No space left on device (os error 28)");
    assert!(
        (grace_expired || gave_up) && !line.contains("External") && !line.contains(".tmp"),
        "{line}"
    );
}

/// A dataset directory another writer holds: the refusal names it, whatever the command. The
/// other writer here is this test process, holding the lock as a writer does.
#[test]
fn a_directory_another_writer_holds_is_refused_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let held = shadow_reconciler::dataset::DatasetLock::acquire(
        &data,
        "shadow-reconciler ingest --parquet-dir data",
    )
    .expect("take the lock");
    let since = std::fs::read_to_string(held.path()).expect("the lock file");
    let since = since
        .lines()
        .find_map(|l| l.strip_prefix("since: "))
        .expect("since")
        .to_owned();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .expect("the host name");
    let expected = format!(
        "error: --parquet-dir data: data is being written by `shadow-reconciler ingest --parquet-dir data` (pid {} on {host}, since {since}): one writer per dataset directory. Stop it, or give this one another directory",
        std::process::id()
    );
    for args in [
        &["simulate", "--parquet-dir", "data"][..],
        &["simulate", "--parquet-dir", "data", "--replace"][..],
        &[
            "ingest",
            "--plan",
            "hostedcluster",
            "--parquet-dir",
            "data",
            "--listen",
            "127.0.0.1:0",
            "--otlp-grpc",
            "127.0.0.1:0",
            "--otlp-http",
            "127.0.0.1:0",
        ][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
            .args(args)
            .current_dir(dir.path())
            .env("RUST_LOG", "off")
            .output()
            .expect("run the command");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.lines().any(|l| l == expected),
            "{args:?}: expected the line\n    {expected}\ngot\n    {stderr}"
        );
    }
    drop(held);
}
